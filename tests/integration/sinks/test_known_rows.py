"""A `lineage sink` that leaves out rows it knows the graph holds (``graph.known``) builds, property for property,
the graph one plain write of the same events builds: in small batches, across a restart (a cold memory), and after
a wipe while it runs (the graph's epoch changes: what it knew is gone); and after a deletion by hand, once
`lineage graph forget` gave the graph a new epoch."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import pytest
import requests
from neo4j import Driver

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_changes, write_events
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.replay.local import wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.partition_workload import generate_partitions
from kafka_lineage_devtools.processes import ChildProcess, sink_process
from kafka_lineage_devtools.workload import Delivery, generate
from tests.integration.conftest import lineage
from tests.integration.sinks.test_graph_sink import SCHEMA_FACET, _publish, _settings
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
_WRITTEN = re.compile(r'^lineage_events_out_total\{stage="graph-sink"\} (\S+)$', re.MULTILINE)
_LEFT_OUT = re.compile(r"(\d+) rows the graph held left out")


@pytest.fixture
def sink_env(clients: ClientSettings) -> dict[str, str]:
    prefix = f"test.known.{uuid.uuid4().hex[:8]}"
    return {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_SINK_GROUP": f"{prefix}.sink", "LINEAGE_PARTITIONS": "3", "LINEAGE_SINK_POLL_SECONDS": "0.2",
            "LINEAGE_SINK_BATCH": "97"}  # many batches: rows repeat across them


def graph_dump(driver: Driver) -> list[str]:
    """Every node and relationship with every property (the epoch node aside), canonical and sorted."""
    nodes = driver.execute_query("MATCH (n) WHERE NOT n:GraphEpoch RETURN labels(n) AS labels, properties(n) AS p")
    edges = driver.execute_query("MATCH (a)-[r]->(b) RETURN type(r) AS type, properties(r) AS p, "
                                 "properties(a) AS a, properties(b) AS b")
    return sorted(json.dumps(record.data(), sort_keys=True, default=str)
                  for result in (nodes, edges) for record in result.records)


def _written(sink: ChildProcess) -> float:
    url = sink.metrics_url if sink.metrics_url.endswith("/metrics") else sink.metrics_url.rstrip("/") + "/metrics"
    found = _WRITTEN.search(requests.get(url, timeout=5).text)
    return float(found.group(1)) if found else 0.0


def _wait_written(sink: ChildProcess, count: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while _written(sink) < count:
        assert time.monotonic() < deadline, f"the sink wrote {_written(sink):.0f} of {count} events"
        time.sleep(0.2)


def _plain(driver: Driver, events: list[dict[str, Any]]) -> list[str]:
    wipe(driver)
    write_events(driver, events)
    return graph_dump(driver)


def test_a_sink_leaving_known_rows_out_builds_the_plain_writes_graph(clients: ClientSettings,
                                                                     sink_env: dict[str, str]) -> None:
    settings = _settings(sink_env)
    prepare_pipeline(settings, 3)
    events = (generate(jobs=10, runs_per_job=5, seed=11, delivery=Delivery()).events  # late STARTs, duplicates
              + generate_partitions(jobs=4, days=8, seed=13, backfill_from=3, backfill_days=2).events
              + run_pairs(900, "realistic", seed=12, namespace=f"known-{uuid.uuid4().hex[:6]}"))
    first, second, third = events[:400], events[400:900], events[900:]
    with driver_for(settings) as driver:
        wipe(driver)
        with sink_process(sink_env) as sink:
            _publish(settings, first)
            _wait_written(sink, len(first))
        with sink_process(sink_env) as restarted:  # a cold memory
            _publish(settings, second)
            _wait_written(restarted, len(second))
            live_before_wipe = graph_dump(driver)
            wipe(driver)  # while the sink runs, warm: it must forget what it knew
            _publish(settings, third)
            _wait_written(restarted, len(second) + len(third))
            live_after_wipe = graph_dump(driver)
        left_out = [int(_LEFT_OUT.search(child.output).group(1)) for child in (sink, restarted)]
        assert sink.returncode == restarted.returncode == 0
        assert all(count > 0 for count in left_out), left_out  # the memory left rows out in both
        assert "rows written before are written again" in restarted.output  # the wipe was noticed
        assert _plain(driver, first + second) == live_before_wipe
        assert _plain(driver, third) == live_after_wipe


def _run_events(namespace: str, run: int) -> list[dict[str, Any]]:
    """A run of each of three jobs, each writing a table of its own with a schema (no name shared with other tests)."""
    schema = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
              "fields": [{"name": "id", "type": "bigint"}, {"name": "total", "type": "double"}]}
    return [{"eventType": "COMPLETE", "eventTime": f"2024-05-01T12:{run:02d}:{job:02d}Z", "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": namespace, "name": f"job-{job}"},
             "inputs": [], "outputs": [{"namespace": "s3://lake", "name": f"{namespace}/table-{job}",
                                        "facets": {"schema": schema}}]} for job in range(3)]


def test_a_writer_writes_again_what_was_deleted_by_hand_once_the_graph_has_a_new_epoch(
        clients: ClientSettings, sink_env: dict[str, str]) -> None:
    namespace = f"known-{uuid.uuid4().hex[:6]}"
    first, later = _run_events(namespace, 1), _run_events(namespace, 2)
    count = ("MATCH (:Job {namespace: $ns})-[:OUTPUTS]->(d:Dataset)-[:HAS_SCHEMA]->(:SchemaVersion) "
             "RETURN count(DISTINCT d)")
    known = KnownRows()
    with driver_for(_settings(sink_env)) as driver:
        ensure_constraints(driver)
        write_changes(driver, graph_batch(first), known)
        write_changes(driver, graph_batch(later), known)  # the memory knows the tables' schema versions
        assert driver.execute_query(count, ns=namespace).records[0][0] == 3 and len(known) > 0
        driver.execute_query("MATCH (:Job {namespace: $ns})-[:OUTPUTS]->(:Dataset)-[:HAS_SCHEMA]->(s) "
                             "DETACH DELETE s", ns=namespace)  # by hand, behind the writer's back
        write_changes(driver, graph_batch(later), known)
        assert driver.execute_query(count, ns=namespace).records[0][0] == 0  # left out as known: still gone
        assert "new epoch" in lineage("graph", "forget", env=sink_env).stdout
        write_changes(driver, graph_batch(later), known)
        assert driver.execute_query(count, ns=namespace).records[0][0] == 3
        # the epoch node gone too (an emptied graph, a new store): no epoch, nothing left out, and no endless retry
        driver.execute_query("MATCH (:Job {namespace: $ns})-[:OUTPUTS]->(:Dataset)-[:HAS_SCHEMA]->(s) "
                             "DETACH DELETE s", ns=namespace)
        driver.execute_query("MATCH (e:GraphEpoch) DELETE e")
        write_changes(driver, graph_batch(later), known)
        assert driver.execute_query(count, ns=namespace).records[0][0] == 3 and len(known) == 0
        ensure_constraints(driver)  # every writer's start makes the node again
        write_changes(driver, graph_batch(later), known)
        assert len(known) > 0
