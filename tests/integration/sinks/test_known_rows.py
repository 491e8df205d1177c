"""A `lineage sink` that leaves out rows it knows the graph holds (``graph.known``) builds, property for property,
the graph one plain write of the same events builds: in small batches, across a restart (a cold memory), and after
a wipe while it runs (the graph's epoch changes: what it knew is gone)."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import pytest
import requests
from neo4j import Driver

from kafka_lineage.graph.driver import driver_for, write_events
from kafka_lineage.replay.local import wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.partition_workload import generate_partitions
from kafka_lineage_devtools.processes import ChildProcess, sink_process
from kafka_lineage_devtools.workload import Delivery, generate
from tests.integration.sinks.test_graph_sink import _publish, _settings

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
