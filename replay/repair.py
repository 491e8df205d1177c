"""``lineage replay --from A --to B --repair``: the graph for an eventTime window made equal to what the window's
events say.

A plain replay of a window only adds: it writes what the window's events produce, idempotently. ``--repair`` also
takes away, within the window, what the graph holds and the replayed events no longer produce — a run recorded from
an event the topic no longer has (a corrected re-publication, compaction) or one that a different processor
configuration named differently (``LINEAGE_PARTITION_PATTERNS``, namespace aliases). In three steps:

1. ``forget_runs`` (before the replay): every run whose times lie wholly inside the window (start and last event)
   is deleted with its edges and partition versions; the replay then writes again exactly the runs the window's
   events name, with their states, times and edges as those events say.
2. The replay, collecting what it produced (``Produced``: identities per row kind, first/last-seen per edge).
3. ``settle`` (after it): job-level edges (INPUT_TO, OUTPUTS, DERIVES_FROM, DEPENDS_ON, SAME_AS) first and last
   seen inside the window and not produced are deleted; produced ones whose first (last) seen lies inside the window
   take the window's own first (last) seen — exact, since no evidence before (after) the window exists for them;
   then partitions, datasets and jobs the removals left with nothing (no version, no lineage, no run) are deleted
   unless the window produced them, with what hangs only on them (fields, schema versions, facet documents).

Nothing outside the window changes. Not repaired: a run that began before the window (its events outside are not
read), and node properties merged across events (a dataset's latest schema); a fresh rebuild recomputes those.
Readers see the window's runs missing while the replay rewrites them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from neo4j import Driver

from kafka_lineage.graph.batch import ROW_IDENTITY, GraphBatch

Key = tuple[Any, ...]
_SEEN_IN_WINDOW = "e.firstSeen >= $from AND ($to IS NULL OR e.lastSeen <= $to)"
# Row kind → (the graph's edges of that kind the window decides about, identity in ROW_IDENTITY order; the match of
# one edge ``e`` by identity ``k``).
_JOB_EDGES = {
    "input_to": (f"MATCH (d:Dataset)-[e:INPUT_TO]->(j:Job) WHERE {_SEEN_IN_WINDOW} "
                 "RETURN d.namespace, d.name, j.namespace, j.name",
                 "MATCH (:Dataset {namespace: k[0], name: k[1]})-[e:INPUT_TO]->(:Job {namespace: k[2], name: k[3]})"),
    "outputs": (f"MATCH (j:Job)-[e:OUTPUTS]->(d:Dataset) WHERE {_SEEN_IN_WINDOW} "
                "RETURN j.namespace, j.name, d.namespace, d.name",
                "MATCH (:Job {namespace: k[0], name: k[1]})-[e:OUTPUTS]->(:Dataset {namespace: k[2], name: k[3]})"),
    "derives_from": (f"MATCH (o:Field)-[e:DERIVES_FROM]->(i:Field) WHERE {_SEEN_IN_WINDOW} "
                     "RETURN o.namespace, o.name, o.field, i.namespace, i.name, i.field",
                     "MATCH (:Field {namespace: k[0], name: k[1], field: k[2]})-[e:DERIVES_FROM]->"
                     "(:Field {namespace: k[3], name: k[4], field: k[5]})"),
    "depends_on": (f"MATCH (d:Dataset)-[e:DEPENDS_ON]->(i:Field) WHERE {_SEEN_IN_WINDOW} "
                   "RETURN d.namespace, d.name, i.namespace, i.name, i.field",
                   "MATCH (:Dataset {namespace: k[0], name: k[1]})-[e:DEPENDS_ON]->"
                   "(:Field {namespace: k[2], name: k[3], field: k[4]})"),
    "same_as": (f"MATCH (d:Dataset)-[e:SAME_AS]->(a:Dataset) WHERE {_SEEN_IN_WINDOW} "
                "RETURN d.namespace, d.name, a.namespace, a.name",
                "MATCH (:Dataset {namespace: k[0], name: k[1]})-[e:SAME_AS]->(:Dataset {namespace: k[2], name: k[3]})"),
}
_RUNS_IN_WINDOW = ("MATCH (r:Run) WHERE coalesce(r.startTime, r.lastEventTime) >= $from "
                   "AND ($to IS NULL OR coalesce(r.lastEventTime, r.startTime) <= $to) "
                   "OPTIONAL MATCH (r)-[:OF_JOB]->(j:Job) "
                   "RETURN r.runId AS run, [j.namespace, j.name] AS job, "
                   "[(r)-[:READ|WROTE]->(d:Dataset) | [d.namespace, d.name]] AS datasets, "
                   "[(r)-[:READ_PARTITION]->(p:Partition) | [p.namespace, p.name, p.key]] "
                   "+ [(r)-[:WROTE_PARTITION]->(v:PartitionVersion) | [v.namespace, v.name, v.key]] AS partitions")
_DELETE_RUNS = ("UNWIND $ids AS id MATCH (r:Run {runId: id}) "
                "OPTIONAL MATCH (r)-[:WROTE_PARTITION]->(v:PartitionVersion) DETACH DELETE v, r")
# A job's latest-run pointer after some of its runs are gone (the sink's rule: the largest start time, then run id).
_REFRESH_LATEST_RUN = (
    "UNWIND $keys AS k MATCH (j:Job {namespace: k[0], name: k[1]}) "
    "OPTIONAL CALL (j) { MATCH (x:Run)-[:OF_JOB]->(j) WITH x, coalesce(x.startTime, x.lastEventTime, '') AS xKey "
    "ORDER BY xKey DESC, x.runId DESC LIMIT 1 RETURN x.runId AS found, xKey } "
    "SET j.latestRunId = found, j.latestRunKey = xKey")
_DELETE_EMPTY_PARTITIONS = (
    "UNWIND $keys AS k MATCH (p:Partition {namespace: k[0], name: k[1], key: k[2]}) "
    "WHERE NOT EXISTS { (p)-[:HAS_VERSION]->() } AND NOT EXISTS { ()-[:READ_PARTITION]->(p) } "
    "AND size(coalesce(p.markers, [])) = 0 DETACH DELETE p RETURN count(p)")
_LINEAGE_LEFT = ("EXISTS { (d)-[:INPUT_TO]->(:Job) } OR EXISTS { (:Job)-[:OUTPUTS]->(d) } "
                 "OR EXISTS { (:Run)-[:READ|WROTE]->(d) } OR EXISTS { (d)-[:SAME_AS]-(:Dataset) } "
                 "OR EXISTS { (d)-[:DEPENDS_ON]->(:Field) } OR EXISTS { (d)-[:HAS_PARTITION]->(:Partition) } "
                 "OR EXISTS { (d)-[:HAS_FIELD]->(:Field)-[:DERIVES_FROM]-(:Field) }")
_DELETE_ORPHAN_DATASETS = (
    "UNWIND $keys AS k MATCH (d:Dataset {namespace: k[0], name: k[1]}) WHERE NOT (" + _LINEAGE_LEFT + ") "
    "OPTIONAL MATCH (d)-[:HAS_FIELD]->(f:Field) OPTIONAL MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) "
    "OPTIONAL MATCH (doc:Facet {of: 'dataset', namespace: d.namespace, name: d.name}) "
    "DETACH DELETE f, s, doc, d RETURN count(DISTINCT d)")
_DELETE_ORPHAN_JOBS = (
    "UNWIND $keys AS k MATCH (j:Job {namespace: k[0], name: k[1]}) WHERE NOT EXISTS { (j)--() } "
    "OPTIONAL MATCH (doc:Facet {of: 'job', namespace: j.namespace, name: j.name}) "
    "DETACH DELETE doc, j RETURN count(DISTINCT j)")
_KINDS = ("runs", "jobs", "datasets", "partitions", *_JOB_EDGES)


@dataclass
class Produced:
    """What the window's events produced: identities per row kind and, per job-level edge, its first/last seen."""

    keys: dict[str, set[Key]] = field(default_factory=lambda: defaultdict(set))
    seen: dict[str, dict[Key, list[str]]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, batch: GraphBatch) -> None:
        for kind in _KINDS:
            columns = ROW_IDENTITY[kind]
            for row in batch[kind]:
                key = tuple(row[c] for c in columns)
                self.keys[kind].add(key)
                if kind in _JOB_EDGES and row.get("firstSeen") is not None:
                    first, last = row["firstSeen"], row.get("lastSeen") or row["firstSeen"]
                    known = self.seen[kind].setdefault(key, [first, last])
                    known[0], known[1] = min(known[0], first), max(known[1], last)


