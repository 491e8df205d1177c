"""What the lineage server reads from the graph: fixed, parameterized Cypher in read transactions, each with a
server-side time limit, every list bounded. Answers are plain dicts and tuples; the API shapes them.

Nodes are looked up by their stored keys (``graph.model.stored_key``) and answered with their whole names.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from neo4j import Driver, Query, RoutingControl
from neo4j.exceptions import ClientError

from kafka_lineage.server.node_ids import NodeId
from kafka_lineage.sinks.graph.model import stored_key
from kafka_lineage.sinks.graph.queries import known

_NS = "coalesce({0}.fullNamespace, {0}.namespace)"
_NAME = "coalesce({0}.fullName, {0}.name)"
_RUN = ("{runId: r.runId, state: r.state, startTime: r.startTime, endTime: r.endTime, "
        "lastEventTime: r.lastEventTime, nominalStartTime: r.nominalStartTime, nominalEndTime: r.nominalEndTime, "
        "errorMessage: r.errorMessage, inputRowCount: r.inputRowCount, outputRowCount: r.outputRowCount, "
        "inputBytes: r.inputBytes, outputBytes: r.outputBytes}")
LATEST_RUNS = 10  # runs shown with a job (Marquez's latestRuns)

_NAMESPACES = (
    "CALL { MATCH (d:Dataset) RETURN " + _NS.format("d") + " AS namespace, null AS time "
    "UNION ALL MATCH (j:Job) RETURN " + _NS.format("j") + " AS namespace, j.lastEventTime AS time } "
    "WITH namespace, min(time) AS firstTime, max(time) AS lastTime "
    "RETURN namespace, firstTime, lastTime ORDER BY namespace LIMIT $limit")

# A dataset: names, current schema version and its fields, first schema seen, the last completed write.
_DATASET_FIELDS = (
    "CALL (d) { OPTIONAL MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) RETURN min(s.firstSeen) AS firstSeen, "
    "collect(CASE WHEN s.hash = d.schemaVersion THEN s.fields END)[0] AS fields } "
    "CALL (d) { OPTIONAL MATCH (d)<-[:WROTE]-(r:Run {state: 'COMPLETE'}) RETURN max(r.endTime) AS lastWrite } "
    "RETURN " + _NS.format("d") + " AS namespace, " + _NAME.format("d") + " AS name, d.schemaVersion AS version, "
    "fields, firstSeen, lastWrite")
_DATASETS = ("MATCH (d:Dataset {namespace: $namespace}) WITH d ORDER BY d.name SKIP $offset LIMIT $limit "
             + _DATASET_FIELDS)
_DATASET = "MATCH (d:Dataset {namespace: $namespace, name: $name}) " + _DATASET_FIELDS
_COUNT_DATASETS = "MATCH (d:Dataset {namespace: $namespace}) RETURN count(d)"

# A job: names, type, inputs and outputs, its first run's start and its latest runs (bounded).
_JOB_FIELDS = (
    "CALL (j) { OPTIONAL MATCH (r:Run)-[:OF_JOB]->(j) RETURN min(r.startTime) AS firstRun } "
    "RETURN " + _NS.format("j") + " AS namespace, " + _NAME.format("j") + " AS name, "
    "j.lastEventTime AS lastEventTime, j.processingType AS processingType, j.jobType AS jobType, "
    "j.integration AS integration, firstRun, "
    "[(d:Dataset)-[:INPUT_TO]->(j) | [" + _NS.format("d") + ", " + _NAME.format("d") + "]] AS inputs, "
    "[(j)-[:OUTPUTS]->(d:Dataset) | [" + _NS.format("d") + ", " + _NAME.format("d") + "]] AS outputs, "
    "COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) WITH r ORDER BY coalesce(r.startTime, r.lastEventTime) DESC "
    "LIMIT $latest RETURN " + _RUN + " } AS runs")
_JOBS = ("MATCH (j:Job {namespace: $namespace}) WITH j ORDER BY j.name SKIP $offset LIMIT $limit "
         + _JOB_FIELDS)
_JOB = "MATCH (j:Job {namespace: $namespace, name: $name}) " + _JOB_FIELDS
_COUNT_JOBS = "MATCH (j:Job {namespace: $namespace}) RETURN count(j)"
_RUNS = ("MATCH (j:Job {namespace: $namespace, name: $name}) OPTIONAL MATCH (r:Run)-[:OF_JOB]->(j) "
         "WITH j, r ORDER BY coalesce(r.startTime, r.lastEventTime) DESC SKIP $offset LIMIT $limit "
         "RETURN count(j) > 0 AS found, [x IN collect(CASE WHEN r IS NOT NULL THEN " + _RUN + " END) "
         "WHERE x IS NOT NULL] AS runs")
_VERSIONS = ("MATCH (d:Dataset {namespace: $namespace, name: $name}) "
             "OPTIONAL MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) "
             "WITH d, s ORDER BY s.firstSeen DESC SKIP $offset LIMIT $limit "
             "RETURN count(d) > 0 AS found, [x IN collect(CASE WHEN s IS NOT NULL THEN "
             "{version: s.hash, fields: s.fields, firstSeen: s.firstSeen} END) WHERE x IS NOT NULL] AS versions")
_SEARCH = (
    "CALL { MATCH (d:Dataset) WHERE $datasets AND " + _NAME.format("d") + " =~ $pattern "
    "RETURN 'DATASET' AS type, " + _NS.format("d") + " AS namespace, " + _NAME.format("d") + " AS name, "
    "null AS time "
    "UNION ALL MATCH (j:Job) WHERE $jobs AND " + _NAME.format("j") + " =~ $pattern "
    "RETURN 'JOB' AS type, " + _NS.format("j") + " AS namespace, " + _NAME.format("j") + " AS name, "
    "j.lastEventTime AS time } "
    "WITH type, namespace, name, time ORDER BY name, namespace, type "
    "WITH collect([type, namespace, name, time]) AS rows "
    "RETURN size(rows) AS total, rows[0..$limit] AS rows")

# One breadth-first level of the table-level graph, both directions: every lineage edge at the frontier nodes.
_NEIGHBOURS = (
    "UNWIND $ids AS id MATCH (a) WHERE elementId(a) = id MATCH (a)-[e:INPUT_TO|OUTPUTS]-(b) WHERE " + known("e")
    + " WITH a, e, b LIMIT $rows "
    "RETURN collect([elementId(startNode(e)), elementId(endNode(e)), elementId(b), "
    "CASE WHEN b:Job THEN 'job' ELSE 'dataset' END, " + _NS.format("b") + ", " + _NAME.format("b") + "])")
_START = {
    "dataset": "MATCH (n:Dataset {namespace: $namespace, name: $name}) RETURN elementId(n)",
    "job": "MATCH (n:Job {namespace: $namespace, name: $name}) RETURN elementId(n)",
}
# Column lineage, one level: DERIVES_FROM points from a derived (output) column to its input column.
_FIELD_LEVEL = {
    "up": "UNWIND $ids AS id MATCH (a:Field)-[e:DERIVES_FROM]->(b:Field) WHERE elementId(a) = id AND " + known("e"),
    "down": "UNWIND $ids AS id MATCH (a:Field)<-[e:DERIVES_FROM]-(b:Field) WHERE elementId(a) = id AND " + known("e"),
}
_FIELD_RETURN = (
    " WITH a, e, b LIMIT $rows RETURN collect([elementId(startNode(e)), elementId(endNode(e)), e.transformation, "
    "elementId(b), " + _NS.format("b") + ", " + _NAME.format("b") + ", coalesce(b.fullField, b.field)])")
_START_FIELDS = ("MATCH (f:Field {namespace: $namespace, name: $name}) WHERE $field IS NULL OR f.field = $field "
                 "RETURN collect([elementId(f), " + _NS.format("f") + ", " + _NAME.format("f") + ", "
                 "coalesce(f.fullField, f.field)])")
_FIELD_TYPES = ("UNWIND $datasets AS key MATCH (d:Dataset {namespace: key[0], name: key[1]}) "
                "RETURN key, [(d)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.hash = d.schemaVersion | s.fields][0]")


_RUN_DETAIL = (
    "MATCH (r:Run {runId: $runId}) "
    "RETURN " + _RUN.replace("{runId:", "{errorLanguage: r.errorLanguage, runId:") + " AS run, "
    "[(r)-[:OF_JOB]->(j:Job) | {namespace: " + _NS.format("j") + ", name: " + _NAME.format("j") + "}][0] AS job, "
    "[(r)-[e:READ]->(d:Dataset) | {namespace: " + _NS.format("d") + ", name: " + _NAME.format("d") + ", "
    "rowCount: e.rowCount, bytes: e.bytes, dataQuality: e.dataQuality}] AS inputs, "
    "[(r)-[e:WROTE]->(d:Dataset) | {namespace: " + _NS.format("d") + ", name: " + _NAME.format("d") + ", "
    "rowCount: e.rowCount, bytes: e.bytes}] AS outputs, "
    "[(r)-[:CHILD_OF]->(p:Run) | {runId: p.runId, state: p.state, "
    "job: [(p)-[:OF_JOB]->(pj:Job) | {namespace: " + _NS.format("pj") + ", name: " + _NAME.format("pj") + "}][0]}][0]"
    " AS parent, "
    "COLLECT { MATCH (c:Run)-[:CHILD_OF]->(r) WITH c ORDER BY c.startTime LIMIT $children RETURN {runId: c.runId, "
    "state: c.state, startTime: c.startTime, endTime: c.endTime, "
    "job: [(c)-[:OF_JOB]->(cj:Job) | {namespace: " + _NS.format("cj") + ", name: " + _NAME.format("cj") + "}][0]} }"
    " AS children")
MAX_CHILDREN = 1000
# The runs that wrote a dataset (row counts, bytes) and the data-quality metrics of the runs that read it, newest
# first, bounded: a dataset's page shows them over time.
_DATASET_RUNS = (
    "MATCH (d:Dataset {namespace: $namespace, name: $name}) "
    "RETURN COLLECT { MATCH (d)<-[e:WROTE]-(r:Run) WITH r, e ORDER BY coalesce(r.endTime, r.lastEventTime) DESC "
    "LIMIT $limit RETURN {runId: r.runId, state: r.state, endTime: r.endTime, startTime: r.startTime, "
    "rowCount: e.rowCount, bytes: e.bytes} } AS writes, "
    "COLLECT { MATCH (d)<-[e:READ]-(r:Run) WHERE e.dataQuality IS NOT NULL "
    "WITH r, e ORDER BY coalesce(r.endTime, r.lastEventTime) DESC LIMIT $limit "
    "RETURN {runId: r.runId, state: r.state, endTime: r.endTime, dataQuality: e.dataQuality} } AS quality")
# The latest run of each job (``$ids``), by then (``$asOf``): the state a lineage graph colours its jobs with.
_LATEST_RUNS = (
    "UNWIND $ids AS id MATCH (j:Job) WHERE elementId(j) = id "
    "RETURN id, COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) WHERE $asOf IS NULL OR r.startTime <= $asOf "
    "WITH r ORDER BY coalesce(r.startTime, r.lastEventTime) DESC LIMIT 1 RETURN " + _RUN + " }[0]")


class NotFound(LookupError):
    """The node asked for is not in the graph; the message names it."""


class QueryTimeout(TimeoutError):
    """A question ran out of the server's time limit (LINEAGE_SERVER_QUERY_TIMEOUT)."""


