"""``lineage replay --fresh --bulk`` on the real stack: the offline import builds the graph the live replay builds
(fingerprint, and every node's and relationship's properties), with the same constraints and indexes online; a
database that is not local, or no installation, is refused with exit 3 before anything changes."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver

from kafka_lineage.graph.coverage import LABEL as COVERAGE_LABEL
from kafka_lineage.graph.driver import driver_for, graph_fingerprint, read_coverage
from kafka_lineage.graph.epoch import CONSTRAINT as EPOCH_CONSTRAINT
from kafka_lineage.graph.epoch import LABEL as EPOCH_LABEL
from kafka_lineage.graph.fingerprint import fingerprint
from kafka_lineage.graph.statements import CONSTRAINTS
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.bulk.importer import Neo4jInstallation, wait_for_neo4j
from kafka_lineage.replay.bulk.mark import read_mark
from kafka_lineage.replay.local import wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.checker import check, format_report
from kafka_lineage_devtools.faults import graph_rows
from kafka_lineage_devtools.partition_checker import check_graph, format_partition_report
from kafka_lineage_devtools.partition_workload import generate_partitions
from kafka_lineage_devtools.processes import pipeline_env, processor_process, sink_process, sleep_watching, wait_until
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import SERVICES_BY_NAME
from kafka_lineage_devtools.workload import Delivery, generate
from tests.integration.conftest import lineage, settled_fingerprint
from tests.unit.replay.bulk_events import PRODUCER, RUN_SCHEMA, facet, rich_events

pytestmark = pytest.mark.integration


def schema_change(namespace: str) -> list[dict[str, Any]]:
    """Two runs of one job whose output's column changes type between them: one BREAKING schema change."""
    return [{"eventType": "COMPLETE", "eventTime": f"2025-12-27T1{hour}:00:00Z", "producer": PRODUCER,
             "schemaURL": RUN_SCHEMA, "run": {"runId": str(uuid.uuid4())},
             "job": {"namespace": namespace, "name": "drifting-job"}, "inputs": [],
             "outputs": [{"namespace": namespace, "name": "drifting",
                          "facets": {"schema": facet(fields=[{"name": "amount", "type": kind}])}}]}
            for hour, kind in ((0, "DOUBLE"), (1, "STRING"))]


@pytest.fixture(scope="module")
def bulk_env(stack_settings: StackSettings) -> dict[str, str]:
    """A topic with the every-row-kind sample, 300 realistic bench events and a schema change; the Neo4j home of the
    test stack."""
    neo4j = SERVICES_BY_NAME["neo4j"]
    neo4j.write_scripts(stack_settings)  # type: ignore[attr-defined]  # a reused stack started before they existed
    env = {"LINEAGE_EVENTS_TOPIC": f"test.replay-bulk.{uuid.uuid4().hex[:8]}.events",
           "LINEAGE_NEO4J_HOME": str(neo4j.home(stack_settings))}
    clients = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(clients, 3)
    namespace = f"bulk-{uuid.uuid4().hex[:6]}"
    events = (rich_events(namespace) + run_pairs(300, "realistic", seed=7, namespace=f"{namespace}-bench")
              + schema_change(namespace))
    publisher = EventPublisher.from_settings(clients, clients.events_topic)
    try:
        publisher.send([publisher.encode(event) for event in events]).result(120)
    finally:
        publisher.close()
    return env


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def graph_dump(driver: Driver) -> dict[str, list[str]]:
    """Every node (labels, properties) but a rebuild's coverage and the graph's epoch (neither is lineage; a live
    writer makes the epoch, an import does not), every relationship (type, properties, its ends' labels and
    properties), the constraints and indexes (name, kind, labels, properties, state): canonical and sorted."""
    with driver.session() as session:
        nodes = sorted(_canonical([sorted(record["l"]), record["p"]]) for record in session.run(
            f"MATCH (n) WHERE NOT n:{COVERAGE_LABEL} AND NOT n:{EPOCH_LABEL} "
            "RETURN labels(n) AS l, properties(n) AS p"))
        edges = sorted(_canonical([record["t"], record["p"], record["a"], record["b"]]) for record in session.run(
            "MATCH (a)-[r]->(b) RETURN type(r) AS t, properties(r) AS p, [labels(a), properties(a)] AS a, "
            "[labels(b), properties(b)] AS b"))
        schema = sorted(_canonical(record.data()) for record in session.run(
            "SHOW INDEXES YIELD name, type, entityType, labelsOrTypes, properties, state, owningConstraint"))
        constraints = sorted(_canonical(record.data()) for record in session.run(
            "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties"))
    return {"nodes": nodes, "relationships": edges, "indexes": schema, "constraints": constraints}


