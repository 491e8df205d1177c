"""The processor's logic over batches of raw records, without Kafka: decode → validate → dedupe → reorder →
normalize → detect schema drift → NormalizedEvent records (or DeadLetters).

The streaming shell (``processors/stream.py``) feeds it batches and writes what it returns: output records and
state changes. State lives in two mappings the shell owns (changelog-backed Faust tables), so a restarted or moved
worker continues where the previous one stopped:

- ``runs``: run key → ``{"ids": {dedupe id: first seen}, "order": reorder-buffer snapshot, "p": partition}`` —
  dedupe identities and held-back events of one run (or of one dataset/job for events without a run);
- ``schemas``: ``namespace/name`` → ``{"fields": [...], "eventTime": ...}`` — the last schema of each dataset.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from kafka_lineage.processors.identity import dedupe_id, run_id
from kafka_lineage.processors.normalize import NormalizeCache, Rename
from kafka_lineage.processors.ordering import Released, RunReorderBuffer
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import (
    FacetCache,
    InvalidEvent,
    event_to_record,
    partition_key,
    record_to_event,
    validate_event,
)
from kafka_lineage.schemas.schema_diff import detect_drift, schema_fields, schema_version, should_store
from kafka_lineage.schemas.wire import AvroCodec, FrozenRecord, WireFormatError

log = logging.getLogger(__name__)
STAGE = "processor"


@dataclass(frozen=True, slots=True)
class Incoming:
    """One raw record of the events topic."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int | None
    topic: str = ""


@dataclass
class Output:
    """What a batch (or a timer tick) produced, for the shell to publish and persist."""

    normalized: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    dead_letters: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    run_writes: dict[str, tuple[int, dict[str, Any] | None]] = field(default_factory=dict)  # key → (partition, value)
    duplicates: int = 0
    late: int = 0
    drift_findings: int = 0

    def extend(self, other: Output) -> None:
        self.normalized += other.normalized
        self.dead_letters += other.dead_letters
        self.run_writes.update(other.run_writes)
        self.duplicates += other.duplicates
        self.late += other.late
        self.drift_findings += other.drift_findings


