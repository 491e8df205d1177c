"""The lineage server on a ground-truth workload (devtools' generator): its events, normalized as the processor
does, written by the graph sink's own statements; then the Marquez-compatible lists, runs, lineage (now and as of a
time, a dataset's SAME_AS aliases reached with it) and column lineage answer exactly what the truth says."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.processors.normalize import normalize_event
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import ChildProcess, server_process
from kafka_lineage_devtools.workload import Delivery, GroundTruth, generate, iter_batches

pytestmark = pytest.mark.integration

MARQUEZ_STATES = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "COMPLETED", "FAIL": "FAILED",
                  "ABORT": "ABORTED", None: "NEW"}


@pytest.fixture(scope="module")
def truth(clients: ClientSettings) -> GroundTruth:
    workload = generate(jobs=14, runs_per_job=3, seed=19, schema_changes=2, delivery=Delivery())
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        for batch in iter_batches(workload, 40):
            write_events(driver, [normalize_event(event)[0] for event in batch])
    return workload.truth


@pytest.fixture(scope="module")
def server(truth: GroundTruth) -> Iterator[ChildProcess]:
    with server_process({"LINEAGE_SERVER_MAX_NODES": "5000"}) as child:
        yield child


def _get(server: ChildProcess, path: str, **params: Any) -> Any:
    answer = requests.get(f"{server.url}{path}", params=params, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _seg(value: str) -> str:
    return quote(value, safe="")


def _edges(truth: GroundTruth, as_of: str | None = None) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Table-level edges as Marquez node ids (dataset → job → dataset), and the SAME_AS links (dataset → its other
    name), known by ``as_of``."""
    edges, links = set(), set()
    for ns, name, job_ns, job, first, _last in truth.graph["INPUT_TO"]:
        if as_of is None or first <= as_of:
            edges.add((f"dataset:{ns}:{name}", f"job:{job_ns}:{job}"))
    for job_ns, job, ns, name, first, _last in truth.graph["OUTPUTS"]:
        if as_of is None or first <= as_of:
            edges.add((f"job:{job_ns}:{job}", f"dataset:{ns}:{name}"))
    for ns, name, alias_ns, alias, _type, first, _last in truth.graph["SAME_AS"]:
        if as_of is None or first <= as_of:
            links.add((f"dataset:{ns}:{name}", f"dataset:{alias_ns}:{alias}"))
    return edges, links


def _closure(node: str, aliases: dict[str, set[str]]) -> set[str]:
    """``node`` and every dataset SAME_AS-linked to it, either way (the same data: reached with it, no hop)."""
    found, todo = {node}, [node]
    while todo:
        for other in aliases[todo.pop()] - found:
            found.add(other)
            todo.append(other)
    return found


def test_lists_jobs_and_runs_are_the_truth(server: ChildProcess, truth: GroundTruth) -> None:
    datasets: dict[str, set[str]] = defaultdict(set)
    for ns, name in truth.graph["Dataset"]:
        datasets[ns].add(name)
    for ns, names in datasets.items():
        listed = _get(server, f"/api/v1/namespaces/{_seg(ns)}/datasets", limit=1000)
        assert {d["name"] for d in listed["datasets"]} == names and listed["totalCount"] == len(names)
    inputs, outputs = defaultdict(set), defaultdict(set)
    for ns, name, job_ns, job, *_ in truth.graph["INPUT_TO"]:
        inputs[(job_ns, job)].add((ns, name))
    for job_ns, job, ns, name, *_ in truth.graph["OUTPUTS"]:
        outputs[(job_ns, job)].add((ns, name))
    states = dict(truth.graph["Run"])
    runs = defaultdict(set)
    for run_id, job_ns, job in truth.graph["OF_JOB"]:
        runs[(job_ns, job)].add((run_id, MARQUEZ_STATES[states[run_id]]))
    for job_ns, job in truth.graph["Job"]:
        answer = _get(server, f"/api/v1/namespaces/{_seg(job_ns)}/jobs/{_seg(job)}")
        assert {(i["namespace"], i["name"]) for i in answer["inputs"]} == inputs[(job_ns, job)]
        assert {(o["namespace"], o["name"]) for o in answer["outputs"]} == outputs[(job_ns, job)]
        listed = _get(server, f"/api/v1/namespaces/{_seg(job_ns)}/jobs/{_seg(job)}/runs", limit=1000)["runs"]
        assert {(r["id"], r["state"]) for r in listed} == runs[(job_ns, job)]


@pytest.mark.parametrize("as_of", [None, "first-quartile", "median"])
def test_lineage_is_the_truth_now_and_as_of_a_time(server: ChildProcess, truth: GroundTruth, as_of: str | None
                                                   ) -> None:
    times = sorted(row[4] for kind in ("INPUT_TO", "OUTPUTS") for row in truth.graph[kind])
    when = {None: None, "first-quartile": times[len(times) // 4], "median": times[len(times) // 2]}[as_of]
    edges, links = _edges(truth, when)
    assert truth.graph["SAME_AS"], "the workload links path datasets to their tables"
    neighbours, aliases = defaultdict(set), defaultdict(set)
    for a, b in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    for a, b in links:
        aliases[a].add(b)
        aliases[b].add(a)
    for ns, name in sorted(truth.graph["Dataset"]):
        start = f"dataset:{ns}:{name}"
        # depth 1: dataset → job → dataset; each dataset comes with its aliases, which the walk goes on from
        expected = frontier = _closure(start, aliases)
        for _ in range(2):
            frontier = {alias for node in frontier for other in neighbours[node]
                        for alias in _closure(other, aliases)} - expected
            expected = expected | frontier
        params = {"nodeId": start, "depth": 1, **({"asOf": when} if when else {})}
        graph = _get(server, "/api/v1/lineage", **params)["graph"]
        assert {n["id"] for n in graph} == expected, start
        answered = {(e["origin"], e["destination"]) for n in graph for e in n["inEdges"] + n["outEdges"]}
        assert answered == {(a, b) for a, b in edges | links if a in expected and b in expected}, start


def test_column_lineage_is_the_truth(server: ChildProcess, truth: GroundTruth) -> None:
    inputs = defaultdict(set)
    for ns, name, field, in_ns, in_name, in_field, *_ in truth.graph["DERIVES_FROM"]:
        inputs[(ns, name, field)].add(f"datasetField:{in_ns}:{in_name}:{in_field}")
    assert inputs, "the workload has column lineage"
    for (ns, name, field), expected in sorted(inputs.items()):
        node = f"datasetField:{ns}:{name}:{field}"
        graph = _get(server, "/api/v1/column-lineage", nodeId=node, depth=1)["graph"]
        start = next(n for n in graph if n["id"] == node)
        assert {f"datasetField:{f['namespace']}:{f['dataset']}:{f['field']}"
                for f in start["data"]["inputFields"]} == expected, node
