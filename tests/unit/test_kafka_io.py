import logging
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka_lineage.kafka_io import commit_offsets

log = logging.getLogger("test")


class FlakyConsumer:
    """Fails its first commits with the given errors, then succeeds."""

    def __init__(self, *errors: int) -> None:
        self.errors, self.commits = list(errors), 0

    def commit(self, asynchronous: bool) -> None:
        assert asynchronous is False
        self.commits += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))


def test_a_coordinator_away_is_waited_out() -> None:
    consumer = FlakyConsumer(KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE)
    stop = threading.Event()
    commit_offsets(consumer, stop, log, "test")  # type: ignore[arg-type]
    assert consumer.commits == 3


def test_moved_partitions_are_not_retried() -> None:
    consumer = FlakyConsumer(KafkaError.REBALANCE_IN_PROGRESS)
    commit_offsets(consumer, threading.Event(), log, "test")  # type: ignore[arg-type]
    assert consumer.commits == 1


def test_stopping_gives_up_with_the_error() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(KafkaException):
        commit_offsets(FlakyConsumer(KafkaError.NOT_COORDINATOR), stop, log, "test")  # type: ignore[arg-type]