@dataclass
class Graph:
    """Nodes (element id → NodeId) and stored edges (element id pairs, with a transformation for columns), what the
    walk stopped on ("nodes", "edges", "time") and the start nodes' ids."""

    nodes: dict[str, NodeId] = field(default_factory=dict)
    edges: dict[tuple[str, str], str] = field(default_factory=dict)
    starts: list[str] = field(default_factory=list)
    stopped: str | None = None


def like_pattern(query: str) -> str:
    """Marquez's search: case-insensitive containment, ``%`` any run of characters, ``_`` one character."""
    parts = [".*" if c == "%" else "." if c == "_" else re.escape(c) for c in query]
    return "(?is).*" + "".join(parts) + ".*"


def schema_fields(fields_json: str | None) -> list[dict[str, Any]]:
    """A SchemaVersion's fields JSON (the schema facet's ``fields``) as a list; [] when absent or unreadable."""
    try:
        fields = json.loads(fields_json) if fields_json else []
    except ValueError:
        return []
    return [f for f in fields if isinstance(f, dict)] if isinstance(fields, list) else []


class GraphStore:
    """Read-only questions to the lineage graph, each bounded by ``timeout`` seconds and the row limits given."""

    def __init__(self, driver: Driver, timeout: float = 10.0, max_rows_per_level: int = 50_000) -> None:
        self.driver, self.timeout, self.max_rows_per_level = driver, timeout, max_rows_per_level

    def _read(self, text: str, timeout: float | None = None, **params: Any) -> list[list[Any]]:
        try:
            records, _, _ = self.driver.execute_query(Query(text, timeout=timeout or self.timeout), params,
                                                      routing_=RoutingControl.READ)
        except ClientError as exc:
            if "TransactionTimedOut" in (exc.code or ""):
                raise QueryTimeout(f"the question took longer than {timeout or self.timeout:g} s") from exc
            raise
        return [list(record.values()) for record in records]

    def _single(self, text: str, **params: Any) -> list[Any]:
        rows = self._read(text, **params)
        return rows[0] if rows else []

    # --- catalogue ----------------------------------------------------------------------------------------------
    def namespaces(self, limit: int) -> list[list[Any]]:
        return self._read(_NAMESPACES, limit=limit)

    def datasets(self, namespace: str, limit: int, offset: int) -> tuple[list[list[Any]], int]:
        key = stored_key(namespace)
        rows = self._read(_DATASETS, namespace=key, limit=limit, offset=offset)
        return rows, self._single(_COUNT_DATASETS, namespace=key)[0]

    def dataset(self, namespace: str, name: str) -> list[Any]:
        row = self._single(_DATASET, namespace=stored_key(namespace), name=stored_key(name))
        if not row:
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        return row

    def jobs(self, namespace: str, limit: int, offset: int) -> tuple[list[list[Any]], int]:
        key = stored_key(namespace)
        rows = self._read(_JOBS, namespace=key, limit=limit, offset=offset, latest=LATEST_RUNS)
        return rows, self._single(_COUNT_JOBS, namespace=key)[0]

    def job(self, namespace: str, name: str) -> list[Any]:
        row = self._single(_JOB, namespace=stored_key(namespace), name=stored_key(name), latest=LATEST_RUNS)
        if not row:
            raise NotFound(f"job {namespace} {name} is not in the graph")
        return row

    def runs(self, namespace: str, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
        found, runs = self._single(_RUNS, namespace=stored_key(namespace), name=stored_key(name), limit=limit,
                                   offset=offset)
        if not found:
            raise NotFound(f"job {namespace} {name} is not in the graph")
        return runs

    def versions(self, namespace: str, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
        found, versions = self._single(_VERSIONS, namespace=stored_key(namespace), name=stored_key(name),
                                       limit=limit, offset=offset)
        if not found:
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        return versions

    def dataset_runs(self, namespace: str, name: str, limit: int) -> dict[str, list[dict[str, Any]]]:
        """The latest runs that wrote the dataset and the data quality its readers measured, newest first."""
        rows = self._read(_DATASET_RUNS, namespace=stored_key(namespace), name=stored_key(name), limit=limit)
        if not rows:
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        writes, quality = rows[0]
        return {"writes": writes, "quality": quality}

    def latest_runs(self, graph: Graph, as_of: str | None = None) -> dict[str, dict[str, Any]]:
        """Element id → the latest run (by ``as_of``) of every job in ``graph``."""
        jobs = [element for element, node in graph.nodes.items() if node.kind == "job"]
        if not jobs:
            return {}
        return {element: run for element, run in self._read(_LATEST_RUNS, ids=jobs, asOf=as_of) if run}

    def run(self, run_id: str) -> dict[str, Any]:
        """A run with its job, inputs and outputs (statistics, data quality), parent and children."""
        rows = self._read(_RUN_DETAIL, runId=run_id, children=MAX_CHILDREN)
        if not rows:
            raise NotFound(f"run {run_id} is not in the graph")
        run, job, inputs, outputs, parent, children = rows[0]
        return {"run": run, "job": job, "inputs": inputs, "outputs": outputs, "parent": parent, "children": children}

    def search(self, query: str, kinds: Iterable[str], limit: int) -> tuple[int, list[list[Any]]]:
        kinds = set(kinds)
        total, rows = self._single(_SEARCH, pattern=like_pattern(query), datasets="dataset" in kinds,
                                   jobs="job" in kinds, limit=limit)
        return total, rows

    def field_types(self, datasets: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        """The current schema's type of every (nested) field of each dataset: (namespace, name) → path → type."""
        keys = [[stored_key(ns), stored_key(name)] for ns, name in set(datasets)]
        types: dict[tuple[str, str], dict[str, str]] = {}
        for key, fields_json in self._read(_FIELD_TYPES, datasets=keys):
            types[(key[0], key[1])] = dict(_typed_paths(schema_fields(fields_json)))
        return types

    # --- graphs -------------------------------------------------------------------------------------------------
    def neighbourhood(self, kind: str, namespace: str, name: str, depth: int, limit: int,
                      as_of: str | None = None) -> Graph:
        """Jobs and datasets within ``depth`` jobs of a dataset or job, following lineage edges either way (as
        Marquez's lineage graph does), nearest first, at most ``limit`` nodes; with ``as_of`` only edges known
        then."""
        found = self._single(_START[kind], namespace=stored_key(namespace), name=stored_key(name))
        if not found:
            raise NotFound(f"{kind} {namespace} {name} is not in the graph")
        graph = Graph(starts=[found[0]])
        graph.nodes[found[0]] = NodeId(kind, namespace, name)
        self._walk(graph, [found[0]], 2 * depth, limit, lambda frontier, rows, remaining: self._read(
            _NEIGHBOURS, remaining, ids=frontier, rows=rows, asOf=as_of)[0][0], self._table_row)
        return graph

    @staticmethod
    def _table_row(row: list[Any]) -> tuple[str, str, str, NodeId, str]:
        start, end, other, kind, namespace, name = row
        return start, end, other, NodeId(kind, namespace, name), ""

    def column_graph(self, namespace: str, name: str, field_name: str | None, depth: int,
                     directions: Sequence[str], limit: int, as_of: str | None = None) -> Graph:
        """Columns within ``depth`` hops of a dataset's column (or of all its columns): those it derives from
        (``up`` in ``directions``) and those derived from it (``down``)."""
        starts = self._single(_START_FIELDS, namespace=stored_key(namespace), name=stored_key(name),
                              field=None if field_name is None else stored_key(field_name))[0]
        if not starts:
            what = f"column {field_name} of dataset" if field_name is not None else "no column of dataset"
            raise NotFound(f"{what} {namespace} {name} is not in the graph")
        graph = Graph(starts=[row[0] for row in starts])
        for node_id, ns, dataset, column in starts:
            graph.nodes[node_id] = NodeId("datasetField", ns, dataset, column)
        for direction in directions:
            self._walk(graph, graph.starts, depth, limit, lambda frontier, rows, remaining, d=direction: self._read(
                _FIELD_LEVEL[d] + _FIELD_RETURN, remaining, ids=frontier, rows=rows, asOf=as_of)[0][0],
                self._field_row)
        return graph

    @staticmethod
    def _field_row(row: list[Any]) -> tuple[str, str, str, NodeId, str]:
        start, end, transformation, other, namespace, name, column = row
        return start, end, other, NodeId("datasetField", namespace, name, column), transformation or ""

    def _walk(self, graph: Graph, start: Sequence[str], hops: int, limit: int, level: Any, read_row: Any) -> None:
        """Breadth-first from ``start`` for at most ``hops`` levels, adding nodes and edges to ``graph``; stops
        (flagged) past ``limit`` nodes, a level over the row limit or the time limit."""
        deadline = time.monotonic() + self.timeout
        frontier, seen = list(start), set(graph.nodes)
        for _ in range(hops):
            remaining = deadline - time.monotonic()
            if not frontier or remaining < 0.001:
                graph.stopped = graph.stopped or ("time" if frontier else None)
                return
            try:
                rows = level(frontier, self.max_rows_per_level + 1, remaining)
            except QueryTimeout:
                graph.stopped = "time"
                return
            if len(rows) > self.max_rows_per_level:
                graph.stopped, rows = "edges", rows[:self.max_rows_per_level]
            following = []
            for row in rows:
                start_id, end_id, other, node, transformation = read_row(row)
                graph.edges[(start_id, end_id)] = transformation
                if other not in seen:
                    seen.add(other)
                    graph.nodes[other] = node
                    following.append(other)
            frontier = following
            if len(graph.nodes) > limit:  # keep the nearest: nodes are in the order the walk reached them
                graph.stopped = "nodes"
                kept = dict(list(graph.nodes.items())[:limit])
                graph.nodes = kept
                graph.edges = {pair: t for pair, t in graph.edges.items() if pair[0] in kept and pair[1] in kept}
                return


def _typed_paths(fields: list[dict[str, Any]], prefix: str = "") -> Iterable[tuple[str, str]]:
    for item in fields:
        name = item.get("name")
        if not isinstance(name, str):
            continue
        yield prefix + name, item.get("type") if isinstance(item.get("type"), str) else ""
        nested = item.get("fields")
        if isinstance(nested, list):
            yield from _typed_paths([f for f in nested if isinstance(f, dict)], prefix + name + ".")
