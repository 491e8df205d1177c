"""One graph across engines on the real stack (the scenario in ``kafka_lineage_devtools.engines``): a Kafka Connect
FileStream source (Avro through the registry, values shaped by SMTs) → topic ``orders.<id>`` → a streaming PyFlink
job (the OpenLineage listener) → topic ``orders_clean.<id>`` + a partitioned filesystem table → a PySpark batch job
(the OpenLineage Spark listener, Spark's Kafka source) → a Parquet catalog table → a SQL task (the project's SQL hook)
→ a warehouse table; a FileStream sink connector reads ``orders.<id>`` too. The processor, graph sink, alert sink and
Connect watcher run as real processes; the graph in Neo4j and the drift alert are asserted.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from openlineage.client import OpenLineageClient

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.graph.queries import impact
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools import engines
from kafka_lineage_devtools.engines import EngineScenario
from kafka_lineage_devtools.processes import (
    alert_sink_process,
    lineage_process,
    pipeline_env,
    processor_process,
    sink_process,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from tests.integration.conftest import consume_all, lineage, running_collector

pytest.importorskip("pyflink", reason="the flink extra is not installed (make install installs it)")
pytest.importorskip("pyspark", reason="the spark extra is not installed")
pytestmark = pytest.mark.integration


def _edges(driver, job_name: str) -> dict[str, set[tuple[str, str]]]:
    found = {}
    for direction, pattern in (("in", "(d:Dataset)-[:INPUT_TO]->(j:Job {name: $job})"),
                               ("out", "(j:Job {name: $job})-[:OUTPUTS]->(d:Dataset)")):
        rows = driver.execute_query(f"MATCH {pattern} RETURN d.namespace, d.name", job=job_name).records
        found[direction] = {(r[0], r[1]) for r in rows}
    return found


def _readers(driver, namespace: str, name: str) -> set[tuple[str, str]]:
    rows = driver.execute_query("MATCH (:Dataset {namespace: $ns, name: $name})-[:INPUT_TO]->(j:Job) "
                                "RETURN j.namespace, j.name", ns=namespace, name=name).records
    return {(r[0], r[1]) for r in rows}


def _derives(driver, namespace: str, name: str) -> set[tuple[str, str, str, str]]:
    """(output field, input namespace, input name, input field) of a dataset's column lineage in the graph."""
    rows = driver.execute_query(
        "MATCH (o:Field {namespace: $ns, name: $name})-[:DERIVES_FROM]->(i:Field) "
        "RETURN o.field, i.namespace, i.name, i.field", ns=namespace, name=name).records
    return {(r[0], r[1], r[2], r[3]) for r in rows}


def test_connect_flink_spark_and_sql_meet_in_one_graph_and_a_source_schema_change_alerts_the_warehouse(
        clients: ClientSettings, stack_settings: StackSettings, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    env = {**pipeline_env(f"test.engines.{suffix}", 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_IMPACT_DEPTH": "10"}
    settings = ClientSettings.from_env({**os.environ, **env})
    started = time.monotonic()
    with running_collector(env["LINEAGE_EVENTS_TOPIC"]) as collector, processor_process(env) as processor, \
            sink_process(env) as sink, alert_sink_process(env) as alerts, \
            lineage_process(["connect", "watch", "--interval", "0.5", "--heartbeat", "0"],
                            lambda _c, _o: True, env) as watcher, driver_for(settings) as driver:
        pipeline = [processor, sink, alerts, watcher]
        scenario = EngineScenario(tmp_path / "engines", suffix, settings.kafka_bootstrap_servers,
                                  stack_settings.registry_port, settings.connect_url, collector)
        with engines.connectors(scenario), engines.flink_job(scenario) as flink:
            watched = [*pipeline, flink]
            engines.wait_for_streaming(driver, scenario, watched)  # RUNNING seen while it streams
            engines.run_spark(scenario)
            client = OpenLineageClient(transport=KafkaAvroTransport(
                KafkaAvroConfig.from_dict({"topic": env["LINEAGE_EVENTS_TOPIC"]})))
            assert engines.run_sql_task(scenario, client) == 2  # two countries
            assert client.transport.close() is True
            print(f"\nengines: pipeline through SQL in {time.monotonic() - started:.0f}s", file=sys.stderr)
            engines.change_source_schema(scenario)
            found = wait_until(lambda: consume_all(settings.kafka_bootstrap_servers, settings.drift_topic), 120,
                               watch=watched)
            engines.cancel_flink(flink)
            wait_until(lambda: engines.flink_run_states(driver, scenario)[-1:] == ["ABORT"], 60, watch=pipeline)
        print(f"engines: all done in {time.monotonic() - started:.0f}s", file=sys.stderr)
        _assert_graph(driver, scenario)
        assert found
        (alert, *_) = wait_until(lambda: _alerts_for(env, scenario.kafka, scenario.orders), 60, watch=pipeline)
        assert {"namespace": engines.SQL_NAMESPACE, "name": scenario.sql_job} in [
            {"namespace": j["namespace"], "name": j["name"]} for j in alert["impactedJobs"]], alert


def _assert_graph(driver, s: EngineScenario) -> None:
    topic, clean, lake = (s.kafka, s.orders), (s.kafka, s.orders_clean), ("file", str(s.lake_table))
    warehouse = "hive://warehouse.local:10000"
    # 1. One connected path, exact identities: one Kafka namespace for Connect, Flink and Spark.
    assert _edges(driver, s.source_connector) == {"in": {("file", str(s.source_file))}, "out": {topic}}
    assert _edges(driver, s.sink_connector) == {"in": {topic}, "out": {("file", str(s.archive_file))}}
    assert _edges(driver, s.flink_job) == {"in": {topic}, "out": {clean, ("", "default_catalog.default_database."
                                                                           "orders_by_country")}}
    spark_jobs = {name for ns, name in _readers(driver, *clean)}
    assert spark_jobs and all(name.startswith(f"{s.spark_app}.") for name in spark_jobs)
    assert all(_edges(driver, name)["out"] == {lake} for name in spark_jobs)
    assert _readers(driver, *lake) == {(engines.SQL_NAMESPACE, s.sql_job)}
    assert _edges(driver, s.sql_job)["out"] == {(warehouse, "dw.revenue_by_country")}
    # 2. Column lineage: Connect's sink side (ReplaceField rename) and the SQL task; Spark's listener gives none
    # for a Kafka source (InputFieldsCollector: no dataset identifier for the Kafka relation), Flink's none at all.
    assert {("raw", *topic, "line"), ("origin", *topic, "origin")} <= _derives(driver, "file", str(s.archive_file))
    assert ("revenue", warehouse, "lake.orders_clean", "amount") in _derives(driver, warehouse,
                                                                              "dw.revenue_by_country")
    # 3. The streaming Flink run: RUNNING was seen while it ran (waited above), ABORT after the cancel.
    assert engines.flink_run_states(driver, s)[-1] == "ABORT"
    # 4. Impact of the Connect topic reaches the warehouse table's writer.
    reached = {(r.kind, r.namespace, r.name) for r in impact(driver, *topic, 10)}
    assert ("job", engines.SQL_NAMESPACE, s.sql_job) in reached


def _alerts_for(env: dict[str, str], kafka: str, topic: str) -> list[dict]:
    lines = lineage("alerts", "tail", "--json", env=env).stdout.splitlines()
    alerts = [json.loads(line) for line in lines if line.startswith("{")]
    return [a for a in alerts if (a["dataset"]["namespace"], a["dataset"]["name"]) == (kafka, topic)]
