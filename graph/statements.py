"""The Cypher that writes a ``GraphBatch``: one fixed, parameterized ``UNWIND $rows AS row MERGE …`` statement
per row kind (``STATEMENTS``), the constraints and indexes (``CONSTRAINTS``), and ``statements(batch)`` pairing each
row list with its statement, nodes first, for the sink to run in one transaction. Labels, relationship types and
property names are constants: no event value ever reaches a statement's text. Each statement applies the merge rules
of ``graph.batch`` against what the graph already holds, so writes are idempotent and order free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_lineage.graph.batch import MAX_UNION, GraphBatch


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
# A run's OF_JOB edge, and its job's pointer to its latest run (``latestRunId``, with that run's key in
# ``latestRunKey``): the run with the largest (start time, else last event time; runId), so a lineage graph's hundreds
# of jobs do not each sort their years of runs. One row per job and batch (``of_job_rows``; after the batch's runs
# are in): its runs' edges, then the best of them takes the pointer when its key passes the pointed run's; when the
# pointed run is one of the batch's and its key went down (its START came after a later event), every run of the job
# is ranked again. Ranked per OF_JOB row instead, a job with several runs in a batch was ranked once for each.
_RUN_KEY = "coalesce({0}.startTime, {0}.lastEventTime, '')"
_LATEST_RUN_OF = ("MATCH (x:Run)-[:OF_JOB]->(j) WITH j, x, " + _RUN_KEY.format("x") + " AS xKey "
                  "ORDER BY xKey DESC, x.runId DESC LIMIT 1")
_OF_JOB = (
    "UNWIND $rows AS row\nMATCH (j:Job {namespace: row.namespace, name: row.name})\n"
    "CALL (j, row) {\n"
    "  UNWIND row.runIds AS id MATCH (x:Run {runId: id}) MERGE (x)-[:OF_JOB]->(j)\n"
    "  WITH x, " + _RUN_KEY.format("x") + " AS xKey ORDER BY xKey DESC, x.runId DESC LIMIT 1\n"
    "  RETURN x.runId AS best, xKey AS bestKey\n"
    "}\n"
    "OPTIONAL MATCH (cur:Run {runId: j.latestRunId})\n"
    "WITH j, best, bestKey, cur, " + _RUN_KEY.format("cur") + " AS curKey,\n"
    "     cur.runId IN row.runIds AND " + _RUN_KEY.format("cur") + " < coalesce(j.latestRunKey, '') AS rescan\n"
    "OPTIONAL CALL (j, rescan) { WITH j WHERE rescan " + _LATEST_RUN_OF + " RETURN x.runId AS found, xKey }\n"
    "WITH j, found, xKey, best, bestKey, cur, curKey,\n"
    "     cur IS NULL OR bestKey > curKey OR (bestKey = curKey AND best >= cur.runId) AS takeBest\n"
    "SET j.latestRunId = CASE WHEN found IS NOT NULL THEN found WHEN takeBest THEN best ELSE cur.runId END,\n"
    "    j.latestRunKey = CASE WHEN found IS NOT NULL THEN xKey WHEN takeBest THEN bestKey ELSE curKey END")
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
    "of_job": _OF_JOB,  # rows: of_job_rows
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
    "CREATE INDEX run_end IF NOT EXISTS FOR (r:Run) ON (r.endTime)",  # runs per day (the home page)
    # Facets of one kind wherever they are (the datasets' tags: the alert sink asks every half minute)
    "CREATE INDEX facet_by_key IF NOT EXISTS FOR (f:Facet) ON (f.key)",
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
    covered: dict[tuple[str, str], set[str]] = {}  # (namespace, name) → the fields its versions write
    if batch["fields"] or batch["has_field"]:
        for (namespace, name, _), keys in paths.items():
            covered.setdefault((namespace, name), set()).update(keys)
    work = []
    for name in _ORDER:
        rows = batch[name]
        if not rows:
            continue
        if name == "schema_versions":
            params = [{**row, "paths": list(paths.get((row["namespace"], row["name"], row["hash"]), ()))}
                      for row in rows]
        elif name == "of_job":
            params = of_job_rows(rows)
        elif covered and name in ("fields", "has_field"):
            params = [row for row in rows if row["field"] not in covered.get((row["namespace"], row["name"]), ())]
        else:
            params = list(rows)  # the batch's own rows: the driver only reads them
        work.append((STATEMENTS[name], {"rows": params}))
    return work


def of_job_rows(of_job: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``of_job`` statement's rows: one per job of the batch's OF_JOB rows, with the ids of its runs."""
    runs: dict[tuple[str, str], list[str]] = {}
    for row in of_job:
        runs.setdefault((row["namespace"], row["name"]), []).append(row["runId"])
    return [{"namespace": namespace, "name": name, "runIds": ids} for (namespace, name), ids in runs.items()]
