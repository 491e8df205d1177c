"""One graph across engines on the real stack: a Kafka Connect FileStream source (Avro through the registry, values
shaped by SMTs) → topic ``orders.<id>`` → a streaming PyFlink job (the OpenLineage listener) → topic
``orders_clean.<id>`` + a partitioned filesystem table → a PySpark batch job (the OpenLineage Spark listener, Spark's
Kafka source) → a Parquet catalog table → a SQL task (the project's SQL hook) → a warehouse table; a FileStream sink
connector reads ``orders.<id>`` too (Connect's column lineage is the sink side's). The processor, graph sink and
alert sink run as real processes; the graph in Neo4j and the drift alert are asserted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests
from openlineage.client import OpenLineageClient

from kafka_lineage.producers.client.hooks import sql_task
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.naming import kafka_namespace
from kafka_lineage.sinks.graph.queries import impact
from kafka_lineage.sinks.graph.sink import driver_for
from kafka_lineage_devtools.processes import (
    alert_sink_process,
    child_process,
    free_port,
    lineage_process,
    pipeline_env,
    processor_process,
    sink_process,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import KafkaConnect
from tests.integration.conftest import consume, consume_all, lineage, running_collector

pytest.importorskip("pyflink", reason="the flink extra is not installed (make install installs it)")
pytest.importorskip("pyspark", reason="the spark extra is not installed")
pytestmark = pytest.mark.integration

DATA = Path(__file__).parent.parent / "data"
FLINK_JOB = DATA / "flink" / "connect_orders_job.py"
SPARK_JOB = DATA / "spark" / "orders_clean_job.py"
T = "org.apache.kafka.connect.transforms."
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WAREHOUSE_URL = "hive://warehouse.local:10000/dw"  # how the SQL task's warehouse names its tables
SQL = """
INSERT INTO dw.revenue_by_country (country, revenue, orders)
SELECT country, SUM(amount) AS revenue, COUNT(order_id) AS orders
FROM lake.orders_clean
GROUP BY country
"""


def _put(url: str, name: str, config: dict[str, str]) -> None:
    response = requests.put(f"{url}/connectors/{name}/config", json=config, timeout=30)
    assert response.status_code in (200, 201), response.text


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


def _runs(driver, namespace: str, name: str) -> list[str]:
    rows = driver.execute_query("MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns, name: $name}) RETURN r.state "
                                "ORDER BY r.startTime", ns=namespace, name=name).records
    return [r[0] for r in rows]


def test_connect_flink_spark_and_sql_meet_in_one_graph_and_a_source_schema_change_alerts_the_warehouse(
        clients: ClientSettings, stack_settings: StackSettings, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    prefix = f"test.engines.{suffix}"
    orders, orders_clean = f"orders.{suffix}", f"orders_clean.{suffix}"
    source_name, sink_name = f"orders-source-{suffix}", f"orders-archive-{suffix}"
    flink_job, spark_app, sql_job = f"orders-clean-{suffix}", f"orders_lake_{suffix}", f"revenue-{suffix}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_IMPACT_DEPTH": "10"}
    settings = ClientSettings.from_env({**os.environ, **env})
    bootstrap = settings.kafka_bootstrap_servers
    kafka = kafka_namespace(bootstrap)
    connect_url = settings.connect_url
    registry = f"http://127.0.0.1:{stack_settings.registry_port}"
    source_file, archive_file = tmp_path / "orders.txt", tmp_path / "archive.txt"
    source_file.write_text("o1,de,10.5\no2,fr,20\no3,de,7.25\n")
    table_path, warehouse = tmp_path / "orders_by_country", tmp_path / "lake"
    lake_table = warehouse / "lake.db" / "orders_clean"
    avro = KafkaConnect.avro_converter_config(stack_settings.registry_port)
    source_config = {"connector.class": FILE_SOURCE, "file": str(source_file), "topic": orders, "tasks.max": "1",
                     **avro, "transforms": "hoist,origin",
                     "transforms.hoist.type": T + "HoistField$Value", "transforms.hoist.field": "line",
                     "transforms.origin.type": T + "InsertField$Value",
                     "transforms.origin.static.field": "origin", "transforms.origin.static.value": "shop"}
    sink_config = {"connector.class": FILE_SINK, "file": str(archive_file), "topics": orders, "tasks.max": "1",
                   **avro, "transforms": "rename", "transforms.rename.type": T + "ReplaceField$Value",
                   "transforms.rename.renames": "line:raw"}
    created: list[str] = []
    started = time.monotonic()
    try:
        with running_collector(env["LINEAGE_EVENTS_TOPIC"]) as collector, processor_process(env) as processor, \
                sink_process(env) as sink, alert_sink_process(env) as alerts, \
                lineage_process(["connect", "watch", "--interval", "0.5", "--heartbeat", "0"],
                                lambda _c, _o: True, env) as watcher, driver_for(settings) as driver:
            pipeline = [processor, sink, alerts, watcher]
            # 1. Connect: the source writes Avro through the registry, the sink archives the topic.
            created.append(source_name)
            _put(connect_url, source_name, source_config)
            created.append(sink_name)
            _put(connect_url, sink_name, sink_config)
            # 2. Flink, streaming: Avro from the registry → orders_clean (JSON) + the partitioned table.
            flink_cmd = [sys.executable, str(FLINK_JOB), bootstrap, f"{registry}/apis/ccompat/v7", orders,
                         orders_clean, str(table_path), collector, str(free_port()), flink_job]
            with child_process(flink_cmd, "flink streaming job", env={**os.environ},
                               is_ready=lambda _c, out: "JOB_ID" in out, ready_timeout=240) as flink:
                watched = [*pipeline, flink]
                wait_until(lambda: len(consume(bootstrap, orders_clean, 3, 1)) >= 3, 120, watch=watched)
                wait_until(lambda: "RUNNING" in _runs(driver, "flink-jobs", flink_job), 90, watch=watched)
                # 3. Spark, batch: orders_clean through Spark's Kafka source → the Parquet table lake.orders_clean.
                spark = subprocess.run(  # a batch job: it ends by itself (a dead pipeline child still interrupts)
                    [sys.executable, str(SPARK_JOB), bootstrap, orders_clean, str(warehouse),
                     "thrift://metastore.local:9083", collector, spark_app],
                    capture_output=True, text=True, timeout=240)
                assert spark.returncode == 0 and "ROWS 3" in spark.stdout, spark.stderr[-3000:]
                # 4. The SQL task: the warehouse table from the Parquet table (SQLite stands in for the warehouse).
                client = OpenLineageClient(transport=KafkaAvroTransport(
                    KafkaAvroConfig.from_dict({"topic": env["LINEAGE_EVENTS_TOPIC"]})))
                with sql_task(SQL, dialect="hive", url=WAREHOUSE_URL, job_name=sql_job, job_namespace="warehouse",
                              client=client) as run:
                    run.add_input(str(lake_table))  # the location the SQL's `lake.orders_clean` reads
                    db = sqlite3.connect(":memory:")
                    db.execute("ATTACH ':memory:' AS lake")
                    db.execute("ATTACH ':memory:' AS dw")
                    db.execute("CREATE TABLE lake.orders_clean (order_id, country, amount, origin)")
                    db.executemany("INSERT INTO lake.orders_clean VALUES (?, ?, ?, ?)",
                                   [tuple(r.values()) for r in pq.read_table(lake_table).to_pylist()])
                    db.execute("CREATE TABLE dw.revenue_by_country (country, revenue, orders)")
                    run.set_output_statistics(row_count=db.execute(SQL).rowcount)
                assert client.transport.close() is True
                print(f"\nengines: pipeline through SQL in {time.monotonic() - started:.0f}s", file=sys.stderr)

                # 5. Schema change at the source: one more inserted field → a new value subject version.
                _put(connect_url, source_name, {
                    **source_config, "transforms": "hoist,origin,channel",
                    "transforms.channel.type": T + "InsertField$Value",
                    "transforms.channel.static.field": "channel", "transforms.channel.static.value": "web"})
                with source_file.open("a") as handle:
                    handle.write("o4,fr,3\n")
                found = wait_until(lambda: consume_all(bootstrap, settings.drift_topic), 120, watch=watched)
                flink.process.terminate()  # the job script cancels the Flink job on SIGTERM
                flink.process.wait(120)
                assert "JOB_STATE CANCELED" in flink.output_so_far()
            wait_until(lambda: _runs(driver, "flink-jobs", flink_job)[-1:] == ["ABORT"], 60, watch=pipeline)
            print(f"engines: all done in {time.monotonic() - started:.0f}s", file=sys.stderr)
            _assert_graph(driver, kafka, orders, orders_clean, source_file, archive_file, flink_job, spark_app,
                          sql_job, lake_table, warehouse)
            assert found
            (alert, *_) = wait_until(lambda: _alerts_for(env, kafka, orders), 60, watch=pipeline)
            assert {"namespace": "warehouse", "name": sql_job} in [
                {"namespace": j["namespace"], "name": j["name"]} for j in alert["impactedJobs"]], alert
    finally:
        for name in created:
            requests.delete(f"{connect_url}/connectors/{name}", timeout=10)


def _assert_graph(driver, kafka, orders, orders_clean, source_file, archive_file, flink_job, spark_app, sql_job,
                  lake_table, warehouse) -> None:
    topic, clean, lake = (kafka, orders), (kafka, orders_clean), ("file", str(lake_table))
    # 1. One connected path, exact identities: one Kafka namespace for Connect, Flink and Spark.
    source_name, sink_name = f"orders-source-{orders.split('.')[-1]}", f"orders-archive-{orders.split('.')[-1]}"
    assert _edges(driver, source_name) == {"in": {("file", str(source_file))}, "out": {topic}}
    assert _edges(driver, sink_name) == {"in": {topic}, "out": {("file", str(archive_file))}}
    assert _edges(driver, flink_job) == {"in": {topic}, "out": {clean, ("", "default_catalog.default_database."
                                                                         "orders_by_country")}}
    spark_jobs = {name for ns, name in _readers(driver, *clean)}
    assert spark_jobs and all(name.startswith(f"{spark_app}.") for name in spark_jobs)
    assert all(_edges(driver, name)["out"] == {lake} for name in spark_jobs)
    assert _readers(driver, *lake) == {("warehouse", sql_job)}
    assert _edges(driver, sql_job)["out"] == {("hive://warehouse.local:10000", "dw.revenue_by_country")}
    # 2. Column lineage: Connect's sink side (ReplaceField rename) and the SQL task; Spark's listener gives none
    # for a Kafka source (InputFieldsCollector: no dataset identifier for the Kafka relation), Flink's none at all.
    assert {("raw", *topic, "line"), ("origin", *topic, "origin")} <= _derives(driver, "file", str(archive_file))
    assert ("revenue", "hive://warehouse.local:10000", "lake.orders_clean", "amount") in _derives(
        driver, "hive://warehouse.local:10000", "dw.revenue_by_country")
    # 3. The streaming Flink run: RUNNING was seen while it ran (waited above), ABORT after the cancel.
    assert _runs(driver, "flink-jobs", flink_job)[-1] == "ABORT"
    # 4. Impact of the Connect topic reaches the warehouse table's writer.
    reached = {(r.kind, r.namespace, r.name) for r in impact(driver, *topic, 10)}
    assert ("job", "warehouse", sql_job) in reached


def _alerts_for(env: dict[str, str], kafka: str, topic: str) -> list[dict]:
    lines = lineage("alerts", "tail", "--json", env=env).stdout.splitlines()
    alerts = [json.loads(line) for line in lines if line.startswith("{")]
    return [a for a in alerts if (a["dataset"]["namespace"], a["dataset"]["name"]) == (kafka, topic)]
