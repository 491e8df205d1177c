"""A deterministic lineage workload with its ground truth: OpenLineage events to send, and the graph they must yield.

``generate(jobs, runs_per_job, seed, schema_changes)`` builds a model of a data platform and the events its runs
emit, then disturbs their delivery the way real transports do. Pure and seeded: the same arguments give the same
events, byte for byte.

The model:

- a layered DAG of ``jobs`` jobs: layer 1 reads source datasets, every later layer reads 1-3 datasets of earlier
  layers (mostly the one before), and every job writes 1-2 datasets of its own (each dataset has one writer);
- datasets live on S3, Postgres, HDFS, Kafka or GCS and are *spelled* differently from event to event
  (``s3a://bucket``, a JDBC URL with the database in it, an upper-case host, a bootstrap-server list, …), as
  different integrations spell them; the truth holds the canonical identity, computed with the processor's own
  ``canonical_identity`` (every spelling is checked to reach it, on a sample of datasets per storage system);
- output datasets carry a schema facet (top-level and nested fields) and, on COMPLETE, a column-lineage facet;
  source datasets carry their schema on the inputs;
- a share of the path datasets (S3, HDFS, GCS; ``symlink_rate``) are also tables of a catalog: every event naming
  one (input or output) carries a ``symlinks`` facet with its TABLE identifier, sent in canonical form — mostly a
  Hive metastore table (``hive://wl-<tag>-metastore:9083``, ``mart.l01_t00003_0``), for some S3 datasets a table
  named under the warehouse location (``s3://wl-<tag>-lake/warehouse``, which the processor keeps as it is);
- every job runs ``runs_per_job`` times, one period apart: START, sometimes RUNNING, then COMPLETE or FAIL; the
  last run of a job may still be in flight (START, or START + RUNNING);
- a share of the jobs are tasks of orchestrator DAGs: their runs have a parent run facet pointing at the DAG's
  run, which itself emits START/COMPLETE|FAIL, only START, or nothing at all;
- ``schema_changes`` scheduled schema changes: an output dataset's schema changes from a given run on (type
  widened or narrowed, field added or dropped); the processor reports each as a drift finding.

Delivery (``Delivery``, seeded): events leave in time order, each moved by up to ``shuffle_window`` positions
(shuffling across and within runs), some runs' STARTs are sent after their last event (late STARTs), some events
are sent twice in a row (duplicates) or again much later (retries). Both copies are the same object.

Drift alerts go by event time in the processor (issue 34: a dataset's schema history, whatever the arrival
order), so schema versions are disturbed like everything else: a change comes out once, at the first observation
of the new version in event time; an alert that a late version made obsolete is named in a later alert's
``supersedes``, and the checker leaves it out. The processor keeps each dataset's schema history (and dedupe ids)
across workloads: a workload sent again under the same tag yields the same graph but no alerts the second time;
use a new tag (or seed) for a fresh run.

The truth (``GroundTruth``) is derived from the model — what each job read and wrote, each run's outcome — not
from the events, so comparing it with the graph the pipeline built checks the pipeline. Its rows have the shape
of ``graph.fingerprint.FINGERPRINT_QUERIES`` results (``KINDS``): node identities, relationship end identities,
``Run.state``, ``WROTE.rowCount``/``bytes``, ``DERIVES_FROM.transformation``, ``SAME_AS.type`` and the lineage
edges' first/last seen event times. Rules it encodes:

- a run's state is the outcome the model gave it (its last lifecycle event: COMPLETE, FAIL, RUNNING or START);
  copies and late delivery do not change it, and a DAG run that emitted no event has state None;
- ``WROTE`` statistics come from the COMPLETE event only (rowCount, and size as ``bytes`` — sometimes absent); a
  run that failed or is in flight wrote its outputs without statistics (None, None);
- ``DERIVES_FROM`` and the fields they name exist for (job, schema epoch) pairs with at least one COMPLETE run;
  fields of every schema version a run emitted exist (nothing is ever deleted from the graph);
- schema versions are ``schemas.schema_diff.schema_version`` of the fields, as the processor and sink hash them;
- a symlinked dataset has one ``SAME_AS`` edge (type TABLE) to a ``Dataset`` node of its table name, seen from the
  first to the last event naming the dataset (its ``INPUT_TO``/``OUTPUTS`` edges' bounds); the alias namespaces are
  in the truth's scope.
"""

from __future__ import annotations

import gc
import math
import random
import re
import uuid
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from hashlib import sha256
from typing import Any, NamedTuple

from kafka_lineage.graph.fingerprint import fingerprint
from kafka_lineage.graph.keys import utc_time
from kafka_lineage.processors.normalize import canonical_identity
from kafka_lineage.schemas.schema_diff import schema_version

__all__ = [
    "KINDS",
    "PRODUCER",
    "Alert",
    "Delivery",
    "GroundTruth",
    "KindSpec",
    "Scope",
    "Workload",
    "alert_id",
    "generate",
    "iter_batches",
]

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/devtools/kafka_lineage_devtools/workload.py"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_FACET_URL = "https://openlineage.io/spec/facets/{}.json#/$defs/{}"

Row = tuple[Any, ...]


# --- the truth's shape ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KindSpec:
    """Columns of one fingerprint query's rows: the identity, then the values compared for equal identities."""

    identity: tuple[str, ...]
    values: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return self.identity + self.values


# Mirrors graph.fingerprint.FINGERPRINT_QUERIES: one entry per query, the columns in its RETURN order.
KINDS: dict[str, KindSpec] = {
    "Job": KindSpec(("namespace", "name")),
    "Run": KindSpec(("runId",), ("state",)),
    "Dataset": KindSpec(("namespace", "name")),
    "Field": KindSpec(("namespace", "name", "field")),
    "SchemaVersion": KindSpec(("namespace", "name", "hash")),
    "OF_JOB": KindSpec(("runId", "namespace", "name")),
    "CHILD_OF": KindSpec(("runId", "parentRunId")),
    "READ": KindSpec(("runId", "namespace", "name")),
    "WROTE": KindSpec(("runId", "namespace", "name"), ("rowCount", "bytes")),
    "INPUT_TO": KindSpec(("namespace", "name", "jobNamespace", "jobName"), ("firstSeen", "lastSeen")),
    "OUTPUTS": KindSpec(("jobNamespace", "jobName", "namespace", "name"), ("firstSeen", "lastSeen")),
    "HAS_FIELD": KindSpec(("namespace", "name", "fieldNamespace", "fieldName", "field")),
    "DERIVES_FROM": KindSpec(("namespace", "name", "field", "inputNamespace", "inputName", "inputField"),
                             ("transformation", "firstSeen", "lastSeen")),
    "SAME_AS": KindSpec(("namespace", "name", "aliasNamespace", "aliasName"), ("type", "firstSeen", "lastSeen")),
    "DEPENDS_ON": KindSpec(("namespace", "name", "inputNamespace", "inputName", "inputField"),
                           ("transformation", "firstSeen", "lastSeen")),  # none in a workload
    "HAS_SCHEMA": KindSpec(("namespace", "name", "schemaNamespace", "schemaName", "hash")),
}


