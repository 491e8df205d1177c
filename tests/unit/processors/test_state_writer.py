"""``ChangelogWriter`` (processors/state_writer.py): the tables' changelog records through librdkafka carry the bytes
Faust's own path would send, and a batch counts as done only once Kafka acknowledged every record of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust
import pytest
from confluent_kafka import KafkaError

from kafka_lineage.processors.state_writer import ChangelogWriter
from kafka_lineage.runtime.kafka_io import PublishError


class _Librdkafka:
    """Records produced (topic, value, key, partition) and their delivery callbacks, answered by ``deliver``."""

    def __init__(self, refuse_first: int = 0) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, int]] = []
        self.callbacks: list[Callable[[Any, Any], None]] = []
        self.refuse_first = refuse_first  # BufferError this many times first: a full local queue
        self.polls = 0

    def produce(self, topic: str, value: bytes | None, key: bytes | None, partition: int,
                on_delivery: Callable[[Any, Any], None]) -> None:
        if self.refuse_first:
            self.refuse_first -= 1
            raise BufferError
        self.records.append((topic, value, key, partition))
        self.callbacks.append(on_delivery)

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0

    def deliver(self, errors: dict[int, KafkaError] | None = None) -> None:
        for i, callback in enumerate(self.callbacks):
            callback((errors or {}).get(i), None)
        self.callbacks = []


class _Producer:
    def __init__(self, librdkafka: _Librdkafka) -> None:
        self.producer, self.failure = librdkafka, None


@pytest.fixture
def app() -> faust.App:
    return faust.App("test-state-writer", broker="kafka://localhost:1", store="memory://", value_serializer="raw",
                     key_serializer="raw")


def _faust_bytes(table: faust.Table, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
    """What ``Table.on_key_set``/``on_key_del`` hand Faust's producer for this write."""
    message = table.changelog_topic.as_future_message(
        key=key, value=value, partition=0, key_serializer=table.key_serializer,
        value_serializer="raw" if value is None else table.value_serializer).message
    return message.key, message.value


def test_records_carry_faust_bytes_to_the_chosen_partition_and_update_the_table(app: faust.App) -> None:
    dedupe = app.Table("dedupe", default=None, partitions=6)
    runs = app.Table("runs", default=None, partitions=6)
    librdkafka = _Librdkafka()
    writer = ChangelogWriter(_Producer(librdkafka))  # type: ignore[arg-type]
    writes = [(dedupe, "id-é\u2028", 4, [1_714_521_600.25, 4]), (runs, "run/1", 2, {"order": {"held": [1]}, "p": 2}),
              (dedupe, "id-é\u2028", 4, None)]
    for table, key, partition, value in writes:
        writer.write(table, key, partition, value)
    assert writer.staged() == 3
    future = writer.send()
    assert writer.staged() == 0
    assert [(topic, partition) for topic, _v, _k, partition in librdkafka.records] == [
        (dedupe.changelog_topic.get_topic_name(), 4), (runs.changelog_topic.get_topic_name(), 2),
        (dedupe.changelog_topic.get_topic_name(), 4)]
    for (table, key, _partition, value), (_topic, sent_value, sent_key, _p) in zip(writes, librdkafka.records,
                                                                                 strict=True):
        assert (sent_key, sent_value) == _faust_bytes(table, key, value)
    assert librdkafka.records[2][1] is None  # a deleted key is a tombstone
    assert dict(dedupe.data) == {} and dict(runs.data) == {"run/1": {"order": {"held": [1]}, "p": 2}}
    assert not future.done()  # nothing acknowledged yet: the batch is not done
    librdkafka.deliver()
    assert future.result(0) == 3


def test_one_refused_record_fails_the_batch_and_a_full_queue_is_waited_out(app: faust.App) -> None:
    dedupe = app.Table("dedupe", default=None, partitions=2)
    librdkafka = _Librdkafka(refuse_first=2)
    writer = ChangelogWriter(_Producer(librdkafka))  # type: ignore[arg-type]
    for i in range(3):
        writer.write(dedupe, f"id-{i}", i % 2, [1.0, i % 2])
    future = writer.send()
    assert librdkafka.polls == 2 and len(librdkafka.records) == 3
    librdkafka.deliver({1: KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)})
    with pytest.raises(PublishError, match="state record"):
        future.result(0)


def test_nothing_staged_is_done_at_once_and_a_refused_client_fails(app: faust.App) -> None:
    librdkafka = _Librdkafka()
    producer = _Producer(librdkafka)
    writer = ChangelogWriter(producer)  # type: ignore[arg-type]
    assert writer.send().result(0) == 0
    writer.write(app.Table("dedupe", default=None, partitions=1), "id", 0, [1.0, 0])
    producer.failure = PublishError("Kafka refused this client")  # type: ignore[assignment]
    with pytest.raises(PublishError, match="refused this client"):
        writer.send().result(0)
    assert librdkafka.records == []
