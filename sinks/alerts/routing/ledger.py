"""What each route has delivered: a compacted topic of the router's group (``{group}.delivered``, one partition),
one record per route and alert (key ``route␟alertId``), written — and acknowledged — before the alert counts as
done on that route.

The router commits its offsets on the alert topic only past alerts every route is done with; a route that waits
(its destination down) holds them back, and a restart reads them again. The ledger is what keeps the other routes
from sending those twice. An alert's records are tombstoned once the group's committed offset passed it: the ledger
holds only the window the offsets do not cover yet.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, ensure_topic, missing_topics, topic_config

SEPARATOR = "\x1f"
READ_SECONDS = 120.0
ACK_SECONDS = 60.0


class LedgerUnreadable(Exception):
    """The ledger could not be read back: the router must not deliver without it."""


@dataclass(frozen=True)
class Done:
    """An alert one route is done with: delivered, or refused for good and dead-lettered."""

    route: str
    alert_id: str
    partition: int
    offset: int
    outcome: str  # delivered | deadLettered
    delivery_id: str = ""


def key(route: str, alert_id: str) -> bytes:
    return f"{route}{SEPARATOR}{alert_id}".encode()


def split_key(record_key: bytes) -> tuple[str, str]:
    route, _, alert_id = record_key.decode("utf-8", "replace").partition(SEPARATOR)
    return route, alert_id


def value(done: Done, at: float) -> bytes:
    return json.dumps({"route": done.route, "alertId": done.alert_id, "partition": done.partition,
                       "offset": done.offset, "outcome": done.outcome, "deliveryId": done.delivery_id,
                       "at": round(at, 3)}, separators=(",", ":")).encode()


def parse(record_key: bytes, record_value: bytes) -> Done | None:
    """A ledger record, or None for one this version cannot read (it is left alone)."""
    try:
        data = json.loads(record_value)
        route, alert_id = split_key(record_key)
        return Done(route, alert_id, int(data["partition"]), int(data["offset"]), str(data.get("outcome", "")),
                    str(data.get("deliveryId", "")))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def stale(entries: Iterable[Done], committed: Mapping[int, int]) -> list[Done]:
    """Records of alerts the group's committed offsets have passed: no start reads those alerts again."""
    return [done for done in entries if done.offset < committed.get(done.partition, -1)]


class Ledger:
    def __init__(self, clients: ClientSettings, group_id: str, producer: AckingProducer) -> None:
        self.clients, self.topic, self.producer = clients, f"{group_id}.delivered", producer

    def ensure(self) -> None:
        if missing_topics(self.clients.kafka_config(), [self.topic]):
            if not self.clients.topics.create:
                raise LedgerUnreadable(f"missing topic {self.topic} (compacted, one partition); create it or set "
                                       "LINEAGE_CREATE_TOPICS=true")
            ensure_topic(self.clients.kafka_config(), self.topic, partitions=1,
                         replication_factor=self.clients.topics.replication_factor,
                         config={**topic_config(self.clients.topics, raw=False), "cleanup.policy": "compact"})

    def load(self) -> dict[tuple[str, str], Done]:
        """Every (route, alert id) the ledger holds now."""
        consumer = Consumer(self.clients.kafka_config({
            "group.id": f"{self.topic}.reader", "enable.auto.commit": False, "enable.partition.eof": True}))
        held: dict[tuple[str, str], Done] = {}
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=10)
            if high <= low:
                return held
            consumer.assign([TopicPartition(self.topic, 0, low)])
            deadline = time.monotonic() + READ_SECONDS
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        return held
                    raise LedgerUnreadable(f"reading {self.topic}: {message.error()}")
                record_key = message.key() or b""
                record_value = message.value()
                if record_value is None:
                    held.pop(split_key(record_key), None)
                    continue
                done = parse(record_key, record_value)
                if done is not None:
                    held[(done.route, done.alert_id)] = done
            raise LedgerUnreadable(f"reading {self.topic} took over {READ_SECONDS:.0f}s")
        finally:
            consumer.close()

    def record(self, entries: list[Done]) -> None:
        """Write and wait for Kafka's acknowledgement (PublishError, TimeoutError: not recorded)."""
        now = time.time()
        self.producer.send(self.topic, [(key(d.route, d.alert_id), value(d, now)) for d in entries]).result(
            ACK_SECONDS)

    def forget(self, entries: Iterable[Done]) -> None:
        """Tombstones, not waited for: a lost one is found stale at the next start."""
        records: list[tuple[bytes | None, bytes | None]] = [(key(d.route, d.alert_id), None) for d in entries]
        if records:
            self.producer.send(self.topic, records)