class ProcessorCore:
    def __init__(self, codec: AvroCodec, runs: MutableMapping[str, Any], schemas: MutableMapping[str, Any], *,
                 window_seconds: float = 2.0, dedupe_ttl_seconds: float = 86_400.0,
                 aliases: dict[str, str] | None = None, facets: FacetCache | None = None) -> None:
        self.codec = codec
        self.runs = runs  # read-only here: writes go out as run_writes, which the shell applies
        self._cache: dict[str, dict[str, Any]] = {}  # current state of the keys this worker touched
        self.schemas = schemas
        self.ttl = dedupe_ttl_seconds
        self.aliases = aliases or {}
        self.buffer: RunReorderBuffer[dict[str, Any]] = RunReorderBuffer(window_seconds, dedupe_ttl_seconds)
        self._loaded: dict[str, int] = {}  # keys this worker holds state of (in the buffer) → their partition
        self._restored_all = False
        self._last_sweep = 0.0
        # A stream repeats its facets, jobs and datasets: each distinct one is decoded, hashed into dedupe ids,
        # normalized and encoded once. Events then share those objects, which is safe: nothing here modifies one.
        self.facets = facets if facets is not None else FacetCache()
        self._normalizer = NormalizeCache(self.facets, self.aliases)
        self._renames: dict[Rename, FrozenRecord] = {}  # the same renames recur with their datasets

    # --- batches -------------------------------------------------------------------------------------------------
    def process(self, batch: Iterable[Incoming], now: float) -> Output:
        out = Output()
        touched: dict[str, int] = {}
        for record in batch:
            event = self._decode(record, out)
            if event is None:
                continue
            run = run_id(event)
            key = run or partition_key(event)
            state = self._state(key, record.partition)
            identity = dedupe_id(event, self.facets)
            if identity in state["ids"]:
                out.duplicates += 1
                continue
            state["ids"][identity] = now
            touched[key] = record.partition
            item = {"key": record.key.decode("utf-8", "replace") if record.key is not None else None,
                    "event": event, "id": identity, "topic": record.topic, "partition": record.partition,
                    "offset": record.offset, "ts": record.timestamp_ms}
            if key not in self._loaded:
                self.buffer.restore_run(key, state.get("order"))
                self._loaded[key] = record.partition
            self._emit(self.buffer.add(key if run else None, event, item, now), now, out)
        self._persist(touched, out)
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
        """Release held events whose window passed; forget the state of keys idle past the dedupe TTL.

        ``assigned``: the partitions this worker owns now (a table also holds standby copies of other partitions).
        """
        out = Output()
        if not self._restored_all:  # after a start or a rebalance: adopt the state of the partitions we own
            self._restored_all = True
            for key, state in list(self.runs.items()):
                if isinstance(state, dict) and state.get("p") in assigned and key not in self._loaded:
                    self._cache[key] = state
                    self.buffer.restore_run(key, state.get("order"))
                    self._loaded[key] = state["p"]
        released = self.buffer.expire(now)
        self._emit(released, now, out)
        self._persist({r.run_id: self._loaded.get(r.run_id, 0) for r in released if r.run_id is not None}, out)
        self.buffer.drain_changed()
        if now - self._last_sweep >= min(60.0, self.ttl):
            self._last_sweep = now
            for key, partition in list(self._loaded.items()):
                state = self._cache.get(key)
                newest = max((state or {}).get("ids", {}).values(), default=0)
                order = self.buffer.snapshot_run(key)
                if newest < now - self.ttl and not (order and order["held"]):
                    self.buffer.restore_run(key, None)
                    del self._loaded[key]
                    self._cache.pop(key, None)
                    out.run_writes[key] = (partition, None)
        return out

    def forget_partitions(self, partitions: set[int]) -> None:
        """Partitions moved to another worker: their runs' in-memory state must not be released from here."""
        for key, partition in list(self._loaded.items()):
            if partition in partitions:
                self.buffer.restore_run(key, None)
                del self._loaded[key]
                self._cache.pop(key, None)
        self._restored_all = False

    def on_assigned(self) -> None:
        """New partitions: adopt their runs (held events resume their windows) at the next ``expire``."""
        self._restored_all = False

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
        try:
            validate_event(event)
        except InvalidEvent as exc:
            self._dead(record, "invalid-event", str(exc), out)
            return None
        return event

    def _dead(self, record: Incoming, error_class: str, message: str, out: Output) -> None:
        log.warning("dead letter %s (%s partition %d offset %d): %s", error_class, record.topic, record.partition,
                    record.offset, message)
        out.dead_letters.append((record.key, dead_letter(
            stage=STAGE, error_class=error_class, error_message=message, key=record.key, value=record.value,
            source_topic=record.topic, source_partition=record.partition, source_offset=record.offset)))

    def _state(self, key: str, partition: int) -> dict[str, Any]:
        state = self._cache.get(key)
        if state is None:
            stored = self.runs.get(key)
            state = {"ids": dict(stored.get("ids") or {}), "order": stored.get("order"), "p": partition} \
                if isinstance(stored, dict) else {"ids": {}, "order": None, "p": partition}
            self._cache[key] = state
        return state

    def _persist(self, touched: dict[str, int], out: Output) -> None:
        for key, partition in touched.items():
            state = self._cache.get(key) or {"ids": {}}
            cutoff = max(state["ids"].values(), default=0) - self.ttl
            ids = {identity: seen for identity, seen in state["ids"].items() if seen >= cutoff}
            value = {"ids": ids, "order": self.buffer.snapshot_run(key), "p": partition}
            self._cache[key] = value
            out.run_writes[key] = (partition, dict(value, ids=dict(ids)))

    def _emit(self, released: list[Released[dict[str, Any]]], now: float, out: Output) -> None:
        for item in released:
            out.normalized.append(self._normalized(item.item, item.late, now, out))
            out.late += item.late

    def _normalized(self, item: dict[str, Any], late: bool, now: float, out: Output
                    ) -> tuple[bytes | None, dict[str, Any]]:
        event, renames = self._normalizer.normalize(item["event"])
        changes = [finding.as_record() for finding in self._drift(event)]
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

    def _drift(self, event: dict[str, Any]) -> list[Any]:
        """Schema changes on the event's output datasets; the per-dataset state changes only with the version."""
        datasets = list(event.get("outputs") or [])
        if isinstance(event.get("dataset"), dict):
            datasets.append(event["dataset"])
        findings = []
        event_time = event.get("eventTime")
        for dataset in datasets:
            fields = schema_fields(dataset) if isinstance(dataset, dict) else None
            if not fields:
                continue
            namespace, name = dataset.get("namespace"), dataset.get("name")
            key = f"{namespace}/{name}"
            stored = self.schemas.get(key)
            if stored and stored["fields"] == fields:  # the common case, decided without hashing the schema
                continue
            previous = (stored["fields"], stored["eventTime"]) if stored else None
            finding = detect_drift(previous, fields, event_time, namespace, name)
            if finding is not None:
                findings.append(finding)
            if previous is None or (should_store(previous[1], event_time)
                                    and schema_version(previous[0]) != schema_version(fields)):
                self.schemas[key] = {"fields": fields, "eventTime": event_time}
        return findings
