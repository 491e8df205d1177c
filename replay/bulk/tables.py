"""One ``GraphBatch`` of a whole topic → neo4j-admin import CSV files: the graph the sink's statements would build on
an empty database. Pure, apart from writing the files.

On an empty graph every ``MERGE`` creates, so each property is what its statement sets from the (already merged)
row alone: a "latest"/"earliest" group (``{"order", …}``) gives its values and ``<group>Order``; min/max times and
set unions are the row's values (unions sorted and bounded as ``_union_set`` keeps them); a null sets nothing. What
the statements derive from other rows is derived here from the same rows: ``searchKey`` (lower-cased name), a job's
latest run (``latestRunId``/``latestRunKey``: the largest ``coalesce(startTime, lastEventTime, '')``, then runId),
a run's totals over its ``READ``/``WROTE`` edges, the ``full…`` names behind hashed keys.

Every row kind and every row column must be known here (``TableError`` otherwise): a property the model adds must
not vanish silently from a bulk-imported graph.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kafka_lineage.graph.batch import MAX_UNION, GraphBatch
from kafka_lineage.graph.coverage import LABEL as COVERAGE_LABEL
from kafka_lineage.graph.coverage import Coverage
from kafka_lineage.graph.keys import canonical_json

Row = Mapping[str, Any]
Getter = Callable[[Row], Any]


class TableError(ValueError):
    """The batch holds a row kind or column this module does not map: the import would lose it."""


@dataclass(frozen=True)
class Column:
    name: str  # the property
    type: str  # neo4j-admin header type: string, long, string[]
    get: Getter


def _col(prop: str, type_: str = "string", source: str | None = None) -> Column:
    key = source or prop
    return Column(prop, type_, lambda row: row.get(key))


def _group(group: str, props: Mapping[str, str], type_: str = "string") -> list[Column]:
    """A "latest/earliest wins" group: its values (stored property → group key) and ``<group>Order``."""
    def member(key: str) -> Getter:
        return lambda row: (row.get(group) or {}).get(key)

    return [*(Column(prop, type_, member(key)) for prop, key in props.items()),
            Column(f"{group}Order", "string", member("order"))]


def _union(prop: str) -> Column:
    def get(row: Row) -> list[str] | None:
        values = row.get(prop)
        return None if values is None else sorted(set(values))[-MAX_UNION:]

    return Column(prop, "string[]", get)


def _lower(source: str) -> Column:
    return Column("searchKey", "string", lambda row: row[source].lower())


def _seen() -> list[Column]:
    return [_col("firstSeen"), _col("lastSeen")]


@dataclass(frozen=True)
class NodeSpec:
    kind: str
    label: str
    keys: tuple[str, ...]  # identity columns, also stored as properties
    columns: tuple[Column, ...]
    consumed: frozenset[str]  # row columns read (keys included)


@dataclass(frozen=True)
class RelSpec:
    kind: str
    type: str
    start: tuple[str, tuple[str, ...]]  # (label, row columns giving the start node's identity in key order)
    end: tuple[str, tuple[str, ...]]
    columns: tuple[Column, ...]
    consumed: frozenset[str]


def _node(kind: str, label: str, keys: tuple[str, ...], columns: Iterable[Column], *extra: str) -> NodeSpec:
    return NodeSpec(kind, label, keys, tuple(columns), frozenset((*keys, *extra)))


def _rel(kind: str, type_: str, start: tuple[str, tuple[str, ...]], end: tuple[str, tuple[str, ...]],
         columns: Iterable[Column] = (), *extra: str) -> RelSpec:
    return RelSpec(kind, type_, start, end, tuple(columns), frozenset((*start[1], *end[1], *extra)))


_JOB_TYPE = {"processingType": "processingType", "integration": "integration", "jobType": "jobType",
             "eventContentMode": "eventContentMode"}
NODES: tuple[NodeSpec, ...] = (
    _node("jobs", "Job", ("namespace", "name"), [_lower("name"), _col("lastEventTime"), *_group("jobType", _JOB_TYPE)],
          "lastEventTime", "jobType"),
    _node("runs", "Run", ("runId",), [
        _col("state"), _col("stateRank", "long", "rank"), _col("stateOrder"), _col("startTime"), _col("endTime"),
        _col("lastEventTime"),
        *_group("nominalTime", {"nominalStartTime": "nominalStartTime", "nominalEndTime": "nominalEndTime"}),
        *_group("startRunFacets", {"startRunFacets": "json"}), *_group("runFacets", {"runFacets": "json"}),
        *_group("errorMessage", {"errorMessage": "message", "errorLanguage": "programmingLanguage"}),
        *_group("backfill", {"backfillPlanId": "planId", "backfillFrom": "start", "backfillTo": "end"})],
        "state", "rank", "stateOrder", "startTime", "endTime", "lastEventTime", "nominalTime", "startRunFacets",
        "runFacets", "errorMessage", "backfill"),
    _node("datasets", "Dataset", ("namespace", "name"),
          [_lower("name"), *_group("schema", {"schemaVersion": "version"})], "schema"),
    _node("fields", "Field", ("namespace", "name", "field"), [_lower("field")]),
    _node("facets", "Facet", ("of", "namespace", "name", "key"), _group("facet", {"json": "json"}), "facet"),
    _node("schema_versions", "SchemaVersion", ("namespace", "name", "hash"),
          _group("first", {"fields": "fields", "firstSeen": "firstSeen"}), "first"),
    _node("partitions", "Partition", ("namespace", "name", "key"),
          [_union("markers"), _union("staleMarks"), *_group("requiredMarker", {"requiredMarker": "marker"})],
          "markers", "staleMarks", "requiredMarker"),
    _node("partition_versions", "PartitionVersion", ("namespace", "name", "key", "runId"), ()),
)

_RUN = ("Run", ("runId",))
_DATASET = ("Dataset", ("namespace", "name"))
_JOB = ("Job", ("jobNamespace", "jobName"))
_FIELD = ("Field", ("namespace", "name", "field"))
_INPUT_FIELD = ("Field", ("inputNamespace", "inputName", "inputField"))
_PARTITION = ("Partition", ("namespace", "name", "key"))
_VERSION = ("PartitionVersion", ("namespace", "name", "key", "runId"))
_STATS = {"rowCount": "rowCount", "bytes": "bytes"}
_CHECKS = [*_group("dataQuality", {"dataQuality": "json"}), *_group("assertions", {"assertions": "json"})]
_QUALITY = [*_CHECKS, _union("failed"), _union("passed")]
_LINEAGE = [*_seen(), *_group("lineage", {"transformation": "transformation"})]
RELATIONSHIPS: tuple[RelSpec, ...] = (
    _rel("of_job", "OF_JOB", _RUN, ("Job", ("namespace", "name"))),
    _rel("child_of", "CHILD_OF", _RUN, ("Run", ("parentRunId",))),
    _rel("read", "READ", _RUN, _DATASET, [*_group("stats", _STATS, "long"), *_CHECKS],
         "stats", "dataQuality", "assertions"),
    _rel("wrote", "WROTE", _RUN, _DATASET, _group("stats", _STATS, "long"), "stats"),
    _rel("input_to", "INPUT_TO", _DATASET, _JOB, _seen(), "firstSeen", "lastSeen"),
    _rel("outputs", "OUTPUTS", _JOB, _DATASET, _seen(), "firstSeen", "lastSeen"),
    _rel("has_field", "HAS_FIELD", _DATASET, _FIELD),
    _rel("derives_from", "DERIVES_FROM", _FIELD, _INPUT_FIELD, _LINEAGE, "firstSeen", "lastSeen", "lineage"),
    _rel("same_as", "SAME_AS", _DATASET, ("Dataset", ("aliasNamespace", "aliasName")), [*_seen(), _col("type")],
         "firstSeen", "lastSeen", "type"),
    _rel("depends_on", "DEPENDS_ON", _DATASET, _INPUT_FIELD, _LINEAGE, "firstSeen", "lastSeen", "lineage"),
    _rel("has_schema", "HAS_SCHEMA", _DATASET, ("SchemaVersion", ("namespace", "name", "hash"))),
    _rel("has_partition", "HAS_PARTITION", _DATASET, _PARTITION),
    _rel("has_version", "HAS_VERSION", _PARTITION, _VERSION),
    _rel("wrote_partition", "WROTE_PARTITION", ("Run", ("runId",)), _VERSION,
         [*_seen(), _union("markers"), *_group("stats", _STATS, "long"), *_QUALITY],
         "firstSeen", "lastSeen", "markers", "stats", "dataQuality", "assertions", "failed", "passed"),
    _rel("read_partition", "READ_PARTITION", _RUN, _PARTITION, [*_seen(), *_QUALITY],
         "firstSeen", "lastSeen", "dataQuality", "assertions", "failed", "passed"),
)
# Node kinds whose whole values behind hashed keys come in ``<kind>_names`` rows.
_FULL = {"jobs": ("fullNamespace", "fullName"), "datasets": ("fullNamespace", "fullName"),
         "fields": ("fullNamespace", "fullName", "fullField"), "schema_versions": ("fullNamespace", "fullName")}
# Derived here from other rows (run totals from READ/WROTE, see ``_run_totals``).
_DERIVED = frozenset(("run_totals", *(f"{kind}_names" for kind in _FULL)))
KNOWN_KINDS = frozenset((*(spec.kind for spec in NODES), *(spec.kind for spec in RELATIONSHIPS), *_DERIVED))


@dataclass
class Table:
    """One CSV file: a label's nodes or a type's relationships."""

    name: str  # label or relationship type
    header: list[str]
    rows: list[list[Any]] = field(default_factory=list)


@dataclass
class ImportTables:
    nodes: list[Table]
    relationships: list[Table]

    def counts(self) -> dict[str, int]:
        return {table.name: len(table.rows) for table in (*self.nodes, *self.relationships)}


def check_batch(batch: GraphBatch) -> None:
    unknown = set(batch.rows) - KNOWN_KINDS
    if unknown:
        raise TableError(f"bulk import does not map row kinds {sorted(unknown)}: use the live replay")
    consumed = {spec.kind: spec.consumed for spec in (*NODES, *RELATIONSHIPS)}
    consumed.update({f"{kind}_names": frozenset((*_key_of(kind), *full)) for kind, full in _FULL.items()})
    consumed["run_totals"] = frozenset(("runId",))
    for kind, rows in batch.rows.items():
        known = consumed[kind]
        for row in rows:
            if not row.keys() <= known:
                raise TableError(f"bulk import does not map {kind} columns {sorted(row.keys() - known)}: "
                                 "use the live replay")


def _key_of(kind: str) -> tuple[str, ...]:
    return next(spec.keys for spec in NODES if spec.kind == kind)


def run_sort_key(run: Row) -> str:
    """What orders a job's runs for its latest-run pointer (as the ``of_job`` statement ranks them), then runId."""
    return run.get("startTime") or run.get("lastEventTime") or ""


