"""OpenLineage events → the Neo4j lineage graph: parameter rows for fixed, parameterized Cypher statements. Pure.

``graph_batch(events)`` folds a batch of (normalized) events into one row per node and per relationship;
``statements(batch)`` pairs each row list with its constant ``UNWIND $rows AS row MERGE …`` statement, nodes first,
for the sink to run in one transaction. Labels, relationship types and property names are constants: no event value
ever reaches a statement's text.

Order independence. Every property is written by a rule whose result does not depend on the order events are
applied in, or on applying them twice, so a replay converges to the live graph:

- edges and nodes are set unions (MERGE); nothing is ever deleted (a field dropped from a schema keeps its
  ``HAS_FIELD`` edge; the ``SchemaVersion`` nodes record the history);
- run state only moves forward: START(0) < RUNNING(1) < COMPLETE/FAIL/ABORT(2), compared in Cypher against the stored
  ``stateRank``; between two events of one rank the later eventTime wins, then the larger state name;
- ``startTime`` is the earliest START eventTime, ``endTime`` the latest terminal one, ``lastEventTime`` the latest;
- facet-derived values (nominal times, error message, job type, statistics, data quality, a dataset's current
  schema) are "latest observation wins": each group is stored with an ``…Order`` property, a string ordering key
  (run facets: rank, eventTime; job/dataset facets: eventTime; then a digest of the value, so ties break
  deterministically) and replaced only by a larger key. ``SchemaVersion`` keeps its *first* observation (smallest
  key): the fields JSON and ``firstSeen``.

Times are compared as strings, so every eventTime is normalized to UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``
(``utc_time``), which sorts chronologically.

Data-quality metrics (``dataQualityMetrics`` input facet) go on the ``READ`` edge as canonical JSON
(``READ.dataQuality``): they describe one input dataset as one run read it, which a single Run property could only
hold as a map keyed by dataset. ``inputStatistics``/``outputStatistics`` give ``READ``/``WROTE`` ``rowCount`` and
``bytes``; the run's totals (``inputRowCount``, ``outputRowCount``, ``inputBytes``, ``outputBytes``) are recomputed from
its edges after every batch that touches them, so they too are order independent.

A dataset's ``symlinks`` identifiers (other names of the same data: the table of a path, the catalog name of a
topic) become ``(Dataset)-[:SAME_AS {type}]->(Dataset)`` to a node of that name, created if needed, so that an event
naming only the path or only the table joins the same lineage; the lineage queries follow ``SAME_AS`` either way
without counting it as a hop (ARCHITECTURE 52). Names in Flink's per-job in-memory catalog (``default_catalog.…``)
are not linked: they name a different table in every job.

Facets of jobs and datasets are kept as documents, one ``Facet {of, namespace, name, key}`` node each (JSON,
bounded like run facets, latest eventTime wins, so every facet a job or dataset was ever sent accumulates); a facet
sent with ``"_deleted": true`` is a later value that hides it. Schema and column lineage are modelled instead
(SchemaVersion nodes, DERIVES_FROM edges). The column-lineage facet's dataset-level ``dataset`` list (input columns
the whole output depends on: join keys, filters, grouping) becomes ``(Dataset)-[:DEPENDS_ON]->(Field)``; a
transformation's ``masking`` flag is kept in the transformation text (``DIRECT/HASH(masked)``). Input datasets'
``dataQualityAssertions`` go on the ``READ`` edge (``READ.assertions``, JSON list) beside the metrics.

Partitions: a ``kafkaLineage_partition`` facet (``schemas/partitions.py``) never makes a dataset; it gives
``(Dataset)-[:HAS_PARTITION]->(Partition {namespace, name, key})`` (``key``: ``date=2025-12-24/region=eu``, in the
order sent). In an output's ``outputFacets``, the run's own version: ``(Partition)-[:HAS_VERSION]->(PartitionVersion
{namespace, name, key, runId})`` and ``(Run)-[:WROTE_PARTITION]->(PartitionVersion)`` carrying that output's
statistics, data quality, failed/passed assertion names and reported markers; in an input's ``inputFacets``
``(Run)-[:READ_PARTITION]->(Partition)`` (with the reader's assertions); in a DatasetEvent's ``facets`` a marker
report. The partition keeps its marker reports (``"<eventTime> <file>"``) and the dataset's ``requiredMarker``
(latest wins). A facet's ``stale`` request (``lineage backfill plan --mark-stale``) is kept on the partition as
``staleMarks`` (``"<requestedAt> <reason>"``, a set union like the markers). A run's ``kafkaLineage_backfill`` facet
(``{"window": {"from", "to"}, "planId"}``) is kept on the Run (``backfillPlanId``, ``backfillFrom``, ``backfillTo``;
latest wins) and tells its partition versions apart from live ones.
Failed/passed assertions and markers are set unions, so a failure once reported stays. Only facts are
written: states (RUNNING/SUCCESS/FAILED/STALE), version numbers and readiness are computed when asked
(``partitions.py``), so nothing depends on the order facts arrived in.

Not mapped (yet): the parent facet's ``root`` (only the direct parent is linked), error stack traces.

Lineage edges (``INPUT_TO``, ``OUTPUTS``, ``DERIVES_FROM``, ``DEPENDS_ON``, ``SAME_AS``) keep
``firstSeen``/``lastSeen``: the earliest and latest eventTime of an event that carried them (min/max rules, so order
free). As-of questions ("the graph as it was at T") read them; they are event times, not wall-clock times, so a
replay reproduces them.

Fingerprint: ``FINGERPRINT_QUERIES`` read every lineage node's identity (``Facet`` documents are descriptive) and
every relationship's type and end identities, plus the lineage-relevant properties ``Run.state``,
``DERIVES_FROM``/``DEPENDS_ON.transformation``, ``SAME_AS.type``, ``WROTE.rowCount``/``bytes`` and the lineage
edges' ``firstSeen``/``lastSeen``. Other times, ``…Order`` bookkeeping and descriptive facet values are left out:
they are derived from the same events, but the fingerprint answers "is this the same lineage", and leaving them out
keeps it stable when the sink later adds descriptive properties. ``PARTITION_FINGERPRINT_QUERIES`` add the partition
nodes and edges with every fact a partition state is computed from (marker reports, required marker, assertion
results, rows, bytes, first/last seen); they are hashed only when the graph has partitions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from kafka_lineage.schemas.openlineage import lifecycle_rank
from kafka_lineage.schemas.partitions import BACKFILL_FACET_KEY as BACKFILL_FACET
from kafka_lineage.schemas.partitions import FACET_KEY as PARTITION_FACET
from kafka_lineage.schemas.partitions import partition_key_text, partition_keys
from kafka_lineage.schemas.schema_diff import schema_fields, schema_version

__all__ = [
    "BACKFILL",
    "CONSTRAINTS",
    "FINGERPRINT_QUERIES",
    "PARTITION_FINGERPRINT_QUERIES",
    "STATEMENTS",
    "GraphBatch",
    "field_paths",
    "fingerprint",
    "graph_batch",
    "state_rank",
    "statements",
    "stored_key",
    "transformation_text",
    "utc_time",
]

Row = dict[str, Any]

# --- times and ranks -----------------------------------------------------------------------------------------------
_NO_TIME_MAX = ""  # a missing time never wins a "latest" comparison …
_NO_TIME_MIN = "~"  # … nor an "earliest" one ("~" sorts after every digit)
_STATEFUL = frozenset(("START", "RUNNING", "COMPLETE", "FAIL", "ABORT"))
_TERMINAL = frozenset(("COMPLETE", "FAIL", "ABORT"))


def utc_time(value: Any) -> str | None:
    """An ISO-8601 time as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (sortable as a string); None if unusable.

    Offsets and ``Z`` are honoured, no offset means UTC (as ``processors.ordering`` reads it), digits beyond
    microseconds are truncated.
    """
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00-01:00 and the like
            return None
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def state_rank(event_type: Any) -> int | None:
    """START=0, RUNNING=1, COMPLETE/FAIL/ABORT=2 (``lifecycle_rank``); None for OTHER or no type: no state change."""
    return lifecycle_rank(event_type) if event_type in _STATEFUL else None


# --- node keys ------------------------------------------------------------------------------------------------------
# Neo4j's range indexes (behind the uniqueness constraints) refuse keys over ~8 KB for the whole composite key, and a
# Field is keyed by three strings: a namespace, name or field over KEY_MAX_BYTES is stored by a hash instead.
KEY_MAX_BYTES = 2048
_KEY_PREFIX_CHARS = 256  # the start of the value is kept in the key, readable in Neo4j Browser
_KEY_MARK = "#sha256:"
_HASHED_KEY = re.compile(r"#sha256:[0-9a-f]{64}\Z")


def stored_key(value: str) -> str:
    """What a node stores in a key property (``namespace``, ``name``, ``field``) for ``value``: the value itself, or
    for a value over ``KEY_MAX_BYTES`` UTF-8 bytes (or one that reads like such a key, so no name can take another's
    node) its first 256 characters + ``#sha256:`` + the SHA-256 of the whole value. The whole value is then kept in
    ``fullNamespace``/``fullName``/``fullField`` (not indexed). Look a node up by ``stored_key(name)``; show
    ``coalesce(n.fullName, n.name)``. Ordinary values are their own key: the graph and its fingerprint do not change.
    """
    if len(value) <= KEY_MAX_BYTES // 4 and _KEY_MARK not in value:  # at most 4 bytes a character: short enough
        return value
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= KEY_MAX_BYTES and not _HASHED_KEY.search(value):
        return value
    return f"{value[:_KEY_PREFIX_CHARS]}{_KEY_MARK}{hashlib.sha256(data).hexdigest()}"


# --- small pure helpers --------------------------------------------------------------------------------------------
def _json(value: Any) -> str:
    """Canonical JSON (sorted keys) for values stored or hashed by this module."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(value: Any) -> str:
    return hashlib.sha256(_json(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    # bool is an int in Python; a JSON true is not a row count
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# A run's facets are kept as JSON (the START event's, and the latest other event's) up to this size; past it the
# largest facets are left out, and ``_omitted`` names them with their sizes (a Spark plan can be megabytes).
RUN_FACETS_MAX_BYTES = 65_536


def run_facets_json(facets: Mapping[str, Any]) -> str:
    """``facets`` as canonical JSON of at most ``RUN_FACETS_MAX_BYTES`` UTF-8 bytes (largest facets left out)."""
    text = _json(facets)
    if len(text) <= RUN_FACETS_MAX_BYTES // 4 or len(text.encode("utf-8", "surrogatepass")) <= RUN_FACETS_MAX_BYTES:
        return text
    sizes = {name: len(_json(value).encode("utf-8", "surrogatepass")) for name, value in facets.items()}
    kept, omitted = dict(facets), {}
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        del kept[name]
        omitted[name] = sizes[name]
        text = _json({**kept, "_omitted": omitted})
        if len(text.encode("utf-8", "surrogatepass")) <= RUN_FACETS_MAX_BYTES:
            break
    return text


# Facets the graph models itself rather than keeping as documents: a dataset's schema (SchemaVersion nodes) and
# column lineage (DERIVES_FROM/DEPENDS_ON edges), a run's (the run's JSON slots).
_MODELLED_FACETS = frozenset(("schema", "columnLineage", PARTITION_FACET))


def _facets(b: _Builder, of: str, namespace: str, name: str, facets: Mapping[str, Any], time: str | None) -> None:
    """A ``facets`` row per facet of a job or dataset: the facet's JSON (``{key: facet}``, ``run_facets_json``
    bounded), latest eventTime wins; a facet sent with ``"_deleted": true`` is stored as deleted (null JSON), so an
    earlier value no longer shows and a later one shows again."""
    for key, facet in facets.items():
        if not isinstance(key, str) or key in _MODELLED_FACETS:
            continue
        done = b.documents.get((id(facet), key))
        if done is None or done[0] is not facet:
            deleted = isinstance(facet, dict) and facet.get("_deleted") is True
            text = None if deleted else run_facets_json({key: facet})
            done = b.documents[(id(facet), key)] = (facet, text, _digest({"json": text}))  # as _group digests it
        b.add("facets", {"of": of, "namespace": namespace, "name": name, "key": b.key(key),
                         "facet": {"order": f"{time or _NO_TIME_MAX}|{done[2]}", "json": done[1]}})


_GROUP_DIGESTS: dict[tuple[tuple[str, Any], ...], str] = {}  # values → digest: most groups repeat (transformations)


def _group(order: str, **props: Any) -> Row:
    """A "latest wins" property group; the digest of its values breaks ties between equal (rank, time) keys."""
    if any(isinstance(value, str) and len(value) > 256 for value in props.values()):
        return {"order": f"{order}|{_digest(props)}", **props}  # long texts (facet JSON) rarely repeat: not kept
    key = tuple(props.items())
    try:
        digest = _GROUP_DIGESTS.get(key)
    except TypeError:  # an unhashable value (a list): digest it every time
        return {"order": f"{order}|{_digest(props)}", **props}
    if digest is None:
        if len(_GROUP_DIGESTS) > 100_000:  # bounded: a long-running sink sees endless distinct values
            _GROUP_DIGESTS.clear()
        digest = _GROUP_DIGESTS[key] = _digest(props)
    return {"order": f"{order}|{digest}", **props}


def field_paths(fields: Any, prefix: str = "") -> list[str]:
    """Dotted names of schema facet fields, nested ones included: ``address``, ``address.city``."""
    paths: list[str] = []
    for item in _list(fields):
        name = _str(_dict(item).get("name"))
        if name is None:
            continue
        paths.append(prefix + name)
        paths.extend(field_paths(item.get("fields"), prefix + name + "."))
    return paths


def transformation_text(entry: Any) -> str:
    """Column-lineage transformations compactly: ``DIRECT/IDENTITY,INDIRECT/FILTER``, with ``(masked)`` after one
    whose ``masking`` flag is set (``DIRECT/HASH(masked)``); "" when none are given.

    ``entry`` is an ``inputFields`` item; the facet's older field-level ``transformationType`` is the fallback.
    """
    parts = []
    for item in _list(_dict(entry).get("transformations")):
        kind, subtype = _str(_dict(item).get("type")), _str(_dict(item).get("subtype"))
        if kind:
            masked = "(masked)" if _dict(item).get("masking") is True else ""
            parts.append((f"{kind}/{subtype}" if subtype else kind) + masked)
    return ",".join(parts)


# --- the batch -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GraphBatch:
    """Parameter rows per statement (``STATEMENTS`` names), each row list sorted by identity: one row per node/edge."""

    rows: Mapping[str, tuple[Row, ...]] = field(default_factory=dict)
    # (namespace, name, hash) of each schema version of the batch → its field paths (stored keys): ``statements``
    # sends them with the version and writes them only when the version is new (ARCHITECTURE 61). Not rows: the
    # ``fields``/``has_field`` rows still hold every field, for whoever reads the rows themselves.
    schema_paths: Mapping[tuple[str, str, str], tuple[str, ...]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> tuple[Row, ...]:
        return self.rows.get(name, ())

    def __len__(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


# How rows with one identity merge: per property, a rule. "latest"/"earliest" are groups (dicts with an "order").
def _latest(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return a if b is None else b
    return a if a["order"] >= b["order"] else b


def _earliest(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return a if b is None else b
    return a if a["order"] <= b["order"] else b


def _max(a: Any, b: Any) -> Any:
    return a if b is None else b if a is None else max(a, b)


def _min(a: Any, b: Any) -> Any:
    return a if b is None else b if a is None else min(a, b)


# Set-valued properties (a partition's marker reports, an edge's failed/passed assertions) keep their last MAX_UNION
# values in sort order: bounded, and still order free. Marker reports sort by time, so the latest are kept.
MAX_UNION = 64


def _union(a: Any, b: Any) -> Any:
    """Sorted set union of two lists (None: nothing reported), as the Cypher ``_union_set`` keeps it; marker report
    lists keep their latest ``MAX_UNION`` (``time name`` texts sort by time)."""
    if a is None or b is None:
        return a if b is None else b
    return sorted(set(a) | set(b))[-MAX_UNION:]


def _merge_state(old: Row, new: Row) -> None:
    """The run's state row fields: the larger (rank, stateOrder) wins, exactly as the Cypher CASE decides."""
    if new["rank"] is None:
        return
    if old["rank"] is None or (new["rank"], new["stateOrder"]) > (old["rank"], old["stateOrder"]):
        old["state"], old["rank"], old["stateOrder"] = new["state"], new["rank"], new["stateOrder"]


_RULES: dict[str, dict[str, Callable[[Any, Any], Any]]] = {
    "jobs": {"lastEventTime": _max, "jobType": _latest},
    "runs": {"startTime": _min, "endTime": _max, "lastEventTime": _max, "nominalTime": _latest,
             "errorMessage": _latest, "startRunFacets": _latest, "runFacets": _latest, "backfill": _latest},
    "datasets": {"schema": _latest},
    "schema_versions": {"first": _earliest},
    "read": {"stats": _latest, "dataQuality": _latest, "assertions": _latest},
    "wrote": {"stats": _latest},
    "derives_from": {"lineage": _latest, "firstSeen": _min, "lastSeen": _max},
    "input_to": {"firstSeen": _min, "lastSeen": _max},
    "outputs": {"firstSeen": _min, "lastSeen": _max},
    "same_as": {"type": _min, "firstSeen": _min, "lastSeen": _max},
    "facets": {"facet": _latest},
    "depends_on": {"lineage": _latest, "firstSeen": _min, "lastSeen": _max},
    "partitions": {"requiredMarker": _latest, "markers": _union, "staleMarks": _union},
    "wrote_partition": {"stats": _latest, "dataQuality": _latest, "assertions": _latest, "failed": _union,
                        "passed": _union, "markers": _union, "firstSeen": _min, "lastSeen": _max},
    "read_partition": {"dataQuality": _latest, "assertions": _latest, "failed": _union, "passed": _union,
                       "firstSeen": _min, "lastSeen": _max},
}
# Identity columns of each row kind, in sort order (public as ROW_IDENTITY: replay's repair compares identities).
_KEYS: dict[str, tuple[str, ...]] = {
    "jobs": ("namespace", "name"),
    "runs": ("runId",),
    "datasets": ("namespace", "name"),
    "fields": ("namespace", "name", "field"),
    "schema_versions": ("namespace", "name", "hash"),
    "facets": ("of", "namespace", "name", "key"),
    "of_job": ("runId", "namespace", "name"),
    "child_of": ("runId", "parentRunId"),
    "read": ("runId", "namespace", "name"),
    "wrote": ("runId", "namespace", "name"),
    "input_to": ("namespace", "name", "jobNamespace", "jobName"),
    "outputs": ("jobNamespace", "jobName", "namespace", "name"),
    "has_field": ("namespace", "name", "field"),
    "derives_from": ("namespace", "name", "field", "inputNamespace", "inputName", "inputField"),
    "has_schema": ("namespace", "name", "hash"),
    "same_as": ("namespace", "name", "aliasNamespace", "aliasName"),
    "depends_on": ("namespace", "name", "inputNamespace", "inputName", "inputField"),
    "partitions": ("namespace", "name", "key"),
    "partition_versions": ("namespace", "name", "key", "runId"),
    "has_partition": ("namespace", "name", "key"),
    "has_version": ("namespace", "name", "key", "runId"),
    "wrote_partition": ("runId", "namespace", "name", "key"),
    "read_partition": ("runId", "namespace", "name", "key"),
    "run_totals": ("runId",),
    # the whole values behind hashed keys (stored_key): rows only for nodes that have one
    "jobs_names": ("namespace", "name"),
    "datasets_names": ("namespace", "name"),
    "fields_names": ("namespace", "name", "field"),
    "schema_versions_names": ("namespace", "name", "hash"),
}
ROW_IDENTITY: Mapping[str, tuple[str, ...]] = _KEYS
# Per node kind, its key columns that may be hashed → the property holding the whole value.
_FULL: dict[str, dict[str, str]] = {
    "jobs": {"namespace": "fullNamespace", "name": "fullName"},
    "datasets": {"namespace": "fullNamespace", "name": "fullName"},
    "fields": {"namespace": "fullNamespace", "name": "fullName", "field": "fullField"},
    "schema_versions": {"namespace": "fullNamespace", "name": "fullName"},
}


_KEY_OF: dict[str, Callable[[Row], Any]] = {kind: itemgetter(*columns) for kind, columns in _KEYS.items()}


# fields JSON → schema version, across batches: every run of a job repeats its datasets' schemas (a pure function)
_VERSIONS: dict[str, str] = {}


class _Builder:
    def __init__(self) -> None:
        self.rows: dict[str, dict[Any, Row]] = {kind: {} for kind in _KEYS}
        self.originals: dict[str, str] = {}  # stored key → the value it stands for, for values stored by hash
        # (namespace, name, version) whose field rows are in: every event of a job repeats its output's schema
        self.schemas_done: set[tuple[str, str, str]] = set()
        self.versions = _VERSIONS  # fields JSON → schema version: hashing is the costlier step
        # id(fields list) → (the list, its JSON, its version): the sink's FacetCache shares one schema facet object
        # per distinct text, so a batch's ~7,000 schemas are ~100-300 objects, and writing the JSON was ~13% of a
        # batch's model time (the list is kept, so its id stays its for the batch)
        self.schema_texts: dict[int, tuple[Any, str, str]] = {}
        self.schema_paths: dict[tuple[str, str, str], tuple[str, ...]] = {}  # GraphBatch.schema_paths
        # (namespace, name, field) whose Field, HAS_FIELD and Dataset rows are in (none has merge rules): column
        # lineage names the same fields in every event of a job
        self.fields_done: set[tuple[str, str, str]] = set()
        # (id(facet), key) → (facet, its stored JSON, that JSON's digest): the sink's FacetCache shares one object per
        # distinct facet text, and every event of a job repeats its facets (the facet is kept, so its id stays its)
        self.documents: dict[tuple[int, str], tuple[Any, str | None, str]] = {}

    def add(self, kind: str, row: Row) -> None:
        key = _KEY_OF[kind](row)
        rows = self.rows[kind]
        old = rows.get(key)
        if old is None:
            rows[key] = row
            return
        for prop, rule in _RULES.get(kind, {}).items():
            if prop in old or prop in row:  # an optional property (a run's backfill) stays absent when never sent
                old[prop] = rule(old.get(prop), row.get(prop))
        if kind == "runs":
            _merge_state(old, row)

    def key(self, value: str) -> str:
        """``stored_key(value)``, remembering the value when it is stored by hash (for its node's full names)."""
        stored = stored_key(value)
        if stored is not value:
            self.originals[stored] = value
        return stored

    def full_names(self, kind: str, row: Row) -> None:
        """A ``…_names`` row (the whole values behind hashed keys) for a node row whose keys include one."""
        originals = self.originals
        if originals and any(row[column] in originals for column in _FULL[kind]):
            self.add(f"{kind}_names", {**{column: row[column] for column in _KEYS[kind]},
                                       **{_FULL[kind][column]: originals.get(row[column]) for column in _FULL[kind]}})

    # nodes (every string of a key is a stored key: Builder.key)
    def job(self, namespace: str, name: str, time: str | None = None, job_type: Row | None = None) -> None:
        row = {"namespace": namespace, "name": name, "lastEventTime": time, "jobType": job_type}
        self.add("jobs", row)
        self.full_names("jobs", row)

    def run(self, run_id: str, **props: Any) -> None:
        row: Row = {"runId": run_id, "state": None, "rank": None, "stateOrder": None, "startTime": None,
                    "endTime": None, "lastEventTime": None, "nominalTime": None, "errorMessage": None,
                    "startRunFacets": None, "runFacets": None}
        row.update(props)
        self.add("runs", row)

    def dataset(self, namespace: str, name: str, schema: Row | None = None) -> None:
        row = {"namespace": namespace, "name": name, "schema": schema}
        self.add("datasets", row)
        self.full_names("datasets", row)

    def field(self, namespace: str, name: str, path: str, with_dataset: bool = True) -> None:
        done = (namespace, name, path)
        if done in self.fields_done:
            return
        self.fields_done.add(done)
        if with_dataset:
            self.dataset(namespace, name)
        row = {"namespace": namespace, "name": name, "field": path}
        self.add("fields", row)
        if self.originals:  # a hashed key somewhere in the batch (rare): the call is most of a field's cost
            self.full_names("fields", row)
        self.add("has_field", {"namespace": namespace, "name": name, "field": path})


def _identity(b: _Builder, obj: Any) -> tuple[str, str] | None:
    """Stored keys of (namespace, name) of a job or dataset object; None when either is missing (MERGE cannot key
    on null). An empty string is an identity the spec allows (Flink's listener names a filesystem table by its
    catalog name in the empty namespace): kept."""
    namespace, name = _dict(obj).get("namespace"), _dict(obj).get("name")
    return (b.key(namespace), b.key(name)) if isinstance(namespace, str) and isinstance(name, str) else None


# Flink's default catalog is in memory, per job: `default_catalog.default_database.orders` of one job is not that of
# another, so linking such a name would merge unrelated lineage (the symlinks facet keeps it, as a document).
_SESSION_CATALOG = "default_catalog."


def _session_catalog_name(name: str) -> bool:
    return name.startswith(_SESSION_CATALOG)


def _dataset_facets(b: _Builder, dataset: Any, time: str | None) -> tuple[str, str] | None:
    """Dataset node, its fields and schema version (schema facet) and field lineage (columnLineage facet)."""
    ident = _identity(b, dataset)
    if ident is None:
        return None
    namespace, name = ident
    facets = _dict(dataset.get("facets"))
    fields = schema_fields(dataset)
    if fields:
        known = b.schema_texts.get(id(fields))
        if known is None or known[0] is not fields:
            fields_json = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)  # as the drift alert writes it
            version = b.versions.get(fields_json)
            if version is None:  # the processor's hash, so alerts and graph name versions alike
                if len(b.versions) > 20_000:  # bounded (~1 KB a key for 20 fields)
                    b.versions.clear()
                version = b.versions[fields_json] = schema_version(fields)
            known = b.schema_texts[id(fields)] = (fields, fields_json, version)
        _, fields_json, version = known
        b.dataset(namespace, name, _group(time or _NO_TIME_MAX, version=version))
        version_row = {"namespace": namespace, "name": name, "hash": version,
                       "first": _group(time or _NO_TIME_MIN, fields=fields_json, firstSeen=time)}
        b.add("schema_versions", version_row)
        b.full_names("schema_versions", version_row)
        b.add("has_schema", {"namespace": namespace, "name": name, "hash": version})
        if (namespace, name, version) not in b.schemas_done:  # field rows have no merge rules: once is enough
            b.schemas_done.add((namespace, name, version))
            paths = tuple(b.key(path) for path in field_paths(fields))
            b.schema_paths[(namespace, name, version)] = paths
            for path in paths:
                b.field(namespace, name, path, with_dataset=False)
    else:
        b.dataset(namespace, name)
    for identifier in _list(_dict(facets.get("symlinks")).get("identifiers")):
        alias = _identity(b, identifier)
        if alias is not None and alias != (namespace, name) and not _session_catalog_name(alias[1]):
            b.dataset(*alias)
            b.add("same_as", {"namespace": namespace, "name": name, "aliasNamespace": alias[0],
                              "aliasName": alias[1], "type": _str(identifier.get("type")), "firstSeen": time,
                              "lastSeen": time})
    _facets(b, "Dataset", namespace, name, facets, time)
    lineage = _dict(facets.get("columnLineage"))
    for entry in _list(lineage.get("dataset")):  # input columns the whole dataset depends on (join, filter, …)
        source, in_field = _identity(b, entry), _str(_dict(entry).get("field"))
        if source is not None and in_field is not None:
            in_key = b.key(in_field)
            b.field(*source, in_key)
            b.add("depends_on", {"namespace": namespace, "name": name, "inputNamespace": source[0],
                                 "inputName": source[1], "inputField": in_key,
                                 "lineage": _group(time or _NO_TIME_MAX, transformation=transformation_text(entry)),
                                 "firstSeen": time, "lastSeen": time})
    for out_field, spec in _dict(lineage.get("fields")).items():
        if not _str(out_field):
            continue
        spec = _dict(spec)
        for entry in _list(spec.get("inputFields")):
            source, in_field = _identity(b, entry), _str(_dict(entry).get("field"))
            if source is None or in_field is None:
                continue
            out_key, in_key = b.key(out_field), b.key(in_field)
            text = transformation_text(entry) or (_str(spec.get("transformationType")) or "")
            b.field(namespace, name, out_key)
            b.field(*source, in_key)
            b.add("derives_from", {"namespace": namespace, "name": name, "field": out_key,
                                   "inputNamespace": source[0], "inputName": source[1], "inputField": in_key,
                                   "lineage": _group(time or _NO_TIME_MAX, transformation=text),
                                   "firstSeen": time, "lastSeen": time})
    return ident


def _statistics(facet: Any) -> Row | None:
    facet = _dict(facet)
    rows, size = _int(facet.get("rowCount")), _int(facet.get("size"))
    return None if rows is None and size is None else {"rowCount": rows, "bytes": size}


def _facet_content(facet: Any) -> dict[str, Any]:
    """A facet without its ``_producer``/``_schemaURL``/``_deleted`` bookkeeping keys."""
    return {key: value for key, value in _dict(facet).items() if not key.startswith("_")}


def _assertion_results(facet: Any) -> tuple[list[str], list[str]]:
    """(failed, passed) assertion names of a ``dataQualityAssertions`` facet: ``assertion`` or
    ``assertion(column)``; an item without a boolean ``success`` decides nothing."""
    failed, passed = set(), set()
    for item in _list(_dict(facet).get("assertions")):
        name, column, success = _str(_dict(item).get("assertion")), _str(_dict(item).get("column")), item.get("success")
        if name is not None and isinstance(success, bool):
            (passed if success else failed).add(f"{name}({column})" if column else name)
    return sorted(failed), sorted(passed)


def _partition(b: _Builder, ident: tuple[str, str], facet: Any, time: str | None) -> str | None:
    """The ``Partition`` row (and its ``HAS_PARTITION``) of a ``kafkaLineage_partition`` facet; its stored key text,
    None when the facet names no valid keys. A ``marker`` is a report "the marker file exists" at the event's time;
    ``requiredMarker`` is the dataset's rule, latest event wins."""
    keys = partition_keys(facet)
    if keys is None:
        return None
    key = b.key(partition_key_text(keys))
    marker, required = _str(facet.get("marker")), _str(facet.get("requiredMarker"))
    stale = _dict(facet.get("stale"))
    stale_at = utc_time(stale.get("requestedAt")) if stale else None
    b.add("partitions", {"namespace": ident[0], "name": ident[1], "key": key,
                         "requiredMarker": _group(time or _NO_TIME_MAX, marker=required) if required else None,
                         "markers": [f"{time} {marker}"] if marker and time else None,
                         "staleMarks": [f"{stale_at} {_str(stale.get('reason')) or 'marked stale'}"]
                         if stale_at else None})
    b.add("has_partition", {"namespace": ident[0], "name": ident[1], "key": key})
    return key


def _partition_io(b: _Builder, kind: str, run_id: str, ident: tuple[str, str], facets: dict[str, Any],
                  order: str, time: str | None) -> None:
    """A run's read (``READ_PARTITION`` to the partition) or write (its own ``PartitionVersion``, ``HAS_VERSION``,
    ``WROTE_PARTITION``) of the partition its input/output facets name, with that dataset's statistics and data
    quality (the writer's checks of what it wrote decide the version's state; see ``partitions``)."""
    facet = facets.get(PARTITION_FACET)
    key = _partition(b, ident, facet, time) if facet is not None else None
    if key is None:
        return
    where = {"runId": run_id, "namespace": ident[0], "name": ident[1], "key": key}
    quality = _facet_content(facets.get("dataQualityMetrics"))
    assertions = _list(_dict(facets.get("dataQualityAssertions")).get("assertions"))
    failed, passed = _assertion_results(facets.get("dataQualityAssertions"))
    row = {**where, "dataQuality": _group(order, json=_json(quality)) if quality else None,
           "assertions": _group(order, json=_json(assertions)) if assertions else None,
           "failed": failed or None, "passed": passed or None, "firstSeen": time, "lastSeen": time}
    if kind == "read":
        b.add("read_partition", row)
        return
    stats = _statistics(facets.get("outputStatistics"))
    marker = _str(_dict(facet).get("marker"))
    b.add("partition_versions", dict(where))
    b.add("has_version", dict(where))
    b.add("wrote_partition", {**row, "stats": _group(order, **stats) if stats else None,
                              "markers": [marker] if marker else None})


def _add_event(b: _Builder, event: Mapping[str, Any]) -> None:
    time = utc_time(event.get("eventTime"))
    if isinstance(event.get("dataset"), dict) and not ("run" in event and "job" in event):  # DatasetEvent
        ident = _dataset_facets(b, event["dataset"], time)
        facet = _dict(event["dataset"].get("facets")).get(PARTITION_FACET)
        if ident is not None and facet is not None:
            _partition(b, ident, facet, time)  # a completion-marker report (or the dataset's marker rule)
        return
    job_ident = _identity(b, event.get("job"))
    if job_ident is not None:
        job_type = _facet_content(_dict(_dict(event["job"].get("facets")).get("jobType")))
        type_group = _group(time or _NO_TIME_MAX, processingType=job_type.get("processingType"),
                            integration=job_type.get("integration"), jobType=job_type.get("jobType"),
                            eventContentMode=_str(_dict(job_type.get("emissionPattern")).get("eventContentMode")))
        b.job(*job_ident, time, type_group if job_type else None)
        _facets(b, "Job", *job_ident, _dict(event["job"].get("facets")), time)

    run = _dict(event.get("run"))
    run_id = _str(run.get("runId"))
    event_type = event.get("eventType")
    rank = state_rank(event_type) if run_id else None
    order = f"{rank if rank is not None else lifecycle_rank(event_type)}|{time or _NO_TIME_MAX}"
    if run_id is not None:
        facets = _dict(run.get("facets"))
        nominal, error = _dict(facets.get("nominalTime")), _dict(facets.get("errorMessage"))
        backfill = _dict(facets.get(BACKFILL_FACET))
        window = _dict(backfill.get("window"))
        b.run(run_id, state=event_type if rank is not None else None, rank=rank,
              stateOrder=f"{time or _NO_TIME_MAX}|{event_type}" if rank is not None else None,
              startTime=time if event_type == "START" else None,
              endTime=time if event_type in _TERMINAL else None,
              lastEventTime=time,
              nominalTime=_group(order, nominalStartTime=utc_time(nominal.get("nominalStartTime")),
                                 nominalEndTime=utc_time(nominal.get("nominalEndTime"))) if nominal else None,
              errorMessage=_group(order, message=_str(error.get("message")),
                                  programmingLanguage=_str(error.get("programmingLanguage"))) if error else None,
              **({"backfill": _group(order, planId=_str(backfill.get("planId")) or "", start=_str(window.get("from")),
                                     end=_str(window.get("to")))} if backfill else {}),
              **({"startRunFacets" if event_type == "START" else "runFacets": _group(order, json=run_facets_json(
                  facets))} if facets else {}))
        if job_ident is not None:
            b.add("of_job", {"runId": run_id, "namespace": job_ident[0], "name": job_ident[1]})
        parent = _dict(facets.get("parent"))
        parent_id, parent_job = _str(_dict(parent.get("run")).get("runId")), _identity(b, parent.get("job"))
        if parent_id is not None and parent_id != run_id:
            b.run(parent_id)
            b.add("child_of", {"runId": run_id, "parentRunId": parent_id})
            if parent_job is not None:
                b.job(*parent_job)
                b.add("of_job", {"runId": parent_id, "namespace": parent_job[0], "name": parent_job[1]})

    for dataset in _list(event.get("inputs")):
        ident = _dataset_facets(b, dataset, time)
        if ident is None:
            continue
        if job_ident is not None:
            b.add("input_to", {"namespace": ident[0], "name": ident[1],
                               "jobNamespace": job_ident[0], "jobName": job_ident[1], "firstSeen": time,
                               "lastSeen": time})
        if run_id is not None:
            input_facets = _dict(dataset.get("inputFacets"))
            _partition_io(b, "read", run_id, ident, input_facets, order, time)
            stats = _statistics(input_facets.get("inputStatistics"))
            quality = _facet_content(input_facets.get("dataQualityMetrics"))
            assertions = _list(_dict(input_facets.get("dataQualityAssertions")).get("assertions"))
            b.add("read", {"runId": run_id, "namespace": ident[0], "name": ident[1],
                           "stats": _group(order, **stats) if stats else None,
                           "dataQuality": _group(order, json=_json(quality)) if quality else None,
                           "assertions": _group(order, json=_json(assertions)) if assertions else None})
            if stats:
                b.add("run_totals", {"runId": run_id})
    for dataset in _list(event.get("outputs")):
        ident = _dataset_facets(b, dataset, time)
        if ident is None:
            continue
        if job_ident is not None:
            b.add("outputs", {"jobNamespace": job_ident[0], "jobName": job_ident[1],
                              "namespace": ident[0], "name": ident[1], "firstSeen": time, "lastSeen": time})
        if run_id is not None:
            output_facets = _dict(dataset.get("outputFacets"))
            _partition_io(b, "wrote", run_id, ident, output_facets, order, time)
            stats = _statistics(output_facets.get("outputStatistics"))
            b.add("wrote", {"runId": run_id, "namespace": ident[0], "name": ident[1],
                            "stats": _group(order, **stats) if stats else None})
            if stats:
                b.add("run_totals", {"runId": run_id})


def graph_batch(events: Iterable[Mapping[str, Any]]) -> GraphBatch:
    """Fold events (OpenLineage JSON dicts, names already normalized) into one row per node and relationship.

    The result does not depend on the events' order or on repeats. Malformed facets are skipped, not fatal: an
    event that passed validation must reach the graph.
    """
    b = _Builder()
    for event in events:
        if isinstance(event, Mapping):
            _add_event(b, event)
    return GraphBatch({kind: tuple(rows[key] for key in sorted(rows)) for kind, rows in b.rows.items() if rows},
                      b.schema_paths)


# --- Cypher --------------------------------------------------------------------------------------------------------
def _take_latest(var: str, group: str, props: Mapping[str, str], earliest: bool = False) -> str:
    """``WITH … SET`` replacing a property group when the row's group has a larger (smaller) order key.

    Built at import time from constants only (``props`` maps stored property → row group key).
    """
    compare = "<" if earliest else ">"
    sets = ",\n    ".join(f"{var}.{prop} = CASE WHEN take THEN row.{group}.{key} ELSE {var}.{prop} END"
                           for prop, key in props.items())
    return (f"WITH {var}, row, row.{group} IS NOT NULL AND ({var}.{group}Order IS NULL "
            f"OR row.{group}.order {compare} {var}.{group}Order) AS take\n"
            f"SET {sets},\n    {var}.{group}Order = CASE WHEN take THEN row.{group}.order ELSE {var}.{group}Order END")


def _take_all(var: str, groups: Mapping[str, Mapping[str, str]], sets: Sequence[str] = (),
              decide: Sequence[str] = ()) -> str:
    """``_take_latest`` for several groups at once, with ``sets`` (other SET items) and ``decide`` (other WITH
    expressions) beside them: every decision in one WITH, every write in one SET. A chain of WITH … SET pairs reads
    a property after writing one, and the planner puts an Eager (all rows materialized) between every pair."""
    takes = "".join(f", row.{group} IS NOT NULL AND ({var}.{group}Order IS NULL OR row.{group}.order > "
                    f"{var}.{group}Order) AS take_{group}" for group in groups)
    items = [*sets, *(f"{var}.{prop} = CASE WHEN take_{group} THEN row.{group}.{key} ELSE {var}.{prop} END"
                      for group, props in groups.items() for prop, key in props.items()),
             *(f"{var}.{group}Order = CASE WHEN take_{group} THEN row.{group}.order ELSE {var}.{group}Order END"
               for group in groups)]
    return f"WITH {var}, row{''.join(', ' + item for item in decide)}{takes}\nSET " + ",\n    ".join(items)


def _min_set(var: str, prop: str) -> str:
    return (f"{var}.{prop} = CASE WHEN row.{prop} IS NOT NULL AND ({var}.{prop} IS NULL OR row.{prop} < {var}.{prop})"
            f" THEN row.{prop} ELSE {var}.{prop} END")


def _max_set(var: str, prop: str) -> str:
    return (f"{var}.{prop} = CASE WHEN row.{prop} IS NOT NULL AND ({var}.{prop} IS NULL OR row.{prop} > {var}.{prop})"
            f" THEN row.{prop} ELSE {var}.{prop} END")


def _union_set(var: str, prop: str) -> str:
    """``prop`` (a list) becomes the sorted union with the row's, its last ``MAX_UNION`` values (as ``_union``)."""
    return (f"{var}.{prop} = CASE WHEN row.{prop} IS NULL THEN {var}.{prop} ELSE COLLECT {{ "
            f"UNWIND coalesce({var}.{prop}, []) + row.{prop} AS x WITH DISTINCT x ORDER BY x DESC LIMIT {MAX_UNION} "
            "RETURN x ORDER BY x } END")


_JOB = "MATCH (j:Job {namespace: row.jobNamespace, name: row.jobName})"
# A job points at its latest run (``latestRunId``, with that run's key in ``latestRunKey``): the run with the largest
# (start time, else last event time; runId), so a lineage graph's hundreds of jobs do not each sort their years of
# runs. Per row, in a subquery (each sees the rows before it): a run whose key passes the pointed one's takes the
# pointer; when the pointed run's own key went down (its START came after a later event), every run of the job is
# ranked again.
_RUN_KEY = "coalesce({0}.startTime, {0}.lastEventTime, '')"
_LATEST_RUN_OF = ("MATCH (x:Run)-[:OF_JOB]->(j) WITH j, x, " + _RUN_KEY.format("x") + " AS xKey "
                  "ORDER BY xKey DESC, x.runId DESC LIMIT 1")
_LATEST_RUN = (
    "CALL (r, j) {\n"
    "  OPTIONAL MATCH (cur:Run {runId: j.latestRunId})\n"
    "  WITH r, j, cur, " + _RUN_KEY.format("r") + " AS key, " + _RUN_KEY.format("cur") + " AS curKey\n"
    "  WITH r, j, key, cur = r AND key < coalesce(j.latestRunKey, '') AS rescan\n"
    "    WHERE cur IS NULL OR cur = r OR key > curKey OR (key = curKey AND r.runId > cur.runId)\n"
    "  OPTIONAL CALL (j, rescan) { WITH j WHERE rescan " + _LATEST_RUN_OF + " RETURN x.runId AS found, xKey }\n"
    "  SET j.latestRunId = coalesce(found, r.runId), j.latestRunKey = CASE WHEN found IS NULL THEN key ELSE xKey END\n"
    "}")
# Lineage edges keep the event times they were first and last seen at (not wall-clock times: a replay reproduces
# them), which as-of questions read.
_SEEN_ITEMS = (_min_set("e", "firstSeen"), _max_set("e", "lastSeen"))
_SEEN = f"SET {', '.join(_SEEN_ITEMS)}"
_DATASET = "MATCH (d:Dataset {namespace: row.namespace, name: row.name})"
_PARTITION = "MATCH (p:Partition {namespace: row.namespace, name: row.name, key: row.key})"
_VERSION = "MATCH (v:PartitionVersion {namespace: row.namespace, name: row.name, key: row.key, runId: row.runId})"
_QUALITY = (_take_latest("e", "dataQuality", {"dataQuality": "json"}) + "\n"
            + _take_latest("e", "assertions", {"assertions": "json"}) + "\n"
            f"SET {_union_set('e', 'failed')}, {_union_set('e', 'passed')}")

STATEMENTS: dict[str, str] = {
    # --- nodes
    "jobs": "UNWIND $rows AS row\nMERGE (j:Job {namespace: row.namespace, name: row.name})\n"
            "ON CREATE SET j.searchKey = toLower(row.name)\n"
            + _take_all("j", {"jobType": {"processingType": "processingType", "integration": "integration",
                                          "jobType": "jobType", "eventContentMode": "eventContentMode"}},
                        [_max_set("j", "lastEventTime")]),
    "runs": "UNWIND $rows AS row\nMERGE (r:Run {runId: row.runId})\n"
            # state only moves forward: rank first, then (eventTime, state) between events of one rank
            "WITH r, row, coalesce(r.stateRank, -1) AS oldRank\n"
            + _take_all("r", {"nominalTime": {"nominalStartTime": "nominalStartTime",
                                              "nominalEndTime": "nominalEndTime"},
                              "startRunFacets": {"startRunFacets": "json"}, "runFacets": {"runFacets": "json"},
                              "errorMessage": {"errorMessage": "message", "errorLanguage": "programmingLanguage"},
                              "backfill": {"backfillPlanId": "planId", "backfillFrom": "start",
                                           "backfillTo": "end"}},
                        ["r.state = CASE WHEN advance THEN row.state ELSE r.state END",
                         "r.stateRank = CASE WHEN advance THEN row.rank ELSE r.stateRank END",
                         "r.stateOrder = CASE WHEN advance THEN row.stateOrder ELSE r.stateOrder END",
                         _min_set("r", "startTime"), _max_set("r", "endTime"), _max_set("r", "lastEventTime")],
                        ["row.rank IS NOT NULL AND (row.rank > oldRank OR (row.rank = oldRank AND "
                         "row.stateOrder > r.stateOrder)) AS advance"]),
    "datasets": "UNWIND $rows AS row\nMERGE (d:Dataset {namespace: row.namespace, name: row.name})\n"
                "ON CREATE SET d.searchKey = toLower(row.name)\n"
                + _take_latest("d", "schema", {"schemaVersion": "version"}),
    "fields": "UNWIND $rows AS row\nMERGE (f:Field {namespace: row.namespace, name: row.name, field: row.field})\n"
              "ON CREATE SET f.searchKey = toLower(row.field)",
    "facets": "UNWIND $rows AS row\n"
              "MERGE (f:Facet {of: row.of, namespace: row.namespace, name: row.name, key: row.key})\n"
              + _take_latest("f", "facet", {"json": "json"}),
    # A version's fields and HAS_FIELD edges are written with it, in its first transaction, and deleted only with it
    # (replay repair): when the version exists they do, and rewriting 20-150 of them per dataset per event was most
    # of a batch's time (ARCHITECTURE 61). ``row.paths``: GraphBatch.schema_paths.
    "schema_versions": "UNWIND $rows AS row\n"
                       "OPTIONAL MATCH (known:SchemaVersion {namespace: row.namespace, name: row.name, "
                       "hash: row.hash})\n"
                       "CALL (row, known) {\n"
                       "  WITH row, known WHERE known IS NULL\n"
                       "  MATCH (d:Dataset {namespace: row.namespace, name: row.name})\n"
                       "  UNWIND coalesce(row.paths, []) AS path\n"
                       "  MERGE (f:Field {namespace: row.namespace, name: row.name, field: path})\n"
                       "  ON CREATE SET f.searchKey = toLower(path)\n"
                       "  MERGE (d)-[:HAS_FIELD]->(f)\n"
                       "}\n"
                       "MERGE (s:SchemaVersion {namespace: row.namespace, name: row.name, hash: row.hash})\n"
                       + _take_latest("s", "first", {"fields": "fields", "firstSeen": "firstSeen"}, earliest=True),
    "partitions": "UNWIND $rows AS row\n"
                  "MERGE (p:Partition {namespace: row.namespace, name: row.name, key: row.key})\n"
                  f"SET {_union_set('p', 'markers')}, {_union_set('p', 'staleMarks')}\n"
                  + _take_latest("p", "requiredMarker", {"requiredMarker": "marker"}),
    "partition_versions": "UNWIND $rows AS row\n"
                          "MERGE (v:PartitionVersion {namespace: row.namespace, name: row.name, key: row.key, "
                          "runId: row.runId})",
    # --- the whole values behind hashed keys: not indexed, so any length
    "jobs_names": "UNWIND $rows AS row\nMATCH (n:Job {namespace: row.namespace, name: row.name})\n"
                  "SET n.fullNamespace = row.fullNamespace, n.fullName = row.fullName",
    "datasets_names": "UNWIND $rows AS row\nMATCH (n:Dataset {namespace: row.namespace, name: row.name})\n"
                      "SET n.fullNamespace = row.fullNamespace, n.fullName = row.fullName",
    "fields_names": "UNWIND $rows AS row\n"
                    "MATCH (n:Field {namespace: row.namespace, name: row.name, field: row.field})\n"
                    "SET n.fullNamespace = row.fullNamespace, n.fullName = row.fullName, n.fullField = row.fullField",
    "schema_versions_names": "UNWIND $rows AS row\n"
                             "MATCH (n:SchemaVersion {namespace: row.namespace, name: row.name, hash: row.hash})\n"
                             "SET n.fullNamespace = row.fullNamespace, n.fullName = row.fullName",
    # --- relationships (every end has a node row in the same batch, written above)
    "of_job": "UNWIND $rows AS row\nMATCH (r:Run {runId: row.runId})\n"
              "MATCH (j:Job {namespace: row.namespace, name: row.name})\nMERGE (r)-[:OF_JOB]->(j)\nWITH r, j\n"
              + _LATEST_RUN,
    "child_of": "UNWIND $rows AS row\nMATCH (r:Run {runId: row.runId})\nMATCH (p:Run {runId: row.parentRunId})\n"
                "MERGE (r)-[:CHILD_OF]->(p)",
    "read": f"UNWIND $rows AS row\nMATCH (r:Run {{runId: row.runId}})\n{_DATASET}\nMERGE (r)-[e:READ]->(d)\n"
            + _take_all("e", {"stats": {"rowCount": "rowCount", "bytes": "bytes"},
                              "dataQuality": {"dataQuality": "json"}, "assertions": {"assertions": "json"}}),
    "wrote": f"UNWIND $rows AS row\nMATCH (r:Run {{runId: row.runId}})\n{_DATASET}\nMERGE (r)-[e:WROTE]->(d)\n"
             + _take_latest("e", "stats", {"rowCount": "rowCount", "bytes": "bytes"}),
    "input_to": f"UNWIND $rows AS row\n{_DATASET}\n{_JOB}\nMERGE (d)-[e:INPUT_TO]->(j)\n{_SEEN}",
    "outputs": f"UNWIND $rows AS row\n{_JOB}\n{_DATASET}\nMERGE (j)-[e:OUTPUTS]->(d)\n{_SEEN}",
    "has_field": f"UNWIND $rows AS row\n{_DATASET}\n"
                 "MATCH (f:Field {namespace: row.namespace, name: row.name, field: row.field})\n"
                 "MERGE (d)-[:HAS_FIELD]->(f)",
    "derives_from": "UNWIND $rows AS row\n"
                    "MATCH (o:Field {namespace: row.namespace, name: row.name, field: row.field})\n"
                    "MATCH (i:Field {namespace: row.inputNamespace, name: row.inputName, field: row.inputField})\n"
                    "MERGE (o)-[e:DERIVES_FROM]->(i)\n"
                    + _take_all("e", {"lineage": {"transformation": "transformation"}}, _SEEN_ITEMS),
    "same_as": f"UNWIND $rows AS row\n{_DATASET}\n"
               "MATCH (a:Dataset {namespace: row.aliasNamespace, name: row.aliasName})\n"
               f"MERGE (d)-[e:SAME_AS]->(a)\n{_SEEN}, {_min_set('e', 'type')}",
    "depends_on": f"UNWIND $rows AS row\n{_DATASET}\n"
                  "MATCH (i:Field {namespace: row.inputNamespace, name: row.inputName, field: row.inputField})\n"
                  "MERGE (d)-[e:DEPENDS_ON]->(i)\n"
                  + _take_all("e", {"lineage": {"transformation": "transformation"}}, _SEEN_ITEMS),
    "has_schema": f"UNWIND $rows AS row\n{_DATASET}\n"
                  "MATCH (s:SchemaVersion {namespace: row.namespace, name: row.name, hash: row.hash})\n"
                  "MERGE (d)-[:HAS_SCHEMA]->(s)",
    "has_partition": f"UNWIND $rows AS row\n{_DATASET}\n{_PARTITION}\nMERGE (d)-[:HAS_PARTITION]->(p)",
    "has_version": f"UNWIND $rows AS row\n{_PARTITION}\n{_VERSION}\nMERGE (p)-[:HAS_VERSION]->(v)",
    "wrote_partition": f"UNWIND $rows AS row\nMATCH (r:Run {{runId: row.runId}})\n{_VERSION}\n"
                       f"MERGE (r)-[e:WROTE_PARTITION]->(v)\n{_SEEN}, {_union_set('e', 'markers')}\n"
                       + _take_latest("e", "stats", {"rowCount": "rowCount", "bytes": "bytes"}) + "\n" + _QUALITY,
    "read_partition": f"UNWIND $rows AS row\nMATCH (r:Run {{runId: row.runId}})\n{_PARTITION}\n"
                      f"MERGE (r)-[e:READ_PARTITION]->(p)\n{_SEEN}\n" + _QUALITY,
    # --- derived: run totals from all of the run's READ/WROTE edges (not just this batch's), hence order free
    "run_totals": "UNWIND $rows AS row\nMATCH (r:Run {runId: row.runId})\n"
                  "WITH r, [(r)-[e:READ]->(:Dataset) | e] AS reads, [(r)-[e:WROTE]->(:Dataset) | e] AS writes\n"
                  "WITH r, [e IN reads WHERE e.rowCount IS NOT NULL | e.rowCount] AS inRows,\n"
                  "     [e IN reads WHERE e.bytes IS NOT NULL | e.bytes] AS inBytes,\n"
                  "     [e IN writes WHERE e.rowCount IS NOT NULL | e.rowCount] AS outRows,\n"
                  "     [e IN writes WHERE e.bytes IS NOT NULL | e.bytes] AS outBytes\n"
                  "SET r.inputRowCount = CASE WHEN size(inRows) = 0 THEN null "
                  "ELSE reduce(s = 0, x IN inRows | s + x) END,\n"
                  "    r.inputBytes = CASE WHEN size(inBytes) = 0 THEN null "
                  "ELSE reduce(s = 0, x IN inBytes | s + x) END,\n"
                  "    r.outputRowCount = CASE WHEN size(outRows) = 0 THEN null "
                  "ELSE reduce(s = 0, x IN outRows | s + x) END,\n"
                  "    r.outputBytes = CASE WHEN size(outBytes) = 0 THEN null "
                  "ELSE reduce(s = 0, x IN outBytes | s + x) END",
}
# Dependency-safe order: nodes, then relationships between them, then what is derived from relationships.
_ORDER = tuple(STATEMENTS)

CONSTRAINTS: list[str] = [
    # Community edition has no NODE KEY; uniqueness constraints also give MERGE its backing index.
    "CREATE CONSTRAINT job_key IF NOT EXISTS FOR (j:Job) REQUIRE (j.namespace, j.name) IS UNIQUE",
    "CREATE CONSTRAINT run_key IF NOT EXISTS FOR (r:Run) REQUIRE r.runId IS UNIQUE",
    "CREATE CONSTRAINT dataset_key IF NOT EXISTS FOR (d:Dataset) REQUIRE (d.namespace, d.name) IS UNIQUE",
    "CREATE CONSTRAINT field_key IF NOT EXISTS FOR (f:Field) REQUIRE (f.namespace, f.name, f.field) IS UNIQUE",
    "CREATE CONSTRAINT facet_key IF NOT EXISTS FOR (f:Facet) REQUIRE (f.of, f.namespace, f.name, f.key) IS UNIQUE",
    "CREATE CONSTRAINT schema_version_key IF NOT EXISTS "
    "FOR (s:SchemaVersion) REQUIRE (s.namespace, s.name, s.hash) IS UNIQUE",
    "CREATE CONSTRAINT partition_key IF NOT EXISTS FOR (p:Partition) REQUIRE (p.namespace, p.name, p.key) IS UNIQUE",
    "CREATE CONSTRAINT partition_version_key IF NOT EXISTS "
    "FOR (v:PartitionVersion) REQUIRE (v.namespace, v.name, v.key, v.runId) IS UNIQUE",
    # Look-ups by name alone (CLI: a dataset or job named without its namespace) and recent or failed runs.
    "CREATE INDEX dataset_name IF NOT EXISTS FOR (d:Dataset) ON (d.name)",
    "CREATE INDEX job_name IF NOT EXISTS FOR (j:Job) ON (j.name)",
    "CREATE INDEX run_state IF NOT EXISTS FOR (r:Run) ON (r.state)",
    "CREATE INDEX run_start IF NOT EXISTS FOR (r:Run) ON (r.startTime)",
    # Search (the lineage server's, case-insensitive containment as Marquez's): ``searchKey`` is the lower-cased
    # stored name (a job's or dataset's, a column's own name); a text index answers CONTAINS without a scan, a range
    # index reads the keys in order (short queries, which match densely).
    "CREATE TEXT INDEX job_search IF NOT EXISTS FOR (j:Job) ON (j.searchKey)",
    "CREATE TEXT INDEX dataset_search IF NOT EXISTS FOR (d:Dataset) ON (d.searchKey)",
    "CREATE TEXT INDEX field_search IF NOT EXISTS FOR (f:Field) ON (f.searchKey)",
    "CREATE INDEX job_search_order IF NOT EXISTS FOR (j:Job) ON (j.searchKey)",
    "CREATE INDEX dataset_search_order IF NOT EXISTS FOR (d:Dataset) ON (d.searchKey)",
    "CREATE INDEX field_search_order IF NOT EXISTS FOR (f:Field) ON (f.searchKey)",
]
# What a sink that wrote the graph before keeping them leaves out: search keys and jobs' latest-run pointers
# (auto-commit statements: IN TRANSACTIONS needs one).
BACKFILL: list[str] = [
    *(f"MATCH (n:{label}) WHERE n.searchKey IS NULL CALL (n) {{ SET n.searchKey = toLower(n.{key}) }} "
      "IN TRANSACTIONS OF 10000 ROWS" for label, key in (("Job", "name"), ("Dataset", "name"), ("Field", "field"))),
    "MATCH (j:Job) WHERE j.latestRunId IS NULL AND EXISTS { (:Run)-[:OF_JOB]->(j) } CALL (j) { " + _LATEST_RUN_OF
    + " SET j.latestRunId = x.runId, j.latestRunKey = xKey } IN TRANSACTIONS OF 1000 ROWS",
]


def statements(batch: GraphBatch) -> list[tuple[str, dict[str, Any]]]:
    """``(cypher, {"rows": rows})`` for every non-empty row list, nodes before relationships: run all in ONE
    transaction (relationship statements MATCH their ends).

    The fields of the batch's schema versions (``batch.schema_paths``) go with their ``schema_versions`` rows
    (``paths``), written only for a version new to the graph; the ``fields``/``has_field`` statements get the other
    fields (column lineage naming a field no schema of the batch has), and may then have no rows (nothing to run).
    """
    paths = batch.schema_paths
    covered = {(namespace, name, path) for (namespace, name, _), keys in paths.items() for path in keys}
    work = []
    for name in _ORDER:
        rows = batch[name]
        if not rows:
            continue
        if name == "schema_versions":
            params = [{**row, "paths": list(paths.get((row["namespace"], row["name"], row["hash"]), ()))}
                      for row in rows]
        elif covered and name in ("fields", "has_field"):
            params = [dict(row) for row in rows if (row["namespace"], row["name"], row["field"]) not in covered]
        else:
            params = [dict(row) for row in rows]
        work.append((STATEMENTS[name], {"rows": params}))
    return work


# --- fingerprint ---------------------------------------------------------------------------------------------------
FINGERPRINT_QUERIES: dict[str, str] = {
    "Job": "MATCH (j:Job) RETURN j.namespace AS namespace, j.name AS name",
    "Run": "MATCH (r:Run) RETURN r.runId AS runId, r.state AS state",
    "Dataset": "MATCH (d:Dataset) RETURN d.namespace AS namespace, d.name AS name",
    "Field": "MATCH (f:Field) RETURN f.namespace AS namespace, f.name AS name, f.field AS field",
    "SchemaVersion": "MATCH (s:SchemaVersion) RETURN s.namespace AS namespace, s.name AS name, s.hash AS hash",
    "OF_JOB": "MATCH (r:Run)-[:OF_JOB]->(j:Job) RETURN r.runId AS runId, j.namespace AS namespace, j.name AS name",
    "CHILD_OF": "MATCH (r:Run)-[:CHILD_OF]->(p:Run) RETURN r.runId AS runId, p.runId AS parentRunId",
    "READ": "MATCH (r:Run)-[:READ]->(d:Dataset) RETURN r.runId AS runId, d.namespace AS namespace, d.name AS name",
    "WROTE": "MATCH (r:Run)-[e:WROTE]->(d:Dataset) RETURN r.runId AS runId, d.namespace AS namespace, "
             "d.name AS name, e.rowCount AS rowCount, e.bytes AS bytes",
    "INPUT_TO": "MATCH (d:Dataset)-[e:INPUT_TO]->(j:Job) RETURN d.namespace AS namespace, d.name AS name, "
                "j.namespace AS jobNamespace, j.name AS jobName, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
    "OUTPUTS": "MATCH (j:Job)-[e:OUTPUTS]->(d:Dataset) RETURN j.namespace AS jobNamespace, j.name AS jobName, "
               "d.namespace AS namespace, d.name AS name, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
    "HAS_FIELD": "MATCH (d:Dataset)-[:HAS_FIELD]->(f:Field) RETURN d.namespace AS namespace, d.name AS name, "
                 "f.namespace AS fieldNamespace, f.name AS fieldName, f.field AS field",
    "DERIVES_FROM": "MATCH (o:Field)-[e:DERIVES_FROM]->(i:Field) RETURN o.namespace AS namespace, o.name AS name, "
                    "o.field AS field, i.namespace AS inputNamespace, i.name AS inputName, i.field AS inputField, "
                    "e.transformation AS transformation, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
    "SAME_AS": "MATCH (d:Dataset)-[e:SAME_AS]->(a:Dataset) RETURN d.namespace AS namespace, d.name AS name, "
               "a.namespace AS aliasNamespace, a.name AS aliasName, e.type AS type, e.firstSeen AS firstSeen, "
               "e.lastSeen AS lastSeen",
    "DEPENDS_ON": "MATCH (d:Dataset)-[e:DEPENDS_ON]->(i:Field) RETURN d.namespace AS namespace, d.name AS name, "
                  "i.namespace AS inputNamespace, i.name AS inputName, i.field AS inputField, "
                  "e.transformation AS transformation, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
    "HAS_SCHEMA": "MATCH (d:Dataset)-[:HAS_SCHEMA]->(s:SchemaVersion) RETURN d.namespace AS namespace, "
                  "d.name AS name, s.namespace AS schemaNamespace, s.name AS schemaName, s.hash AS hash",
}

# Partitions: identities, the facts their states are computed from (the writing run's state is Run.state
# above; marker reports, the required marker, failed/passed assertions), rows and bytes written, and read times (STALE
# compares them). Kept apart from FINGERPRINT_QUERIES, whose kinds the workload's ground truth mirrors, and hashed
# only when they have rows: a graph without partitions keeps the fingerprint it had.
PARTITION_FINGERPRINT_QUERIES: dict[str, str] = {
    "Partition": "MATCH (p:Partition) RETURN p.namespace AS namespace, p.name AS name, p.key AS key, "
                 "p.requiredMarker AS requiredMarker, p.markers AS markers, p.staleMarks AS staleMarks",
    "PartitionVersion": "MATCH (v:PartitionVersion) RETURN v.namespace AS namespace, v.name AS name, v.key AS key, "
                        "v.runId AS runId",
    "HAS_PARTITION": "MATCH (d:Dataset)-[:HAS_PARTITION]->(p:Partition) RETURN d.namespace AS datasetNamespace, "
                     "d.name AS datasetName, p.namespace AS namespace, p.name AS name, p.key AS key",
    "HAS_VERSION": "MATCH (p:Partition)-[:HAS_VERSION]->(v:PartitionVersion) RETURN p.namespace AS namespace, "
                   "p.name AS name, p.key AS key, v.namespace AS versionNamespace, v.name AS versionName, "
                   "v.key AS versionKey, v.runId AS runId",
    "WROTE_PARTITION": "MATCH (r:Run)-[e:WROTE_PARTITION]->(v:PartitionVersion) RETURN r.runId AS runId, "
                       "v.namespace AS namespace, v.name AS name, v.key AS key, v.runId AS versionRunId, "
                       "e.rowCount AS rowCount, e.bytes AS bytes, e.markers AS markers, e.failed AS failed, "
                       "e.passed AS passed, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
    # backfill runs: only runs that sent the kafkaLineage_backfill facet, so other graphs hash as before
    "BackfillRun": "MATCH (r:Run) WHERE r.backfillPlanId IS NOT NULL RETURN r.runId AS runId, "
                   "r.backfillPlanId AS planId, r.backfillFrom AS windowFrom, r.backfillTo AS windowTo",
    "READ_PARTITION": "MATCH (r:Run)-[e:READ_PARTITION]->(p:Partition) RETURN r.runId AS runId, "
                      "p.namespace AS namespace, p.name AS name, p.key AS key, e.failed AS failed, "
                      "e.passed AS passed, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen",
}


def fingerprint(rows_by_query: Mapping[str, Iterable[Mapping[str, Any] | Sequence[Any]]]) -> str:
    """Hex SHA-256 over the results of ``FINGERPRINT_QUERIES`` and ``PARTITION_FINGERPRINT_QUERIES``
    (``record.data()`` dicts or value lists), canonical: rows sorted, query names sorted, a missing query counts as
    no rows (a partition query without rows is left out). Unknown query names raise ValueError."""
    unknown = set(rows_by_query) - set(FINGERPRINT_QUERIES) - set(PARTITION_FINGERPRINT_QUERIES)
    if unknown:
        raise ValueError(f"not fingerprint queries: {sorted(unknown)}")
    rows_by_query = {name: list(rows) for name, rows in rows_by_query.items()}
    names = set(FINGERPRINT_QUERIES) | {name for name in PARTITION_FINGERPRINT_QUERIES if rows_by_query.get(name)}
    digest = hashlib.sha256()
    for name in sorted(names):
        rows = sorted(_json(dict(row) if isinstance(row, Mapping) else list(row))
                      for row in rows_by_query.get(name, ()))
        digest.update(_json([name, len(rows)]).encode())
        for row in rows:
            digest.update(b"\n" + row.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()