class Alert(NamedTuple):
    """An expected schema-drift alert: the dataset (canonical), the versions it moved between, the severity."""

    namespace: str
    name: str
    previous_version: str
    new_version: str
    severity: str


def alert_id(namespace: str, name: str, previous_version: str, new_version: str) -> str:
    """The id the alert sink gives an alert (hash of dataset and both versions), computed here independently."""
    return sha256("\x1f".join((namespace, name, previous_version, new_version)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Scope:
    """What of a shared graph belongs to a workload: its job and dataset namespaces (exact) and its run ids."""

    job_namespaces: frozenset[str]
    dataset_namespaces: frozenset[str]
    run_ids: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """The graph and alerts a workload must produce. ``graph[kind]``: rows as tuples in ``KINDS[kind].columns``."""

    graph: Mapping[str, frozenset[Row]]
    alerts: frozenset[Alert]
    scope: Scope

    def rows(self, kind: str) -> list[dict[str, Any]]:
        """The rows of one kind as dicts (what ``record.data()`` of the fingerprint query returns), sorted."""
        spec = KINDS[kind]
        columns = spec.columns  # identities are strings; only value columns may hold None, which needs the key
        ordered = sorted(self.graph[kind], key=_row_key) if spec.values else sorted(self.graph[kind])
        return [dict(zip(columns, row, strict=True)) for row in ordered]

    def fingerprint(self) -> str:
        """``graph.fingerprint.fingerprint`` of the expected graph: equal to the live one's if it holds only this."""
        return fingerprint({kind: self.rows(kind) for kind in KINDS})

    def counts(self) -> dict[str, int]:
        return {**{kind: len(self.graph[kind]) for kind in KINDS}, "alerts": len(self.alerts)}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (rows as lists); ``from_dict`` reads it back."""
        return {"graph": {kind: sorted((list(row) for row in rows), key=_row_key) for kind, rows in self.graph.items()},
                "alerts": sorted(list(a) for a in self.alerts),
                "scope": {"jobNamespaces": sorted(self.scope.job_namespaces),
                          "datasetNamespaces": sorted(self.scope.dataset_namespaces),
                          "runIds": sorted(self.scope.run_ids)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroundTruth:
        scope = data["scope"]
        return cls({kind: frozenset(tuple(row) for row in data["graph"].get(kind, ())) for kind in KINDS},
                   frozenset(Alert(*alert) for alert in data["alerts"]),
                   Scope(frozenset(scope["jobNamespaces"]), frozenset(scope["datasetNamespaces"]),
                         frozenset(scope["runIds"])))


def _row_key(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((value is None, str(value)) for value in row)


@dataclass(frozen=True, slots=True)
class Delivery:
    """How delivery disturbs the event list (rates per event, or per run for late STARTs)."""

    duplicate_rate: float = 0.03  # sent twice in a row (a client retry after a lost acknowledgement)
    retry_rate: float = 0.02  # sent again much later (a replay, a restarted emitter)
    late_start_rate: float = 0.05  # a run's START sent after all its other events
    shuffle_window: int = 32  # each event moves by up to this many positions
    # per schema change: the last run before it sent after the first run after it (an emitter's buffer flushed
    # after an outage, a backfill re-sending yesterday): the old version arrives later; the first change of a
    # workload has all the runs before it sent after, so the change is found from a late observation alone
    late_schema_rate: float = 0.5

    @classmethod
    def none(cls) -> Delivery:
        """In time order, each event once."""
        return cls(0.0, 0.0, 0.0, 0, 0.0)


@dataclass(frozen=True, slots=True)
class Workload:
    """The events to send, in order (read-only: copies share objects), and what the pipeline must make of them."""

    events: list[dict[str, Any]]
    truth: GroundTruth
    params: Mapping[str, Any]
    delivery: Mapping[str, int]  # what the disturbance did: duplicates, retries, late_starts, moved

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-ready overview: parameters, event counts, disturbances, expected graph sizes."""
        truth = self.truth.counts()
        return {
            **{k: v for k, v in self.params.items() if k != "delivery"},
            "events": len(self.events),
            "distinct_events": self.params["distinct_events"],
            "delivery": {**self.params["delivery"], **self.delivery},
            "expected": {"jobs": truth["Job"], "runs": truth["Run"], "datasets": truth["Dataset"],
                         "fields": truth["Field"], "schema_versions": truth["SchemaVersion"],
                         "edges": sum(truth[k] for k in KINDS if k.isupper()), "alerts": truth["alerts"],
                         "breaking_alerts": sum(a.severity == "BREAKING" for a in self.truth.alerts)},
            "job_namespaces": sorted(self.truth.scope.job_namespaces),
            "dataset_namespaces": sorted(self.truth.scope.dataset_namespaces),
        }


def iter_batches(workload: Workload | Sequence[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """The events in delivery order, ``size`` at a time."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    events = workload.events if isinstance(workload, Workload) else workload
    for start in range(0, len(events), size):
        yield list(events[start:start + size])


# --- the model -----------------------------------------------------------------------------------------------------
_TAG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,22}[a-z0-9])?")
_PERIOD_MS = 3_600_000  # one run of every job per hour
_SPREAD_MS = 1_800_000  # layers start spread over the first half hour
_TZ_PLUS2 = timezone(timedelta(hours=2))

# Field types; a change retypes along these maps. Widening is a compatible change, narrowing a breaking one.
_TYPES = ("int", "bigint", "string", "double", "float", "date", "timestamp", "decimal(10,2)", "decimal(18,2)",
          "varchar(64)", "boolean", "smallint", "BIGINT", "STRING")
_WIDEN = {"int": "bigint", "smallint": "int", "float": "double", "date": "timestamp",
          "decimal(10,2)": "decimal(18,2)", "varchar(64)": "string"}
_NARROW = {"bigint": "int", "BIGINT": "int", "double": "float", "timestamp": "date", "string": "varchar(16)",
           "STRING": "varchar(16)", "decimal(18,2)": "decimal(10,2)"}
_SEVERITY = {"widen": "COMPATIBLE", "add": "COMPATIBLE", "narrow": "BREAKING", "drop": "BREAKING"}

# Column-lineage transformations: (transformations of each input field or None, field-level keys, expected text of
# DERIVES_FROM.transformation), written out here rather than computed, weighted towards plain copies.
_PATTERNS: tuple[tuple[list[dict[str, Any]] | None, dict[str, str], str], ...] = (
    ([{"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}], {}, "DIRECT/IDENTITY"),
    ([{"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}], {}, "DIRECT/IDENTITY"),
    ([{"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "cast", "masking": False}], {},
     "DIRECT/TRANSFORMATION"),
    ([{"type": "DIRECT", "subtype": "AGGREGATION", "description": "sum", "masking": False},
      {"type": "INDIRECT", "subtype": "GROUP_BY", "description": "", "masking": False}], {},
     "DIRECT/AGGREGATION,INDIRECT/GROUP_BY"),
    ([{"type": "INDIRECT"}], {}, "INDIRECT"),
    (None, {"transformationType": "IDENTITY", "transformationDescription": "copied"}, "IDENTITY"),
    (None, {}, ""),
)
_PATTERN_WEIGHTS = (30, 30, 15, 10, 5, 5, 5)


def _spellings(system: str, tag: str, path: str) -> tuple[tuple[str, str], ...]:
    """Ways integrations write one dataset; the first is already canonical."""
    up = tag.upper()
    if system == "s3":
        name = f"warehouse/{path}"
        lake = f"wl-{tag}-lake"
        return ((f"s3://{lake}", name), (f"s3a://{lake}", name), (f"s3n://{lake}", name),
                (f"s3a://{lake}/warehouse", path), (f"s3://WL-{up}-LAKE", name), (f"s3://{lake}", f"s3a://{lake}/{name}"))
    if system == "postgres":
        schema, table = ("raw", path.replace("/", "_")) if path.startswith("src") else ("mart", path.replace("/", "_"))
        return ((f"postgres://wl-{tag}-db:5432", f"analytics.{schema}.{table}"),
                (f"postgresql://WL-{up}-DB:5432/analytics", f"{schema}.{table}"),
                (f"jdbc:postgresql://wl-{tag}-db/analytics", f"{schema}.{table}"),
                (f"jdbc:postgresql://wl-{tag}-db:5432/analytics?currentSchema={schema}", table))
    if system == "hdfs":
        return ((f"hdfs://wl-{tag}-nn:8020", f"/data/{path}"), (f"hdfs://WL-{up}-NN", f"/data/{path}"),
                (f"hdfs://wl-{tag}-nn:8020/data", path))
    if system == "kafka":
        topic = "events." + path.replace("/", ".")
        return ((f"kafka://wl-{tag}-broker-1:9092", topic),
                (f"kafka://wl-{tag}-broker-2:9092,wl-{tag}-broker-1:9092", topic),
                (f"kafka://SASL_SSL://wl-{tag}-broker-1:9092", topic))
    if system == "gcs":
        return ((f"gs://wl-{tag}-gcs", path), (f"gcs://wl-{tag}-gcs", path))
    raise ValueError(system)


def _table_name(tag: str, path: str, source: bool, location: bool) -> tuple[str, str]:
    """A catalog's (namespace, name) of a path dataset: a Hive metastore table, or (``location``) a table of a
    catalog without a metastore, which Spark names under its warehouse location (``s3://…/warehouse``)."""
    table = f"{'raw' if source else 'mart'}.{path.replace('/', '_')}"
    return (f"s3://wl-{tag}-lake/warehouse" if location else f"hive://wl-{tag}-metastore:9083"), table


_TABLE_SYSTEMS = frozenset(("s3", "hdfs", "gcs"))  # path datasets a catalog may also name as a table
_LOCATION_TABLE_RATE = 0.25  # the share of symlinked S3 datasets whose table is named under the warehouse location
_VERIFIED_PER_SYSTEM = 64  # datasets per storage system whose every spelling is normalized to check the identity
_SOURCE_SYSTEMS = ("postgres", "postgres", "kafka", "s3")
_OUTPUT_SYSTEMS = ("s3", "s3", "s3", "postgres", "hdfs", "gcs")


@dataclass(eq=False)
class _Dataset:
    index: int
    spellings: tuple[tuple[str, str], ...]
    identity: tuple[str, str]
    fields: list[dict[str, Any]]  # epoch 0 schema
    source: bool
    change_runs: list[int] = field(default_factory=list)  # run indices from which epoch 1, 2, … hold
    epochs: list[tuple[list[dict[str, Any]], str]] = field(default_factory=list)  # (fields, version) per epoch
    facets: dict[Any, dict[str, Any]] = field(default_factory=dict)  # built facet maps, shared by events
    # a catalog's name of a path dataset: the symlinks facet its events carry, and the alias's identity in the graph
    symlinks: dict[str, Any] | None = None
    alias: tuple[str, str] | None = None

    def epoch(self, run: int) -> int:
        return bisect_right(self.change_runs, run)


@dataclass(eq=False)
class _Dag:
    index: int
    namespace: str
    name: str
    run_ids: list[str] = field(default_factory=list)
    tasks: list[_Job] = field(default_factory=list)


@dataclass(eq=False)
class _Job:
    index: int
    namespace: str
    name: str
    layer: int
    inputs: list[_Dataset]
    outputs: list[_Dataset]
    offset_ms: int
    dag: _Dag | None = None
    # output dataset index → [(out field, [(input dataset, input field, ref spelling)], pattern index)]
    lineage: dict[int, list[tuple[str, list[tuple[_Dataset, str, tuple[str, str]]], int]]] = field(
        default_factory=dict)
    obj: dict[str, Any] = field(default_factory=dict)  # the job object of its events


def _paths(fields: Iterable[dict[str, Any]]) -> list[str]:
    """Dotted field paths, nested ones included (``attrs``, ``attrs.source``)."""
    out = []
    for item in fields:
        out.append(item["name"])
        out.extend(f"{item['name']}.{sub['name']}" for sub in item.get("fields", ()))
    return out


def _flat(fields: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Top-level fields without nested ones: the ones column lineage names and changes touch."""
    return [item for item in fields if "fields" not in item]


def _schema_fields(rng: random.Random, prefix: str, source: bool) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = [{"name": "id", "type": "bigint", "description": "key"}]
    for n in range(rng.randint(3, 7)):
        fields.append({"name": f"{prefix}_{n}", "type": rng.choice(_TYPES)})
    if not source and rng.random() < 0.25:
        fields.append({"name": "attrs", "type": "struct", "fields": [{"name": "origin", "type": "string"},
                                                                      {"name": "tags", "type": "array<string>"}]})
    return fields


def _canonical(spellings: tuple[tuple[str, str], ...], aliases: Mapping[str, str] | None,
               verify: bool) -> tuple[str, str]:
    """The processor's canonical identity of a dataset (``canonical_identity`` of its first spelling).

    ``verify``: check that every other spelling reaches it too, and that it is stable under normalization (the
    spellings of one storage system differ only in the path, so a sample of datasets per system is checked).
    """
    identity = canonical_identity(*spellings[0], aliases)[:2]
    if verify:
        found = {canonical_identity(ns, nm, aliases)[:2] for ns, nm in (*spellings, identity)}
        if found != {identity}:
            raise RuntimeError(f"spellings of one dataset normalize differently: {sorted(found)}")
    return identity


def _change(rng: random.Random, fields: list[dict[str, Any]], severity: str, referenced: set[str], number: int,
            seen: set[str]) -> tuple[list[dict[str, Any]], str, str] | None:
    """One schema change of the given severity class that yields a version not seen before: (fields, version, kind)."""
    flat = _flat(fields)
    options: list[tuple[str, str | None]] = []
    if severity == "COMPATIBLE":
        options += [("widen", f["name"]) for f in flat if f["type"] in _WIDEN]
        rng.shuffle(options)
        options.append(("add", None))
    else:
        drops = [("drop", f["name"]) for f in flat if f["name"] != "id"]
        rng.shuffle(drops)
        drops.sort(key=lambda option: option[1] in referenced)  # prefer fields nobody downstream reads
        narrows = [("narrow", f["name"]) for f in flat if f["type"] in _NARROW]
        rng.shuffle(narrows)
        options += (narrows + drops) if rng.random() < 0.5 else (drops + narrows)
        if len(flat) <= 2:
            options = [o for o in options if o[0] != "drop"]
    for kind, name in options:
        if kind == "add":
            new = [*fields, {"name": f"added_{number}", "type": "string"}]
        elif kind == "drop":
            new = [f for f in fields if f["name"] != name]
        else:
            table = _WIDEN if kind == "widen" else _NARROW
            new = [{**f, "type": table[f["type"]]} if f["name"] == name else f for f in fields]
        version = schema_version(new)
        if version not in seen:
            return new, version, kind
    return None


# --- generation ----------------------------------------------------------------------------------------------------
def generate(jobs: int, runs_per_job: int, seed: int, schema_changes: int = 2, *, tag: str | None = None,
             delivery: Delivery | None = None, parent_rate: float = 0.3, symlink_rate: float = 0.4,
             aliases: Mapping[str, str] | None = None, start: str = "2024-06-01T00:00:00Z") -> Workload:
    """A workload of ``jobs`` jobs run ``runs_per_job`` times each, with ``schema_changes`` schema changes.

    ``tag`` (lower-case letters, digits, inner hyphens; default ``s{seed}``) goes into every namespace and seeds
    the run ids, so workloads with different tags never share graph elements. ``delivery``: how delivery is
    disturbed (``Delivery()`` defaults; ``Delivery.none()`` for time order, each event once). ``parent_rate``: the
    share of jobs that are tasks of an orchestrator DAG. ``symlink_rate``: the share of path datasets (S3, HDFS,
    GCS) a catalog also names as a table (their events carry a ``symlinks`` facet; 0 for none). ``aliases``: the
    processor's alias map, if it runs with one (the truth then holds the aliased namespaces). ``start``: the first
    run's eventTime.

    Deterministic: the model depends on ``seed`` only (``symlink_rate`` decides which datasets have a table name,
    nothing else), run ids on ``seed`` and ``tag``, the disturbance on ``seed`` and ``delivery``.
    """
    if jobs < 1 or runs_per_job < 1:
        raise ValueError("jobs and runs_per_job must be at least 1")
    if schema_changes < 0:
        raise ValueError("schema_changes must not be negative")
    if schema_changes and runs_per_job < 2:
        raise ValueError("schema changes need at least 2 runs per job (a change takes effect from a later run)")
    tag = f"s{seed}" if tag is None else tag
    if not _TAG.fullmatch(tag):
        raise ValueError(f"tag must be 1-24 lower-case letters, digits or inner hyphens: {tag!r}")
    delivery = delivery or Delivery()
    collecting = gc.isenabled()
    gc.disable()  # millions of new containers, no cycles: collections would only re-scan them (2-3x the time)
    try:
        builder = _Builder(seed, tag, runs_per_job, aliases, start, symlink_rate)
        builder.plan_jobs(jobs)
        builder.plan_lineage()
        builder.plan_dags(parent_rate)
        builder.plan_schema_changes(schema_changes)
        for job in builder.jobs:
            builder.emit_job_runs(job)
        for dag in builder.dags:
            builder.emit_dag_runs(dag)
        truth = builder.truth()
        timeline = sorted(builder.timeline, key=lambda item: (item.ms, item.seq))
        events, stats = _deliver(timeline, random.Random(f"delivery/{seed}"), delivery, builder.schema_change_runs)
    finally:
        if collecting:
            gc.enable()
    params = {"seed": seed, "tag": tag, "jobs": jobs, "runs_per_job": runs_per_job,
              "schema_changes": schema_changes, "parent_rate": parent_rate, "symlink_rate": symlink_rate,
              "dags": len(builder.dags),
              "distinct_events": len(timeline),
              "delivery": {"duplicate_rate": delivery.duplicate_rate, "retry_rate": delivery.retry_rate,
                           "late_start_rate": delivery.late_start_rate, "shuffle_window": delivery.shuffle_window,
                           "late_schema_rate": delivery.late_schema_rate}}
    return Workload(events, truth, params, stats)


@dataclass(frozen=True, slots=True)
class _Timed:
    """An event with what delivery needs to know of it."""

    ms: int  # eventTime, milliseconds after the start
    seq: int
    event: dict[str, Any]
    run_id: str
    event_type: str


def _facet(kind: str, version: str, **content: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": _FACET_URL.format(f"{version}/{kind}", kind), **content}


def _widen(bounds: dict[Any, tuple[int, int]], key: Any, first: int, last: int) -> None:
    """``bounds[key]`` (first, last) stretched to cover ``first``..``last``."""
    old = bounds.get(key)
    bounds[key] = (first, last) if old is None else (min(old[0], first), max(old[1], last))


class _Builder:
    """The model, the events of its runs (time order) and its truth, built step by step by ``generate``."""

    def __init__(self, seed: int, tag: str, runs: int, aliases: Mapping[str, str] | None, start: str,
                 symlink_rate: float = 0.0) -> None:
        self.tag, self.runs, self.aliases = tag, runs, aliases
        self.rng = random.Random(seed)
        # symlinks draw from a stream of their own: the rest of the model is the same at every symlink_rate
        self.links, self.symlink_rate = random.Random(f"symlinks/{seed}"), symlink_rate
        self.ids = random.Random(f"{seed}/{tag}")
        self.base = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(UTC)
        self.job_ns, self.dag_ns = f"wl-{tag}.spark", f"wl-{tag}.airflow"
        self.datasets: list[_Dataset] = []
        self.jobs: list[_Job] = []
        self.dags: list[_Dag] = []
        self.referenced: dict[int, set[str]] = defaultdict(set)  # dataset → its fields read by column lineage
        self.alerts: set[Alert] = set()
        self.timeline: list[_Timed] = []
        # per schema change: the job's runs before it (oldest first) and the first run after it
        self.schema_change_runs: list[tuple[list[str], str]] = []
        self.rows: dict[str, set[Row]] = {kind: set() for kind in KINDS}
        self.used: set[int] = set()  # datasets some event names
        self.versions_seen: set[tuple[int, int]] = set()  # (dataset, epoch) some event carried
        self.lineage_done: set[tuple[int, int, int]] = set()  # (job, output, epoch) with a COMPLETE run
        # event times (ms) lineage edges were first and last seen at: a job's input/output edges ride on its
        # START, COMPLETE and FAIL events; column lineage on COMPLETE events of its (job, output, epoch)
        self.job_seen: dict[int, tuple[int, int]] = {}
        self.lineage_seen: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.dag_runs: dict[tuple[int, int], list[int]] = {}  # (dag, run) → [first start, last end, failed, open]
        self.per_system: dict[str, int] = defaultdict(int)

    def new_id(self) -> str:
        return str(uuid.UUID(int=self.ids.getrandbits(128), version=4))

    def seen_time(self, ms: int) -> str | None:
        """An event time as the graph keeps it (``graph.keys.utc_time``)."""
        return utc_time((self.base + timedelta(milliseconds=ms)).isoformat())

    def time(self, ms: int) -> str:
        moment = self.base + timedelta(milliseconds=ms)
        if self.rng.random() < 0.1:  # some producers write a local offset: the same instant
            return moment.astimezone(_TZ_PLUS2).isoformat(timespec="milliseconds")
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    # --- the model
    def dataset(self, system: str, path: str, source: bool) -> _Dataset:
        spellings = _spellings(system, self.tag, path)
        fields = _schema_fields(self.rng, "src" if source else "c", source)
        self.per_system[system] += 1
        identity = _canonical(spellings, self.aliases, self.per_system[system] <= _VERIFIED_PER_SYSTEM)
        ds = _Dataset(len(self.datasets), spellings, identity, fields, source)
        ds.epochs.append((fields, schema_version(fields)))
        linked, location = self.links.random(), self.links.random()  # two draws for every dataset, whatever happens
        if system in _TABLE_SYSTEMS and linked < self.symlink_rate:
            self.link(ds, _table_name(self.tag, path, source, system == "s3" and location < _LOCATION_TABLE_RATE))
        self.datasets.append(ds)
        return ds

    def link(self, ds: _Dataset, table: tuple[str, str]) -> None:
        """Give ``ds`` a ``symlinks`` facet naming ``table`` (type TABLE), and the alias identity the graph gets.

        The identifier is sent in canonical form. The processor keeps a TABLE identifier whose namespace is a storage
        location as it is (a table name under a warehouse location, not a path in it); any other goes through
        ``canonical_identity`` (the alias map included) like every dataset name.
        """
        namespace, name = table
        if namespace.startswith("hive://"):
            if canonical_identity(namespace, name)[:2] != table:
                raise RuntimeError(f"a symlink identifier is not canonical: {table}")
            ds.alias = canonical_identity(namespace, name, self.aliases)[:2]
        else:
            ds.alias = table
        ds.symlinks = _facet("SymlinksDatasetFacet", "1-0-1",
                             identifiers=[{"namespace": namespace, "name": name, "type": "TABLE"}])

    def plan_jobs(self, count: int) -> None:
        """Layers of jobs: layer 1 reads sources, later layers mostly the layer before, sometimes any earlier."""
        rng = self.rng
        layers = max(1, min(count, math.isqrt(count)))
        sources = [self.dataset(rng.choice(_SOURCE_SYSTEMS), f"src/t{i:05d}", True) for i in range(max(3, count // 3))]
        by_layer: list[list[_Dataset]] = [sources]
        for layer in range(1, layers + 1):
            produced: list[_Dataset] = []
            earlier = [ds for level in by_layer for ds in level]
            for _ in range(count // layers + (1 if layer <= count % layers else 0)):
                index = len(self.jobs)
                inputs: list[_Dataset] = []
                wanted = min(rng.randint(1, 3), len(earlier))
                while len(inputs) < wanted:
                    candidate = rng.choice(by_layer[-1] if rng.random() < 0.7 else earlier)
                    if candidate not in inputs:
                        inputs.append(candidate)
                outputs = [self.dataset(rng.choice(_OUTPUT_SYSTEMS), f"l{layer:02d}/t{index:05d}_{n}", False)
                           for n in range(rng.randint(1, 2))]
                produced += outputs
                offset = (layer - 1) * _SPREAD_MS // layers + rng.randrange(600_000)
                job = _Job(index, self.job_ns, f"layer{layer:02d}.job{index:05d}", layer, inputs, outputs, offset)
                job.obj = {"namespace": job.namespace, "name": job.name, "facets": {"jobType": _facet(
                    "JobTypeJobFacet", "2-0-3", processingType="BATCH", integration="SPARK", jobType="JOB")}}
                self.jobs.append(job)
            by_layer.append(produced)

    def plan_lineage(self) -> None:
        """Each top-level output field derives from 1-2 fields of the job's inputs, named in one spelling each."""
        rng = self.rng
        for job in self.jobs:
            spelling = {ds.index: rng.choice(ds.spellings) for ds in job.inputs}
            candidates = [(ds, f["name"]) for ds in job.inputs for f in _flat(ds.fields)]
            for out in job.outputs:
                entries = []
                for f in _flat(out.fields):
                    refs = rng.sample(candidates, min(len(candidates), 1 if rng.random() < 0.7 else 2))
                    for ds, name in refs:
                        self.referenced[ds.index].add(name)
                    pattern = rng.choices(range(len(_PATTERNS)), _PATTERN_WEIGHTS)[0]
                    entries.append((f["name"], [(ds, name, spelling[ds.index]) for ds, name in refs], pattern))
                job.lineage[out.index] = entries

    def plan_dags(self, parent_rate: float) -> None:
        """A share of the jobs become tasks of orchestrator DAGs, about five per DAG."""
        tasks = [job for job in self.jobs if self.rng.random() < parent_rate]
        dags = [_Dag(d, self.dag_ns, f"dag{d:04d}") for d in range(math.ceil(len(tasks) / 5))]
        for job in tasks:
            job.dag = self.rng.choice(dags)
            job.dag.tasks.append(job)
        self.dags = [dag for dag in dags if dag.tasks]
        for dag in self.dags:
            dag.run_ids = [self.new_id() for _ in range(self.runs)]

    def plan_schema_changes(self, count: int) -> None:
        """Distinct (output, run ≥ 1) slots; the first change is compatible, the second breaking, then either."""
        rng = self.rng
        outputs = [ds for job in self.jobs for ds in job.outputs]
        per_output = self.runs - 1
        capacity = len(outputs) * per_output
        if count > capacity:
            raise ValueError(f"at most {capacity} schema changes fit ({len(outputs)} outputs, {self.runs} runs each)")
        planned: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for number, slot in enumerate(rng.sample(range(capacity), count)):
            severity = ("COMPATIBLE", "BREAKING")[number] if number < 2 else rng.choice(("COMPATIBLE", "BREAKING"))
            planned[outputs[slot // per_output].index].append((1 + slot % per_output, severity))
        number = 0
        for index, changes in sorted(planned.items()):
            ds = self.datasets[index]
            seen = {ds.epochs[0][1]}
            for run, severity in sorted(changes):
                number += 1
                fields, version = ds.epochs[-1]
                found = _change(rng, fields, severity, self.referenced[index], number, seen)
                if found is None:
                    raise RuntimeError(f"no {severity.lower()} schema change possible for {ds.identity}")
                new_fields, new_version, kind = found
                self.alerts.add(Alert(*ds.identity, version, new_version, _SEVERITY[kind]))
                seen.add(new_version)
                ds.change_runs.append(run)
                ds.epochs.append((new_fields, new_version))

    # --- events
    def add(self, ms: int, event: dict[str, Any]) -> None:
        self.timeline.append(_Timed(ms, len(self.timeline), event, event["run"]["runId"], event["eventType"]))

    def event(self, event_type: str, ms: int, run: dict[str, Any], job: dict[str, Any],
              inputs: list[dict[str, Any]] | None = None, outputs: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
        event = {"eventType": event_type, "eventTime": self.time(ms), "producer": PRODUCER,
                 "schemaURL": RUN_EVENT_SCHEMA, "run": run, "job": job}
        if inputs is not None:
            event["inputs"], event["outputs"] = inputs, outputs or []
        return event

    def output_facets(self, job: _Job, out: _Dataset, epoch: int, complete: bool) -> dict[str, Any]:
        """The output's facets in one epoch: its schema, on COMPLETE also the column lineage (shared by events)."""
        facets = out.facets.get((epoch, complete))
        if facets is not None:
            return facets
        fields = out.epochs[epoch][0]
        facets = {"schema": _facet("SchemaDatasetFacet", "1-1-1", fields=fields)}
        if out.symlinks is not None:
            facets["symlinks"] = out.symlinks
        if complete:
            present = {f["name"] for f in fields}
            lineage: dict[str, Any] = {}
            for name, refs, pattern in job.lineage[out.index]:
                if name not in present:  # dropped from this epoch on
                    continue
                transformations, extra, _ = _PATTERNS[pattern]
                inputs = []
                for _, in_field, (ns, nm) in refs:
                    ref: dict[str, Any] = {"namespace": ns, "name": nm, "field": in_field}
                    if transformations is not None:
                        ref["transformations"] = transformations
                    inputs.append(ref)
                lineage[name] = {"inputFields": inputs, **extra}
            facets["columnLineage"] = _facet("ColumnLineageDatasetFacet", "1-2-0", fields=lineage)
        out.facets[(epoch, complete)] = facets
        return facets

    def datasets_of(self, job: _Job, epochs: list[int], complete: bool) -> tuple[list[dict[str, Any]],
                                                                                  list[dict[str, Any]]]:
        """An event's inputs and outputs, each in a spelling picked for this event."""
        rnd = self.rng.random  # index arithmetic on random(): several times cheaper than choice/randrange
        inputs = []
        for ds in job.inputs:
            ns, nm = ds.spellings[int(rnd() * len(ds.spellings))]
            item: dict[str, Any] = {"namespace": ns, "name": nm}
            facets = ds.facets.get("input")
            if facets is None:  # a source's schema, a symlinked dataset's symlinks
                facets = ds.facets["input"] = {}
                if ds.source:
                    facets["schema"] = _facet("SchemaDatasetFacet", "1-1-1", fields=ds.fields)
                if ds.symlinks is not None:
                    facets["symlinks"] = ds.symlinks
            if facets:
                item["facets"] = facets
            if complete:
                item["inputFacets"] = {"inputStatistics": _facet(
                    "InputStatisticsInputDatasetFacet", "1-0-0", rowCount=1 + int(rnd() * 10**6))}
            inputs.append(item)
        outputs = []
        for out, epoch in zip(job.outputs, epochs, strict=True):
            ns, nm = out.spellings[int(rnd() * len(out.spellings))]
            outputs.append({"namespace": ns, "name": nm, "facets": self.output_facets(job, out, epoch, complete)})
        return inputs, outputs

    def emit_job_runs(self, job: _Job) -> None:
        """The job's runs, one period apart: events and truth rows."""
        rng, rows = self.rng, self.rows
        changes = {change for out in job.outputs for change in out.change_runs}
        earlier: list[str] = []
        for run in range(self.runs):
            run_id = self.new_id()
            if run in changes and earlier:
                self.schema_change_runs.append((list(earlier), run_id))
            earlier.append(run_id)
            roll = rng.random()
            if run < self.runs - 1:
                outcome = "COMPLETE" if roll < 0.9 else "FAIL"
            else:  # the latest run may still be going
                outcome = "COMPLETE" if roll < 0.6 else "FAIL" if roll < 0.7 else "RUNNING" if roll < 0.9 else "START"
            running = outcome == "RUNNING" or (outcome in ("COMPLETE", "FAIL") and rng.random() < 0.25)
            t0 = run * _PERIOD_MS + job.offset_ms + int(rng.random() * 60_000)
            t1 = t0 + 60_000 + int(rng.random() * 1_140_000)
            epochs = [out.epoch(run) for out in job.outputs]
            facets: dict[str, Any] = {"nominalTime": _facet(
                "NominalTimeRunFacet", "1-0-1",
                nominalStartTime=(self.base + timedelta(milliseconds=run * _PERIOD_MS)).isoformat())}
            if job.dag is not None:
                dag_run = job.dag.run_ids[run]
                parent = {"run": {"runId": dag_run}, "job": {"namespace": job.dag.namespace, "name": job.dag.name}}
                facets["parent"] = _facet("ParentRunFacet", "1-1-0", **parent, root=parent)
                window = self.dag_runs.setdefault((job.dag.index, run), [t0, t1, 0, 0])
                window[0], window[1] = min(window[0], t0), max(window[1], t1)
                window[2] |= outcome == "FAIL"
                window[3] |= outcome in ("START", "RUNNING")
                rows["CHILD_OF"].add((run_id, dag_run))
            run_obj = {"runId": run_id, "facets": facets}

            inputs, outputs = self.datasets_of(job, epochs, complete=False)
            self.add(t0, self.event("START", t0, run_obj, job.obj, inputs, outputs))
            if running:
                tr = (t0 + t1) // 2
                self.add(tr, self.event("RUNNING", tr, run_obj, job.obj))
            wrote: list[tuple[int | None, int | None]] = [(None, None)] * len(job.outputs)
            if outcome == "COMPLETE":
                inputs, outputs = self.datasets_of(job, epochs, complete=True)
                for n, item in enumerate(outputs):
                    roll = rng.random()
                    if roll < 0.9:  # mostly rows and bytes, sometimes rows only, sometimes no statistics
                        count = 1 + int(rng.random() * 10**7)
                        size = 1 + int(rng.random() * 10**10) if roll < 0.8 else None
                        stats = _facet("OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=count)
                        if size is not None:
                            stats["size"] = size
                        item["outputFacets"] = {"outputStatistics": stats}
                        wrote[n] = (count, size)
                self.add(t1, self.event("COMPLETE", t1, run_obj, job.obj, inputs, outputs))
                for out, out_epoch in zip(job.outputs, epochs, strict=True):
                    self.lineage_done.add((job.index, out.index, out_epoch))
                    _widen(self.lineage_seen, (job.index, out.index, out_epoch), t1, t1)
            elif outcome == "FAIL":
                inputs, outputs = self.datasets_of(job, epochs, complete=False)
                error = _facet("ErrorMessageRunFacet", "1-0-1", message=f"task failed in run {run}",
                               programmingLanguage="python")
                failed = {"runId": run_id, "facets": {**facets, "errorMessage": error}}
                self.add(t1, self.event("FAIL", t1, failed, job.obj, inputs, outputs))

            _widen(self.job_seen, job.index, t0, t1 if outcome in ("COMPLETE", "FAIL") else t0)
            rows["Run"].add((run_id, outcome))
            rows["OF_JOB"].add((run_id, job.namespace, job.name))
            for ds in job.inputs:
                self.used.add(ds.index)
                rows["READ"].add((run_id, *ds.identity))
                if ds.source:
                    self.versions_seen.add((ds.index, 0))
            for out, out_epoch, (count, size) in zip(job.outputs, epochs, wrote, strict=True):
                self.used.add(out.index)
                rows["WROTE"].add((run_id, *out.identity, count, size))
                self.versions_seen.add((out.index, out_epoch))

    def emit_dag_runs(self, dag: _Dag) -> None:
        """A DAG run spans its tasks' runs: START and COMPLETE|FAIL, only START (open), or no event at all."""
        job = {"namespace": dag.namespace, "name": dag.name}
        for run, run_id in enumerate(dag.run_ids):
            first, end, failed, still_open = self.dag_runs[(dag.index, run)]
            roll = self.rng.random()
            state: str | None = None  # no event: the run exists only as its tasks' parent
            if roll >= 0.2:
                state = "START" if still_open or roll < 0.3 else "FAIL" if failed else "COMPLETE"
                run_obj = {"runId": run_id, "facets": {}}
                self.add(first - 1000, self.event("START", first - 1000, run_obj, job))
                if state != "START":
                    self.add(end + 1000, self.event(state, end + 1000, run_obj, job))
            self.rows["Run"].add((run_id, state))
            self.rows["OF_JOB"].add((run_id, dag.namespace, dag.name))
        self.rows["Job"].add((dag.namespace, dag.name))

    # --- truth
    def truth(self) -> GroundTruth:
        """The rest of the expected graph — jobs, datasets, their edges, fields, schema versions, column lineage."""
        rows = self.rows
        linked: dict[tuple[str, str, str, str], tuple[int, int]] = {}  # (dataset, alias) → first, last ms seen
        for job in self.jobs:
            rows["Job"].add((job.namespace, job.name))
            seen_ms = self.job_seen.get(job.index)
            seen = tuple(self.seen_time(ms) for ms in seen_ms) if seen_ms is not None else (None, None)
            for ds in job.inputs:
                rows["INPUT_TO"].add((*ds.identity, job.namespace, job.name, *seen))
            for out in job.outputs:
                rows["OUTPUTS"].add((job.namespace, job.name, *out.identity, *seen))
            if seen_ms is not None:  # every event naming a dataset (START, COMPLETE, FAIL) carries its symlinks
                for ds in (*job.inputs, *job.outputs):
                    if ds.alias is not None:
                        _widen(linked, (*ds.identity, *ds.alias), *seen_ms)
        fields: set[tuple[str, str, str]] = set()
        for index in self.used:
            rows["Dataset"].add(self.datasets[index].identity)
        for edge, (first, last) in linked.items():
            rows["Dataset"].add(edge[2:])  # the alias node, created with the SAME_AS edge
            rows["SAME_AS"].add((*edge, "TABLE", self.seen_time(first), self.seen_time(last)))
        for index, epoch in self.versions_seen:
            ds = self.datasets[index]
            schema, version = ds.epochs[epoch]
            rows["SchemaVersion"].add((*ds.identity, version))
            rows["HAS_SCHEMA"].add((*ds.identity, *ds.identity, version))
            fields.update((*ds.identity, path) for path in _paths(schema))
        derives: dict[tuple[Any, ...], tuple[int, int]] = {}
        for job_index, out_index, epoch in self.lineage_done:
            out = self.datasets[out_index]
            present = {f["name"] for f in out.epochs[epoch][0]}
            first, last = self.lineage_seen[(job_index, out_index, epoch)]
            for name, refs, pattern in self.jobs[job_index].lineage[out_index]:
                if name not in present:
                    continue
                fields.add((*out.identity, name))
                for ds, in_field, _ in refs:
                    fields.add((*ds.identity, in_field))
                    _widen(derives, (*out.identity, name, *ds.identity, in_field, _PATTERNS[pattern][2]), first, last)
        rows["DERIVES_FROM"] = {(*edge, self.seen_time(first), self.seen_time(last))
                                for edge, (first, last) in derives.items()}
        rows["Field"] = fields
        rows["HAS_FIELD"] = {(ns, nm, ns, nm, path) for ns, nm, path in fields}
        scope = Scope(frozenset({self.job_ns} | ({self.dag_ns} if self.dags else set())),
                      frozenset(namespace for namespace, _ in rows["Dataset"]),
                      frozenset(row[0] for row in rows["Run"]))
        return GroundTruth({kind: frozenset(found) for kind, found in rows.items()}, frozenset(self.alerts), scope)


def _deliver(timeline: list[_Timed], rng: random.Random, delivery: Delivery,
             schema_change_runs: list[tuple[list[str], str]] = ()) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Disturb the time-ordered events: shuffle, late STARTs, duplicates, retries (schema versions included)."""
    window = max(0, delivery.shuffle_window)
    count = len(timeline)
    keys = [i + rng.random() * window for i in range(count)] if window else [float(i) for i in range(count)]
    late = 0
    if delivery.late_start_rate > 0:
        by_run: dict[str, list[int]] = defaultdict(list)
        for i, item in enumerate(timeline):
            by_run[item.run_id].append(i)
        for members in by_run.values():
            if len(members) > 1 and rng.random() < delivery.late_start_rate:
                start = next(i for i in members if timeline[i].event_type == "START")
                keys[start] = max(keys[i] for i in members) + 1 + rng.random() * (2 * window + 4)
                late += 1
    late_schemas = 0
    if delivery.late_schema_rate > 0 and schema_change_runs:
        members_of: dict[str, list[int]] = defaultdict(list)
        for i, item in enumerate(timeline):
            members_of[item.run_id].append(i)
        for index, (earlier, after) in enumerate(schema_change_runs):
            # the first change: every run before it comes after the first run of the new schema (a buffer of an
            # emitter flushed after an outage), so the old version's first observation is late; the others: with
            # the rate, the last run before the change
            if index == 0:
                moved = earlier
            elif rng.random() < delivery.late_schema_rate:
                moved = earlier[-1:]
            else:
                continue
            last = max(keys[i] for i in members_of[after])
            members = sorted((i for run in moved for i in members_of[run]), key=keys.__getitem__)
            for offset, i in enumerate(members):
                keys[i] = last + 1 + offset * 0.001  # in their own order, after the new schema's first run
            late_schemas += 1
    entries = [(keys[i], i) for i in range(count)]
    duplicates = retries = 0
    for i in range(count):
        if delivery.duplicate_rate > 0 and rng.random() < delivery.duplicate_rate:
            entries.append((keys[i] + 0.001 + rng.random() * 2, i))  # sent again right away
            duplicates += 1
        if delivery.retry_rate > 0 and rng.random() < delivery.retry_rate:
            entries.append((keys[i] + (20 + rng.random() * 200) * max(window, 1), i))  # sent again much later
            retries += 1
    entries.sort()  # a changing dataset's schema versions arrive in any order too: drift goes by event time
    started: set[str] = set()
    late_runs: set[str] = set()  # some other event of the run arrives before its first START
    reordered = 0
    previous = -1
    for _, i in entries:
        item = timeline[i]
        if item.event_type == "START":
            started.add(item.run_id)
        elif item.run_id not in started:
            late_runs.add(item.run_id)
        reordered += i < previous
        previous = i
    return [timeline[i].event for _, i in entries], {
        "duplicates": duplicates, "retries": retries, "late_starts": len(late_runs), "late_starts_planned": late,
        "late_schema_runs": late_schemas,
        "out_of_time_order": reordered}
