"""Transactions (runtime/transactions.py) without a broker: group metadata built by librdkafka, retries."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafka_lineage.runtime import transactions
from kafka_lineage.runtime.transactions import (
    TransactionAborted,
    TransactionalProducer,
    group_metadata,
    unchecked_by_the_group,
)


def test_group_metadata_is_what_librdkafka_s_own_consumer_gives_for_the_same_member() -> None:
    consumer = Consumer({"group.id": "lineage-processor", "bootstrap.servers": "127.0.0.1:1"})
    try:
        assert group_metadata("lineage-processor", -1, "") == consumer.consumer_group_metadata()  # not joined yet
    finally:
        consumer.close()


def test_group_metadata_carries_the_generation_and_member_id() -> None:
    joined = group_metadata("lineage-processor", 7, "faust-0.15.3-abc")
    assert joined != group_metadata("lineage-processor", 8, "faust-0.15.3-abc")
    assert b"lineage-processor\x00faust-0.15.3-abc\x00" in joined


def test_a_consumer_without_generation_and_member_is_recognised_as_unchecked_by_its_group() -> None:
    consumer = Consumer({"group.id": "lineage-alerts", "bootstrap.servers": "127.0.0.1:1"})
    try:  # what librdkafka's consumer gives before its first join and right after its session expired
        assert unchecked_by_the_group(consumer.consumer_group_metadata(), "lineage-alerts")
    finally:
        consumer.close()
    assert not unchecked_by_the_group(group_metadata("lineage-alerts", 3, "rdkafka-1"), "lineage-alerts")


class _FlakyProducer:
    """send_offsets_to_transaction answers with errors first, as librdkafka does while a coordinator loads."""

    def __init__(self, errors: list[KafkaError]) -> None:
        self.errors, self.calls = errors, 0

    def send_offsets_to_transaction(self, *_: object) -> None:
        self.calls += 1
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def abort_transaction(self, *_: object) -> None:
        pass


def _producer(fake: _FlakyProducer) -> TransactionalProducer:
    producer = object.__new__(TransactionalProducer)  # no broker: the calls go to the fake
    producer.transactional_id, producer.producer, producer.open = "tx", fake, True
    return producer


def test_a_call_with_a_retriable_error_is_made_again(monkeypatch) -> None:
    monkeypatch.setattr(transactions.time, "sleep", lambda _seconds: None)
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)
    fake = _FlakyProducer([loading, KafkaError(KafkaError.NOT_COORDINATOR, "moved", retriable=True)])
    _producer(fake).send_offsets({("t", 0): 5}, group_metadata("g", 1, "m"))
    assert fake.calls == 3


def test_a_call_that_needs_an_abort_is_aborted_at_once() -> None:
    fake = _FlakyProducer([KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "unknown member", txn_requires_abort=True)])
    with pytest.raises(TransactionAborted):
        _producer(fake).send_offsets({("t", 0): 5}, group_metadata("g", 1, "m"))
    assert fake.calls == 1


class _RecordingProducer:
    """A librdkafka producer's transactional calls, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    def produce(self, topic: str, value: object, key: object, partition: int | None = None) -> None:
        self.calls.append(("produce", topic, partition, key, value))

    def send_offsets_to_transaction(self, positions: list, *_: object) -> None:
        self.calls.append(("offsets", [(tp.topic, tp.partition, tp.offset) for tp in positions]))

    def commit_transaction(self, *_: object) -> None:
        self.calls.append(("commit",))


def test_settling_commits_one_transaction_that_touches_every_partition_with_a_tombstone_no_table_holds() -> None:
    fake = _RecordingProducer()
    producer = object.__new__(TransactionalProducer)
    producer.transactional_id, producer.producer, producer.open = "tx", fake, False
    producer.settle([("runs-changelog", 0, b"k"), ("runs-changelog", 1, b"k")], {("leader", 0): 0},
                    group_metadata("g", 1, "m"))
    assert fake.calls == [("begin",), ("produce", "runs-changelog", 0, b"k", None),
                          ("produce", "runs-changelog", 1, b"k", None),
                          ("offsets", [("leader", 0, 0)]), ("commit",)]
    assert transactions.SETTLE_KEY.startswith("\x00") and not producer.open


class _LeaderMoving:
    """get_watermark_offsets answers 'not leader' first, as a restarting broker does for a while."""

    def __init__(self, refusals: int) -> None:
        self.refusals, self.calls = refusals, 0

    def get_watermark_offsets(self, *_: object, **__: object) -> tuple[int, int]:
        self.calls += 1
        if self.calls <= self.refusals:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "not leader"))
        return 0, 5


def test_end_offsets_are_asked_again_while_the_broker_is_not_the_leader_yet(monkeypatch) -> None:
    monkeypatch.setattr(transactions.time, "sleep", lambda _seconds: None)
    reader = _LeaderMoving(refusals=3)
    assert transactions._watermarks(reader, TopicPartition("t", 0), transactions.time.monotonic() + 60) == (0, 5)
    assert reader.calls == 4
    with pytest.raises(KafkaException):  # past the deadline the error is the caller's
        transactions._watermarks(_LeaderMoving(refusals=99), TopicPartition("t", 0), transactions.time.monotonic())