def test_bulk_replay_builds_the_graph_the_live_replay_builds_in_one_process_and_on_spark(
        clients: ClientSettings, bulk_env: dict[str, str]):
    live = lineage("replay", "--fresh", "--yes", env=bulk_env)
    assert ", 0 records not processable" in live.stdout
    changes = "schema changes by event time: 1 (1 breaking)"
    assert changes in live.stdout.splitlines()
    with driver_for(clients) as driver:
        driver.execute_query("CALL db.awaitIndexes(300)")
        live_fingerprint, live_graph = graph_fingerprint(driver), graph_dump(driver)
    assert len(live_graph["nodes"]) > 1000 and any('"Partition"' in node for node in live_graph["nodes"])

    # folded in this process, then on Spark (two executor threads, each topic partition cut into tasks of at most
    # 20 records, rows merged in a shuffle): the same graph each time
    for engine in (("--engine", "local"),
                   ("--engine", "spark", "--spark-master", "local[2]", "--task-records", "20")):
        bulk = lineage("replay", "--fresh", "--yes", "--bulk", *engine, env=bulk_env)
        assert "310 events written" in bulk.stdout
        assert changes in bulk.stdout.splitlines(), engine  # the records' schema change, found alike
        ended = [line.split("\033[K")[-1].split(":")[0] for line in bulk.stderr.splitlines() if "\033[K" in line]
        folding = ["read", "tables", "files"] if engine[1] == "local" else ["fold", "merge", "files"]
        assert [phase for phase in ended if phase in {"prepare", "stop", "import", "start", "indexes", *folding}] \
            == ["prepare", "stop", *folding, "import", "start", "indexes"], (engine, bulk.stderr[-2000:])
        assert "import files " in bulk.stdout and "seconds per phase: prepare" in bulk.stdout
        with driver_for(clients) as driver:
            bulk_fingerprint, bulk_graph = graph_fingerprint(driver), graph_dump(driver)
        assert bulk_fingerprint == live_fingerprint, engine
        for part in ("nodes", "relationships", "constraints", "indexes"):
            assert bulk_graph[part] == live_graph[part], (engine, part)
        assert all('"state": "ONLINE"' in index for index in bulk_graph["indexes"])
        with driver_for(clients) as driver:  # the hand-over: the whole topic is the import's
            coverage = read_coverage(driver)
        assert coverage.topic == bulk_env["LINEAGE_EVENTS_TOPIC"] and sum(coverage.ends.values()) == 310

    # the rebuilt database takes live writes as before: a second live replay over it changes nothing
    lineage("replay", env=bulk_env)
    with driver_for(clients) as driver:
        assert graph_fingerprint(driver) == live_fingerprint
        assert graph_dump(driver)["nodes"] == live_graph["nodes"]


