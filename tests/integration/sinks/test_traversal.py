"""Breadth-first traversals on the real Neo4j against references: a brute-force walk over the generated edge lists
in Python, and the variable-length path query the traversals replaced (it enumerates paths, so only on small
graphs). Random DAGs with diamonds, shared hubs and cycles (bad events can make them), table and column level."""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Iterator

import pytest
from neo4j import Driver

from kafka_lineage.graph.driver import driver_for, write_events
from kafka_lineage.graph.queries import (
    Reached,
    ReachedField,
    TraversalTimeout,
    column_impact,
    field_lineage,
    impact,
    traverse,
)
from kafka_lineage.runtime.config import ClientSettings
from tests.integration.conftest import lineage

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def driver(clients: ClientSettings) -> Iterator[Driver]:
    with driver_for(clients) as neo4j:
        yield neo4j


def _random_graph(seed: int, jobs: int, hubs: int, cycles: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(dataset → job reads, job → dataset writes): layered, fan-in 1-4, a few hub datasets read by many jobs, and
    ``cycles`` writes back into an earlier layer."""
    rng = random.Random(seed)
    reads, writes = [], []
    for job in range(jobs):
        output = job + hubs  # datasets 0..hubs-1 are sources/hubs; job i writes dataset i + hubs
        writes.append((job, output))
        candidates = list(range(output))
        for dataset in rng.sample(candidates, min(len(candidates), rng.randint(1, 4))):
            reads.append((dataset, job))
        if rng.random() < 0.3:
            reads.append((rng.randrange(hubs), job))
    for _ in range(cycles):
        job = rng.randrange(jobs // 2, jobs)
        writes.append((job, rng.randrange(hubs, hubs + jobs // 2)))
    return sorted(set(reads)), sorted(set(writes))


def _store(driver: Driver, namespace: str, reads: list[tuple[int, int]], writes: list[tuple[int, int]]) -> None:
    with driver.session() as session:
        session.run("UNWIND $rows AS row MERGE (d:Dataset {namespace: $ns, name: 'd' + toString(row[0])}) "
                    "MERGE (j:Job {namespace: $ns, name: 'j' + toString(row[1])}) MERGE (d)-[:INPUT_TO]->(j)",
                    rows=reads, ns=namespace).consume()
        session.run("UNWIND $rows AS row MERGE (j:Job {namespace: $ns, name: 'j' + toString(row[0])}) "
                    "MERGE (d:Dataset {namespace: $ns, name: 'd' + toString(row[1])}) MERGE (j)-[:OUTPUTS]->(d)",
                    rows=writes, ns=namespace).consume()


def _reference(reads: list[tuple[int, int]], writes: list[tuple[int, int]], start: int, depth: int,
               direction: str, namespace: str) -> list[Reached]:
    """Every node within ``depth`` jobs at its shortest depth, by relaxing distances until nothing changes."""
    edges = [(("dataset", d), ("job", j)) for d, j in reads] + [(("job", j), ("dataset", d)) for j, d in writes]
    if direction == "up":
        edges = [(b, a) for a, b in edges]
    best: dict[tuple[str, int], int] = {}
    hops = {("dataset", start): 0}
    for _ in range(2 * depth):  # hop counts only shrink; 2 * depth rounds reach every node within the bound
        for a, b in edges:
            if a in hops and hops[a] + 1 <= 2 * depth and hops[a] + 1 < best.get(b, 10 ** 9):
                best[b] = hops[a] + 1
        hops = {**best, ("dataset", start): 0}  # the start is at 0 even when a cycle also reaches it
    prefix = {"dataset": "d", "job": "j"}
    return sorted(Reached((h + 1) // 2, kind, namespace, f"{prefix[kind]}{n}") for (kind, n), h in best.items())


def _path_query(driver: Driver, namespace: str, name: str, depth: int, direction: str) -> list[Reached]:
    """The query the traversals replaced: every path enumerated, then the shortest kept per node."""
    pattern = (f"-[:INPUT_TO|OUTPUTS*1..{2 * depth}]->" if direction == "down"
               else f"<-[:INPUT_TO|OUTPUTS*1..{2 * depth}]-")
    with driver.session() as session:
        rows = session.run(f"MATCH path = (s:Dataset {{namespace: $ns, name: $name}}){pattern}(n) "
                           "WITH n, min(length(path)) AS hops RETURN CASE WHEN n:Job THEN 'job' ELSE 'dataset' END "
                           "AS kind, n.namespace AS namespace, n.name AS name, (hops + 1) / 2 AS depth",
                           ns=namespace, name=name).data()
    return sorted(Reached(r["depth"], r["kind"], r["namespace"], r["name"]) for r in rows)


@pytest.mark.parametrize("seed", range(6))
def test_traversals_match_a_brute_force_reference_and_the_path_query(driver: Driver, seed: int) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    reads, writes = _random_graph(seed, jobs=40, hubs=3, cycles=seed % 3)
    _store(driver, namespace, reads, writes)
    rng = random.Random(seed)
    for direction in ("down", "up"):
        for depth in (1, 2, 4):
            start = rng.randrange(3) if direction == "down" else rng.randrange(30, 43)
            expected = _reference(reads, writes, start, depth, direction, namespace)
            walk = traverse(driver, namespace, f"d{start}", depth, direction, limit=10_000)
            assert walk.found and not walk.truncated
            assert walk.nodes == expected, (direction, depth, start)
            assert walk.nodes == _path_query(driver, namespace, f"d{start}", depth, direction)
            # the edges are exactly the stored ones between the start and the returned nodes
            names = {(n.kind, n.name) for n in walk.nodes} | {("dataset", f"d{start}")}
            stored = {(("dataset", f"d{d}"), ("job", f"j{j}")) for d, j in reads} | \
                {(("job", f"j{j}"), ("dataset", f"d{d}")) for j, d in writes}
            returned = {((a[0], a[2]), (b[0], b[2])) for a, b in walk.edges}
            assert returned <= stored
            on_walk = {(a, b) for a, b in stored if a in names and b in names}
            if direction == "down":  # every stored edge out of a node short of the depth bound is walked
                inner = {(r.kind, r.name) for r in walk.nodes if 2 * r.depth - (r.kind == "job") < 2 * depth}
                assert {(a, b) for a, b in on_walk if a in inner or a == ("dataset", f"d{start}")} <= returned


def test_a_limit_keeps_the_nearest_nodes_and_says_it_cut(driver: Driver) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    reads, writes = _random_graph(99, jobs=60, hubs=2, cycles=0)
    _store(driver, namespace, reads, writes)
    full = traverse(driver, namespace, "d0", 20, "down", limit=10_000)
    assert not full.truncated and len(full.nodes) > 10
    cut = traverse(driver, namespace, "d0", 20, "down", limit=10)
    assert cut.truncated and cut.stopped == "nodes" and cut.nodes == full.nodes[:10]
    exact = traverse(driver, namespace, "d0", 20, "down", limit=len(full.nodes))
    assert exact.nodes == full.nodes and not exact.truncated
    spent = traverse(driver, namespace, "d0", 20, "down", limit=10_000, timeout=0.0)
    assert spent.truncated and spent.stopped == "time"
    with pytest.raises(TraversalTimeout):  # a bare list cannot say it is partial
        impact(driver, namespace, "d0", 20, timeout=0.0)


def test_an_unknown_dataset_is_not_found_rather_than_empty(driver: Driver) -> None:
    walk = traverse(driver, f"bfs-{uuid.uuid4().hex[:8]}", "nope", 3)
    assert not walk.found and walk.nodes == [] and not walk.truncated


def test_column_traversals_walk_breadth_first_with_cycles(driver: Driver) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    # a.x → b.x → c.x → a.x (a cycle from bad events), b.x → d.y, and a diamond a.x → {b.z, c.z} → e.z
    derives = [("b", "x", "a", "x"), ("c", "x", "b", "x"), ("a", "x", "c", "x"), ("d", "y", "b", "x"),
               ("b", "z", "a", "x"), ("c", "z", "a", "x"), ("e", "z", "b", "z"), ("e", "z", "c", "z")]
    with driver.session() as session:
        session.run("UNWIND $rows AS row MERGE (o:Field {namespace: $ns, name: row[0], field: row[1]}) "
                    "MERGE (i:Field {namespace: $ns, name: row[2], field: row[3]}) MERGE (o)-[:DERIVES_FROM]->(i)",
                    rows=derives, ns=namespace).consume()
    down = field_lineage(driver, namespace, "a", "x", depth=5)
    assert down == sorted([ReachedField(1, namespace, "b", "x"), ReachedField(1, namespace, "b", "z"),
                           ReachedField(1, namespace, "c", "z"), ReachedField(2, namespace, "c", "x"),
                           ReachedField(2, namespace, "d", "y"), ReachedField(2, namespace, "e", "z"),
                           ReachedField(3, namespace, "a", "x")])  # the cycle brings the start back at 3
    assert field_lineage(driver, namespace, "e", "z", depth=1, direction="up") == [
        ReachedField(1, namespace, "b", "z"), ReachedField(1, namespace, "c", "z")]
    assert column_impact(driver, namespace, "a", ["x"], depth=1, limit=2) == [
        ReachedField(1, namespace, "b", "x"), ReachedField(1, namespace, "b", "z")]


def test_a_path_leads_from_the_start_to_each_node_along_stored_edges(driver: Driver) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    reads, writes = _random_graph(5, jobs=40, hubs=3, cycles=1)
    _store(driver, namespace, reads, writes)
    stored = {(("dataset", f"d{d}"), ("job", f"j{j}")) for d, j in reads} | \
        {(("job", f"j{j}"), ("dataset", f"d{d}")) for j, d in writes}
    for direction in ("down", "up"):
        start = "d0" if direction == "down" else "d42"
        walk = traverse(driver, namespace, start, 6, direction, limit=15)
        for node in walk.nodes:
            path = walk.path(node.kind, node.namespace, node.name)
            assert path[0] == ("dataset", namespace, start) and path[-1] == (node.kind, node.namespace, node.name)
            assert len(path) == 2 * node.depth - (node.kind == "job") + 1  # a shortest one
            for a, b in itertools.pairwise(path):
                edge = ((a[0], a[2]), (b[0], b[2])) if direction == "down" else ((b[0], b[2]), (a[0], a[2]))
                assert edge in stored
        assert walk.path("dataset", namespace, "not-there") == []


def test_the_cli_names_an_unknown_dataset_or_column_with_the_closest_existing_ones(driver: Driver,
                                                                                    clients: ClientSettings) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    with driver.session() as session:
        session.run("MERGE (d:Dataset {namespace: $ns, name: 'warehouse.orders'}) "
                    "MERGE (f:Field {namespace: $ns, name: 'warehouse.orders', field: 'order_id'})",
                    ns=namespace).consume()
    missing = lineage("impact", namespace, "warehouse.order", check=False)
    assert missing.returncode == 1 and missing.stdout == ""
    assert f"not found in the graph: dataset {namespace} warehouse.order" in missing.stderr
    assert f"closest existing: {namespace} warehouse.orders" in missing.stderr
    unknown_column = lineage("upstream", namespace, "warehouse.orders", "--column", "orderid", check=False)
    assert unknown_column.returncode == 1
    assert "not found in the graph: column orderid" in unknown_column.stderr
    assert "--column order_id" in unknown_column.stderr
    # a known dataset with nothing downstream is an answer, not an error
    known = lineage("impact", namespace, "warehouse.orders")
    assert known.stdout.startswith("0 nodes downstream of")
    assert lineage("impact", namespace, "warehouse.orders", "--column", "order_id").returncode == 0


def test_hostile_names_reach_the_terminal_escaped_and_json_exact(driver: Driver) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    evil, job = "evil\x1b[31mRED\x1b[0m\x1b]0;pwned\x07\rSPOOF\u202e", "job\x1b[2Jx"
    with driver.session() as session:
        session.run("MERGE (s:Dataset {namespace: $ns, name: 'source'}) MERGE (j:Job {namespace: $ns, name: $job}) "
                    "MERGE (o:Dataset {namespace: $ns, name: $evil}) MERGE (s)-[:INPUT_TO]->(j) "
                    "MERGE (j)-[:OUTPUTS]->(o)", ns=namespace, job=job, evil=evil).consume()
    table = lineage("impact", namespace, "source")
    assert "\x1b" not in table.stdout and "\r" not in table.stdout and "\u202e" not in table.stdout
    assert "evil\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07\\x0dSPOOF\\u202e" in table.stdout
    assert "job\\x1b[2Jx" in table.stdout
    rows = json.loads(lineage("impact", namespace, "source", "--format", "json").stdout)
    assert {row["name"] for row in rows} == {evil, job}  # exact
    upstream = lineage("upstream", namespace, evil)
    assert "\x1b" not in upstream.stdout and "\\x1b[31m" in upstream.stdout
    missing = lineage("impact", namespace, evil + "x", check=False)
    assert missing.returncode == 1 and "\x1b" not in missing.stderr and "\\x1b]0;pwned" in missing.stderr


def _run_events(namespace: str, job: str, states: tuple[str, ...], output: str) -> list[dict]:
    run = str(uuid.uuid4())
    return [{"eventType": state, "eventTime": f"2025-01-01T00:00:0{i}Z", "producer": "https://example.com/tests",
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": run}, "job": {"namespace": namespace, "name": job},
             "inputs": [{"namespace": namespace, "name": "source"}],
             "outputs": [{"namespace": namespace, "name": output}]} for i, state in enumerate(states)]


def test_outputs_only_declared_by_failed_or_unfinished_runs_are_answered_as_never_written(
        driver: Driver) -> None:
    namespace = f"bfs-{uuid.uuid4().hex[:8]}"
    write_events(driver, [*_run_events(namespace, "failing-model", ("START", "FAIL"), "never_created"),
                          *_run_events(namespace, "failing-model", ("START", "FAIL"), "never_created"),
                          *_run_events(namespace, "good-model", ("START", "COMPLETE"), "built"),
                          *_run_events(namespace, "streaming", ("START", "RUNNING"), "in_progress"),
                          *_run_events(namespace, "retried", ("START", "FAIL"), "built_on_retry"),
                          *_run_events(namespace, "retried", ("START", "COMPLETE"), "built_on_retry")])
    walk = traverse(driver, namespace, "source", 1)
    assert {n.name for n in walk.nodes if n.kind == "dataset"} == {"never_created", "built", "in_progress",
                                                                   "built_on_retry"}  # declared outputs stay
    assert walk.unwritten == {("dataset", namespace, "never_created"), ("dataset", namespace, "in_progress")}
    rows = json.loads(lineage("impact", namespace, "source", "--format", "json").stdout)
    assert {row["name"]: row["written"] for row in rows if row["kind"] == "dataset"} == {
        "never_created": False, "built": True, "in_progress": False, "built_on_retry": True}
    table = lineage("impact", namespace, "source").stdout
    assert [line for line in table.splitlines() if "declared only" in line] == [
        line for line in table.splitlines() if "never_created" in line or "in_progress" in line]
