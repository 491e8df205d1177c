"""Compare what the pipeline built — graph rows and drift alerts — with a workload's ground truth. Pure.

``check(truth, graph_rows, alerts)`` reports, per element kind (the ``FINGERPRINT_QUERIES`` kinds of
``graph.fingerprint``, plus ``alerts``):

- missing: expected, not found;
- extra: found, not expected;
- wrong: same identity, different value (``Run.state``, ``WROTE.rowCount``/``bytes``,
  ``DERIVES_FROM``/``DEPENDS_ON.transformation``, ``SAME_AS.type``, the lineage edges' ``firstSeen``/``lastSeen``;
  an alert's ``severity`` or ``changeId``);
- duplicates: one identity found more than once. The graph MERGEs, so it should hold none, but concurrent MERGEs
  of one relationship in two transactions can create two, and a missing uniqueness constraint two nodes; for
  alerts, the same alert (id) published twice.

Only the workload's part of a shared graph is compared (``Scope``, by default the truth's): jobs in its job
namespaces, datasets, fields and schema versions in its dataset namespaces (exact names), runs with its run ids or
of its jobs, and relationships with at least one end in scope. Rows outside are counted as ``ignored``.

``GRAPH_QUERIES`` fetch exactly those rows from Neo4j (constant Cypher, parameters from ``query_parameters``), in
the shape of ``FINGERPRINT_QUERIES`` results; each returns one row per node or relationship (no DISTINCT), so
duplicates show. ``rows_from_graph_batch`` gives the same rows for a ``GraphBatch`` — the graph the sink would
write for a batch of normalized events — for checks without Neo4j.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_lineage_devtools.workload import KINDS, GroundTruth, KindSpec, Scope, alert_id

__all__ = [
    "ALERT_KIND",
    "GRAPH_QUERIES",
    "CheckReport",
    "KindReport",
    "check",
    "format_report",
    "query_parameters",
    "rows_from_graph_batch",
]

ALERT_KIND = "alerts"
_ALERT_SPEC = KindSpec(("namespace", "name", "previousVersion", "newVersion"), ("severity", "alertId"))

Row = tuple[Any, ...]


# --- Cypher ----------------------------------------------------------------------------------------------------------
# Parameters: $jobNamespaces, $datasetNamespaces, $runIds (lists of strings; ``query_parameters``).
# A run is in scope when its id is one of the workload's or it has an OF_JOB edge to one of its jobs. Branches of a
# UNION inside CALL are deduplicated by entity, not by value: two relationships (or nodes) that look alike still
# come out as two rows, as a duplicate must.
def _union(returned: str, branches: Sequence[str], projection: str) -> str:
    body = "\n  UNION\n".join(f"  {branch} RETURN {returned}" for branch in branches)
    return f"CALL () {{\n{body}\n}}\nRETURN {projection}"


_RUN_OF_JOB = "MATCH (scoped:Job)<-[:OF_JOB]-({run}:Run)"  # the run belongs to one of the workload's jobs
_IN_JOBS = "scoped.namespace IN $jobNamespaces"


def _run_scoped(pattern: str, run: str, returned: str, projection: str, others: Sequence[str] = ()) -> str:
    """A relationship in scope through its run (``run``: the pattern's run variable), or through ``others``."""
    joined = _RUN_OF_JOB.format(run=run) + ("" if pattern == f"({run}:Run)" else f", {pattern}")
    branches = [*others, f"MATCH {pattern} WHERE {run}.runId IN $runIds", f"{joined} WHERE {_IN_JOBS}"]
    return _union(returned, branches, projection)


GRAPH_QUERIES: dict[str, str] = {
    "Job": "MATCH (j:Job) WHERE j.namespace IN $jobNamespaces RETURN j.namespace AS namespace, j.name AS name",
    "Run": _run_scoped("(r:Run)", "r", "r", "r.runId AS runId, r.state AS state"),
    "Dataset": "MATCH (d:Dataset) WHERE d.namespace IN $datasetNamespaces "
               "RETURN d.namespace AS namespace, d.name AS name",
    "Field": "MATCH (f:Field) WHERE f.namespace IN $datasetNamespaces "
             "RETURN f.namespace AS namespace, f.name AS name, f.field AS field",
    "SchemaVersion": "MATCH (s:SchemaVersion) WHERE s.namespace IN $datasetNamespaces "
                     "RETURN s.namespace AS namespace, s.name AS name, s.hash AS hash",
    "OF_JOB": _run_scoped("(r:Run)-[e:OF_JOB]->(j:Job)", "r", "r, e, j",
                          "r.runId AS runId, j.namespace AS namespace, j.name AS name",
                          ["MATCH (r:Run)-[e:OF_JOB]->(j:Job) WHERE j.namespace IN $jobNamespaces"]),
    "CHILD_OF": _union("r, e, p", [
        "MATCH (r:Run)-[e:CHILD_OF]->(p:Run) WHERE r.runId IN $runIds",
        "MATCH (r:Run)-[e:CHILD_OF]->(p:Run) WHERE p.runId IN $runIds",
        f"{_RUN_OF_JOB.format(run='r')}, (r)-[e:CHILD_OF]->(p:Run) WHERE {_IN_JOBS}",
        f"{_RUN_OF_JOB.format(run='p')}, (r:Run)-[e:CHILD_OF]->(p) WHERE {_IN_JOBS}",
    ], "r.runId AS runId, p.runId AS parentRunId"),
    "READ": _run_scoped("(r:Run)-[e:READ]->(d:Dataset)", "r", "r, e, d",
                        "r.runId AS runId, d.namespace AS namespace, d.name AS name",
                        ["MATCH (r:Run)-[e:READ]->(d:Dataset) WHERE d.namespace IN $datasetNamespaces"]),
    "WROTE": _run_scoped("(r:Run)-[e:WROTE]->(d:Dataset)", "r", "r, e, d",
                         "r.runId AS runId, d.namespace AS namespace, d.name AS name, "
                         "e.rowCount AS rowCount, e.bytes AS bytes",
                         ["MATCH (r:Run)-[e:WROTE]->(d:Dataset) WHERE d.namespace IN $datasetNamespaces"]),
    "INPUT_TO": _union("d, e, j", [
        "MATCH (d:Dataset)-[e:INPUT_TO]->(j:Job) WHERE d.namespace IN $datasetNamespaces",
        "MATCH (d:Dataset)-[e:INPUT_TO]->(j:Job) WHERE j.namespace IN $jobNamespaces",
    ], "d.namespace AS namespace, d.name AS name, j.namespace AS jobNamespace, j.name AS jobName, "
       "e.firstSeen AS firstSeen, e.lastSeen AS lastSeen"),
    "OUTPUTS": _union("j, e, d", [
        "MATCH (j:Job)-[e:OUTPUTS]->(d:Dataset) WHERE j.namespace IN $jobNamespaces",
        "MATCH (j:Job)-[e:OUTPUTS]->(d:Dataset) WHERE d.namespace IN $datasetNamespaces",
    ], "j.namespace AS jobNamespace, j.name AS jobName, d.namespace AS namespace, d.name AS name, "
       "e.firstSeen AS firstSeen, e.lastSeen AS lastSeen"),
    "HAS_FIELD": _union("d, e, f", [
        "MATCH (d:Dataset)-[e:HAS_FIELD]->(f:Field) WHERE d.namespace IN $datasetNamespaces",
        "MATCH (d:Dataset)-[e:HAS_FIELD]->(f:Field) WHERE f.namespace IN $datasetNamespaces",
    ], "d.namespace AS namespace, d.name AS name, f.namespace AS fieldNamespace, f.name AS fieldName, "
       "f.field AS field"),
    "DERIVES_FROM": _union("o, e, i", [
        "MATCH (o:Field)-[e:DERIVES_FROM]->(i:Field) WHERE o.namespace IN $datasetNamespaces",
        "MATCH (o:Field)-[e:DERIVES_FROM]->(i:Field) WHERE i.namespace IN $datasetNamespaces",
    ], "o.namespace AS namespace, o.name AS name, o.field AS field, i.namespace AS inputNamespace, "
       "i.name AS inputName, i.field AS inputField, e.transformation AS transformation, "
       "e.firstSeen AS firstSeen, e.lastSeen AS lastSeen"),
    "SAME_AS": _union("d, e, a", [
        "MATCH (d:Dataset)-[e:SAME_AS]->(a:Dataset) WHERE d.namespace IN $datasetNamespaces",
        "MATCH (d:Dataset)-[e:SAME_AS]->(a:Dataset) WHERE a.namespace IN $datasetNamespaces",
    ], "d.namespace AS namespace, d.name AS name, a.namespace AS aliasNamespace, a.name AS aliasName, "
       "e.type AS type, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen"),
    "DEPENDS_ON": _union("d, e, i", [
        "MATCH (d:Dataset)-[e:DEPENDS_ON]->(i:Field) WHERE d.namespace IN $datasetNamespaces",
        "MATCH (d:Dataset)-[e:DEPENDS_ON]->(i:Field) WHERE i.namespace IN $datasetNamespaces",
    ], "d.namespace AS namespace, d.name AS name, i.namespace AS inputNamespace, i.name AS inputName, "
       "i.field AS inputField, e.transformation AS transformation, e.firstSeen AS firstSeen, e.lastSeen AS lastSeen"),
    "HAS_SCHEMA": _union("d, e, s", [
        "MATCH (d:Dataset)-[e:HAS_SCHEMA]->(s:SchemaVersion) WHERE d.namespace IN $datasetNamespaces",
        "MATCH (d:Dataset)-[e:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.namespace IN $datasetNamespaces",
    ], "d.namespace AS namespace, d.name AS name, s.namespace AS schemaNamespace, s.name AS schemaName, "
       "s.hash AS hash"),
}


def query_parameters(scope: Scope | GroundTruth) -> dict[str, list[str]]:
    """Parameters of every ``GRAPH_QUERIES`` statement for a scope (or a truth's scope), sorted lists."""
    scope = scope.scope if isinstance(scope, GroundTruth) else scope
    return {"jobNamespaces": sorted(scope.job_namespaces), "datasetNamespaces": sorted(scope.dataset_namespaces),
            "runIds": sorted(scope.run_ids)}


# --- rows without Neo4j ----------------------------------------------------------------------------------------------
def rows_from_graph_batch(batch: Any) -> dict[str, list[dict[str, Any]]]:
    """A ``graph.batch.GraphBatch`` as the rows ``FINGERPRINT_QUERIES`` would return once it is written."""

    def pick(name: str, kind: str, **derived: Any) -> list[dict[str, Any]]:
        out = []
        for row in batch[name]:
            values = {column: row.get(column) for column in KINDS[kind].columns}
            for column, compute in derived.items():
                values[column] = compute(row)
            out.append(values)
        return out

    def stat(key: str) -> Any:
        return lambda row: (row.get("stats") or {}).get(key)

    return {
        "Job": pick("jobs", "Job"), "Run": pick("runs", "Run"), "Dataset": pick("datasets", "Dataset"),
        "Field": pick("fields", "Field"), "SchemaVersion": pick("schema_versions", "SchemaVersion"),
        "OF_JOB": pick("of_job", "OF_JOB"), "CHILD_OF": pick("child_of", "CHILD_OF"), "READ": pick("read", "READ"),
        "WROTE": pick("wrote", "WROTE", rowCount=stat("rowCount"), bytes=stat("bytes")),
        "INPUT_TO": pick("input_to", "INPUT_TO"), "OUTPUTS": pick("outputs", "OUTPUTS"),
        "HAS_FIELD": pick("has_field", "HAS_FIELD", fieldNamespace=lambda r: r["namespace"],
                          fieldName=lambda r: r["name"]),
        "DERIVES_FROM": pick("derives_from", "DERIVES_FROM",
                             transformation=lambda r: (r.get("lineage") or {}).get("transformation")),
        "SAME_AS": pick("same_as", "SAME_AS"),
        "DEPENDS_ON": pick("depends_on", "DEPENDS_ON",
                           transformation=lambda r: (r.get("lineage") or {}).get("transformation")),
        "HAS_SCHEMA": pick("has_schema", "HAS_SCHEMA", schemaNamespace=lambda r: r["namespace"],
                           schemaName=lambda r: r["name"]),
    }


# --- the report ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KindReport:
    """The comparison of one element kind. Rows are dicts with the kind's columns."""

    kind: str
    expected: int  # rows in the truth
    found: int  # rows in scope in the input (duplicates included)
    missing: tuple[dict[str, Any], ...] = ()
    extra: tuple[dict[str, Any], ...] = ()
    wrong: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ()  # (expected, found)
    duplicates: tuple[tuple[dict[str, Any], int], ...] = ()  # (row, times found)
    ignored: int = 0  # rows outside the scope

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.wrong or self.duplicates)

    def counts(self) -> dict[str, int]:
        return {"expected": self.expected, "found": self.found, "missing": len(self.missing),
                "extra": len(self.extra), "wrong": len(self.wrong), "duplicates": len(self.duplicates),
                "ignored": self.ignored}


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Per kind (graph kinds in ``KINDS`` order, then ``alerts``), what was checked and what differs."""

    kinds: Mapping[str, KindReport] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(report.ok for report in self.kinds.values())

    def counts(self) -> dict[str, dict[str, int]]:
        return {kind: report.counts() for kind, report in self.kinds.items()}

    def problems(self) -> int:
        """Missing + extra + wrong + duplicated elements over all kinds."""
        return sum(c["missing"] + c["extra"] + c["wrong"] + c["duplicates"] for c in self.counts().values())

    def __getitem__(self, kind: str) -> KindReport:
        return self.kinds[kind]


def check(truth: GroundTruth, graph_rows: Mapping[str, Iterable[Mapping[str, Any] | Sequence[Any]]] | None,
          alerts: Iterable[Mapping[str, Any]] | None, scope: Scope | None = None) -> CheckReport:
    """Compare graph rows (per ``KINDS`` name: ``record.data()`` dicts, or value lists in column order) and drift
    alerts (``SchemaDriftAlert`` records, or flat ``schemaChanges`` items) with the truth.

    ``None`` skips that part; a kind absent from ``graph_rows`` counts as no rows (everything of it missing).
    ``scope``: what of the input belongs to the workload (default: the truth's).
    """
    scope = scope or truth.scope
    reports: dict[str, KindReport] = {}
    if graph_rows is not None:
        unknown = set(graph_rows) - set(KINDS)
        if unknown:
            raise ValueError(f"not graph kinds: {sorted(unknown)} (known: {list(KINDS)})")
        rows = {kind: [_as_row(KINDS[kind], row) for row in graph_rows.get(kind, ())] for kind in KINDS}
        runs = scope.run_ids | {row[0] for row in rows["OF_JOB"] if row[1] in scope.job_namespaces}
        for kind, spec in KINDS.items():
            keep = _SCOPES[kind](scope, runs)
            inside = [row for row in rows[kind] if keep(row)]
            reports[kind] = _compare(kind, spec, truth.graph[kind], inside, len(rows[kind]) - len(inside))
    if alerts is not None:
        expected = {(*a[:4], a.severity, alert_id(*a[:4])) for a in truth.alerts}
        alerts = list(alerts)
        superseded = {_superseded_key(alert) for alert in alerts if alert.get("supersedes")}
        found = [_alert_row(alert) for alert in alerts if _change_key(alert) not in superseded]
        inside = [row for row in found if row[0] in scope.dataset_namespaces]
        reports[ALERT_KIND] = _compare(ALERT_KIND, _ALERT_SPEC, expected, inside, len(found) - len(inside))
    return CheckReport(reports)


def _as_row(spec: KindSpec, row: Mapping[str, Any] | Sequence[Any]) -> Row:
    if isinstance(row, Mapping):
        return tuple(row.get(column) for column in spec.columns)
    values = tuple(row)
    if len(values) != len(spec.columns):
        raise ValueError(f"a row of {len(values)} values where {spec.columns} are expected: {values!r}")
    return values


def _dataset_of(alert: Mapping[str, Any]) -> tuple[Any, Any]:
    dataset = alert.get("dataset")
    return (dataset.get("namespace"), dataset.get("name")) if isinstance(dataset, Mapping) else (
        alert.get("namespace"), alert.get("name"))


def _change_key(alert: Mapping[str, Any]) -> tuple[Any, ...]:
    """(namespace, name, previousVersion, newVersion, changedAt) of an alert or a ``schemaChanges`` item."""
    return (*_dataset_of(alert), alert.get("previousVersion"), alert.get("newVersion"),
            alert.get("changedAt") or alert.get("eventTime"))


def _superseded_key(alert: Mapping[str, Any]) -> tuple[Any, ...]:
    """The ``_change_key`` of the change an alert supersedes (a late version split it in two)."""
    split = alert["supersedes"]
    return (*_dataset_of(alert), split.get("previousVersion"), split.get("newVersion"), split.get("changedAt"))


def _alert_row(alert: Mapping[str, Any]) -> Row:
    """(namespace, name, previousVersion, newVersion, severity, alertId) of an alert or a ``schemaChanges`` item;
    an item without ``alertId`` gets the one its identity implies (nothing to compare)."""
    identity = (*_dataset_of(alert), alert.get("previousVersion"), alert.get("newVersion"))
    given = alert.get("changeId") or alert.get("alertId")  # the alert sink's alertId names the source, changeId this
    if given is None and all(isinstance(part, str) for part in identity):
        given = alert_id(*identity)
    return (*identity, alert.get("severity"), given)


def _scope_rules() -> dict[str, Any]:
    """Per kind: scope, runs in scope → predicate over the kind's row tuples."""
    def by(*checks: tuple[int, str]) -> Any:
        def build(scope: Scope, runs: frozenset[str] | set[str]) -> Any:
            sets = {"jobs": scope.job_namespaces, "datasets": scope.dataset_namespaces, "runs": runs}
            tests = [(index, sets[name]) for index, name in checks]
            return lambda row: any(row[index] in members for index, members in tests)
        return build

    return {
        "Job": by((0, "jobs")), "Run": by((0, "runs")), "Dataset": by((0, "datasets")),
        "Field": by((0, "datasets")), "SchemaVersion": by((0, "datasets")),
        "OF_JOB": by((1, "jobs"), (0, "runs")), "CHILD_OF": by((0, "runs"), (1, "runs")),
        "READ": by((0, "runs"), (1, "datasets")), "WROTE": by((0, "runs"), (1, "datasets")),
        "INPUT_TO": by((0, "datasets"), (2, "jobs")), "OUTPUTS": by((0, "jobs"), (2, "datasets")),
        "HAS_FIELD": by((0, "datasets"), (2, "datasets")), "DERIVES_FROM": by((0, "datasets"), (3, "datasets")),
        "SAME_AS": by((0, "datasets"), (2, "datasets")), "DEPENDS_ON": by((0, "datasets"), (2, "datasets")),
        "HAS_SCHEMA": by((0, "datasets"), (2, "datasets")),
    }


_SCOPES = _scope_rules()


def _compare(kind: str, spec: KindSpec, expected: Iterable[Row], found: list[Row], ignored: int) -> KindReport:
    width = len(spec.identity)
    want = {row[:width]: row[width:] for row in expected}
    seen: dict[Row, list[Row]] = defaultdict(list)
    for row in found:
        seen[row[:width]].append(row[width:])
    columns = spec.columns

    def as_dict(identity: Row, values: Row) -> dict[str, Any]:
        return dict(zip(columns, identity + values, strict=True))

    missing = [as_dict(identity, values) for identity, values in want.items() if identity not in seen]
    extra, wrong, duplicates = [], [], []
    for identity, values in seen.items():
        expected_values = want.get(identity)
        if expected_values is None:
            extra += [as_dict(identity, value) for value in dict.fromkeys(values)]  # repeats: see duplicates
        else:
            wrong += [(as_dict(identity, expected_values), as_dict(identity, value))
                      for value in dict.fromkeys(values) if value != expected_values]
        if len(values) > 1:
            duplicates.append((as_dict(identity, values[0]), len(values)))
    return KindReport(kind, len(want), len(found), tuple(sorted(missing, key=_order)),
                      tuple(sorted(extra, key=_order)), tuple(sorted(wrong, key=lambda pair: _order(pair[0]))),
                      tuple(sorted(duplicates, key=lambda pair: _order(pair[0]))), ignored)


def _order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple((value is None, str(value)) for value in row.values())


# --- text ------------------------------------------------------------------------------------------------------------
def format_report(report: CheckReport, limit: int = 20) -> str:
    """A table of counts per kind, then up to ``limit`` examples of each kind of difference."""
    checked = sum(r.expected for r in report.kinds.values())
    head = (f"OK: {checked} expected elements, all found, nothing extra, wrong or duplicated" if report.ok else
            f"MISMATCH: {report.problems()} differences over {checked} expected elements")
    lines = [head, "", f"{'kind':<14} {'expected':>9} {'found':>9} {'missing':>8} {'extra':>7} {'wrong':>7} "
                       f"{'dupl.':>6} {'ignored':>8}"]
    for kind, r in report.kinds.items():
        c = r.counts()
        lines.append(f"{kind:<14} {c['expected']:>9} {c['found']:>9} {c['missing']:>8} {c['extra']:>7} "
                     f"{c['wrong']:>7} {c['duplicates']:>6} {c['ignored']:>8}" + ("" if r.ok else "  <--"))
    for kind, r in report.kinds.items():
        if r.ok:
            continue
        sections: list[tuple[str, list[str]]] = [
            ("missing", [_text(row) for row in r.missing]),
            ("extra", [_text(row) for row in r.extra]),
            ("wrong", [f"{_text(found)}  expected {_text(_values(expected, kind))}" for expected, found in r.wrong]),
            ("duplicated", [f"{_text(row)}  x{times}" for row, times in r.duplicates]),
        ]
        for title, items in sections:
            if items:
                lines += ["", f"{kind} {title} ({len(items)}):"]
                lines += [f"  {item}" for item in items[:limit]]
                if len(items) > limit:
                    lines.append(f"  … {len(items) - limit} more")
    return "\n".join(lines)


def _values(row: Mapping[str, Any], kind: str) -> dict[str, Any]:
    spec = _ALERT_SPEC if kind == ALERT_KIND else KINDS[kind]
    return {column: row[column] for column in spec.values}


def _text(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "), default=str)