@dataclass
class Forgotten:
    """What ``forget_runs`` deleted, and the nodes that may be left with nothing once the replay has written."""

    runs: int = 0
    jobs: set[Key] = field(default_factory=set)
    datasets: set[Key] = field(default_factory=set)
    partitions: set[Key] = field(default_factory=set)


@dataclass
class RepairReport:
    runs: int = 0  # deleted and not written again
    edges: int = 0
    partitions: int = 0
    datasets: int = 0
    jobs: int = 0


def _window(start: str, end: str | None) -> dict[str, str | None]:
    return {"from": start, "to": end}


def forget_runs(driver: Driver, start: str, end: str | None) -> tuple[Forgotten, set[str]]:
    """Delete the runs lying wholly inside the window (the replay writes back those its events name); returns what
    they touched and their ids."""
    forgotten, ids = Forgotten(), set()
    for record in driver.execute_query(_RUNS_IN_WINDOW, **_window(start, end)).records:
        ids.add(record["run"])
        if record["job"][0] is not None:
            forgotten.jobs.add(tuple(record["job"]))
        forgotten.datasets.update(tuple(d) for d in record["datasets"])
        forgotten.partitions.update(tuple(p) for p in record["partitions"])
    if ids:
        driver.execute_query(_DELETE_RUNS, ids=sorted(ids))
    forgotten.runs = len(ids)
    return forgotten, ids