def latest_run(first: tuple[str, str], second: tuple[str, str]) -> tuple[str, str]:
    """The later of two (sort key, runId) candidates: associative and commutative, so any reduce order agrees."""
    return max(first, second)


def _latest_runs(batch: GraphBatch) -> dict[tuple[Any, ...], tuple[str, str]]:
    """(job namespace, name) → (latestRunId, latestRunKey) as the ``of_job`` statement leaves them."""
    keys = {row["runId"]: run_sort_key(row) for row in batch["runs"]}
    latest: dict[tuple[Any, ...], tuple[str, str]] = {}  # job → (key, runId), the largest
    for row in batch["of_job"]:
        job, candidate = (row["namespace"], row["name"]), (keys.get(row["runId"], ""), row["runId"])
        latest[job] = latest_run(latest[job], candidate) if job in latest else candidate
    return {job: (run_id, key) for job, (key, run_id) in latest.items()}


def edge_totals(kind: str, row: Row) -> dict[str, int]:
    """A ``read``/``wrote`` row's part of its run's totals (inputRowCount, inputBytes, outputRowCount, outputBytes)."""
    stats, prefix = row.get("stats"), "input" if kind == "read" else "output"
    if stats is None:
        return {}
    return {prefix + prop: stats[key] for key, prop in (("rowCount", "RowCount"), ("bytes", "Bytes"))
            if stats.get(key) is not None}


