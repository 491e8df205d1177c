"""The processor's logic over batches of raw records, without Kafka: decode → validate → dedupe → reorder →
normalize → detect schema drift → NormalizedEvent records (or DeadLetters).

The streaming shell (``processors/stream.py``) feeds it batches and writes what it returns: output records and
state changes. State lives in three mappings the shell owns (changelog-backed Faust tables), so a restarted or moved
worker continues where the previous one stopped. Every entry is bounded, and an event costs O(1) state writes:

- ``dedupe``: dedupe id → ``[first seen, partition]``, one entry per accepted event, deleted ``dedupe_ttl`` after
  it was seen (a months-long streaming run adds one small entry per event instead of rewriting a growing list);
- ``runs``: run key → ``{"order": reorder-buffer snapshot, "p": partition}``, while the run holds back events
  (at most ``MAX_HELD_PER_RUN`` events and ``MAX_HELD_CHARS`` of JSON; see ``ordering``) and, once it ended (its
  COMPLETE, FAIL or ABORT went out), or once its window let events go without a START, one small entry until the
  retention: what a restart must not lose (its START, still to come, must come out late). An open run's position
  otherwise lives in memory only, so an in-order run costs one run write when it ends; after a restart, an open
  run's next event may wait one window for a START, and whatever comes of an ended run is marked late;
- ``schemas``: ``namespace/name`` → the dataset's last schema (``schema_state``: version, eventTime and the fields
  drift compares, split into chunk entries for wide tables).

Every state change is *staged* in the ``Output`` (``dedupe_writes``, ``run_writes``, ``schema_writes``) and written
by the shell in the same Kafka transaction as the outputs: a crash before its commit repeats the batch, whose drift
findings and outputs are then computed again from the state as it was (never lost). Until then the core reads its
own staged writes first.
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from kafka_lineage.processors.identity import dedupe_id, run_id
from kafka_lineage.processors.normalize import NormalizeCache, Rename
from kafka_lineage.processors.ordering import Released, RunReorderBuffer, event_instant, lifecycle_rank
from kafka_lineage.processors.schema_state import (
    head_version,
    stored_fields,
    version_deletions,
    version_entries,
    version_fields,
    version_key,
)
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import (
    FacetCache,
    InvalidEvent,
    event_to_record,
    partition_key,
    record_to_event,
    validate_event,
)
from kafka_lineage.schemas.partitions import DEFAULT_PATTERNS, PathPatterns
from kafka_lineage.schemas.schema_diff import drift_between, written_schemas
from kafka_lineage.schemas.schema_history import DEFAULT_HISTORY_LIMIT, SchemaHistory
from kafka_lineage.schemas.wire import AvroCodec, FrozenRecord, WireFormatError

log = logging.getLogger(__name__)
STAGE = "processor"
# One run's held-back events are one changelog record (the Faust producer's limit is 1,000,000 bytes): bounded by
# count and by the JSON characters the table's serializer writes. An event that cannot be held leaves at once, late.
MAX_HELD_PER_RUN = 500
MAX_HELD_CHARS = 512 * 1024
# An in-order observation of a dataset's newest schema version is recorded in its history (one state write) only
# when it is this much event time after the last one recorded: a late version that lands inside a stretch of one
# version is placed exactly where the stretch has a recorded observation at least this often, and a
# dataset written every minute costs one write an hour, not one an event.
SCHEMA_SEEN_EVERY_SECONDS = 3600.0
# A finding carries the previous and the new schema as JSON up to this size; wider ones are left empty there (the
# changes list names every changed field, and the graph keeps each version's fields).
MAX_SCHEMA_TEXT_CHARS = 256 * 1024
# An eventTime further ahead of its record's Kafka timestamp is a clock error, dead-lettered: accepted, one event
# dated 9999 would pin its dataset's schema state and every "latest observation wins" property to the far future.
MAX_EVENT_TIME_AHEAD_SECONDS = 3600.0
# The processor's FacetCache: the working set of a 2,000-job platform (``bench_events`` realistic: ~48 M characters,
# ~110 MB). A stream's jobs recur in any order, so a cache smaller than that mostly misses: 4 M held ~8% of it, and
# this size made a worker 1.14-1.19x faster for +70-80 MiB (ARCHITECTURE 62).
FACET_CACHE_CHARS = 48_000_000
# The processor's NormalizeCache: plans (what normalizing changes, per combination of a job's datasets and their
# facets), one per job and event kind in practice. Sized like the FacetCache, for a platform: the 512 of other users
# held a quarter of a 2,000-job stream's ~2,000 plans, so most events were planned again and their rewritten datasets
# encoded again (ARCHITECTURE 62). Each plan keeps the facet objects it is keyed on and its rewritten facets alive.
NORMALIZE_PLANS = 4096
ENDED_RANK = lifecycle_rank("COMPLETE")  # a run whose COMPLETE, FAIL or ABORT went out has ended
_held_encode = json.JSONEncoder(separators=(",", ":")).encode  # as the table's serializer writes (ASCII)


def _held_chars(item: dict[str, Any]) -> int:
    return len(_held_encode(item))


@dataclass(frozen=True, slots=True)
class Incoming:
    """One raw record of the events topic."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int | None
    topic: str = ""
    validated: bool = False  # stamped by the project's own entry points under this process's rules: not validated again


