"""Backfill plans ("time-window repair"): what must re-run, in which order, after a dataset's partitions in a
date window were wrong.

``fetch_facts`` reads what a plan needs in a bounded number of queries (one per job level, at most ``depth``, then
one for the start dataset's partition keys and one for the runs of the jobs found); ``plan`` is pure:

- **Window**: the start dataset's partitions whose date lies in [from, to] (inclusive). A partition's date is its
  ``date`` key, else the first key whose value is a date (``YYYY-MM-DD`` or ``YYYYMMDD``). A dataset none of whose
  partitions carries a date cannot be planned by date (``PlanError``).
- **Jobs**: breadth-first downstream of the dataset over ``INPUT_TO``/``OUTPUTS`` (as impact), job level ≤ depth.
- **Derivation**, to a fixpoint (monotone over finite sets, so cycles end): a run of a job found that read an
  affected partition makes every partition it wrote affected (partition level, transitively). A job that reads an
  affected dataset about which none of its runs recorded a partition read falls back to the job level: it is planned
  with the window's keys on each of its outputs (``partitions: unknown``), and those outputs count as affected by
  window for the jobs after it.
- **Work items** are (job, partition key): one run of the job rebuilds every listed output partition with that key.
  An item depends on the items that rebuild what it reads (for a by-window item: anything rebuilt in the datasets it
  reads). Stages are the longest-path layering of that graph (every item's upstream items are in earlier stages),
  items sorted within a stage; items in a dependency cycle are layered as one (their cycle is reported, and the job
  graph's cycles too).
- **Last known run** of an item: the current version's writer of its first output partition (``current_version``
  in ``partitions``: live versions by writer start, a backfill version only when it started later), else the job's
  latest run by start.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from neo4j import Driver, Query, RoutingControl

from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.partitions import UnknownDataset
from kafka_lineage.schemas.partitions import FACET_KEY, parse_key_text, partition_facet

__all__ = ["BackfillFacts", "PlanError", "RunFacts", "fetch_facts", "partition_date", "plan", "plan_id",
           "stale_events"]

MAX_DEPTH = 50  # the cap impact has (queries.MAX_DEPTH)
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/graph/backfill.py"
DATASET_EVENT_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
MAX_RUNS_PER_JOB = 2000  # latest runs read per job (by start)

Ref = tuple[str, str]  # (namespace, name)
PartRef = tuple[str, str, str]  # (namespace, name, key)

_ISO_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_COMPACT_DAY = re.compile(r"(\d{4})(\d{2})(\d{2})")


class PlanError(ValueError):
    """The plan cannot be made as asked (a bad window or depth, a dataset without dated partitions)."""


@dataclass(frozen=True)
class RunFacts:
    """One run of a job found downstream: its partition reads and writes (full names and key text)."""

    run_id: str
    job: Ref
    state: str | None
    start: str  # START time, else ""
    end: str | None = None
    backfill: str | None = None  # the planId of its kafkaLineage_backfill facet
    reads: tuple[PartRef, ...] = ()
    writes: tuple[PartRef, ...] = ()


@dataclass(frozen=True)
class BackfillFacts:
    dataset: Ref
    keys: tuple[str, ...]  # the start dataset's partition keys
    job_depth: Mapping[Ref, int]  # job → its level (1: reads the dataset)
    job_inputs: Mapping[Ref, tuple[Ref, ...]]
    job_outputs: Mapping[Ref, tuple[Ref, ...]]
    runs: tuple[RunFacts, ...] = ()
    truncated: bool = False  # jobs exist below the depth asked


# --- pure -------------------------------------------------------------------------------------------------------------
def _day(value: str) -> date | None:
    match = _ISO_DAY.fullmatch(value) or _COMPACT_DAY.fullmatch(value)
    if not match:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def partition_date(key: str) -> date | None:
    """The date of a partition key text: its ``date`` key, else the first key whose value is a date."""
    try:
        pairs = parse_key_text(key)
    except ValueError:
        return None
    named = dict(pairs).get("date")
    if named is not None:
        return _day(named)
    return next((d for _, value in pairs if (d := _day(value)) is not None), None)


def parse_day(text: str, what: str) -> date:
    day = _day(text.strip())
    if day is None:
        raise PlanError(f"{what}: a date YYYY-MM-DD or YYYYMMDD, got {text!r}")
    return day


def plan_id(dataset: Ref, start: date, end: date, depth: int) -> str:
    """Deterministic for the question asked, so a scheduler re-planning the same window gets the same id."""
    text = "\n".join((dataset[0], dataset[1], start.isoformat(), end.isoformat(), str(depth)))
    return "bf-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def version_order(run: RunFacts) -> tuple[str, int, str]:
    """Current-version order (as ``partitions.version_order``): writer start, then a live run over a backfill
    run started at the same time, then run id."""
    return run.start, 0 if run.backfill else 1, run.run_id


@dataclass
class _Item:
    job: Ref
    key: str
    by_window: bool
    outputs: set[PartRef] = field(default_factory=set)
    inputs: set[PartRef] = field(default_factory=set)  # key "" for a by-window input dataset
    runs: set[str] = field(default_factory=set)


def _sccs(nodes: Sequence[Any], edges: Mapping[Any, Iterable[Any]]) -> list[list[Any]]:
    """Strongly connected components (iterative Tarjan), each sorted; deterministic for sorted ``nodes``."""
    index: dict[Any, int] = {}
    low: dict[Any, int] = {}
    on_stack: set[Any] = set()
    stack: list[Any] = []
    out: list[list[Any]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(sorted(component))
    return out


def _cycles(nodes: Sequence[Any], edges: Mapping[Any, Iterable[Any]]) -> list[list[Any]]:
    return sorted(c for c in _sccs(nodes, edges) if len(c) > 1 or c[0] in edges.get(c[0], ()))


def _ref(r: Ref) -> dict[str, str]:
    return {"namespace": r[0], "name": r[1]}


def _last_run(run: RunFacts | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"runId": run.run_id, "state": run.state, "startTime": run.start or None, "endTime": run.end,
            "backfill": run.backfill}


def plan(facts: BackfillFacts, start: date, end: date, depth: int) -> dict[str, Any]:
    """The plan as JSON-ready dict (shape in the README's scheduler section); ``PlanError`` when it cannot be made."""
    if end < start:
        raise PlanError(f"--to {end.isoformat()} is before --from {start.isoformat()}")
    dated = {key: partition_date(key) for key in facts.keys}
    if not facts.keys:
        raise PlanError(f"dataset {facts.dataset[0]} {facts.dataset[1]} has no partitions in the graph")
    if all(day is None for day in dated.values()):
        raise PlanError(f"dataset {facts.dataset[0]} {facts.dataset[1]}: no partition key is a date (a 'date' key, "
                        "or a value YYYY-MM-DD / YYYYMMDD), so a date window selects nothing")
    window = sorted(key for key, day in dated.items() if day is not None and start <= day <= end)
    jobs = sorted(job for job, level in facts.job_depth.items() if level <= depth)
    job_set = set(jobs)
    runs_of: dict[Ref, list[RunFacts]] = defaultdict(list)
    for run in sorted(facts.runs, key=lambda r: r.run_id):
        if run.job in job_set:
            runs_of[run.job].append(run)
    partition_read: dict[Ref, set[Ref]] = {job: {(ns, nm) for r in runs_of[job] for ns, nm, _ in r.reads}
                                           for job in jobs}

    affected: set[PartRef] = {(*facts.dataset, key) for key in window}
    by_window: set[Ref] = set()  # datasets affected with partitions unknown
    items: dict[tuple[Ref, str], _Item] = {}
    changed = bool(window)
    while changed:  # monotone: every pass only adds, over finite sets
        changed = False
        affected_datasets = {(ns, nm) for ns, nm, _ in affected} | by_window
        for job in jobs:
            for run in runs_of[job]:
                if not any(p in affected for p in run.reads):
                    continue
                for out in run.writes:
                    item = items.setdefault((job, out[2]), _Item(job, out[2], False))
                    before = (len(item.outputs), len(item.inputs), len(item.runs))
                    item.outputs.add(out)
                    item.inputs.update(run.reads)
                    item.runs.add(run.run_id)
                    if out not in affected:
                        affected.add(out)
                        changed = True
                    changed |= before != (len(item.outputs), len(item.inputs), len(item.runs))
            # fall back to the job level: an affected input no run of the job recorded partitions of
            blind = sorted(d for d in facts.job_inputs.get(job, ())
                           if d in affected_datasets and (d in by_window or d not in partition_read[job]))
            if blind:
                for key in window:
                    item = items.setdefault((job, key), _Item(job, key, True))
                    before = (len(item.outputs), len(item.inputs))
                    item.by_window = True
                    item.outputs.update((*o, key) for o in facts.job_outputs.get(job, ()))
                    item.inputs.update((*d, "") for d in blind)
                    changed |= before != (len(item.outputs), len(item.inputs))
                for out in facts.job_outputs.get(job, ()):
                    if out not in by_window:
                        by_window.add(out)
                        changed = True
    planned = sorted((i for i in items.values() if i.outputs), key=lambda i: (i.job, i.key))

    # dependencies: who rebuilds what each item reads
    rebuilt_by: dict[PartRef, set[int]] = defaultdict(set)
    rebuilt_in: dict[Ref, set[int]] = defaultdict(set)
    for n, item in enumerate(planned):
        for out in item.outputs:
            rebuilt_by[out].add(n)
            rebuilt_in[out[:2]].add(n)
    upstream: dict[int, set[int]] = {}
    for n, item in enumerate(planned):
        ups: set[int] = set()
        for ns, nm, key in item.inputs:
            ups |= rebuilt_in[(ns, nm)] if key == "" else rebuilt_by[(ns, nm, key)]
        upstream[n] = ups - {n}

    # longest-path layering over the condensation (a cycle's items share a layer)
    components = _sccs(list(range(len(planned))), upstream)
    component_of = {n: c for c, members in enumerate(components) for n in members}
    stage_of: dict[int, int] = {}
    for c, members in enumerate(components):  # Tarjan emits a component after everything it reaches: upstream first
        ups = {component_of[u] for m in members for u in upstream[m]} - {c}
        stage_of[c] = 1 + max((stage_of[u] for u in ups), default=-1)
    stages: dict[int, list[int]] = defaultdict(list)
    for n in range(len(planned)):
        stages[stage_of[component_of[n]]].append(n)

    latest_of_job = {job: max(rs, key=version_order) for job, rs in runs_of.items() if rs}
    writers: dict[PartRef, list[RunFacts]] = defaultdict(list)
    for job in jobs:
        for run in runs_of[job]:
            for out in run.writes:
                writers[out].append(run)

    def last_run(item: _Item) -> RunFacts | None:
        for out in sorted(item.outputs):
            if writers.get(out):
                return max(writers[out], key=version_order)
        return latest_of_job.get(item.job)

    def as_json(n: int) -> dict[str, Any]:
        item = planned[n]
        return {
            "job": _ref(item.job), "key": item.key,
            "partitions": "unknown" if item.by_window else "known",
            "derivation": "window" if item.by_window else "partition",
            "rebuild": [{"namespace": ns, "name": nm, "key": key} for ns, nm, key in sorted(item.outputs)],
            "inputs": [{"namespace": ns, "name": nm, "key": key or None} for ns, nm, key in sorted(item.inputs)],
            "after": sorted(f"{planned[u].job[0]} {planned[u].job[1]} {planned[u].key}" for u in upstream[n]),
            "lastRun": _last_run(last_run(item))}

    job_edges: dict[Ref, set[Ref]] = defaultdict(set)
    readers: dict[Ref, set[Ref]] = defaultdict(set)
    for job in jobs:
        for d in facts.job_inputs.get(job, ()):
            readers[d].add(job)
    for job in jobs:
        for d in facts.job_outputs.get(job, ()):
            job_edges[job] |= readers.get(d, set())
    ordered_stages = [sorted(stages[s], key=lambda n: (planned[n].job, planned[n].key)) for s in sorted(stages)]
    return {
        "planId": plan_id(facts.dataset, start, end, depth),
        "dataset": _ref(facts.dataset), "window": {"from": start.isoformat(), "to": end.isoformat()},
        "depth": depth, "truncated": facts.truncated,
        "partitions": window,
        "jobs": [_ref(job) for job in dict.fromkeys(planned[n].job for s in ordered_stages for n in s)],
        "itemCount": len(planned),
        "stages": [{"stage": i, "items": [as_json(n) for n in s]} for i, s in enumerate(ordered_stages)],
        "cycles": [[_ref(job) for job in cycle] for cycle in _cycles(jobs, job_edges)],
    }


def stale_events(result: Mapping[str, Any], requested_at: str) -> tuple[list[dict[str, Any]], int]:
    """(DatasetEvents marking each planned partition stale, partitions left out): one event per known partition a
    plan rebuilds, carrying the partition facet with its ``stale`` request. Published like any event, so a replay
    rebuilds the marks; by-window items name no partition of their outputs (left out, counted)."""
    events, skipped, seen = [], 0, set()
    dataset, window = result["dataset"], result["window"]
    reason = (f"backfill plan {result['planId']}: {dataset['namespace']} {dataset['name']} "
              f"{window['from']}..{window['to']}")
    for stage in result["stages"]:
        for item in stage["items"]:
            for out in item["rebuild"]:
                ident = (out["namespace"], out["name"], out["key"])
                if item["partitions"] != "known":
                    skipped += 1
                    continue
                if ident in seen:
                    continue
                seen.add(ident)
                try:
                    keys = parse_key_text(out["key"])
                except ValueError:  # a key stored by its hash (too long to index): not a key text
                    skipped += 1
                    continue
                stale = {"reason": reason, "requestedAt": requested_at,
                         "upstream": {**dataset, "planId": result["planId"]}}
                events.append({"eventTime": requested_at, "producer": PRODUCER, "schemaURL": DATASET_EVENT_URL,
                               "dataset": {"namespace": out["namespace"], "name": out["name"], "facets": {
                                   FACET_KEY: partition_facet(keys, "hook", producer=PRODUCER, stale=stale)}}})
    return events, skipped


# --- Cypher -------------------------------------------------------------------------------------------------------
_NAMES = "[coalesce({v}.fullNamespace, {v}.namespace), coalesce({v}.fullName, {v}.name)]"
_START = ("OPTIONAL MATCH (d:Dataset {namespace: $namespace, name: $name}) WITH d "
          "RETURN d IS NOT NULL, COLLECT { MATCH (d)-[:HAS_PARTITION]->(q:Partition) RETURN q.key }")
# one job level: the jobs reading the frontier datasets, with every input and output of theirs
_LEVEL = ("UNWIND $frontier AS f MATCH (:Dataset {namespace: f[0], name: f[1]})-[:INPUT_TO]->(j:Job) "
          "WITH DISTINCT j RETURN collect([[j.namespace, j.name], " + _NAMES.format(v="j") + ", "
          "[(i:Dataset)-[:INPUT_TO]->(j) | [[i.namespace, i.name], " + _NAMES.format(v="i") + "]], "
          "[(j)-[:OUTPUTS]->(o:Dataset) | [[o.namespace, o.name], " + _NAMES.format(v="o") + "]]])")
_NAMES_P = ("[[(p)<-[:HAS_PARTITION]-(pd:Dataset) | " + _NAMES.format(v="pd") + "][0], p.key]")
_RUNS = ("UNWIND $jobs AS k MATCH (j:Job {namespace: k[0], name: k[1]}) "
         "CALL (j) { MATCH (j)<-[:OF_JOB]-(r:Run) WITH r ORDER BY coalesce(r.startTime, '') DESC, r.runId DESC "
         "LIMIT $maxRuns RETURN collect([r.runId, r.state, coalesce(r.startTime, ''), r.endTime, r.backfillPlanId, "
         "[(r)-[:READ_PARTITION]->(p:Partition) | " + _NAMES_P + "], "
         "[(r)-[:WROTE_PARTITION]->(:PartitionVersion)<-[:HAS_VERSION]-(p:Partition) | " + _NAMES_P + "]]) AS runs } "
         "RETURN collect([" + _NAMES.format(v="j") + ", runs])")


def _one(driver: Driver, text: str, timeout: float, **params: Any) -> list[Any]:
    records, _, _ = driver.execute_query(Query(text, timeout=timeout), params, routing_=RoutingControl.READ)
    return list(records[0].values())


def fetch_facts(driver: Driver, namespace: str, name: str, depth: int, timeout: float = 10.0) -> BackfillFacts:
    """The facts ``plan`` needs: the dataset's partition keys, the jobs downstream to ``depth`` (one query per
    level), the latest runs of those jobs with their partition reads and writes (one query). ``UnknownDataset``."""
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise PlanError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    ns, nm = stored_key(namespace), stored_key(name)
    found, keys = _one(driver, _START, timeout, namespace=ns, name=nm)
    if not found:
        raise UnknownDataset(f"dataset {namespace} {name} is not in the graph")
    full: dict[tuple[str, str], Ref] = {(ns, nm): (namespace, name)}  # stored key → full names
    job_depth: dict[Ref, int] = {}
    inputs: dict[Ref, tuple[Ref, ...]] = {}
    outputs: dict[Ref, tuple[Ref, ...]] = {}
    job_keys: dict[Ref, list[str]] = {}
    seen = {(ns, nm)}
    frontier = [[ns, nm]]
    truncated = False
    for level in range(1, depth + 2):  # one level past the depth, to say whether the plan was cut
        if not frontier:
            break
        (rows,) = _one(driver, _LEVEL, timeout, frontier=frontier)
        fresh = [row for row in rows if tuple(row[1]) not in job_depth]
        if level > depth:
            truncated = bool(fresh)
            break
        frontier = []
        for stored, names, ins, outs in fresh:
            job = tuple(names)
            job_depth[job], job_keys[job] = level, stored
            for key_, full_ in (*ins, *outs):
                full[tuple(key_)] = tuple(full_)
            inputs[job] = tuple(sorted(tuple(f) for _, f in ins))
            outputs[job] = tuple(sorted(tuple(f) for _, f in outs))
            for key_, _ in outs:
                if tuple(key_) not in seen:
                    seen.add(tuple(key_))
                    frontier.append(list(key_))
    runs: list[RunFacts] = []
    if job_keys:
        (rows,) = _one(driver, _RUNS, timeout, jobs=list(job_keys.values()), maxRuns=MAX_RUNS_PER_JOB)
        for job_names, job_runs in rows:
            for run_id, state, started, ended, planned, reads, writes in job_runs:
                runs.append(RunFacts(run_id, tuple(job_names), state, started, ended, planned,
                                     tuple(sorted({(*r[0], r[1]) for r in reads if r[0]})),
                                     tuple(sorted({(*w[0], w[1]) for w in writes if w[0]}))))
    return BackfillFacts((namespace, name), tuple(sorted(keys)), job_depth, inputs, outputs, tuple(runs), truncated)
