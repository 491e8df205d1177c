"""``lineage dlq redrive``: dead letters back to the topic they came from, once the cause is fixed.

Each dead letter keeps the original record's key, value and headers and where it was read (topic, partition,
offset). Redrive publishes those bytes unchanged to that topic, so the stage that refused them reads them again.
It is idempotent: every redriven dead letter is marked in a compacted topic beside the DLQ (``<dlq>.redriven``,
keyed by its DLQ partition and offset), written only after Kafka acknowledged the republished records, and a later
redrive skips what is marked, whatever its filters (a crash in between repeats a few records, which the stages'
dedupe absorbs). Dead letters without the original bytes (a record too large to keep, one refused before it was
read) are counted and reported, never skipped silently; so are records of the DLQ that do not decode.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, ensure_topic, partitions_of, reading_consumer
from kafka_lineage.runtime.terminal import shown
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec, WireFormatError

log = logging.getLogger(__name__)
MARKER_CONFIG = {"cleanup.policy": "compact"}


@dataclass
class RedriveReport:
    redriven: Counter[tuple[str, str]] = field(default_factory=Counter)  # (source topic, reason) → records
    already: int = 0  # redriven by an earlier run
    filtered: int = 0  # outside --reason / --from / --to
    without_value: Counter[str] = field(default_factory=Counter)  # reason → letters without the original bytes
    unreadable: int = 0  # DLQ records that do not decode as dead letters


def marker_topic(clients: ClientSettings) -> str:
    return f"{clients.dlq_topic}.redriven"


def _marker(partition: int, offset: int) -> bytes:
    return f"{partition}:{offset}".encode()


def selected(letter: dict[str, Any], reason: str | None, since: datetime | None, until: datetime | None) -> bool:
    """Whether a dead letter falls inside the filters (``reason``: its errorClass; ``since``/``until``: failedAt)."""
    failed: datetime = letter["failedAt"]
    return (reason is None or letter["errorClass"] == reason) and (since is None or failed >= since) \
        and (until is None or failed < until)


def _read_to_end(clients: ClientSettings, topic: str) -> Iterator[Message]:
    """Every record of ``topic`` up to its end offsets now; consumer errors other than a partition's end logged."""
    consumer = reading_consumer(clients, "redrive")
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in partitions_of(consumer, topic)}
        todo = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        while todo:
            for message in consumer.consume(500, 1.0):
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("reading %s: %s", topic, message.error())
                    continue
                yield message
            for position in consumer.position([TopicPartition(topic, p) for p in list(todo)]):
                if position.offset >= ends[position.partition][1]:
                    todo.discard(position.partition)
    finally:
        consumer.close()


def redrive(clients: ClientSettings, reason: str | None = None, since: datetime | None = None,
            until: datetime | None = None, dry_run: bool = False, batch: int = 500) -> RedriveReport:
    report = RedriveReport()
    markers = marker_topic(clients)
    ensure_topic(clients.kafka_config(), markers, config=MARKER_CONFIG)
    done = {message.key() for message in _read_to_end(clients, markers)}
    codec = AvroCodec("dead_letter", registry.schema_fetcher(SchemaRegistryClient(clients.registry_config())))
    producer = None if dry_run else AckingProducer(clients.kafka_config())
    pending: list[tuple[Message, dict[str, Any]]] = []

    def flush() -> None:
        if producer is None or not pending:
            pending.clear()
            return
        # with their own headers (the alert router's say which route refused the alert: only that route sends it)
        by_topic: dict[tuple[str, tuple[tuple[str, bytes | None], ...]], list[tuple[bytes | None, bytes | None]]] = {}
        for _message, letter in pending:
            headers = tuple((h["key"], h["value"]) for h in letter.get("headers") or ())
            by_topic.setdefault((letter["sourceTopic"], headers), []).append((letter["key"], letter["value"]))
        for (topic, headers), records in by_topic.items():  # acknowledged before marked: never marked but lost
            producer.send(topic, records, headers=list(headers) or None).result(300)
        producer.send(markers, [(_marker(m.partition(), m.offset()), b"") for m, _ in pending]).result(300)
        pending.clear()

    try:
        for message in _read_to_end(clients, clients.dlq_topic):
            try:
                letter = codec.decode(message.value())
            except WireFormatError as exc:
                log.warning("DLQ record at partition %d offset %d is not a dead letter: %s", message.partition(),
                            message.offset(), exc)
                report.unreadable += 1
                continue
            if _marker(message.partition(), message.offset()) in done:
                report.already += 1
            elif not selected(letter, reason, since, until):
                report.filtered += 1
            elif letter["value"] is None or not letter["sourceTopic"]:
                report.without_value[letter["errorClass"]] += 1
            else:
                report.redriven[(letter["sourceTopic"], letter["errorClass"])] += 1
                pending.append((message, letter))
                if len(pending) >= batch:
                    flush()
        flush()
    finally:
        if producer is not None:
            producer.close()
    return report


def format_report(report: RedriveReport, dry_run: bool) -> str:
    verb = "would redrive" if dry_run else "redrove"
    lines = [f"{verb} {count} dead letters to {shown(topic)} (reason {shown(reason)})"
             for (topic, reason), count in sorted(report.redriven.items())] or [f"{verb} nothing"]
    lines += [f"{count} dead letters of reason {shown(reason)} hold no original record: nothing to redrive"
              for reason, count in sorted(report.without_value.items())]
    if report.already:
        lines.append(f"{report.already} dead letters were redriven before (marked in the .redriven topic)")
    if report.filtered:
        lines.append(f"{report.filtered} dead letters outside the filters")
    if report.unreadable:
        lines.append(f"{report.unreadable} DLQ records are not dead letters (see the log)")
    return "\n".join(lines)