def not_produced(found: set[Key], produced: set[Key]) -> list[list[Any]]:
    """Identities of the graph's elements the window decides about that its events did not produce, sorted."""
    return sorted(list(key) for key in found - produced)


def settle(driver: Driver, produced: Produced, forgotten: Forgotten, forgotten_ids: set[str], start: str,
           end: str | None) -> RepairReport:
    """After the window's replay: remove its edges no event produced, correct the produced edges' seen times inside
    it, and delete what was left with nothing."""
    report = RepairReport(runs=len(forgotten_ids - {run for (run,) in produced.keys["runs"]}))
    window = _window(start, end)
    datasets, jobs = set(forgotten.datasets), set(forgotten.jobs)
    for kind, (listing, match) in _JOB_EDGES.items():
        found = {tuple(r.values()) for r in driver.execute_query(listing, **window).records}
        extra = not_produced(found, produced.keys[kind])
        if extra:
            driver.execute_query(f"UNWIND $keys AS k {match} DELETE e", keys=extra)
            report.edges += len(extra)
            for key in extra:  # the ends that may now be left without lineage
                if kind == "input_to":
                    datasets.add(tuple(key[:2]))
                    jobs.add(tuple(key[2:]))
                elif kind == "outputs":
                    jobs.add(tuple(key[:2]))
                    datasets.add(tuple(key[2:]))
                else:
                    datasets.add(tuple(key[:2]))
        seen = [[list(key), first, last] for key, (first, last) in sorted(produced.seen[kind].items())]
        if seen:
            driver.execute_query(
                f"UNWIND $rows AS row WITH row, row[0] AS k {match} "
                "SET e.firstSeen = CASE WHEN e.firstSeen >= $from THEN row[1] ELSE e.firstSeen END, "
                "e.lastSeen = CASE WHEN $to IS NULL OR e.lastSeen <= $to THEN row[2] ELSE e.lastSeen END",
                rows=seen, **window)
    if jobs:
        driver.execute_query(_REFRESH_LATEST_RUN, keys=sorted(list(k) for k in jobs))
    if partitions := not_produced(forgotten.partitions, produced.keys["partitions"]):
        report.partitions = driver.execute_query(_DELETE_EMPTY_PARTITIONS, keys=partitions).records[0][0]
    if orphans := not_produced(datasets, produced.keys["datasets"]):
        report.datasets = driver.execute_query(_DELETE_ORPHAN_DATASETS, keys=orphans).records[0][0]
    if orphans := not_produced(jobs, produced.keys["jobs"]):
        report.jobs = driver.execute_query(_DELETE_ORPHAN_JOBS, keys=orphans).records[0][0]
    return report
