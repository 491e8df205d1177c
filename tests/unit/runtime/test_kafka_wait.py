"""Waiting for a Kafka cluster that does not answer yet (runtime/kafka_io.listed_topics)."""

from __future__ import annotations

import pytest


def test_topics_are_listed_again_while_kafka_does_not_answer_and_other_errors_raise_at_once(monkeypatch) -> None:
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException

    from kafka_lineage.runtime import kafka_io

    waits: list[float] = []

    class Instant(kafka_io.Backoff):
        def wait(self, stop=None) -> None:
            waits.append(self.delay)
            self.delay = min(self.delay * 2, self.cap)

    monkeypatch.setattr(kafka_io, "Backoff", Instant)

    class Admin:
        def __init__(self, errors: list[int]) -> None:
            self.errors = errors

        def list_topics(self, timeout: float):
            if self.errors:
                raise KafkaException(KafkaError(self.errors.pop(0)))
            return SimpleNamespace(topics={"a": None, "b": None})

    assert kafka_io.listed_topics(Admin([KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN])) == {"a", "b"}
    assert waits == [0.5, 1.0]
    with pytest.raises(KafkaException):  # not a cluster that is away: no waiting
        kafka_io.listed_topics(Admin([KafkaError.TOPIC_AUTHORIZATION_FAILED]))
    with pytest.raises(KafkaException):  # away for longer than the wait: the cause is raised
        kafka_io.listed_topics(Admin([KafkaError._TRANSPORT] * 100), wait_seconds=0.1)
