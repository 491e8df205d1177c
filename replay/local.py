"""``lineage replay``: rebuild (``--fresh``) or repair a time window of the graph from ``openlineage.events``.

The raw topic is the source of truth. Replay reads it with a consumer of its own (no group offsets are touched),
decodes, validates and normalizes every record with the same processor core as ``lineage processor`` and writes
the events whose **eventTime** lies in ``--from``..``--to`` with the graph sink's statements. Kafka time is only the
coarse index to seek by: no accepted event is stamped more than the processor's future bound
(``LINEAGE_MAX_EVENT_TIME_AHEAD``) ahead of its record, so reading starts at the first record at or after ``--from``
minus that bound; a late event (an old eventTime published later) can sit anywhere after, so reading goes on to the
topic's end offsets when replay starts. Because those statements are idempotent and order independent, a
rebuilt graph has the same fingerprint as the live one, and a window replayed onto the live graph repairs what is
missing without duplicating anything. For the same reason replay skips the processor's dedupe, hold-back window and
drift state (``ProcessorCore.normalize``): they would not change the graph, only cost time. Schema-drift alerts are
not re-sent; the schema changes the records hold are found by the processor's event-time rule (``replay/drift``) and
reported (``--schema-changes FILE``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from neo4j import Driver

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_changes
from kafka_lineage.graph.epoch import LABEL as EPOCH_LABEL
from kafka_lineage.graph.epoch import deleting
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.keys import utc_time
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.processors.core import Incoming, Output, ProcessorCore
from kafka_lineage.processors.normalize import parse_aliases
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.drift import ReplayDrift
from kafka_lineage.replay.repair import Produced, RepairReport, forget_runs, settle
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import end_offsets, reading_consumer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.partitions import parse_patterns
from kafka_lineage.schemas.schema_diff import DriftFinding
from kafka_lineage.schemas.validation_stamp import is_stamped
from kafka_lineage.schemas.wire import AvroCodec

# Replay without the processor's settings: no namespace aliases, the default future-eventTime bound.
DEFAULT_PROCESSING = ProcessorSettings()
DEFAULT_AHEAD_SECONDS = DEFAULT_PROCESSING.max_event_time_ahead_seconds


@dataclass
class ReplayReport:
    records: int = 0  # records replayed: in the window, or without a readable eventTime (dead letters)
    written: int = 0
    dead_letters: int = 0
    seconds: float = 0.0
    scanned: int = 0  # records read, the window's and the others
    repaired: RepairReport | None = None  # --repair: what was removed
    # schema changes of the records read, by event time as the processor finds them (replay/drift.py); not sent
    schema_changes: list[DriftFinding] = field(default_factory=list)


@dataclass(frozen=True)
class EventWindow:
    """``--from``..``--to`` by eventTime, both ends included; None: open on that side."""

    start: str | None = None  # UTC, as graph.keys.utc_time spells it (sortable as text)
    end: str | None = None

    @classmethod
    def parse(cls, start: str | None, end: str | None) -> EventWindow:
        return cls(*(_utc_bound(text, option) for text, option in ((start, "--from"), (end, "--to"))))

    @property
    def whole(self) -> bool:
        return self.start is None and self.end is None

    def holds(self, event: dict[str, Any]) -> bool:
        moment = utc_time(event.get("eventTime"))
        if moment is None:  # validation makes this rare; such an event is replayed rather than lost
            return True
        return (self.start is None or moment >= self.start) and (self.end is None or moment <= self.end)


ALL_TIME = EventWindow()


def _utc_bound(text: str | None, option: str) -> str | None:
    if text is None or text == "earliest":
        return None
    parse_moment(text, option)  # the same check and message as the offsets' moment
    return utc_time(text.replace("Z", "+00:00"))


def parse_moment(text: str | None, option: str) -> int | None:
    """``earliest``/None → None; an ISO-8601 time → epoch milliseconds (no offset = UTC), at least 0.

    Kafka record timestamps are not negative and brokers refuse a negative time in a ListOffsets request (a negative
    value there is a special offset, or UNSUPPORTED_VERSION): a time before the epoch is the epoch, which is before
    every record. (For ``--from`` that is the same as ``earliest``.)"""
    if text is None or text == "earliest":
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{option}: expected 'earliest' or an ISO-8601 time such as 2024-05-01T00:00:00Z, "
                         f"got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(int(moment.timestamp() * 1000), 0)


def wipe(driver: Driver) -> None:
    """Delete every relationship, then every node but the epoch (a new one: writers forget what they knew), in inner
    transactions of bounded size (a dataset read by many runs has many relationships: deleting nodes with theirs can
    exceed the transaction memory limit)."""
    with deleting(driver), driver.session() as session:
        session.run("MATCH ()-[r]->() CALL (r) { DELETE r } IN TRANSACTIONS OF 10000 ROWS").consume()
        session.run(f"MATCH (n) WHERE NOT n:{EPOCH_LABEL} CALL (n) {{ DELETE n }} IN TRANSACTIONS OF 10000 ROWS"
                    ).consume()


def _offsets(consumer: Consumer, topic: str, moment: int | None, default: Callable[[int], int],
             high: dict[int, int]) -> dict[int, int]:
    """Per partition: the offset of the first record at or after ``moment`` (``default`` when there is none)."""
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    if moment is None:
        return {p: default(p) for p in partitions}
    found = consumer.offsets_for_times([TopicPartition(topic, p, moment) for p in partitions], timeout=10)
    # No record at or after the moment: the answer is -1 (OFFSET_END), which means the partition's end — for --from,
    # nothing to replay; for --to, everything up to now — never its beginning.
    return {tp.partition: (tp.offset if tp.offset >= 0 else high[tp.partition]) for tp in found}


def offset_range(clients: ClientSettings, start: str | None, end: str | None,
                 ahead_seconds: float = DEFAULT_AHEAD_SECONDS) -> tuple[dict[int, int], dict[int, int]]:
    """(first offset, end offset) per partition of the events topic that can hold events with an eventTime in
    ``--from``..``--to``: from the first record at or after ``--from`` minus ``ahead_seconds`` (by record timestamp)
    to the end offsets now. A first offset may be ``OFFSET_BEGINNING``; partitions with nothing to read are left
    out."""
    begins, ends, _ = offset_bounds(clients, start, end, ahead_seconds)
    return begins, ends


def offset_bounds(clients: ClientSettings, start: str | None, end: str | None,
                  ahead_seconds: float = DEFAULT_AHEAD_SECONDS
                  ) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """``offset_range`` and the end offsets of every partition it was taken from (those with nothing to read too)."""
    from_ms = parse_moment(start, "--from")
    parse_moment(end, "--to")  # checked here too: a bad --to fails before anything is read
    if from_ms is not None:
        from_ms = max(from_ms - int(ahead_seconds * 1000), 0)
    topic = clients.events_topic
    consumer = reading_consumer(clients, "lineage-replay")
    try:
        high = end_offsets(consumer, topic)
        ends = dict(high)
        begins = _offsets(consumer, topic, from_ms, lambda _p: OFFSET_BEGINNING, high)
    finally:
        consumer.close()
    wanted = {p for p in ends if ends[p] > max(begins[p], 0)}
    return {p: begins[p] for p in wanted}, {p: ends[p] for p in wanted}, ends


def replay_core(clients: ClientSettings, settings: ProcessorSettings) -> ProcessorCore:
    """A processor core with fresh in-memory state, configured like ``lineage processor`` (namespace aliases, the
    future eventTime bound, the partition path patterns)."""
    registry_client = SchemaRegistryClient(clients.registry_config())
    return ProcessorCore(AvroCodec("openlineage_event", registry.schema_fetcher(registry_client)), {}, {},
                         aliases=parse_aliases(settings.aliases) if settings.aliases else None,
                         max_event_time_ahead_seconds=settings.max_event_time_ahead_seconds,
                         partition_patterns=parse_patterns(settings.partition_patterns))


def _batches(consumer: Consumer, topic: str, begins: dict[int, int], ends: dict[int, int], batch_size: int
             ) -> Iterator[list[Incoming]]:
    consumer.assign([TopicPartition(topic, p, begins[p]) for p in ends])
    open_partitions = set(ends)
    # Offsets left to read per partition: a batch asks for no more, so the last one does not wait out the timeout
    # for records past the ends (1 s a range read to its partition's end). Transaction markers take offsets too:
    # then the last ask may still wait once.
    left = {p: ends[p] - max(begins[p], 0) for p in ends}
    while open_partitions:
        batch = []
        for message in consumer.consume(max(1, min(batch_size, sum(left[p] for p in open_partitions))), 1.0):
            if message.error() is not None or message.offset() >= ends[message.partition()]:
                continue
            timestamp = message.timestamp()[1]
            batch.append(Incoming(message.key(), message.value(), message.partition(), message.offset(),
                                  timestamp if timestamp > 0 else None, topic, is_stamped(message.headers())))
        # Positions, not the last offset seen: a committed transaction's marker can be a partition's last offset,
        # and read_committed never returns it as a message.
        done = []
        for position in consumer.position([TopicPartition(topic, p) for p in open_partitions]):
            if position.offset >= ends[position.partition]:
                open_partitions.discard(position.partition)
                done.append(TopicPartition(topic, position.partition))
            elif position.offset >= 0:
                left[position.partition] = ends[position.partition] - position.offset
        if done:  # no more fetches past the ends (librdkafka drops what it fetched ahead for a paused partition)
            consumer.pause(done)
        if batch:
            yield batch


def normalized_ranges(clients: ClientSettings, begins: dict[int, int], ends: dict[int, int], *, batch_size: int,
                      report: ReplayReport, processing: ProcessorSettings = DEFAULT_PROCESSING,
                      progress: Callable[[ReplayReport, int], None] | None = None,
                      window: EventWindow = ALL_TIME, drift: ReplayDrift | None = None
                      ) -> Iterator[tuple[list[dict[str, Any]], Output]]:
    """Partitions' offset ranges → processor core: each batch's normalized events in ``window`` and the core's
    output (dead letters), counted into ``report``, the schema changes of every record read found into ``drift``
    (a new one: into ``report.schema_changes`` at the end); ``progress`` is told once the caller has handled a
    batch."""
    core = replay_core(clients, processing)
    own_drift = drift is None
    drift = ReplayDrift(processing.schema_history_limit) if drift is None else drift
    total = sum(ends[p] - max(begins[p], 0) for p in ends)
    consumer = reading_consumer(clients, "lineage-replay")
    try:
        for batch in _batches(consumer, clients.events_topic, begins, ends, batch_size):
            report.scanned += len(batch)
            events, output = core.normalize(batch)
            # every record read: a change's versions may lie either side of the window
            drift.observe(events, core.facets)
            if not window.whole:
                events = [event for event in events if window.holds(event)]
            report.records += len(events) + len(output.dead_letters)
            yield events, output
            if progress:
                progress(report, total)
        if own_drift:
            report.schema_changes = drift.findings()
    finally:
        consumer.close()


def replay_ranges(clients: ClientSettings, driver: Driver, begins: dict[int, int], ends: dict[int, int], *,
                  batch_size: int, report: ReplayReport, processing: ProcessorSettings = DEFAULT_PROCESSING,
                  progress: Callable[[ReplayReport, int], None] | None = None,
                  window: EventWindow = ALL_TIME, produced: Produced | None = None,
                  drift: ReplayDrift | None = None) -> None:
    """Partitions' offset ranges → processor core → the events in ``window`` → graph. Partitions are independent (a
    run's events share a key), so any split of them over processes (Spark tasks) builds the same graph as one pass
    over all."""
    batches = normalized_ranges(clients, begins, ends, batch_size=batch_size, report=report, processing=processing,
                                progress=progress, window=window, drift=drift)
    with contextlib.closing(batches), PipelinedWriter(driver) as writer:
        for events, output in batches:
            writer.write(events, output, report, produced)


class PartialHistory(ValueError):
    """A fresh rebuild would not see the whole raw topic: emptying the graph first would lose lineage for good."""


def missing_history(first_offsets: dict[int, int]) -> dict[int, int]:
    """Partitions whose replay would start after offset 0 → that first offset (the records before it are gone from
    the topic, or excluded by ``--from``)."""
    return {partition: offset for partition, offset in sorted(first_offsets.items()) if offset > 0}


def first_offsets(clients: ClientSettings, begins: dict[int, int]) -> dict[int, int]:
    """Each partition's first offset replay will read: the given one, or the partition's low watermark (the oldest
    record the topic still holds) where replay starts at the beginning."""
    consumer = reading_consumer(clients, "lineage-replay")
    try:
        topic = clients.events_topic
        return {p: offset if offset >= 0 else consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
                for p, offset in begins.items()}
    finally:
        consumer.close()


def refuse_partial_history(clients: ClientSettings, begins: dict[int, int]) -> None:
    """``PartialHistory`` when replaying from ``begins`` would not start at offset 0 of every partition."""
    missing = missing_history(first_offsets(clients, begins))
    if missing:
        lost = ", ".join(f"partition {p} from offset {offset}" for p, offset in missing.items())
        raise PartialHistory(f"a fresh rebuild would start after the first record of {clients.events_topic} "
                             f"({lost}): the records before are deleted (retention) or excluded by --from, so "
                             "emptying the graph would lose their lineage; replay without --fresh to repair, or "
                             "add --allow-partial-history")


def prepare_replay(clients: ClientSettings, start: str | None, end: str | None, fresh: bool,
                   allow_partial_history: bool = False, ahead_seconds: float = DEFAULT_AHEAD_SECONDS
                   ) -> tuple[dict[int, int], dict[int, int]]:
    """The offset range to replay (``offset_range``), after emptying the graph (``fresh``) and ensuring its
    constraints: what both engines do before reading. A fresh rebuild that would not start at offset 0 of every
    partition raises ``PartialHistory`` before touching the graph, unless ``allow_partial_history``."""
    begins, ends = offset_range(clients, start, end, ahead_seconds)
    if fresh and not allow_partial_history:
        refuse_partial_history(clients, begins)
    with driver_for(clients) as driver:
        if fresh:
            wipe(driver)
        ensure_constraints(driver)
    return begins, ends


def replay(clients: ClientSettings, *, start: str | None = "earliest", end: str | None = None, fresh: bool = False,
           batch_size: int = 2000, progress: Callable[[ReplayReport, int], None] | None = None,
           allow_partial_history: bool = False,
           processing: ProcessorSettings = DEFAULT_PROCESSING, repair: bool = False) -> ReplayReport:
    """Replay ``start``..``end`` (eventTime) into the graph; ``repair``: then remove, within the window, what its
    events no longer produce (``replay.repair``)."""
    report = ReplayReport()
    started = time.monotonic()
    window = EventWindow.parse(start, end)
    if repair and (fresh or window.start is None):
        raise ValueError("--repair: a window with --from (a time), without --fresh (which rebuilds everything)")
    begins, ends = prepare_replay(clients, start, end, fresh, allow_partial_history,
                                  processing.max_event_time_ahead_seconds)
    produced = Produced() if repair else None
    with driver_for(clients) as driver, deleting(driver) if repair else contextlib.nullcontext():
        # a repair deletes runs and edges and lowers seen times: writers (graph.known) forget what they knew
        if produced is not None and window.start is not None:
            forgotten, forgotten_ids = forget_runs(driver, window.start, window.end)
        replay_ranges(clients, driver, begins, ends, batch_size=batch_size, report=report,
                      processing=processing, progress=progress, window=window, produced=produced)
        if produced is not None and window.start is not None:
            report.repaired = settle(driver, produced, forgotten, forgotten_ids, window.start, window.end)
    report.seconds = time.monotonic() - started
    return report


class PipelinedWriter:
    """Writes batch N in a thread while the caller decodes and processes batch N+1: Neo4j and Python overlap.

    At most one batch is in flight; its error surfaces at the next ``write`` or on exit, so nothing fails silently.
    """

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-writer")
        self.pending: Future[None] | None = None
        # rows written: a batch leaves out what the graph holds (graph.known; nothing during a repair, whose
        # deleting makes the graph's epoch unstable)
        self.known = KnownRows()

    def write(self, events: list[dict[str, Any]], output: Output, report: ReplayReport,
              produced: Produced | None = None) -> None:
        batch = graph_batch(events, schema_field_rows=False) if events else None
        if batch is not None and produced is not None:
            produced.add(batch)
        self.wait()  # the batch before is in, and known: this one leaves its rows out
        if batch is not None:
            self.pending = self.executor.submit(write_changes, self.driver, batch, self.known)
        report.written += len(events)
        report.dead_letters += len(output.dead_letters)

    def wait(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def __enter__(self) -> PipelinedWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.wait()
        finally:
            self.executor.shutdown(wait=True)


def progress_bar(width: int = 30) -> Callable[[ReplayReport, int], None]:
    """A one-line progress bar with events/s on stderr."""
    started = time.monotonic()

    def show(report: ReplayReport, total: int) -> None:
        done = min(report.records, total) if total else report.records
        filled = int(width * done / total) if total else width
        rate = report.records / max(time.monotonic() - started, 1e-9)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} records  {rate:,.0f} events/s ")
        sys.stderr.flush()

    return show
