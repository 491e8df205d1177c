"""How replay reads an offset range (replay/local._batches): whole batches, and no wait past the range's end."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition

from kafka_lineage.replay.local import _batches
from tests.unit.kafka_fakes import FakeMessage


class _Partitions:
    """A consumer's view of partitions holding ``sizes[p]`` records: hands out at most the asked number of records
    (past a range's end too, as librdkafka fetches ahead, until the partition is paused) and records each ask; an
    ask for more than is left would wait out its timeout on a real consumer."""

    def __init__(self, sizes: dict[int, int]) -> None:
        self.sizes, self.positions, self.asks = sizes, {}, []

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = {tp.partition: tp.offset for tp in partitions}

    def consume(self, count: int, timeout: float) -> list[Any]:
        self.asks.append(count)
        out = []
        for p in sorted(self.positions):
            while len(out) < count and self.positions[p] < self.sizes[p]:
                out.append(FakeMessage(p, self.positions[p], b"v", b"k"))
                self.positions[p] += 1
        return out

    def pause(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            del self.positions[tp.partition]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions[tp.partition]) for tp in partitions]


def test_a_range_is_read_in_batches_and_the_last_ask_is_for_what_is_left():
    consumer = _Partitions({0: 1000, 1: 1000})
    batches = list(_batches(consumer, "events", {0: 100, 1: 990}, {0: 450, 1: 1000}, 200))  # type: ignore[arg-type]
    read = [(incoming.partition, incoming.offset) for batch in batches for incoming in batch]
    assert sorted(read) == [(0, offset) for offset in range(100, 450)] + [(1, offset) for offset in range(990, 1000)]
    # 360 offsets left, then 10 (partition 0 paused at its end): never an ask a real consumer would wait on
    assert consumer.asks == [200, 160, 10]


def test_a_range_to_the_partitions_end_ends_without_asking_for_more():
    consumer = _Partitions({0: 30})
    batches = list(_batches(consumer, "events", {0: 0}, {0: 30}, 2000))  # type: ignore[arg-type]
    assert [len(batch) for batch in batches] == [30]
    assert consumer.asks == [30]
