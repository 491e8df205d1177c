"""What the lineage server reads from the graph: fixed, parameterized Cypher in read transactions, each with a
server-side time limit, every list bounded. Answers are plain dicts and tuples; the API shapes them.

Nodes are looked up by their stored keys (``graph.keys.stored_key``) and answered with their whole names.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from neo4j import Driver, Query, RoutingControl
from neo4j.exceptions import ClientError

from kafka_lineage.graph import partitions as partition_reads
from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.node_ids import NodeId
from kafka_lineage.graph.queries import MAX_ALIAS_LINKS, Traversal, aliases_of, field_aliases_of, known, traverse
from kafka_lineage.schemas.schema_diff import diff_schemas, overall_severity
from kafka_lineage.schemas.tags import TAGS_FACET

_NS = "coalesce({0}.fullNamespace, {0}.namespace)"
_NAME = "coalesce({0}.fullName, {0}.name)"
_RUN = ("{runId: r.runId, state: r.state, startTime: r.startTime, endTime: r.endTime, "
        "lastEventTime: r.lastEventTime, nominalStartTime: r.nominalStartTime, nominalEndTime: r.nominalEndTime, "
        "errorMessage: r.errorMessage, inputRowCount: r.inputRowCount, outputRowCount: r.outputRowCount, "
        "inputBytes: r.inputBytes, outputBytes: r.outputBytes}")
LATEST_RUNS = 10  # runs shown with a job (Marquez's latestRuns)
# Runs newest first: by start (else last event) time, then id; the order the sink's latest-run pointer keeps.
_NEWEST_FIRST = "coalesce(r.startTime, r.lastEventTime, '') DESC, r.runId DESC"

_NAMESPACES = (
    "CALL { MATCH (d:Dataset) RETURN " + _NS.format("d") + " AS namespace, null AS time "
    "UNION ALL MATCH (j:Job) RETURN " + _NS.format("j") + " AS namespace, j.lastEventTime AS time } "
    "WITH namespace, min(time) AS firstTime, max(time) AS lastTime "
    "RETURN namespace, firstTime, lastTime ORDER BY namespace SKIP $offset LIMIT $limit")

# A job's or dataset's facet documents (``Facet`` nodes, one per facet key; a deleted facet's JSON is null).
_FACETS = ("COLLECT {{ MATCH (f:Facet {{of: '{of}', namespace: {node}.namespace, name: {node}.name}}) "
           "WHERE f.key IS NOT NULL AND f.json IS NOT NULL RETURN f.json }}")

# A dataset: names, current schema version and its fields, first schema seen, the last completed write.
MAX_COLUMN_LINEAGE = 5000  # input columns listed with a dataset (a page of datasets: LIST_COLUMN_LINEAGE each)
LIST_COLUMN_LINEAGE = 200
_DATASET_FIELDS = (
    "CALL (d) { OPTIONAL MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) RETURN min(s.firstSeen) AS firstSeen, "
    "collect(CASE WHEN s.hash = d.schemaVersion THEN s.fields END)[0] AS fields } "
    "CALL (d) { OPTIONAL MATCH (d)<-[:WROTE]-(r:Run {state: 'COMPLETE'}) RETURN max(r.endTime) AS lastWrite } "
    "RETURN " + _NS.format("d") + " AS namespace, " + _NAME.format("d") + " AS name, d.schemaVersion AS version, "
    "fields, firstSeen, lastWrite, " + _FACETS.format(of="Dataset", node="d") + " AS facets, "
    # Marquez's columnLineage: each column's inputs (bounded: a wide table's whole lineage is a column graph question)
    # (``f.field IS NOT NULL`` lets the field_key index answer by its first two properties)
    "COLLECT { MATCH (f:Field {namespace: d.namespace, name: d.name})-[e:DERIVES_FROM]->(i:Field) "
    "WHERE f.field IS NOT NULL "
    "WITH coalesce(f.fullField, f.field) AS column, coalesce(i.fullNamespace, i.namespace) AS ns, "
    "coalesce(i.fullName, i.name) AS name, coalesce(i.fullField, i.field) AS input, e.transformation AS how "
    "ORDER BY column, ns, name, input LIMIT $columnLineage RETURN [column, ns, name, input, how] } AS columnLineage")
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
    "COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) WITH r ORDER BY " + _NEWEST_FIRST + " "
    "LIMIT $latest RETURN " + _RUN + " } AS runs, " + _FACETS.format(of="Job", node="j") + " AS facets")
_JOBS = ("MATCH (j:Job {namespace: $namespace}) WITH j ORDER BY j.name SKIP $offset LIMIT $limit "
         + _JOB_FIELDS)
_JOB = "MATCH (j:Job {namespace: $namespace, name: $name}) " + _JOB_FIELDS
_COUNT_JOBS = "MATCH (j:Job {namespace: $namespace}) RETURN count(j)"
# Every namespace's jobs, most recently active first (Marquez's ``GET /jobs``), those whose latest run is in one of
# ``$states`` (OpenLineage states; 'NEW': no run yet) when given.
_ALL_JOBS = ("MATCH (j:Job) WHERE $states IS NULL OR "
             "coalesce(COLLECT { MATCH (r:Run {runId: j.latestRunId}) RETURN r.state }[0], 'NEW') IN $states "
             "WITH j ORDER BY coalesce(j.lastEventTime, '') DESC, j.namespace, j.name SKIP $offset LIMIT $limit "
             + _JOB_FIELDS)
_COUNT_ALL_JOBS = "MATCH (j:Job) RETURN count(j)"
_COUNT_RUNS = "MATCH (j:Job {namespace: $namespace, name: $name}) RETURN COUNT { (:Run)-[:OF_JOB]->(j) }"
# A job's latest runs (at most $runs) with the datasets each read and wrote: Marquez's job versions, derived.
_JOB_RUN_IO = (
    "MATCH (j:Job {namespace: $namespace, name: $name}) "
    "RETURN " + _NS.format("j") + ", " + _NAME.format("j") + ", COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) "
    "WITH r ORDER BY " + _NEWEST_FIRST + " LIMIT $runs RETURN {run: " + _RUN + ", "
    "inputs: [(r)-[:READ]->(d:Dataset) | [" + _NS.format("d") + ", " + _NAME.format("d") + "]], "
    "outputs: [(r)-[:WROTE]->(d:Dataset) | [" + _NS.format("d") + ", " + _NAME.format("d") + "]]} }")
JOB_VERSION_RUNS = 1000  # the latest runs a job's versions are derived from
_COUNT_VERSIONS = ("MATCH (d:Dataset {namespace: $namespace, name: $name}) "
                   "RETURN COUNT { (d)-[:HAS_SCHEMA]->(:SchemaVersion) }")
_RUN_WITH_FACETS = _RUN.replace("{runId:", "{startRunFacets: r.startRunFacets, runFacets: r.runFacets, "
                                "contentMode: [(r)-[:OF_JOB]->(rj:Job) | rj.eventContentMode][0], runId:")
# (A page past the last run or version is empty, not a 404: the node is matched apart from its page.)
_RUNS = ("MATCH (j:Job {namespace: $namespace, name: $name}) "
         "RETURN true, COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) WITH r ORDER BY " + _NEWEST_FIRST + " "
         "SKIP $offset LIMIT $limit RETURN " + _RUN_WITH_FACETS + " } AS runs")
_VERSIONS = ("MATCH (d:Dataset {namespace: $namespace, name: $name}) "
             "RETURN true, COLLECT { MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) WITH s "
             "ORDER BY s.firstSeen DESC SKIP $offset LIMIT $limit "
             "RETURN {version: s.hash, fields: s.fields, firstSeen: s.firstSeen} } AS versions")
# Search: Marquez's case-insensitive containment over the lower-cased ``searchKey`` the sink keeps, ordered by that
# key. A query with a literal run of 3+ characters (``$needle``) asks the key's text index for the nodes containing
# it and sorts those; a shorter one matches densely, so the key's range index is read in order until ``$limit`` match.
_SEARCH_KINDS = {
    "dataset": ("Dataset", "'DATASET'", "null", "null"),
    "job": ("Job", "'JOB'", "null", "n.lastEventTime"),
    "field": ("Field", "'FIELD'", "coalesce(n.fullField, n.field)", "null"),
}
SELECTIVE_NEEDLE = 3


def _search_query(kinds: Iterable[str], selective: bool, by_update: bool = False, dated: bool = False) -> str:
    """One branch per kind, each its own first ``$limit`` by key (``by_update``: latest update first, what has no
    update time last), merged and cut to ``$limit`` again. ``dated``: only what was updated in [$after, $before) —
    datasets and columns carry no update time, so a date filter leaves only jobs."""
    branches = []
    for kind in sorted(kinds):
        label, type_name, column, updated = _SEARCH_KINDS[kind]
        index = (f"USING TEXT INDEX n:{label}(searchKey) WHERE n.searchKey CONTAINS toLower($needle)" if selective
                 else f"USING RANGE INDEX n:{label}(searchKey) WHERE n.searchKey >= ''")
        window = f"AND {updated} >= $after AND {updated} < $before " if dated else ""
        order = f"coalesce({updated}, '') DESC, n.searchKey" if by_update else "n.searchKey"
        branches.append(
            f"MATCH (n:{label}) {index} AND n.searchKey =~ $pattern "
            f"AND ($namespace IS NULL OR n.namespace = $namespace) {window}"
            f"WITH n ORDER BY {order} LIMIT $limit "
            f"RETURN {type_name} AS type, {_NS.format('n')} AS namespace, {_NAME.format('n')} AS name, "
            f"{column} AS field, {updated} AS time, n.searchKey AS key")
    order = "coalesce(time, '') DESC, key, namespace, type" if by_update else "key, namespace, type"
    return ("CALL { " + " UNION ALL ".join(branches) + " } WITH type, namespace, name, field, time, key "
            f"ORDER BY {order} LIMIT $limit RETURN collect([type, namespace, name, field, time])")


# Breadth-first levels, several per query: each level is up to what still fits ($cap = limit + 1 nodes in all, so
# one more than fits tells that the answer was cut) of the nodes next to the frontier not seen yet, through edges
# known at ``$asOf``. Asking only for what still fits keeps a hub's thousands of neighbours from being read when a
# few fill the answer; the edges among the nodes kept are read once at the end (``_*_EDGES``). The visited set stays
# in Neo4j between the levels of a query, so a depth-10 walk (20 levels) is a few round trips, not 20 each
# re-sending every node seen. ``$hops`` levels at most; a level after the answer is full or after an empty one
# reads nothing.
LEVELS_PER_QUERY = 5  # a query of more levels costs Neo4j more to plan once and loses more levels to a timeout


@dataclass(frozen=True)
class _Levels:
    query: str
    count: int  # levels per query
    data: bool = False  # a row ends with the node's data (``_NODE_DATA``)


def _levels(body: str, columns: str, count: int = LEVELS_PER_QUERY, data: bool = False) -> _Levels:
    """``body``: clauses from a frontier node (``a``) to the nodes it reaches (``b``), with any edge filter."""
    parts = ["UNWIND $seen AS id MATCH (s) WHERE elementId(s) = id WITH collect(s) AS seen",
             "WITH seen, [s IN seen WHERE elementId(s) IN $ids] AS frontier, [] AS levels"]
    for level in range(count):
        parts += [f"CALL (seen, frontier) {{ UNWIND CASE WHEN $hops > {level} THEN frontier ELSE [] END AS a {body} "
                  "WITH b WHERE NOT b IN seen WITH DISTINCT b LIMIT $cap RETURN collect(b) AS found }",
                  "WITH seen, levels, found[..($cap - size(seen))] AS found",
                  "WITH seen + found AS seen, levels + [found] AS levels, "
                  "CASE WHEN size(seen) + size(found) >= $cap THEN [] ELSE found END AS frontier"]
    return _Levels(" ".join(parts) + " RETURN [level IN levels | [b IN level | [elementId(b), " + columns + "]]]",
                   count, data)


def _neighbours(pattern: str, then: str = "") -> str:
    """A level's body: the ends of ``pattern`` (from ``a`` through an edge ``e`` to ``n``), or with ``then`` the
    nodes it reaches from ``n`` (``b``), asked once per distinct ``n`` (not once per edge to it), in the order met."""
    return f"MATCH {pattern} WHERE {known('e')}" + (f" WITH DISTINCT n {then}" if then else "")


_TABLE_COLUMNS = "CASE WHEN b:Job THEN 'job' ELSE 'dataset' END, " + _NS.format("b") + ", " + _NAME.format("b")
# What a lineage answer shows of each node, read with it rather than by a second lookup of thousands of ids: a job's
# latest run (now: the run the sink points the job at; by ``$asOf``: the latest started by then), a dataset's current
# schema fields (by ``$asOf``: the latest version first seen by then) and whether a completed run has written it (by
# then), as [fields, written]. Keyed by whether there is an ``$asOf``.
_NODE_DATA = {
    False: ("CASE WHEN b:Job THEN COLLECT { MATCH (r:Run {runId: b.latestRunId}) RETURN " + _RUN + " }[0] "
            "ELSE [[(b)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.hash = b.schemaVersion | s.fields][0], "
            "EXISTS { (b)<-[:WROTE]-(:Run {state: 'COMPLETE'}) }] END"),
    True: ("CASE WHEN b:Job THEN COLLECT { MATCH (r:Run)-[:OF_JOB]->(b) WHERE r.startTime <= $asOf "
           "WITH r ORDER BY " + _NEWEST_FIRST + " LIMIT 1 RETURN " + _RUN + " }[0] "
           "ELSE [COLLECT { MATCH (b)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.firstSeen <= $asOf "
           "WITH s ORDER BY s.firstSeen DESC LIMIT 1 RETURN s.fields }[0], "
           "EXISTS { (b)<-[:WROTE]-(r:Run {state: 'COMPLETE'}) WHERE r.endTime <= $asOf }] END"),
}
# A dataset's aliases (SAME_AS) come with it, in the same level: the same data under another name.
_TABLE_LEVEL = {then: _levels(_neighbours("(a)-[e:INPUT_TO|OUTPUTS]-(n)", aliases_of("n", "b")),
                              _TABLE_COLUMNS + ", " + data, data=True) for then, data in _NODE_DATA.items()}
_ALIASES = {then: _levels(_neighbours("(a)-[e:SAME_AS]-(b)"), _TABLE_COLUMNS + ", " + data, MAX_ALIAS_LINKS,
                          data=True) for then, data in _NODE_DATA.items()}  # a start's aliases
# The edges among the walk's nodes, compared as nodes (not as element id strings built for every neighbour).
_TABLE_EDGES = ("UNWIND $ids AS id MATCH (a) WHERE elementId(a) = id WITH collect(a) AS nodes UNWIND nodes AS a "
                "MATCH (a)-[e:INPUT_TO|OUTPUTS|SAME_AS]->(b) WHERE " + known("e") + " AND b IN nodes "
                "WITH a, b LIMIT $rows RETURN collect([elementId(a), elementId(b), ''])")
# The start: its id, its data and whether it has any alias (without, the walk to its aliases is not asked).
_START = {(kind, then): f"MATCH (b:{label} {{namespace: $namespace, name: $name}}) RETURN elementId(b), {data}, "
                        "EXISTS { (b)-[:SAME_AS]-() }"
          for kind, label in (("dataset", "Dataset"), ("job", "Job")) for then, data in _NODE_DATA.items()}
# Column lineage: DERIVES_FROM points from a derived (output) column to its input column.
_FIELD_COLUMNS = "'datasetField', " + _NS.format("b") + ", " + _NAME.format("b") + ", coalesce(b.fullField, b.field)"
_FIELD_LEVEL = {  # a column's aliases (the same column of a SAME_AS-linked dataset) come with it
    "up": _levels(_neighbours("(a:Field)-[e:DERIVES_FROM]->(n:Field)", field_aliases_of("n", "b")), _FIELD_COLUMNS),
    "down": _levels(_neighbours("(a:Field)<-[e:DERIVES_FROM]-(n:Field)", field_aliases_of("n", "b")),
                    _FIELD_COLUMNS),
}
_FIELD_ALIASES = _levels("WITH a AS n WHERE n:Field " + field_aliases_of("n", "b"), _FIELD_COLUMNS, 1)
# ... and a column to the same column of a SAME_AS-linked dataset (transformation "SAME_AS").
_FIELD_EDGES = ("UNWIND $ids AS id MATCH (a:Field) WHERE elementId(a) = id CALL (a) { "
                "MATCH (a)-[e:DERIVES_FROM]->(b:Field) WHERE " + known("e") + " "
                "RETURN b, coalesce(e.transformation, '') AS transformation UNION "
                "MATCH (:Dataset {namespace: a.namespace, name: a.name})-[e:SAME_AS]->(twin:Dataset) WHERE "
                + known("e") + " MATCH (b:Field {namespace: twin.namespace, name: twin.name, field: a.field}) "
                "RETURN b, 'SAME_AS' AS transformation } "
                "WITH a, b, transformation WHERE elementId(b) IN $ids WITH a, b, transformation LIMIT $rows "
                "RETURN collect([elementId(a), elementId(b), transformation])")
# The start columns: one by its key, or every column of the dataset (the IS NOT NULL lets the key's index answer).
_FIELD_COLUMNS_OF = ("RETURN collect([elementId(f), " + _NS.format("f") + ", " + _NAME.format("f") + ", "
                     "coalesce(f.fullField, f.field)])")
_START_FIELD = "MATCH (f:Field {namespace: $namespace, name: $name, field: $field}) " + _FIELD_COLUMNS_OF
_START_FIELDS = "MATCH (f:Field {namespace: $namespace, name: $name}) WHERE f.field IS NOT NULL " + _FIELD_COLUMNS_OF
# A job's columns (Marquez's column lineage of a job node): those of the datasets it writes, at most ``$limit``.
_START_JOB_FIELDS = ("MATCH (:Job {namespace: $namespace, name: $name})-[:OUTPUTS]->(d:Dataset) "
                     "MATCH (f:Field {namespace: d.namespace, name: d.name}) WHERE f.field IS NOT NULL "
                     "WITH f ORDER BY f.name, f.field LIMIT $limit " + _FIELD_COLUMNS_OF)
_FIELD_TYPES = ("UNWIND $datasets AS key MATCH (d:Dataset {namespace: key[0], name: key[1]}) "
                "RETURN key, [(d)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.hash = d.schemaVersion | s.fields][0]")


_JOB_OF_RUN = "[(r)-[:OF_JOB]->(j:Job) | {namespace: " + _NS.format("j") + ", name: " + _NAME.format("j") + "}][0]"
_RUN_DETAIL = (
    "MATCH (r:Run {runId: $runId}) "
    "RETURN " + _RUN_WITH_FACETS.replace("{", "{errorLanguage: r.errorLanguage, ", 1) + " AS run, "
    + _JOB_OF_RUN + " AS job, "
    "[(r)-[e:READ]->(d:Dataset) | {namespace: " + _NS.format("d") + ", name: " + _NAME.format("d") + ", "
    "rowCount: e.rowCount, bytes: e.bytes, dataQuality: e.dataQuality, assertions: e.assertions}] AS inputs, "
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
# The home page's questions: recent runs in some states (newest first), runs still going (oldest first: a run whose
# end never came shows until it does), runs per day and state, and how many jobs, datasets and runs there are.
_RUN_AND_JOB = " RETURN " + _RUN + " AS run, " + _JOB_OF_RUN + " AS job"
_RUN_DAY = "coalesce(r.startTime, r.endTime)"  # a run that only reported its end counts on that day
_RECENT_RUNS = ("MATCH (r:Run) USING INDEX r:Run(state) WHERE r.state IN $states AND " + _RUN_DAY + " >= $since "
                "AND " + _RUN_DAY + " < $until "
                "WITH r ORDER BY " + _RUN_DAY + " DESC LIMIT $limit" + _RUN_AND_JOB)
_RUNNING_RUNS = ("MATCH (r:Run) WHERE r.state IN ['START', 'RUNNING'] AND r.startTime IS NOT NULL "
                 "WITH r ORDER BY r.startTime LIMIT $limit" + _RUN_AND_JOB)
_RUNS_PER_DAY = ("CALL { MATCH (r:Run) WHERE r.startTime >= $since AND r.startTime < $until RETURN r "
                 "UNION MATCH (r:Run) WHERE r.endTime >= $since AND r.endTime < $until AND r.startTime IS NULL "
                 "RETURN r } "
                 "RETURN substring(" + _RUN_DAY + ", 0, 10) AS day, r.state AS state, count(*) AS runs")
# Run starts and ends per UTC hour in [$from, $to) (Marquez's lineage-event stats): starts by start time, ends by
# end time and final state.
_RUN_HOURS = ("CALL { MATCH (r:Run) WHERE r.startTime >= $from AND r.startTime < $to "
              "RETURN substring(r.startTime, 0, 13) AS hour, 'START' AS kind, count(*) AS runs "
              "UNION ALL MATCH (r:Run) WHERE r.endTime >= $from AND r.endTime < $to AND r.state IN ['COMPLETE', "
              "'FAIL', 'ABORT'] RETURN substring(r.endTime, 0, 13) AS hour, r.state AS kind, count(*) AS runs } "
              "RETURN hour, kind, sum(runs)")
_COUNTS = ("CALL { MATCH (j:Job) RETURN count(j) AS jobs } CALL { MATCH (d:Dataset) RETURN count(d) AS datasets } "
           "CALL { MATCH (r:Run) RETURN count(r) AS runs } RETURN jobs, datasets, runs")
# Dataset namespaces (Marquez's sources) and the datasets' tags facets (Marquez's tags), bounded.
_DATASET_NAMESPACES = ("MATCH (d:Dataset) WITH DISTINCT " + _NS.format("d") + " AS namespace "
                       "RETURN namespace ORDER BY namespace SKIP $offset LIMIT $limit")
_TAG_FACETS = ("MATCH (f:Facet) WHERE f.key IN ['tags', '" + TAGS_FACET + "'] AND f.of = 'Dataset' "
               "AND f.json IS NOT NULL RETURN f.json LIMIT $limit")
MAX_TAG_FACETS = 10_000
# One schema version of a dataset (Marquez's dataset version).
_VERSION = ("MATCH (:Dataset {namespace: $namespace, name: $name})-[:HAS_SCHEMA]->(s:SchemaVersion {hash: $version}) "
            "RETURN {version: s.hash, fields: s.fields, firstSeen: s.firstSeen}")
# A run as Marquez shows it: its facets, its job, and each dataset it read and wrote with the schema version current
# when the run last reported (the latest first seen by then; none when the dataset had no schema yet).
_VERSION_AT = ("COLLECT {{ MATCH ({0})-[:HAS_SCHEMA]->(s:SchemaVersion) "
               "WHERE s.firstSeen <= coalesce(r.endTime, r.lastEventTime) "
               "RETURN s.hash ORDER BY s.firstSeen DESC LIMIT 1 }}[0]")
_MARQUEZ_RUN = (
    "MATCH (r:Run {runId: $runId}) "
    "RETURN " + _RUN_WITH_FACETS + " AS run, "
    "[(r)-[:OF_JOB]->(j:Job) | {namespace: " + _NS.format("j") + ", name: " + _NAME.format("j") + ", "
    "facets: " + _FACETS.format(of="Job", node="j") + "}][0] AS job, "
    "[(r)-[:READ]->(d:Dataset) | {namespace: " + _NS.format("d") + ", name: " + _NAME.format("d") + ", "
    "version: " + _VERSION_AT.format("d") + "}] AS inputs, "
    "[(r)-[:WROTE]->(d:Dataset) | {namespace: " + _NS.format("d") + ", name: " + _NAME.format("d") + ", "
    "version: " + _VERSION_AT.format("d") + "}] AS outputs")
# Runs (``$runIds``) with their job and each dataset they read: its schema version then and the run that produced
# what they read (the latest completed write that ended before the reader started), Marquez's upstream run lineage.
_RUN_INPUTS = (
    "UNWIND $runIds AS id MATCH (r:Run {runId: id}) "
    "RETURN r.runId, r.startTime, r.endTime, r.state, "
    "[(r)-[:OF_JOB]->(j:Job) | [" + _NS.format("j") + ", " + _NAME.format("j") + "]][0], "
    "COLLECT { MATCH (r)-[:READ]->(d:Dataset) "
    "CALL (r, d) { OPTIONAL MATCH (d)<-[:WROTE]-(w:Run {state: 'COMPLETE'}) "
    "WHERE w.endTime <= coalesce(r.startTime, r.lastEventTime) AND w <> r "
    "RETURN w ORDER BY w.endTime DESC LIMIT 1 } "
    "RETURN [" + _NS.format("d") + ", " + _NAME.format("d") + ", " + _VERSION_AT.format("d") + ", w.runId] }")
MAX_UPSTREAM_RUNS = 1000
OVERVIEW_PARTITION_RUNS = 20  # failed runs whose partitions the home page looks at

# The runs that wrote a dataset (row counts, bytes) and the data-quality metrics of the runs that read it, newest
# first, bounded: a dataset's page shows them over time.
_DATASET_RUNS = (
    "MATCH (d:Dataset {namespace: $namespace, name: $name}) "
    "RETURN COLLECT { MATCH (d)<-[e:WROTE]-(r:Run) WITH r, e ORDER BY coalesce(r.endTime, r.lastEventTime) DESC "
    "LIMIT $limit RETURN {runId: r.runId, state: r.state, endTime: r.endTime, startTime: r.startTime, "
    "rowCount: e.rowCount, bytes: e.bytes} } AS writes, "
    "COLLECT { MATCH (d)<-[e:READ]-(r:Run) WHERE e.dataQuality IS NOT NULL OR e.assertions IS NOT NULL "
    "WITH r, e ORDER BY coalesce(r.endTime, r.lastEventTime) DESC LIMIT $limit "
    "RETURN {runId: r.runId, state: r.state, endTime: r.endTime, dataQuality: e.dataQuality, "
    "assertions: e.assertions} } AS quality")
# The latest run of each job (``$ids``): now, the run the job points at (kept by the sink); by then (``$asOf``), the
# latest started by then.
_LATEST_RUNS = (
    "UNWIND $ids AS id MATCH (j:Job) WHERE elementId(j) = id OPTIONAL MATCH (r:Run {runId: j.latestRunId}) "
    "RETURN id, CASE WHEN r IS NULL THEN null ELSE " + _RUN + " END")
_LATEST_RUNS_AS_OF = (
    "UNWIND $ids AS id MATCH (j:Job) WHERE elementId(j) = id "
    "RETURN id, COLLECT { MATCH (r:Run)-[:OF_JOB]->(j) WHERE r.startTime <= $asOf "
    "WITH r ORDER BY " + _NEWEST_FIRST + " LIMIT 1 RETURN " + _RUN + " }[0]")
# The run that last touched each job (``$jobs``, [namespace, name] keys): its latest run; and each dataset
# (``$datasets``): the latest of the latest runs of the jobs that write it. By then (``$asOf``): runs started by then.
def _last_runs(runs_of_j: str) -> str:
    latest = "COLLECT { " + runs_of_j + " WITH r ORDER BY " + _NEWEST_FIRST + " LIMIT 1 RETURN r } AS runs "
    return ("CALL { UNWIND $jobs AS key MATCH (j:Job {namespace: key[0], name: key[1]}) "
            "RETURN key, 'job' AS kind, " + latest + "UNION ALL "
            "UNWIND $datasets AS key MATCH (d:Dataset {namespace: key[0], name: key[1]}) "
            "RETURN key, 'dataset' AS kind, " + latest.replace("{ ", "{ MATCH (j:Job)-[:OUTPUTS]->(d) ", 1) + "} "
            "WITH key, kind, runs[0] AS r WHERE r IS NOT NULL "
            "RETURN kind, key, {runId: r.runId, state: r.state, startTime: r.startTime, endTime: r.endTime}")


_LAST_RUNS = _last_runs("MATCH (r:Run {runId: j.latestRunId})")
_LAST_RUNS_AS_OF = _last_runs("MATCH (r:Run)-[:OF_JOB]->(j) WHERE r.startTime <= $asOf")

# The schema fields of each dataset (``$ids``) current then (``$asOf``): the latest version first seen by then.
_SCHEMAS = (
    "UNWIND $ids AS id MATCH (d:Dataset) WHERE elementId(d) = id "
    "RETURN id, CASE WHEN $asOf IS NULL "
    "THEN [(d)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.hash = d.schemaVersion | s.fields][0] "
    "ELSE COLLECT { MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) WHERE s.firstSeen <= $asOf "
    "WITH s ORDER BY s.firstSeen DESC LIMIT 1 RETURN s.fields }[0] END")


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
    data: dict[str, Any] = field(default_factory=dict)  # element id → what ``_NODE_DATA`` read (table walks)

    def latest_runs(self) -> dict[str, dict[str, Any]]:
        """Element id → the latest run of every job that has one (``GraphStore.latest_runs``'s answer)."""
        return {element: data for element, data in self.data.items() if data and self.nodes[element].kind == "job"}

    def schemas(self) -> dict[str, str]:
        """Element id → the fields JSON of every dataset's schema (``GraphStore.schemas``'s answer)."""
        return {element: data[0] for element, data in self.data.items()
                if self.nodes[element].kind == "dataset" and data and data[0]}

    def written(self) -> set[str]:
        """The datasets some completed run has written (by the walk's time); the others are declared outputs only
        (of runs that failed, were aborted or are still running) or sources."""
        return {element for element, data in self.data.items()
                if self.nodes[element].kind == "dataset" and data and data[1]}


def like_pattern(query: str) -> str:
    """Marquez's search: case-insensitive containment, ``%`` any run of characters, ``_`` one character."""
    parts = [".*" if c == "%" else "." if c == "_" else re.escape(c) for c in query.lower()]
    return "(?s).*" + "".join(parts) + ".*"


def like_needle(query: str) -> str:
    """The longest run of literal characters in a search query: every match contains it."""
    return max(re.split("[%_]", query), key=len)


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
    def namespaces(self, limit: int, offset: int = 0) -> list[list[Any]]:
        return self._read(_NAMESPACES, limit=limit, offset=offset)

    def datasets(self, namespace: str, limit: int, offset: int) -> tuple[list[list[Any]], int]:
        key = stored_key(namespace)
        rows = self._read(_DATASETS, namespace=key, limit=limit, offset=offset, columnLineage=LIST_COLUMN_LINEAGE)
        return rows, self._single(_COUNT_DATASETS, namespace=key)[0]

    def dataset(self, namespace: str, name: str) -> list[Any]:
        row = self._single(_DATASET, namespace=stored_key(namespace), name=stored_key(name),
                           columnLineage=MAX_COLUMN_LINEAGE)
        if not row:
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        return row

    def jobs(self, namespace: str, limit: int, offset: int) -> tuple[list[list[Any]], int]:
        key = stored_key(namespace)
        rows = self._read(_JOBS, namespace=key, limit=limit, offset=offset, latest=LATEST_RUNS)
        return rows, self._single(_COUNT_JOBS, namespace=key)[0]

    def all_jobs(self, states: Sequence[str] | None, limit: int, offset: int) -> tuple[list[list[Any]], int]:
        """Jobs of every namespace, most recently active first; with ``states``, those whose latest run is in one
        (``NEW``: no run). The count is of every job, as Marquez counts."""
        rows = self._read(_ALL_JOBS, states=None if states is None else list(states), limit=limit, offset=offset,
                          latest=LATEST_RUNS)
        return rows, self._single(_COUNT_ALL_JOBS)[0]

    def run_count(self, namespace: str, name: str) -> int:
        return self._single(_COUNT_RUNS, namespace=stored_key(namespace), name=stored_key(name))[0]

    def version_count(self, namespace: str, name: str) -> int:
        return self._single(_COUNT_VERSIONS, namespace=stored_key(namespace), name=stored_key(name))[0]

    def job(self, namespace: str, name: str) -> list[Any]:
        row = self._single(_JOB, namespace=stored_key(namespace), name=stored_key(name), latest=LATEST_RUNS)
        if not row:
            raise NotFound(f"job {namespace} {name} is not in the graph")
        return row

    def runs(self, namespace: str, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
        found = self._single(_RUNS, namespace=stored_key(namespace), name=stored_key(name), limit=limit,
                             offset=offset)
        if not found:
            raise NotFound(f"job {namespace} {name} is not in the graph")
        runs = found[1]
        for run in runs:
            run["facets"] = run_facets(run)
        return runs

    def job_run_io(self, namespace: str, name: str) -> tuple[str, str, list[dict[str, Any]]]:
        """(namespace, name, its latest runs newest first, each with the datasets it read and wrote)."""
        found = self._single(_JOB_RUN_IO, namespace=stored_key(namespace), name=stored_key(name),
                             runs=JOB_VERSION_RUNS)
        if not found:
            raise NotFound(f"job {namespace} {name} is not in the graph")
        return found[0], found[1], found[2]

    def versions(self, namespace: str, name: str, limit: int, offset: int) -> list[dict[str, Any]]:
        found = self._single(_VERSIONS, namespace=stored_key(namespace), name=stored_key(name), limit=limit,
                             offset=offset)
        if not found:
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        return found[1]

    def dataset_namespaces(self, limit: int, offset: int) -> list[str]:
        return [row[0] for row in self._read(_DATASET_NAMESPACES, limit=limit, offset=offset)]

    def tag_facets(self) -> list[str]:
        """The datasets' tags facet documents, producers' and those set through the API (at most
        ``MAX_TAG_FACETS``)."""
        return [row[0] for row in self._read(_TAG_FACETS, limit=MAX_TAG_FACETS)]

    def version(self, namespace: str, name: str, version: str) -> dict[str, Any]:
        rows = self._read(_VERSION, namespace=stored_key(namespace), name=stored_key(name), version=version)
        if not rows:
            raise NotFound(f"dataset {namespace} {name} has no version {version}")
        return rows[0][0]

    def marquez_run(self, run_id: str) -> dict[str, Any]:
        """A run with its facets, its job (with the job's facets) and the versions of the datasets it read and
        wrote."""
        rows = self._read(_MARQUEZ_RUN, runId=run_id)
        if not rows:
            raise NotFound(f"run {run_id} is not in the graph")
        run, job, inputs, outputs = rows[0]
        run["facets"] = run_facets(run)
        if job is not None:
            job["facets"] = facet_documents(job["facets"])
        return {"run": run, "job": job, "inputs": inputs, "outputs": outputs}

    def upstream_runs(self, run_id: str, depth: int) -> list[dict[str, Any]]:
        """The run and, level by level up to ``depth``, the runs that produced what it read: each with its job, times,
        state and inputs (dataset, schema version then, producing run), nearest first, then by job name; at most
        ``MAX_UPSTREAM_RUNS`` runs."""
        found: list[dict[str, Any]] = []
        seen, level = {run_id}, [run_id]
        for _ in range(depth + 1):
            rows = self._read(_RUN_INPUTS, runIds=level)
            if not rows and not found:
                raise NotFound(f"run {run_id} is not in the graph")
            next_level = []
            for run, start, end, state, job, inputs in sorted(rows, key=lambda r: (r[4] or ["", ""])[1]):
                found.append({"runId": run, "startTime": start, "endTime": end, "state": state, "job": job,
                              "inputs": [{"namespace": ns, "name": name, "version": version, "producedBy": producer}
                                         for ns, name, version, producer in sorted(inputs)]})
                for *_, producer in inputs:
                    if producer is not None and producer not in seen and len(seen) < MAX_UPSTREAM_RUNS:
                        seen.add(producer)
                        next_level.append(producer)
            if not next_level:
                break
            level = next_level
        return found

    def schema_history(self, namespace: str, name: str, limit: int) -> tuple[str, list[dict[str, Any]]]:
        """The dataset's current version and its versions, oldest first, each with the changes from the one before
        (``schema_diff``, as the drift alerts classify them) and their overall severity."""
        current = self.dataset(namespace, name)[2]
        history, previous = [], None
        for version in self.versions(namespace, name, limit, 0)[::-1]:
            fields = schema_fields(version["fields"])
            changes = diff_schemas(previous, fields) if previous is not None else []
            history.append({"version": version["version"], "firstSeen": version["firstSeen"], "fields": fields,
                            "current": version["version"] == current,
                            "changes": [change.as_record() for change in changes],
                            "severity": overall_severity(changes) if changes else None})
            previous = fields
        return current, history

    def overview(self, since: str, until: str, limit: int) -> dict[str, Any]:
        """What the home page shows: counts of jobs, datasets and runs; runs started in [``since``, ``until``) per
        day (the day of their own start time) and state; the latest failed or aborted of them (a run dated past
        ``until``, a clock's mistake, is in neither); the runs still going, oldest first (``limit`` each); the
        partitions those failed runs wrote that are still failed."""
        jobs, datasets, runs = self._single(_COUNTS)
        recent = self._read(_RECENT_RUNS, since=since, until=until, states=["FAIL", "ABORT"], limit=limit)
        running = self._read(_RUNNING_RUNS, limit=limit)
        per_day: dict[str, dict[str, int]] = {}
        for day, state, count in self._read(_RUNS_PER_DAY, since=since, until=until):
            per_day.setdefault(day, {})[state or "NEW"] = count
        failed_partitions = []
        # the partitions the latest of these runs wrote that are failed still (no later version fixed them): one
        # question per run, so a bounded number of runs
        for run, job in recent[:OVERVIEW_PARTITION_RUNS]:
            for written in self._partitions(partition_reads.run_partitions, run["runId"]).wrote:
                if written.get("partitionState") == "FAILED":
                    failed_partitions.append({"namespace": written["namespace"], "name": written["name"],
                                              "key": written["key"], "reason": written.get("reason"),
                                              "runId": run["runId"], "job": job})
        return {"counts": {"jobs": jobs, "datasets": datasets, "runs": runs},
                "runsPerDay": [{"day": day, "states": per_day[day]} for day in sorted(per_day)],
                "failedRuns": [{**run, "job": job} for run, job in recent],
                "runningRuns": [{**run, "job": job} for run, job in running],
                "failedPartitions": failed_partitions[:limit]}

    def run_hours(self, start: str, end: str) -> dict[str, dict[str, int]]:
        """UTC hour (``YYYY-MM-DDTHH``) → how many runs started (START) and ended COMPLETE, FAIL or ABORT in it,
        over [start, end)."""
        hours: dict[str, dict[str, int]] = {}
        for hour, kind, count in self._read(_RUN_HOURS, **{"from": start, "to": end}):
            hours.setdefault(hour, {})[kind] = count
        return hours

    def walk(self, namespace: str, name: str, depth: int, direction: str, limit: int, as_of: str | None) -> Traversal:
        """Jobs and datasets up or downstream of a dataset, nearest first, within ``limit`` nodes and the store's
        time bound (``graph.queries.traverse``)."""
        return traverse(self.driver, namespace, name, depth, direction, limit, self.timeout, as_of)

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
        if as_of is None:
            return {element: run for element, run in self._read(_LATEST_RUNS, ids=jobs) if run}
        return {element: run for element, run in self._read(_LATEST_RUNS_AS_OF, ids=jobs, asOf=as_of) if run}

    def last_runs(self, nodes: Iterable[tuple[str, str, str]], as_of: str | None = None
                  ) -> dict[tuple[str, str, str], dict[str, Any]]:
        """(kind, namespace, name) → the run that last touched it (``_LAST_RUNS``), for jobs and datasets."""
        nodes = list(nodes)
        keys: dict[str, list[list[str]]] = {"job": [], "dataset": []}
        for kind, namespace, name in nodes:
            keys[kind].append([stored_key(namespace), stored_key(name)])
        if not keys["job"] and not keys["dataset"]:
            return {}
        names = {(kind, stored_key(ns), stored_key(name)): (kind, ns, name) for kind, ns, name in nodes}
        return {names[(kind, key[0], key[1])]: run
                for kind, key, run in self._read(_LAST_RUNS if as_of is None else _LAST_RUNS_AS_OF, jobs=keys["job"],
                                                 datasets=keys["dataset"], asOf=as_of)}

    def schemas(self, graph: Graph, as_of: str | None = None) -> dict[str, str]:
        """Element id → the fields JSON of the schema current (by ``as_of``) of every dataset in ``graph``."""
        datasets = [element for element, node in graph.nodes.items() if node.kind == "dataset"]
        if not datasets:
            return {}
        return {element: fields for element, fields in self._read(_SCHEMAS, ids=datasets, asOf=as_of) if fields}

    def run(self, run_id: str) -> dict[str, Any]:
        """A run with its job, inputs and outputs (statistics, data quality), parent and children."""
        rows = self._read(_RUN_DETAIL, runId=run_id, children=MAX_CHILDREN)
        if not rows:
            raise NotFound(f"run {run_id} is not in the graph")
        run, job, inputs, outputs, parent, children = rows[0]
        run["facets"] = run_facets(run)
        return {"run": run, "job": job, "inputs": inputs, "outputs": outputs, "parent": parent, "children": children}

    def search(self, query: str, kinds: Iterable[str], limit: int, namespace: str | None = None,
               by_update: bool = False, after: str | None = None, before: str | None = None) -> list[list[Any]]:
        """Datasets, jobs and fields (``kinds``) whose name matches ``query``, the first ``limit`` by lower-cased
        name (``by_update``: latest update first); with ``after``/``before`` (graph times), only what was updated
        then: rows of [type, namespace, name, field, time]."""
        needle = like_needle(query)
        dated = after is not None or before is not None
        return self._single(_search_query(set(kinds), len(needle) >= SELECTIVE_NEEDLE, by_update, dated),
                            needle=needle, pattern=like_pattern(query),
                            namespace=None if namespace is None else stored_key(namespace), limit=limit,
                            after=after or "", before=before or "~")[0]

    def field_types(self, datasets: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        """The current schema's type of every (nested) field of each dataset: (namespace, name) → path → type."""
        keys = [[stored_key(ns), stored_key(name)] for ns, name in set(datasets)]
        types: dict[tuple[str, str], dict[str, str]] = {}
        for key, fields_json in self._read(_FIELD_TYPES, datasets=keys):
            types[(key[0], key[1])] = dict(_typed_paths(schema_fields(fields_json)))
        return types

    # --- partitions (graph/partitions.py computes the states) -----------------------------------------------
    def _partitions(self, question: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return question(self.driver, *args, timeout=self.timeout, **kwargs)
        except partition_reads.UnknownDataset as exc:
            raise NotFound(str(exc)) from None
        except ClientError as exc:
            if "TransactionTimedOut" in (exc.code or ""):
                raise QueryTimeout(f"the question took longer than {self.timeout:g} s") from exc
            raise

    def partitions(self, namespace: str, name: str, key: str | None, state: str | None, limit: int
                   ) -> list[partition_reads.PartitionStatus]:
        """The dataset's partitions (holding every pair of ``key``; in ``state``) by key; ValueError: bad key."""
        return self._partitions(partition_reads.dataset_partitions, namespace, name, key, state, limit)

    def ready(self, namespace: str, name: str, key: str) -> tuple[bool, list[dict[str, Any]]]:
        """(ready, what is missing) of the partition ``key``; ValueError: a malformed key."""
        ok, missing, _ = self._partitions(partition_reads.ready, namespace, name, key)
        return ok, missing

    def backfill_plan(self, namespace: str, name: str, start: str, end: str, depth: int) -> dict[str, Any]:
        """``lineage backfill plan``'s answer; ``PlanError`` (a ValueError) for a bad window or undated partitions."""
        from kafka_lineage.graph import backfill

        first, last = backfill.parse_day(start, "from"), backfill.parse_day(end, "to")
        facts = self._partitions(backfill.fetch_facts, namespace, name, depth)
        return backfill.plan(facts, first, last, depth)

    def run_partitions(self, run_id: str) -> partition_reads.RunPartitions:
        found = self._partitions(partition_reads.run_partitions, run_id)
        if not found.found:
            raise NotFound(f"run {run_id} is not in the graph")
        return found

    # --- graphs -------------------------------------------------------------------------------------------------
    def neighbourhood(self, kind: str, namespace: str, name: str, depth: int, limit: int,
                      as_of: str | None = None) -> Graph:
        """Jobs and datasets within ``depth`` jobs of a dataset or job, following lineage edges either way (as
        Marquez's lineage graph does), nearest first, at most ``limit`` nodes, and the edges among them; with
        ``as_of`` only edges known then."""
        then = as_of is not None
        found = self._single(_START[(kind, then)], namespace=stored_key(namespace), name=stored_key(name),
                             asOf=as_of)
        if not found:
            raise NotFound(f"{kind} {namespace} {name} is not in the graph")
        graph = Graph(starts=[found[0]])
        graph.nodes[found[0]] = NodeId(kind, namespace, name)
        graph.data[found[0]] = found[1]
        deadline = time.monotonic() + self.timeout
        if kind == "dataset" and found[2]:
            self._walk(graph, graph.starts, MAX_ALIAS_LINKS, limit, _ALIASES[then], as_of, deadline)
        self._walk(graph, list(graph.nodes), 2 * depth, limit, _TABLE_LEVEL[then], as_of, deadline)
        self._edges(graph, _TABLE_EDGES, as_of, deadline)
        return graph

    def column_graph(self, namespace: str, name: str, field_name: str | None, depth: int,
                     directions: Sequence[str], limit: int, as_of: str | None = None) -> Graph:
        """Columns within ``depth`` hops of a dataset's column (or of all its columns): those it derives from
        (``up`` in ``directions``) and those derived from it (``down``), and the edges among them."""
        keys = {"namespace": stored_key(namespace), "name": stored_key(name)}
        starts = (self._single(_START_FIELDS, **keys) if field_name is None else
                  self._single(_START_FIELD, **keys, field=stored_key(field_name)))[0]
        if not starts:
            what = f"column {field_name} of dataset" if field_name is not None else "no column of dataset"
            raise NotFound(f"{what} {namespace} {name} is not in the graph")
        return self._column_walk(starts, depth, directions, limit, as_of)

    def job_column_graph(self, namespace: str, name: str, depth: int, directions: Sequence[str], limit: int,
                         as_of: str | None = None) -> Graph:
        """``column_graph`` from every column of the datasets a job writes."""
        starts = self._single(_START_JOB_FIELDS, namespace=stored_key(namespace), name=stored_key(name),
                              limit=limit)[0]
        if not starts:
            raise NotFound(f"job {namespace} {name} writes no dataset with columns in the graph")
        graph = self._column_walk(starts, depth, directions, limit, as_of)
        if len(starts) >= limit:  # its columns alone fill the answer: more may exist
            graph.stopped = graph.stopped or "nodes"
        return graph

    def _column_walk(self, starts: list[list[str]], depth: int, directions: Sequence[str], limit: int,
                     as_of: str | None) -> Graph:
        graph = Graph(starts=[row[0] for row in starts])
        for node_id, ns, dataset, column in starts:
            graph.nodes[node_id] = NodeId("datasetField", ns, dataset, column)
        deadline = time.monotonic() + self.timeout
        self._walk(graph, graph.starts, 1, limit, _FIELD_ALIASES, as_of, deadline)
        for direction in directions:
            self._walk(graph, list(graph.nodes), depth, limit, _FIELD_LEVEL[direction], as_of, deadline)
        self._edges(graph, _FIELD_EDGES, as_of, deadline)
        return graph

    def _remaining(self, graph: Graph, deadline: float) -> float | None:
        """Seconds left of the question's budget; None (and the graph flagged) when it is spent."""
        remaining = deadline - time.monotonic()
        if remaining < 0.001:  # the driver sends milliseconds, and 0 means no limit
            graph.stopped = graph.stopped or "time"
            return None
        return remaining

    def _walk(self, graph: Graph, start: Sequence[str], hops: int, limit: int, levels: _Levels, as_of: str | None,
              deadline: float) -> None:
        """Breadth-first from ``start`` for at most ``hops`` levels, adding the nodes reached to ``graph`` in the
        order reached; stops (flagged) once more than ``limit`` nodes are known or the time is up (the levels of a
        query cut by the time are lost with it)."""
        frontier = list(start)
        while hops > 0 and frontier and not graph.stopped:
            remaining = self._remaining(graph, deadline)
            if remaining is None:
                return
            try:
                found = self._read(levels.query, remaining, ids=frontier, seen=list(graph.nodes), hops=hops,
                                   cap=limit + 1, asOf=as_of)[0][0]
            except QueryTimeout:
                graph.stopped = "time"
                return
            hops -= levels.count
            for rows in found:
                frontier = []
                for element, kind, namespace, name, *more in rows:
                    if len(graph.nodes) == limit:
                        graph.stopped = "nodes"
                        return
                    if levels.data:
                        graph.data[element] = more.pop()
                    graph.nodes[element] = NodeId(kind, namespace, name, *more)
                    frontier.append(element)
                if not frontier:
                    return

    def _edges(self, graph: Graph, query: str, as_of: str | None, deadline: float) -> None:
        """The stored edges among the graph's nodes (at most ``max_rows_per_level``, flagged beyond)."""
        remaining = self._remaining(graph, max(deadline, time.monotonic() + 1.0))  # a walk cut by time still
        try:                                                                       # gets its edges
            rows = self._read(query, remaining, ids=list(graph.nodes), rows=self.max_rows_per_level + 1,
                              asOf=as_of)[0][0]
        except QueryTimeout:
            graph.stopped = "time"
            return
        if len(rows) > self.max_rows_per_level:
            graph.stopped, rows = "edges", rows[:self.max_rows_per_level]
        graph.edges.update({(start, end): transformation for start, end, transformation in rows})


def run_facets(run: dict[str, Any]) -> dict[str, Any]:
    """A run row's facets (popping the two JSON texts the sink keeps): the START event's, updated by the latest
    other event's (OpenLineage's ACCUMULATIVE content mode, the default), or the latest event's alone when its job
    declares COMPLETE_SNAPSHOT events (``contentMode``). A facet sent as ``"_deleted": true`` is left out."""
    start, latest = _json_object(run.pop("startRunFacets", None)), _json_object(run.pop("runFacets", None))
    snapshot = run.pop("contentMode", None) == "COMPLETE_SNAPSHOT"
    merged = (latest or start) if snapshot else {**start, **latest}
    return {key: facet for key, facet in merged.items() if not (isinstance(facet, dict) and facet.get("_deleted"))}


def facet_documents(texts: Iterable[str] | None) -> dict[str, Any]:
    """A job's or dataset's facets, from its ``Facet`` JSON texts (each ``{key: facet}``; an oversized facet is
    ``{"_omitted": {key: bytes}}``, gathered under one ``_omitted``)."""
    facets: dict[str, Any] = {}
    for text in texts or ():
        document = _json_object(text)
        omitted = document.pop("_omitted", None)
        facets.update(document)
        if isinstance(omitted, dict):
            facets.setdefault("_omitted", {}).update(omitted)
    return facets


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _typed_paths(fields: list[dict[str, Any]], prefix: str = "") -> Iterable[tuple[str, str]]:
    for item in fields:
        name = item.get("name")
        if not isinstance(name, str):
            continue
        yield prefix + name, item.get("type") if isinstance(item.get("type"), str) else ""
        nested = item.get("fields")
        if isinstance(nested, list):
            yield from _typed_paths([f for f in nested if isinstance(f, dict)], prefix + name + ".")
