"""A batch of graph rows and how rows of one identity merge. Pure.

``GraphBatch`` holds one row per node and per relationship (``ROW_IDENTITY`` names each kind's identity columns);
``RowBuilder`` adds rows, merging a row into the one of the same identity by a rule per property: "latest"/"earliest"
property groups (``property_group``: dicts with an ``order`` key), min, max, a bounded sorted union, and the run
state's forward-only rank. Every rule is commutative, associative and idempotent, so a batch does not depend on the
order events were folded in or on repeats; the Cypher statements (``graph.statements``) apply the same rules
against what Neo4j holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from kafka_lineage.graph.keys import stored_key, value_digest

Row = dict[str, Any]

_GROUP_DIGESTS: dict[tuple[tuple[str, Any], ...], str] = {}  # values → digest: most groups repeat (transformations)


def property_group(order: str, **props: Any) -> Row:
    """A "latest wins" property group; the digest of its values breaks ties between equal (rank, time) keys."""
    if any(isinstance(value, str) and len(value) > 256 for value in props.values()):
        return {"order": f"{order}|{value_digest(props)}", **props}  # long texts (facet JSON) rarely repeat: not kept
    key = tuple(props.items())
    try:
        digest = _GROUP_DIGESTS.get(key)
    except TypeError:  # an unhashable value (a list): digest it every time
        return {"order": f"{order}|{value_digest(props)}", **props}
    if digest is None:
        if len(_GROUP_DIGESTS) > 100_000:  # bounded: a long-running sink sees endless distinct values
            _GROUP_DIGESTS.clear()
        digest = _GROUP_DIGESTS[key] = value_digest(props)
    return {"order": f"{order}|{digest}", **props}


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


def merge_into(kind: str, old: Row, new: Row) -> None:
    """``old`` becomes the merge of ``old`` and ``new``, two rows of one identity, by the rules of their kind."""
    for prop, rule in _RULES.get(kind, {}).items():
        if prop in old or prop in new:  # an optional property (a run's backfill) stays absent when never sent
            old[prop] = rule(old.get(prop), new.get(prop))
    if kind == "runs":
        _merge_state(old, new)


def merge_changes(kind: str, old: Row, new: Row) -> bool:
    """Whether ``merge_into(kind, old, new)`` would change ``old`` (a run's state aside: ``kind`` is not "runs")."""
    for prop, rule in _RULES.get(kind, {}).items():
        value = new.get(prop)
        if value is None:  # every rule keeps the other side of a None
            continue
        known = old.get(prop)
        if known is None:
            return True
        merged = rule(known, value)
        if merged is not known and merged != known:
            return True
    return False


def row_identity(kind: str, row: Row) -> Any:
    """The identity of a ``kind`` row: its ``ROW_IDENTITY`` columns' values (one value for a one-column identity)."""
    return _KEY_OF[kind](row)


class RowBuilder:
    def __init__(self, schema_field_rows: bool = True) -> None:
        self.rows: dict[str, dict[Any, Row]] = {kind: {} for kind in _KEYS}
        # Field and HAS_FIELD rows for a schema version's fields too (the bulk import writes them from rows); a
        # writer that runs ``statements`` sends those with the version (``schema_paths``) and needs none of them
        self.schema_field_rows = schema_field_rows
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
        # ((namespace, name), id(facets)) → the times that dataset was seen at since its rows were built (events.py)
        self.repeats: dict[tuple[tuple[str, str], int], Any] = {}
        self.datasets_seen: dict[int, tuple[Any, Any, tuple[str, str]]] = {}  # id(dataset) → it, its repeats, identity
        self.jobs_seen: dict[int, Any] = {}  # id(job object) → when it was seen (events.py: built once per object)
        self.edge_spans: dict[tuple[str, tuple[str, ...]], Any] = {}  # INPUT_TO/OUTPUTS → when seen (events.py)

    def add(self, kind: str, row: Row) -> None:
        key = _KEY_OF[kind](row)
        rows = self.rows[kind]
        old = rows.get(key)
        if old is None:
            rows[key] = row
            return
        merge_into(kind, old, row)

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

    def batch(self) -> GraphBatch:
        """The rows built so far, each kind's sorted by identity."""
        return GraphBatch({kind: tuple(rows[key] for key in sorted(rows)) for kind, rows in self.rows.items() if rows},
                          dict(self.schema_paths))


def merge_batches(batches: Iterable[GraphBatch]) -> GraphBatch:
    """The batch of all the batches' events together: rows of one identity merged by the rules above.

    A monoid: the empty ``GraphBatch()`` is its identity, and since every rule is commutative, associative and
    idempotent, any split of a stream's events into batches, merged in any order or grouping, gives the rows
    ``graph_batch`` gives for the whole stream (tested). Rows are copied, never changed in place.
    """
    builder = RowBuilder()
    for batch in batches:
        for kind, rows in batch.rows.items():
            for row in rows:
                builder.add(kind, dict(row))
        builder.schema_paths.update(batch.schema_paths)
    return builder.batch()