def add_totals(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    return {prop: first.get(prop, 0) + second.get(prop, 0) for prop in {*first, *second}}


def _run_totals(batch: GraphBatch) -> dict[str, dict[str, int]]:
    """runId → inputRowCount/inputBytes/outputRowCount/outputBytes: sums over its edges' values, for the runs with a
    ``run_totals`` row (the others have none set)."""
    totals: dict[str, dict[str, int]] = {row["runId"]: {} for row in batch["run_totals"]}
    for kind in ("read", "wrote"):
        for row in batch[kind]:
            if row["runId"] in totals:
                totals[row["runId"]] = add_totals(totals[row["runId"]], edge_totals(kind, row))
    return totals


_TOTALS = ("inputRowCount", "inputBytes", "outputRowCount", "outputBytes")


# A node's id is asked for by its own record and by every relationship record that ends at it (a run's by its
# OF_JOB, READ and WROTE; a dataset's by every run's), ~1.5 µs each: remembered, the latest 300,000 (~100 B each).
@lru_cache(maxsize=300_000)
def node_id(identity: tuple[str, ...]) -> str:
    """A node's import id, from its identity alone (ids are per label): so a row's CSV record needs no other row,
    and the tables of a parallel rebuild are written where their rows are."""
    return hashlib.blake2b(canonical_json(list(identity)).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def node_header(spec: NodeSpec) -> list[str]:
    header = [f":ID({spec.label})", *(f"{key}:string" for key in spec.keys),
              *(f"{column.name}:{column.type}" for column in spec.columns),
              *(f"{prop}:string" for prop in _FULL.get(spec.kind, ()))]
    if spec.kind == "jobs":
        header += ["latestRunId:string", "latestRunKey:string"]
    elif spec.kind == "runs":
        header += [f"{prop}:long" for prop in _TOTALS]
    return header


def node_values(spec: NodeSpec, row: Row, names: Row | None = None, latest: tuple[str, str] | None = None,
                totals: Mapping[str, int] | None = None) -> list[Any]:
    """A node's CSV record: its row, the whole values behind its hashed keys (its ``…_names`` row), and what is
    derived from other rows: a job's latest run (``latest_runs``), a run's totals (``run_totals``)."""
    identity = tuple(row[key] for key in spec.keys)
    values = [node_id(identity), *identity, *(column.get(row) for column in spec.columns)]
    if spec.kind in _FULL:
        values += [(names or {}).get(prop) for prop in _FULL[spec.kind]]
    if spec.kind == "jobs":
        values += list(latest or (None, None))
    elif spec.kind == "runs":
        values += [(totals or {}).get(prop) for prop in _TOTALS]
    return values


def relationship_header(rel: RelSpec) -> list[str]:
    return [f":START_ID({rel.start[0]})", f":END_ID({rel.end[0]})",
            *(f"{column.name}:{column.type}" for column in rel.columns)]


def relationship_values(rel: RelSpec, row: Row) -> list[Any]:
    return [node_id(tuple(row[column] for column in rel.start[1])),
            node_id(tuple(row[column] for column in rel.end[1])), *(column.get(row) for column in rel.columns)]


def import_tables(batch: GraphBatch) -> ImportTables:
    """The node and relationship tables of ``batch`` (one merged batch of every event, as ``graph_batch`` gives
    it). Every relationship end must be a node of the batch (the statements MATCH them)."""
    check_batch(batch)
    latest = _latest_runs(batch)
    totals = _run_totals(batch)
    nodes, identities = [], {}
    for spec in NODES:
        full = {tuple(row[key] for key in spec.keys): row for row in batch[f"{spec.kind}_names"]}
        table = Table(spec.label, node_header(spec))
        known = identities.setdefault(spec.label, set())
        for row in batch[spec.kind]:
            identity = tuple(row[key] for key in spec.keys)
            known.add(identity)
            table.rows.append(node_values(spec, row, full.get(identity), latest.get(identity),
                                          totals.get(row["runId"]) if spec.kind == "runs" else None))
        nodes.append(table)
    relationships = []
    for rel in RELATIONSHIPS:
        table = Table(rel.type, relationship_header(rel))
        for row in batch[rel.kind]:
            for label, columns in (rel.start, rel.end):
                if tuple(row[column] for column in columns) not in identities[label]:
                    raise TableError(f"a {rel.type} row names a node the batch has no row for: {dict(row)}")
            table.rows.append(relationship_values(rel, row))
        relationships.append(table)
    return ImportTables(nodes, relationships)


# --- CSV -----------------------------------------------------------------------------------------------------------
# Array elements are joined by a character none of them holds (neo4j-admin has no escape inside arrays).
ARRAY_DELIMITERS = ("\x1f", "\x1e", "\x1d", "\x1c", "\ue000", "\ue001", "\ue002")


@dataclass(frozen=True)
class CsvFiles:
    """What ``write_csv`` wrote, and the neo4j-admin options the files need."""

    nodes: tuple[tuple[str, Path], ...]
    relationships: tuple[tuple[str, Path], ...]
    array_delimiter: str
    multiline: bool  # some value holds a line break: the parser must allow quoted line breaks (slower)

    def admin_arguments(self, database: str, report_file: Path) -> list[str]:
        """``neo4j-admin database import full`` arguments (after ``full``) importing these files into
        ``database``, replacing it; the tool's report of bad entries goes to ``report_file`` (else: the cwd)."""
        return [
            database,  # first: the --nodes/--relationships options take any number of files after them
            "--overwrite-destination=true",
            f"--report-file={report_file}",
            "--id-type=STRING",
            f"--array-delimiter=U+{ord(self.array_delimiter):04X}",
            f"--multiline-fields={'true' if self.multiline else 'false'}",
            "--skip-duplicate-nodes=false",
            "--skip-bad-relationships=false",
            "--bad-tolerance=0",
            *(f"--nodes={label}={path}" for label, path in self.nodes),
            *(f"--relationships={type_}={path}" for type_, path in self.relationships),
        ]


def _array_delimiter(tables: Iterable[Table]) -> str:
    used: set[str] = set()
    for table in tables:
        arrays = [index for index, name in enumerate(table.header) if name.endswith("[]")]
        for row in table.rows if arrays else ():
            for index in arrays:
                for value in row[index] or ():
                    used.update(value)
    for candidate in ARRAY_DELIMITERS:
        if candidate not in used:
            return candidate
    raise TableError("every array delimiter candidate occurs in an array value")


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def csv_line(values: Iterable[Any], array_delimiter: str) -> str:
    """One CSV record: null → an empty unquoted field (no property), a string always quoted (so "" stays an empty
    string), an int as digits, a list as one quoted field of its elements joined by ``array_delimiter``."""
    fields: list[str] = []
    append = fields.append
    for value in values:
        kind = type(value)  # exact types, cheapest first: strings are most of the values
        if kind is str:
            append(f'"{value}"' if '"' not in value else _quoted(value))
        elif value is None:
            append("")
        elif kind is int:
            append(str(value))
        elif kind is list:
            append(_quoted(array_delimiter.join(value)))
        elif kind is bool:
            raise TableError(f"no booleans in the graph's properties: {value!r}")
        else:
            raise TableError(f"no CSV form for {kind.__name__} {value!r}")
    return ",".join(fields) + "\n"


def write_csv(tables: ImportTables, directory: Path) -> CsvFiles:
    """One file per table (header first) under ``directory``; tables without rows are left out."""
    directory.mkdir(parents=True, exist_ok=True)
    everything = [*tables.nodes, *tables.relationships]
    delimiter = _array_delimiter(everything)
    multiline = False
    written: dict[str, list[tuple[str, Path]]] = {"nodes": [], "relationships": []}
    for group, group_tables in (("nodes", tables.nodes), ("relationships", tables.relationships)):
        for table in group_tables:
            if not table.rows:
                continue
            path = directory / f"{group}-{table.name}.csv"
            with path.open("w", encoding="utf-8", newline="") as out:
                out.write(",".join(table.header) + "\n")
                for row in table.rows:
                    line = csv_line(row, delimiter)
                    if not multiline and ("\n" in line[:-1] or "\r" in line):
                        multiline = True
                    out.write(line)
            written[group].append((table.name, path))
    return CsvFiles(tuple(written["nodes"]), tuple(written["relationships"]), delimiter, multiline)


def with_coverage(files: CsvFiles, coverage: Coverage, directory: Path) -> CsvFiles:
    """``files`` and one more: the ``graph.coverage`` node of the offsets the import holds (its own id space)."""
    path = directory / f"nodes-{COVERAGE_LABEL}.csv"
    node = coverage.node()
    header = [f":ID({COVERAGE_LABEL})", "rebuild:string", "topic:string", "partitions:int[]", "ends:long[]"]
    values = ["coverage", node["rebuild"], node["topic"], [str(p) for p in node["partitions"]],
              [str(end) for end in node["ends"]]]
    path.write_text(",".join(header) + "\n" + csv_line(values, files.array_delimiter), encoding="utf-8")
    return dataclasses.replace(files, nodes=(*files.nodes, (COVERAGE_LABEL, path)))
