"""The raw OpenLineage events as they arrived, read back from the raw events topic (which keeps everything; the graph
keeps none): Marquez's events browser (``GET /api/v1/events/lineage``) and one run's events
(``GET /api/v2/runs/{id}/events``). Times are the records' Kafka timestamps (when the event was published), not the
events' own ``eventTime`` (Marquez filters and sorts by that): the topic is indexed by the former. Every read is
bounded (records read, seconds)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import partitions_of, reading_consumer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import record_to_event
from kafka_lineage.schemas.wire import AvroCodec, WireFormatError

log = logging.getLogger(__name__)
MAX_PAGE_DEPTH = 10_000  # offset + limit of the events browser: records read per partition at most
MAX_RUN_SCAN = 200_000  # records looked at for one run's events
READ_SECONDS = 20.0
RUN_MARGIN_MS = 10 * 60 * 1000  # before a run's first known time
LATE_MS = 60 * 60 * 1000  # after its last: events published late (an emitter's outage) within an hour are found


@dataclass(frozen=True)
class Span:
    """Offsets [start, stop) of one partition to read."""

    partition: int
    start: int
    stop: int


def page_spans(ranges: dict[int, tuple[int, int]], depth: int, newest_first: bool) -> list[Span]:
    """The records a page needs from each partition's [first, end) range: its newest (or oldest) ``depth``; the
    page's records are among them whatever the interleaving of partitions."""
    spans = []
    for partition, (first, end) in sorted(ranges.items()):
        if end <= first:
            continue
        start, stop = (max(first, end - depth), end) if newest_first else (first, min(end, first + depth))
        if start < stop:  # (a page of none reads nothing)
            spans.append(Span(partition, start, stop))
    return spans


def page(records: list[tuple[int, int, int, dict[str, Any]]], newest_first: bool, offset: int, limit: int
         ) -> list[dict[str, Any]]:
    """(timestamp, partition, offset, event) records in time order (ties by partition and offset), paged."""
    ordered = sorted(records, key=lambda r: (r[0], r[1], r[2]), reverse=newest_first)
    return [event for *_, event in ordered[offset:offset + limit]]


@dataclass
class RunEvents:
    events: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # the window held more records than one read looks at, or the read ran out of time


class EventLog:
    """Reads the raw events topic (``LINEAGE_EVENTS_TOPIC``); one consumer per question, closed after it."""

    def __init__(self, clients: ClientSettings) -> None:
        self.clients = clients
        self.topic = clients.events_topic
        self._codec: AvroCodec | None = None

    def codec(self) -> AvroCodec:
        if self._codec is None:
            client = SchemaRegistryClient(self.clients.registry_config())
            self._codec = AvroCodec("openlineage_event", registry.schema_fetcher(client))
        return self._codec

    def between(self, after_ms: int, before_ms: int, limit: int, offset: int, newest_first: bool
                ) -> tuple[list[dict[str, Any]], int]:
        """The events published in [after, before), a page of them in time order, and how many there are."""
        consumer = reading_consumer(self.clients, "events-browser")
        try:
            ranges = self._ranges(consumer, after_ms, before_ms)
            total = sum(max(end - first, 0) for first, end in ranges.values())
            records = [record for record in self._read(consumer, page_spans(ranges, offset + limit, newest_first))
                       if after_ms <= record[0] < before_ms]
        finally:
            consumer.close()
        return page(records, newest_first, offset, limit), total

    def of_run(self, run_id: str, first_ms: int, last_ms: int, limit: int) -> RunEvents:
        """The events of run ``run_id`` published from a margin before ``first_ms`` to an hour after ``last_ms``,
        in the order they were published: a record is decoded only when its bytes hold the run id."""
        consumer = reading_consumer(self.clients, "run-events")
        found, records = RunEvents(), []
        try:
            ranges = self._ranges(consumer, first_ms - RUN_MARGIN_MS, last_ms + LATE_MS)
            spans = [Span(p, first, end) for p, (first, end) in sorted(ranges.items()) if end > first]
            found.truncated = sum(s.stop - s.start for s in spans) > MAX_RUN_SCAN
            for stamp, partition, at, event in self._read(consumer, spans, run_id.encode(), MAX_RUN_SCAN):
                if event.get("run", {}).get("runId") == run_id:
                    records.append((stamp, partition, at, event))
                    if len(records) >= limit:
                        found.truncated = True
                        break
        except TimeoutError:
            found.truncated = True
        finally:
            consumer.close()
        found.events = page(records, False, 0, len(records))
        return found

    def _ranges(self, consumer: Consumer, after_ms: int, before_ms: int) -> dict[int, tuple[int, int]]:
        partitions = partitions_of(consumer, self.topic)
        if not partitions:
            return {}
        high = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1] for p in partitions}

        def offsets(moment: int) -> dict[int, int]:
            found = consumer.offsets_for_times([TopicPartition(self.topic, p, max(moment, 0)) for p in partitions],
                                               timeout=10)
            return {tp.partition: tp.offset if tp.offset >= 0 else high[tp.partition] for tp in found}

        first, end = offsets(after_ms), offsets(before_ms)
        return {p: (first[p], end[p]) for p in partitions}

    def _read(self, consumer: Consumer, spans: list[Span], needle: bytes | None = None, most: int | None = None
              ) -> Iterator[tuple[int, int, int, dict[str, Any]]]:
        """(timestamp ms, partition, offset, event) of the spans' records (the first ``most`` looked at); with
        ``needle`` only records whose value contains it are decoded. Raises TimeoutError past ``READ_SECONDS``."""
        if not spans:
            return
        stops = {s.partition: s.stop for s in spans}
        consumer.assign([TopicPartition(self.topic, s.partition, s.start) for s in spans])
        open_partitions, scanned = set(stops), 0
        deadline = time.monotonic() + READ_SECONDS
        while open_partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {self.topic} took over {READ_SECONDS:.0f} s")
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("reading %s: %s", self.topic, message.error())
                    continue
                if message.partition() not in open_partitions or message.offset() >= stops[message.partition()]:
                    continue
                scanned += 1
                if most is not None and scanned > most:
                    return
                value = message.value()
                if needle is not None and (value is None or needle not in value):
                    continue
                try:
                    event = record_to_event(self.codec().decode(value))
                except WireFormatError as exc:  # the collector validated it; a record from elsewhere is said
                    log.warning("%s[%d]@%d is not an OpenLineage event: %s", self.topic, message.partition(),
                                message.offset(), exc)
                    continue
                yield message.timestamp()[1], message.partition(), message.offset(), event
            for position in consumer.position([TopicPartition(self.topic, p) for p in open_partitions]):
                if position.offset >= stops[position.partition]:
                    open_partitions.discard(position.partition)
