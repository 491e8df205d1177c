"""The graph's fingerprint: ``FINGERPRINT_QUERIES`` read every lineage node's identity (``Facet`` documents are
descriptive) and every relationship's type and end identities, plus the lineage-relevant properties ``Run.state``,
``DERIVES_FROM``/``DEPENDS_ON.transformation``, ``SAME_AS.type``, ``WROTE.rowCount``/``bytes`` and the lineage
edges' ``firstSeen``/``lastSeen``. Other times, ``…Order`` bookkeeping and descriptive facet values are left out:
they are derived from the same events, but the fingerprint answers "is this the same lineage", and leaving them out
keeps it stable when the sink later adds descriptive properties. ``PARTITION_FINGERPRINT_QUERIES`` add the partition
nodes and edges with every fact a partition state is computed from (marker reports, required marker, assertion
results, rows, bytes, first/last seen); they are hashed only when the graph has partitions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka_lineage.graph.keys import canonical_json

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
        rows = sorted(canonical_json(dict(row) if isinstance(row, Mapping) else list(row))
                      for row in rows_by_query.get(name, ()))
        digest.update(canonical_json([name, len(rows)]).encode())
        for row in rows:
            digest.update(b"\n" + row.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()