@dataclass
class Output:
    """What a batch (or a timer tick) produced, for the shell to publish and then persist, in this order."""

    normalized: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    dead_letters: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    dedupe_writes: dict[str, tuple[int, Any]] = field(default_factory=dict)  # id → (partition, value or None)
    run_writes: dict[str, tuple[int, dict[str, Any] | None]] = field(default_factory=dict)  # key → (partition, value)
    schema_writes: list[tuple[str, str, Any]] = field(default_factory=list)  # (dataset key, entry key, value), in order
    duplicates: int = 0
    late: int = 0
    drift_findings: int = 0

    def state_writes(self) -> list[tuple[str, str, int | str, Any]]:
        """Every staged state change as (table, key, where, value or None for a delete), in the order to write them:
        ``where`` is the partition for ``dedupe`` and ``runs``, the dataset (whose key picks it) for ``schemas``."""
        return [*(("dedupe", key, partition, value) for key, (partition, value) in self.dedupe_writes.items()),
                *(("runs", key, partition, value) for key, (partition, value) in self.run_writes.items()),
                *(("schemas", key, dataset, value) for dataset, key, value in self.schema_writes)]

    def extend(self, other: Output) -> None:
        self.normalized += other.normalized
        self.dead_letters += other.dead_letters
        self.dedupe_writes.update(other.dedupe_writes)
        self.run_writes.update(other.run_writes)
        self.schema_writes += other.schema_writes
        self.duplicates += other.duplicates
        self.late += other.late
        self.drift_findings += other.drift_findings


