import logging
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_lineage.runtime.kafka_io import commit_bounded, commit_offsets, rebalance_callback

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


def test_a_lost_assignment_is_not_retried() -> None:
    consumer = FlakyConsumer(KafkaError._ASSIGNMENT_LOST)  # the consumer must poll to rejoin: retrying blocks that
    commit_offsets(consumer, threading.Event(), log, "test")  # type: ignore[arg-type]
    assert consumer.commits == 1


def test_it_gives_up_after_its_attempts_and_when_stopping() -> None:
    consumer = FlakyConsumer(*[KafkaError.NOT_COORDINATOR] * 10)
    commit_offsets(consumer, threading.Event(), log, "test", attempts=2)  # type: ignore[arg-type]
    assert consumer.commits == 2
    stop = threading.Event()
    stop.set()
    stopping = FlakyConsumer(KafkaError.NOT_COORDINATOR)
    commit_offsets(stopping, stop, log, "test")  # type: ignore[arg-type]
    assert stopping.commits == 1


def test_fatal_errors_are_raised() -> None:
    class Fatal:
        def commit(self, asynchronous: bool) -> None:
            raise KafkaException(KafkaError(KafkaError._FATAL, fatal=True))

    with pytest.raises(KafkaException):
        commit_offsets(Fatal(), threading.Event(), log, "test")  # type: ignore[arg-type]


def test_a_commit_that_does_not_return_is_given_up_and_not_started_again_while_it_hangs() -> None:
    class Hanging:
        def __init__(self) -> None:
            self.commits, self.release = 0, threading.Event()

        def commit(self, asynchronous: bool) -> None:
            self.commits += 1
            self.release.wait(10)  # what librdkafka does without a group coordinator: wait

    consumer = Hanging()
    commit_offsets(consumer, threading.Event(), log, "test", wait=0.2)  # type: ignore[arg-type]
    commit_offsets(consumer, threading.Event(), log, "test", wait=0.2)  # type: ignore[arg-type]
    assert consumer.commits == 1  # the second found the first still waiting: given up at once
    consumer.release.set()
    time.sleep(0.2)
    commit_offsets(consumer, threading.Event(), log, "test", wait=0.2)  # type: ignore[arg-type]
    assert consumer.commits == 2


def test_a_commit_within_the_consumer_s_rebalance_callback_is_made_in_the_callback_s_thread() -> None:
    # librdkafka answers a commit from another thread only once the callback returned: it waited out every timeout
    class Recording:
        def __init__(self) -> None:
            self.threads: list[int] = []

        def commit(self, offsets: object = None, asynchronous: bool = True) -> None:
            assert asynchronous is False
            self.threads.append(threading.get_ident())

    consumer, other = Recording(), Recording()
    with rebalance_callback(consumer):  # type: ignore[arg-type]
        commit_bounded(consumer, 1.0)  # type: ignore[arg-type]
        commit_bounded(other, 1.0)  # type: ignore[arg-type]
    commit_bounded(consumer, 1.0)  # type: ignore[arg-type]
    here = threading.get_ident()
    assert consumer.threads[0] == here and other.threads[0] != here and consumer.threads[1] != here
