"""Real PyFlink jobs with the official OpenLineage Flink listener → `lineage collector` → processor → graph sink →
Neo4j: the job, its runs' states and the datasets' identities in the graph.

The job (tests/data/flink/orders_job.py) runs on a local mini-cluster in a child process (Kafka topic → Kafka topic
+ a partitioned filesystem table); a bounded run ends COMPLETE, a streaming run is RUNNING with checkpoint
heartbeats and ends ABORT when cancelled. On a standing session cluster, a job whose submitting client (and with it
the listener) has gone fails later: `lineage flink watch` ends its run FAIL with Flink's root exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.flink_cluster import flink_session_cluster
from kafka_lineage_devtools.processes import (
    child_process,
    free_port,
    lineage_process,
    pipeline_env,
    processor_process,
    sink_process,
    sleep_watching,
    wait_until,
)
from tests.integration.conftest import running_collector

pytest.importorskip("pyflink", reason="the flink extra is not installed (make install installs it)")
pytestmark = pytest.mark.integration
JOB = Path(__file__).parents[2] / "data" / "flink" / "orders_job.py"


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, json.dumps({"order_id": f"o{i}", "country": ["de", "fr"][i % 2],
                                            "amount": float(i + 1)}).encode())
    assert producer.flush(30) == 0


def _runs(driver, namespace: str, name: str) -> list[tuple[str, str | None]]:
    records = driver.execute_query(
        "MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns, name: $name}) RETURN r.state, r.lastEventTime "
        "ORDER BY r.startTime", ns=namespace, name=name).records
    return [(r[0], r[1]) for r in records]


def _datasets(driver, job: str) -> dict[str, set[tuple[str, str]]]:
    found = {}
    for direction, pattern in (("in", "(d:Dataset)-[:INPUT_TO]->(j:Job {name: $job})"),
                               ("out", "(j:Job {name: $job})-[:OUTPUTS]->(d:Dataset)")):
        rows = driver.execute_query(f"MATCH {pattern} RETURN d.namespace, d.name", job=job).records
        found[direction] = {(r[0], r[1]) for r in rows}
    return found


def test_flink_jobs_reach_the_graph_with_run_states_and_spec_identities(clients: ClientSettings,
                                                                         tmp_path: Path) -> None:
    prefix = f"test.flink.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    bootstrap = settings.kafka_bootstrap_servers
    kafka_ns = f"kafka://{bootstrap.split(',')[0]}"
    source, sink, suffix = f"{prefix}.orders", f"{prefix}.orders_clean", uuid.uuid4().hex[:6]
    bounded_job, streaming_job = f"orders-bounded-{suffix}", f"orders-streaming-{suffix}"
    _produce(bootstrap, source, 20)

    with running_collector(env["LINEAGE_EVENTS_TOPIC"]) as collector, processor_process(env), sink_process(env):
        job_env = {**os.environ, "LINGER": "600"}  # each job's process is ended by the test (SIGTERM)

        def job(mode: str, name: str, port: int, table: str) -> list[str]:
            return [sys.executable, str(JOB), mode, bootstrap, source, sink, str(tmp_path / table), collector,
                    str(port), name]

        # bounded: START → COMPLETE from the listener itself
        bounded_port = free_port()
        with child_process(job("bounded", bounded_job, bounded_port, "bounded"), "flink bounded job", env=job_env,
                           is_ready=lambda _c, out: "JOB_STATE" in out, ready_timeout=240) as bounded:
            assert "JOB_STATE FINISHED" in bounded.output_so_far()
            sleep_watching(5, [bounded])  # the listener's COMPLETE, sent by its REST tracking
        # streaming: RUNNING heartbeats while it runs, ABORT once cancelled
        streaming_port = free_port()
        with driver_for(settings) as driver, child_process(
                job("streaming", streaming_job, streaming_port, "streaming"), "flink streaming job", env=job_env,
                is_ready=lambda _c, out: "JOB_ID" in out, ready_timeout=240) as streaming:
            running = wait_until(lambda: [r for r in _runs(driver, "flink-jobs", streaming_job)
                                          if r[0] == "RUNNING"], 120, watch=[streaming])
            first_heartbeat = running[0][1]
            later = wait_until(lambda: [r for r in _runs(driver, "flink-jobs", streaming_job)
                                        if r[0] == "RUNNING" and r[1] > first_heartbeat], 60, watch=[streaming])
            assert later, "the streaming run's heartbeat did not move"
            streaming.process.terminate()  # the job script cancels the Flink job on SIGTERM
            streaming.process.wait(120)
            assert "JOB_STATE CANCELED" in streaming.output_so_far()

        with driver_for(settings) as driver:
            wait_until(lambda: [s for s, _ in _runs(driver, "flink-jobs", streaming_job)] == ["ABORT"], 60)
            wait_until(lambda: [s for s, _ in _runs(driver, "flink-jobs", bounded_job)] == ["COMPLETE"], 60)
            for name in (bounded_job, streaming_job):
                found = _datasets(driver, name)
                assert found["in"] == {(kafka_ns, source)}  # a topic by its topic name in the kafka namespace
                assert (kafka_ns, sink) in found["out"]
                # the filesystem table: the identity the listener gives it (empty namespace + catalog name), kept
                assert any(ns == "" and table.startswith("default_catalog.default_database.")
                           for ns, table in found["out"]), found["out"]
            aliases = driver.execute_query(  # Flink's per-job catalog names are not linked (ARCHITECTURE 52)
                "MATCH (:Dataset {namespace: $ns, name: $name})-[:SAME_AS]-(a:Dataset) RETURN a.name",
                ns=kafka_ns, name=source).records
            assert aliases == []


def _run_errors(driver, namespace: str, name: str) -> list[tuple[str, str | None]]:
    records = driver.execute_query("MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns, name: $name}) "
                                   "RETURN r.state, r.errorMessage", ns=namespace, name=name).records
    return [(r[0], r[1]) for r in records]


def test_a_job_that_fails_after_its_client_left_ends_fail_with_flinks_error(clients: ClientSettings,
                                                                             tmp_path: Path) -> None:
    prefix = f"test.flink.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    bootstrap = settings.kafka_bootstrap_servers
    source, sink, name = f"{prefix}.orders", f"{prefix}.orders_clean", f"orders-detached-{uuid.uuid4().hex[:6]}"
    _produce(bootstrap, source, 3)
    port = free_port()
    with running_collector(env["LINEAGE_EVENTS_TOPIC"]) as collector, processor_process(env) as processor, \
            sink_process(env) as graph_sink, flink_session_cluster(tmp_path / "flink", port) as rest_url, \
            lineage_process(["flink", "watch", "--rest-url", rest_url, "--interval", "1", "--grace", "3"],
                            lambda _c, out: "flink watcher ready" in out, env) as watcher, \
            driver_for(settings) as driver:
        pipeline = [processor, graph_sink, watcher]
        # A detached submission: the client (and the listener in it) ends once the job runs on the cluster.
        submitted = subprocess.run([sys.executable, str(JOB), "detached", bootstrap, source, sink,
                                    str(tmp_path / "table"), collector, str(port), name],
                                   env={**os.environ, "FLINK_REMOTE": f"127.0.0.1:{port}"},
                                   capture_output=True, text=True, timeout=300)
        assert submitted.returncode == 0 and "DETACHED" in submitted.stdout, submitted.stderr[-3000:]
        wait_until(lambda: _run_errors(driver, "flink-jobs", name), 60, watch=pipeline)  # the listener's START
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(source, b"this is not json")  # the job fails on it, with nobody from the client watching
        assert producer.flush(30) == 0
        ((_, error),) = wait_until(
            lambda: [r for r in _run_errors(driver, "flink-jobs", name) if r[0] == "FAIL" and r[1]], 120,
            watch=pipeline)
        # Flink's top exception is the scheduler's; the message names the innermost cause: the JSON parser's.
        assert error.startswith("org.apache.flink.runtime.JobException (root cause: ") and \
            "JsonParseException: Unrecognized token 'this'" in error, error