def test_a_rebuild_killed_while_neo4j_is_stopped_is_started_again(clients: ClientSettings,
                                                                   bulk_env: dict[str, str]):
    """SIGKILL in the fold, Neo4j stopped: the next rebuild finds the mark, starts over, and builds the graph."""
    lineage("replay", "--fresh", "--yes", "--bulk", env=bulk_env)
    with driver_for(clients) as driver:
        expected = graph_fingerprint(driver)
    store = Neo4jInstallation(Path(bulk_env["LINEAGE_NEO4J_HOME"])).data
    rebuild = subprocess.Popen(
        [sys.executable, "-m", "kafka_lineage.app.cli", "replay", "--fresh", "--yes", "--bulk", "--engine", "spark",
         "--spark-master", "local[1]", "--task-records", "5"], env={**os.environ, **bulk_env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while (mark := read_mark(store)) is None or mark.phase != "fold":
            assert rebuild.poll() is None, f"the rebuild ended (exit {rebuild.returncode}) before it folded"
            assert time.monotonic() < deadline, "the rebuild did not reach its fold"
            time.sleep(0.05)
    finally:
        os.killpg(rebuild.pid, signal.SIGKILL)
        rebuild.wait()
    assert mark.directory is not None and Path(mark.directory).exists()

    again = lineage("replay", "--fresh", "--yes", "--bulk", env=bulk_env)
    assert "a rebuild killed in its fold phase had left its mark: this one started over" in again.stdout
    assert read_mark(store) is None and not Path(mark.directory).exists()
    with driver_for(clients) as driver:
        assert graph_fingerprint(driver) == expected


@pytest.mark.parametrize("override, says", [
    ({"NEO4J_URI": "bolt://neo4j.elsewhere.example:7687"}, "on this machine"),
    ({"LINEAGE_NEO4J_HOME": ""}, "needs LINEAGE_NEO4J_HOME"),
    ({"LINEAGE_NEO4J_HOME": "/nonexistent/neo4j"}, "bin/neo4j-admin not found"),
])
def test_bulk_replay_is_refused_where_it_cannot_import(clients: ClientSettings, bulk_env: dict[str, str],
                                                       override: dict[str, str], says: str):
    with driver_for(clients) as driver:
        before = graph_fingerprint(driver)
    refused = lineage("replay", "--fresh", "--yes", "--bulk", env={**bulk_env, **override}, check=False)
    assert refused.returncode == 3, refused.stderr
    assert says in refused.stderr
    with driver_for(clients) as driver:
        assert graph_fingerprint(driver) == before


def test_bulk_replay_of_an_empty_topic_empties_the_graph(clients: ClientSettings, bulk_env: dict[str, str]):
    empty = {**bulk_env, "LINEAGE_EVENTS_TOPIC": f"test.replay-bulk.{uuid.uuid4().hex[:8]}.empty"}
    prepare_pipeline(ClientSettings.from_env({**os.environ, **empty}), 3)
    with driver_for(clients) as driver:
        assert driver.execute_query("MATCH (n) RETURN count(n) AS n").records[0]["n"] > 0
    rebuilt = lineage("replay", "--fresh", "--yes", "--bulk", env=empty)
    assert "0 events written" in rebuilt.stdout
    with driver_for(clients) as driver:
        assert graph_fingerprint(driver) == fingerprint({})
        constraints = [*CONSTRAINTS, EPOCH_CONSTRAINT]
        assert len(graph_dump(driver)["constraints"]) == sum("CONSTRAINT" in c for c in constraints)


def test_bulk_needs_fresh(bulk_env: dict[str, str]):
    refused = lineage("replay", "--bulk", env=bulk_env, check=False)
    assert refused.returncode == 1 and "--bulk rebuilds the whole graph" in refused.stderr


def _sink_counts(output: str) -> tuple[int, int]:
    """(written, held by a rebuild) from the graph sink's last report line."""
    reports = re.findall(r"graph sink: (\d+) events written, \d+ dead letters, (\d+) held by a rebuild", output)
    return (int(reports[-1][0]), int(reports[-1][1])) if reports else (0, 0)


def test_the_live_graph_sink_takes_over_exactly_where_a_rebuild_ended(
        clients: ClientSettings, bulk_env: dict[str, str], tmp_path: Path):
    """Processor and graph sink run before, during and after a bulk rebuild while events keep coming: every record
    below the rebuild's end offsets is the import's, every one at or above them the sink's, none both."""
    env = {"LINEAGE_NEO4J_HOME": bulk_env["LINEAGE_NEO4J_HOME"], "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_REPORT_SECONDS": "0.5", **pipeline_env(f"test.handover.{uuid.uuid4().hex[:8]}", 3,
                                                          tmp_path / "processor")}
    settings = ClientSettings.from_env({**os.environ, **env})
    events = run_pairs(1200, "realistic", seed=11, namespace=f"handover-{uuid.uuid4().hex[:6]}")
    before, during, after = events[:200], iter(events[200:1100]), events[1100:]
    with driver_for(settings) as driver:
        wipe(driver)
    publisher = EventPublisher.from_settings(settings)
    try:
        with processor_process(env), sink_process(env) as sink:
            publisher.send([publisher.encode(event) for event in before]).result(60)
            wait_until(lambda: _sink_counts(sink.output_so_far())[0] >= len(before), 120, watch=[sink])

            rebuild = subprocess.Popen([sys.executable, "-m", "kafka_lineage.app.cli", "replay", "--fresh", "--yes",
                                        "--bulk"], env={**os.environ, **env}, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
            sent = len(before)
            while rebuild.poll() is None:  # a steady stream across the stop, the fold, the import and the start
                if (pair := list(itertools.islice(during, 2))):
                    publisher.send([publisher.encode(event) for event in pair]).result(60)
                    sent += len(pair)
                sleep_watching(0.25, [sink])
            out, err = rebuild.communicate()
            assert rebuild.returncode == 0, err[-3000:]
            assert "the live graph sink takes over at" in out
            rest = [*during, *after]
            publisher.send([publisher.encode(event) for event in rest]).result(60)
            sent += len(rest)
            assert sent == len(events)
            wait_until(lambda: sum(_sink_counts(sink.output_so_far())) >= len(events), 180, watch=[sink])
    finally:
        publisher.close()

    with driver_for(settings) as driver:
        coverage = read_coverage(driver)
        live = graph_fingerprint(driver)
    below = sum(coverage.ends.values())  # the events topic is written without transactions: an offset, a record
    assert coverage.topic == settings.events_topic and set(coverage.ends) == {0, 1, 2}
    assert len(before) < below < len(events), "the rebuild's end offsets fall inside the stream"
    stopped = re.search(r"graph sink stopped: (\d+) events written, 0 dead letters, (\d+) held by a rebuild already; "
                        rf"(\d+) written since the graph's rebuild {coverage.rebuild}", sink.output)
    assert stopped, sink.output[-3000:]
    written, held, since_rebuild = map(int, stopped.groups())
    assert written + held == len(events)  # each record once: written or left to the import
    assert held > 0  # records the sink had read but not written when Neo4j stopped: the import's
    assert since_rebuild == len(events) - below  # into the rebuilt graph: exactly the records above its ends

    # no gap: the graph equals a rebuild of the whole topic by the transactional replay
    replayed = lineage("replay", "--fresh", "--yes", env=env)
    assert f"{len(events)} events written" in replayed.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == live


def test_every_rebuild_builds_the_live_pipelines_graph_of_the_ground_truth_and_partition_workloads(
        clients: ClientSettings, bulk_env: dict[str, str], tmp_path: Path):
    """The two ground-truth workloads, delivered late, twice and out of order: the live pipeline's graph, the
    transactional replay's, the single-process bulk's and the Spark bulk's (tasks of 40 records) are one graph."""
    env = {"LINEAGE_NEO4J_HOME": bulk_env["LINEAGE_NEO4J_HOME"], "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_REPORT_SECONDS": "0.5", **pipeline_env(f"test.rebuilds.{uuid.uuid4().hex[:8]}", 3,
                                                          tmp_path / "processor")}
    settings = ClientSettings.from_env({**os.environ, **env})
    truth = generate(jobs=20, runs_per_job=4, seed=36, schema_changes=2, delivery=Delivery())
    partitions = generate_partitions(jobs=8, days=8, seed=36, backfill_from=2, backfill_days=2)
    assert truth.delivery["duplicates"] and truth.delivery["late_starts"] and truth.delivery["out_of_time_order"]
    events = [*truth.events, *partitions.events]
    with driver_for(settings) as driver:
        wipe(driver)
    with processor_process(env), sink_process(env) as sink:
        publisher = EventPublisher.from_settings(settings)
        try:
            publisher.send([publisher.encode(event) for event in events]).result(120)
        finally:
            publisher.close()
        runs = len({event["run"]["runId"] for event in events if "run" in event})
        with driver_for(settings) as driver:
            wait_until(lambda: driver.execute_query("MATCH (r:Run) RETURN count(r) AS n").records[0]["n"] >= runs,
                       180, watch=[sink])
            live = settled_fingerprint(driver, quiet=5.0, timeout=120.0, watch=[sink])
    answers = {"live pipeline": live}
    for engine, arguments in (("transactional replay", ()), ("bulk", ("--bulk",)),
                              ("bulk on Spark", ("--bulk", "--engine", "spark", "--spark-master", "local[2]",
                                                 "--task-records", "40"))):
        lineage("replay", "--fresh", "--yes", *arguments, env=env)
        with driver_for(settings) as driver:
            answers[engine] = graph_fingerprint(driver)
    assert set(answers.values()) == {live}, answers
    # and that one graph is the truth (the Spark bulk's, last built)
    report = check(truth.truth, graph_rows(settings, truth), None)
    assert report.ok, format_report(report)
    with driver_for(settings) as driver:
        partition_report = check_graph(driver, partitions.truth)
    assert partition_report.ok, format_partition_report(partition_report)


def test_an_export_for_a_neo4j_elsewhere_follows_its_steps_to_the_same_graph(
        clients: ClientSettings, bulk_env: dict[str, str], tmp_path: Path):
    """`--bulk --export DIR` refuses while Neo4j answers; with Neo4j stopped it writes the files and the steps, and
    following them (import.sh, start, `lineage graph indexes`) gives the graph the live replay builds."""
    lineage("replay", "--fresh", "--yes", env=bulk_env)
    with driver_for(clients) as driver:
        expected, expected_nodes = graph_fingerprint(driver), graph_dump(driver)["nodes"]
    export = tmp_path / "export"
    refused = lineage("replay", "--fresh", "--yes", "--bulk", "--export", str(export), env=bulk_env, check=False)
    assert refused.returncode == 3 and "still answers; stop it first" in refused.stderr
    installation = Neo4jInstallation(Path(bulk_env["LINEAGE_NEO4J_HOME"]))
    with driver_for(clients) as driver:
        database = driver.execute_query("SHOW DEFAULT DATABASE YIELD name", database_="system").records[0]["name"]
    installation.run(installation.control, "stop", step="stop")
    try:
        exported = lineage("replay", "--fresh", "--yes", "--bulk", "--engine", "spark", "--spark-master", "local[2]",
                           "--export", str(export), env=bulk_env)
        assert f"the steps to import them in {export / 'IMPORT.md'}" in exported.stdout
        assert "import.sh" in (export / "IMPORT.md").read_text()
        subprocess.run(["sh", str(export / "import.sh"), database], cwd="/", check=True, capture_output=True,
                       env={**os.environ, "NEO4J_HOME": bulk_env["LINEAGE_NEO4J_HOME"]})
    finally:
        installation.run(installation.control, "start", step="start")
        wait_for_neo4j(clients)
    assert "constraints and indexes online" in lineage("graph", "indexes", env=bulk_env).stdout
    with driver_for(clients) as driver:
        assert graph_fingerprint(driver) == expected
        assert graph_dump(driver)["nodes"] == expected_nodes
        assert read_coverage(driver).topic == bulk_env["LINEAGE_EVENTS_TOPIC"]