class ProcessorCore:
    def __init__(self, codec: AvroCodec, runs: MutableMapping[str, Any], schemas: MutableMapping[str, Any], *,
                 dedupe: MutableMapping[str, Any] | None = None, window_seconds: float = 2.0,
                 dedupe_ttl_seconds: float = 86_400.0, aliases: dict[str, str] | None = None,
                 facets: FacetCache | None = None,
                 max_event_time_ahead_seconds: float = MAX_EVENT_TIME_AHEAD_SECONDS,
                 partition_patterns: PathPatterns = DEFAULT_PATTERNS,
                 schema_history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.codec = codec
        self.schema_history_limit = schema_history_limit
        # The tables are read here and written by the shell (from the Output's staged writes).
        self.runs = runs
        self.schemas = schemas
        self.dedupe = dedupe if dedupe is not None else {}
        self.ttl = dedupe_ttl_seconds
        self.max_ahead = max_event_time_ahead_seconds
        self.aliases = aliases or {}
        self.buffer: RunReorderBuffer[dict[str, Any]] = RunReorderBuffer(
            window_seconds, dedupe_ttl_seconds, max_held=MAX_HELD_PER_RUN, max_held_bytes=MAX_HELD_CHARS,
            size_of=_held_chars)
        self._ids: OrderedDict[str, tuple[float, int]] = OrderedDict()  # ids of owned partitions → (seen, partition)
        self._ids_unsorted = False  # adopted ids arrive in any order: the expiry sweep sorts once before running
        self._loaded: dict[str, int] = {}  # run keys this worker holds state of (in the buffer) → their partition
        self._stored: set[str] = set()  # run keys with an entry in ``runs`` (runs holding events)
        self._pending_schemas: dict[str, Any] = {}  # staged schema entries, read before the table until written
        self._restored_all = False
        self._last_sweep = 0.0
        # A stream repeats its facets, jobs and datasets: each distinct one is decoded, hashed into dedupe ids,
        # normalized and encoded once. Events then share those objects, which is safe: nothing here modifies one.
        self.facets = facets if facets is not None else FacetCache(max_chars=FACET_CACHE_CHARS)
        self._normalizer = NormalizeCache(self.facets, self.aliases, maxsize=NORMALIZE_PLANS,
                                          patterns=partition_patterns)
        self._renames: dict[Rename, FrozenRecord] = {}  # the same renames recur with their datasets

    # --- batches -------------------------------------------------------------------------------------------------
    def process(self, batch: Iterable[Incoming], now: float) -> Output:
        out = Output()
        for record in batch:
            event = self._decode(record, out)
            if event is None:
                continue
            run = run_id(event)
            key = run or partition_key(event)
            if key not in self._loaded:
                stored = self.runs.get(key)
                if run or stored is not None:
                    self._adopt_run(key, stored, record.partition, out, track=bool(run))
            identity = dedupe_id(event, self.facets)
            if self._seen(identity):
                out.duplicates += 1
                continue
            self._ids[identity] = (now, record.partition)
            out.dedupe_writes[identity] = (record.partition, [now, record.partition])
            item = {"key": record.key.decode("utf-8", "replace") if record.key is not None else None,
                    "event": event, "id": identity, "topic": record.topic, "partition": record.partition,
                    "offset": record.offset, "ts": record.timestamp_ms}
            self._emit(self.buffer.add(key if run else None, event, item, now), now, out)
        self._persist_runs(out)
        return out

    def normalize(self, batch: Iterable[Incoming]) -> tuple[list[dict[str, Any]], Output]:
        """Replay's path: each record decoded, validated and normalized exactly as ``process`` does, in arrival order,
        with nothing held back, deduplicated or checked for drift. The graph's statements are idempotent and order
        independent, so for a rebuild those steps change nothing but the cost; invalid records still come back as
        dead letters in the ``Output``."""
        out = Output()
        events = []
        for record in batch:
            event = self._decode(record, out)
            if event is not None:
                events.append(self._normalizer.normalize(event)[0])
        return events, out

    def expire(self, now: float, assigned: set[int]) -> Output:
        """Release held events whose window passed; forget dedupe ids and idle runs past the dedupe TTL.

        ``assigned``: the partitions this worker owns now (the tables may still hold entries of partitions it gave up).
        """
        out = Output()
        if not self._restored_all:  # after a start or a rebalance: adopt the state of the partitions we own
            self._restored_all = True
            for key, state in list(self.runs.items()):
                if isinstance(state, dict) and state.get("p") in assigned and key not in self._loaded:
                    self._adopt_run(key, state, state["p"], out, track=state.get("order") is not None)
            for identity, value in list(self.dedupe.items()):
                if _valid_seen(value) and value[1] in assigned and identity not in self._ids:
                    self._ids[identity] = (float(value[0]), int(value[1]))
            self._ids_unsorted = True
        self._emit(self.buffer.expire(now), now, out)
        self._persist_runs(out)
        if now - self._last_sweep >= min(60.0, self.ttl):
            self._last_sweep = now
            self._forget_ids(now - self.ttl, out)
        return out

    def written(self, output: Output) -> None:
        """The shell wrote ``output``'s staged state: the tables now answer for it."""
        for _dataset, key, value in output.schema_writes:
            if key in self._pending_schemas and self._pending_schemas[key] is value:
                del self._pending_schemas[key]

    def forget_partitions(self, partitions: set[int]) -> None:
        """Partitions moved to another worker: their runs' in-memory state must not be released from here."""
        for key, partition in list(self._loaded.items()):
            if partition in partitions:
                self.buffer.restore_run(key, None)
                del self._loaded[key]
                self._stored.discard(key)
        for identity, (_seen, partition) in list(self._ids.items()):
            if partition in partitions:
                del self._ids[identity]
        self._restored_all = False

    def on_assigned(self) -> None:
        """New partitions: adopt their runs (held events resume their windows) at the next ``expire``."""
        self._restored_all = False

    def state_sizes(self) -> dict[str, int]:
        """Entries of state this worker holds: dedupe ids, runs, held events, staged schema entries."""
        return {"ids": len(self._ids), "runs": self.buffer.state_size(), "held": self.buffer.held_count(),
                "pendingSchemas": len(self._pending_schemas)}

    # --- steps ---------------------------------------------------------------------------------------------------
    def _decode(self, record: Incoming, out: Output) -> dict[str, Any] | None:
        try:
            event = record_to_event(self.codec.decode(record.value), self.facets)
        except WireFormatError as exc:
            self._dead(record, exc.error_class, str(exc), out)
            return None
        except (ValueError, TypeError, RecursionError) as exc:  # a facet that is not JSON (or nested too deeply)
            reason = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            self._dead(record, "undecodable", f"record does not hold OpenLineage JSON: {reason}", out)
            return None
        if not record.validated:
            try:
                validate_event(event, self.facets)
            except InvalidEvent as exc:
                self._dead(record, "invalid-event", str(exc), out)
                return None
        if record.timestamp_ms is not None:
            ahead = event_instant(event.get("eventTime")) - record.timestamp_ms / 1000
            if math.isfinite(ahead) and ahead > self.max_ahead:
                self._dead(record, "event-time-in-future",
                           f"eventTime {event.get('eventTime')} is {ahead:,.0f} s after the record was produced; more "
                           f"than {self.max_ahead:,.0f} s ahead is taken for a clock error (it would pin the "
                           "dataset's latest state to the future)", out)
                return None
        return event

    def _dead(self, record: Incoming, error_class: str, message: str, out: Output) -> None:
        log.warning("dead letter %s (%s partition %d offset %d): %s", error_class, record.topic, record.partition,
                    record.offset, message)
        out.dead_letters.append((record.key, dead_letter(
            stage=STAGE, error_class=error_class, error_message=message, key=record.key, value=record.value,
            source_topic=record.topic, source_partition=record.partition, source_offset=record.offset)))

    def _seen(self, identity: str) -> bool:
        if identity in self._ids:
            return True
        if self._restored_all:  # every id of the owned partitions is in ``_ids`` (adopted by ``expire``)
            return False
        stored = self.dedupe.get(identity)  # restored, but not adopted yet: after a start or a rebalance
        if _valid_seen(stored):
            self._ids[identity] = (float(stored[0]), int(stored[1]))
            self._ids_unsorted = True
            return True
        return False

    def _adopt_run(self, key: str, stored: Any, partition: int, out: Output, track: bool = True) -> None:
        """Take a run's stored state into memory (``track``: a run, ordered by the buffer; else only the ids of
        an event key's state of the earlier layout, which is then deleted)."""
        if isinstance(stored, dict):
            self._stored.add(key)
        if track:
            self.buffer.restore_run(key, stored.get("order") if isinstance(stored, dict) else None)
            self._loaded[key] = partition
        if isinstance(stored, dict) and "ids" in stored:  # the earlier layout: its ids become entries of their own
            for identity, seen in (stored["ids"] or {}).items():
                if identity not in self._ids and isinstance(seen, int | float):
                    self._ids[identity] = (float(seen), partition)
                    out.dedupe_writes[identity] = (partition, [seen, partition])
            self._ids_unsorted = True
            self._persist_run(key, partition, out)  # rewritten without the ids (or deleted)

    def _persist_runs(self, out: Output) -> None:
        for key in self.buffer.drain_changed():
            partition = self._loaded.get(key)
            if partition is None:
                continue
            if self.buffer.snapshot_run(key) is None:  # dropped after the retention
                del self._loaded[key]
            self._persist_run(key, partition, out)

    def _persist_run(self, key: str, partition: int, out: Output) -> None:
        """Stage the run's entry: written while it holds events or once it has ended (so that a worker taking the run
        over marks what still comes of it late), deleted when it holds nothing or is dropped after the retention."""
        snapshot = self.buffer.snapshot_run(key)
        if snapshot is not None and (snapshot["held"] or snapshot["maxRank"] >= ENDED_RANK
                                     or (snapshot["maxRank"] > 0 and not snapshot["started"])):
            out.run_writes[key] = (partition, {"order": snapshot, "p": partition})
            self._stored.add(key)
        elif key in self._stored:
            out.run_writes[key] = (partition, None)
            self._stored.discard(key)

    def _forget_ids(self, cutoff: float, out: Output) -> None:
        """Delete the dedupe ids first seen before ``cutoff`` (oldest first: the dict is in first-seen order)."""
        if self._ids_unsorted:
            self._ids = OrderedDict(sorted(self._ids.items(), key=lambda item: item[1][0]))
            self._ids_unsorted = False
        ids = self._ids
        while ids:
            identity, (seen, partition) = next(iter(ids.items()))
            if seen >= cutoff:
                break
            del ids[identity]
            out.dedupe_writes[identity] = (partition, None)

    def _emit(self, released: list[Released[dict[str, Any]]], now: float, out: Output) -> None:
        for item in released:
            out.normalized.append(self._normalized(item.item, item.late, now, out))
            out.late += item.late

    def _normalized(self, item: dict[str, Any], late: bool, now: float, out: Output
                    ) -> tuple[bytes | None, dict[str, Any]]:
        event, renames = self._normalizer.normalize(item["event"])
        changes = [finding.as_record() for finding in self._drift(event, out)]
        out.drift_findings += len(changes)
        record = {
            "event": event_to_record(event, self.facets),
            "processing": {
                "dedupeId": item["id"], "processedAt": int(now * 1000), "late": late,
                "sourceTopic": item["topic"] or None, "sourcePartition": item["partition"],
                "sourceOffset": item["offset"], "producedAt": item["ts"],
                "renamedDatasets": [self._rename_record(rename) for rename in renames],
            },
            "schemaChanges": changes,
        }
        key = item["key"].encode() if item["key"] is not None else None
        return key, record

    def _rename_record(self, rename: Rename) -> dict[str, str]:
        """``rename.as_record()``, frozen and shared by every output with this rename (encoded once)."""
        record = self._renames.get(rename)
        if record is None:
            if len(self._renames) >= 4096:
                self._renames.clear()
            record = self._renames[rename] = FrozenRecord(rename.as_record())
        return record

    # --- schema drift --------------------------------------------------------------------------------------------
    def _schema_entry(self, key: str) -> Any:
        return self._pending_schemas[key] if key in self._pending_schemas else self.schemas.get(key)

    def _stage_schema(self, dataset: str, key: str, value: Any, out: Output) -> None:
        self._pending_schemas[key] = value
        out.schema_writes.append((dataset, key, value))

    def _drift(self, event: dict[str, Any], out: Output) -> list[Any]:
        """Schema changes on the event's output datasets, by event time whatever the arrival order: each
        dataset's state is its schema history (``schemas/schema_history``); it changes only with a version or a
        late observation, so an in-order run writing the newest version costs nothing."""
        findings = []
        event_time = event.get("eventTime")
        for dataset, fields, version in written_schemas(event, self.facets):
            namespace, name = dataset.get("namespace"), dataset.get("name")
            key = f"{namespace}/{name}"
            head = self._schema_entry(key)
            head = head if isinstance(head, dict) else None
            if head is not None and "history" in head and head.get("version") == version \
                    and _recorded_recently(head.get("eventTime"), event_time):
                continue  # the common case: the newest version again, in order, and recorded not long before
            findings += self._observe_schema(key, namespace, name, head, fields, version, event_time, out)
        return findings

    def _observe_schema(self, key: str, namespace: str, name: str, head: dict[str, Any] | None, fields: list[Any],
                        version: str, event_time: Any, out: Output) -> list[Any]:
        table = _Overlay(self._pending_schemas, self.schemas)
        history, known = self._schema_history(key, head, out)
        before = history.entries()
        changes = history.observe(event_time if isinstance(event_time, str) else "", version)
        if history.entries() == before:
            return []  # a repeat, or a head of the earlier layout rewritten already by _schema_history
        if version not in known:
            for entry, value in version_entries(key, fields, version).items():
                self._stage_schema(key, entry, value, out)
        findings = []
        for change in changes:
            old = fields if change.previous_version == version else version_fields(table, key, change.previous_version)
            new = fields if change.version == version else version_fields(table, key, change.version)
            finding = drift_between(old, new or [], change.previous_version, change.version, change.previous_time,
                                    change.at, namespace, name)
            findings.append(replace(finding, previous_schema=_bounded_text(finding.previous_schema),
                                    new_schema=_bounded_text(finding.new_schema), late=change.late,
                                    supersedes=change.supersedes, beyond_history=change.beyond_history))
        newest_time, newest_version = history.latest() or (event_time, version)
        self._stage_schema(key, key, {"version": newest_version, "eventTime": newest_time,
                                      "history": history.entries(), "revealed": history.revealed(),
                                      "truncated": history.truncated}, out)
        for gone in sorted((known | {version}) - history.versions()):
            for entry in version_deletions(key, gone, table.get(version_key(key, gone))):
                self._stage_schema(key, entry, None, out)
        return findings

    def _schema_history(self, key: str, head: dict[str, Any] | None, out: Output) -> tuple[SchemaHistory, set[str]]:
        """The dataset's history and the versions whose fields are kept; a head of the earlier layout (the newest
        schema only) becomes a history of one observation, its fields a version entry."""
        if head is None:
            return SchemaHistory(limit=self.schema_history_limit), set()
        if "history" in head:
            history = SchemaHistory(head["history"], revealed=head.get("revealed") or (),
                                    limit=self.schema_history_limit, truncated=bool(head.get("truncated")))
            return history, history.versions()
        version = head_version(head)
        table = _Overlay(self._pending_schemas, self.schemas)
        if "chunks" in head:  # its chunks are already where a version entry finds them
            self._stage_schema(key, version_key(key, version), {"chunks": head["chunks"]}, out)
        else:
            for entry, value in version_entries(key, stored_fields(table, key, head) or [], version).items():
                self._stage_schema(key, entry, value, out)
        history = SchemaHistory([[head.get("eventTime") or "", version]], limit=self.schema_history_limit)
        return history, {version}


class _Overlay:
    """Staged entries over a table, for reading a schema's chunks."""

    def __init__(self, staged: dict[str, Any], table: MutableMapping[str, Any]) -> None:
        self.staged, self.table = staged, table

    def get(self, key: str, default: Any = None) -> Any:
        return self.staged[key] if key in self.staged else self.table.get(key, default)


def _recorded_recently(recorded: Any, observed: Any) -> bool:
    """Whether ``observed`` is in order after the recorded ``eventTime`` and within ``SCHEMA_SEEN_EVERY_SECONDS``."""
    since = event_instant(observed) - event_instant(recorded)
    return math.isfinite(since) and 0 <= since < SCHEMA_SEEN_EVERY_SECONDS


def _bounded_text(schema_text: str) -> str:
    """A finding's schema JSON, or "" when it is over ``MAX_SCHEMA_TEXT_CHARS``."""
    return schema_text if len(schema_text) <= MAX_SCHEMA_TEXT_CHARS else ""


def _valid_seen(value: Any) -> bool:
    """A dedupe entry as written here: ``[first seen, partition]``."""
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], int | float) \
        and isinstance(value[1], int)
