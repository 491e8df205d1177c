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

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, TopicUnread, compacted_contents, ensure_compacted

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
        ensure_compacted(self.clients, self.topic)

    def load(self) -> dict[tuple[str, str], Done]:
        """Every (route, alert id) the ledger holds now."""
        try:
            contents = compacted_contents(self.clients, self.topic, READ_SECONDS)
        except TopicUnread as exc:
            raise LedgerUnreadable(str(exc)) from exc
        held = {}
        for record_key, record_value in contents.items():
            done = parse(record_key, record_value)
            if done is not None:
                held[(done.route, done.alert_id)] = done
        return held

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
