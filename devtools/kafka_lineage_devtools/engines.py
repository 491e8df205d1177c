"""The streaming-engines scenario: Kafka Connect, Flink, Spark and a SQL task in one lineage graph.

A Kafka Connect FileStream source writes Avro through the registry (values shaped by SMTs) to ``orders.<id>``; a
FileStream sink connector archives that topic (Connect's column lineage is the sink side's); a streaming PyFlink job
(the OpenLineage listener) turns the topic into ``orders_clean.<id>`` and a partitioned filesystem table; a PySpark
batch job (the OpenLineage Spark listener, Spark's Kafka source) writes the Parquet catalog table
``lake.orders_clean``; a SQL task (the project's SQL hook) builds the warehouse table from it. Then the connector's
source gains a field: a new value-subject version, whose drift alert reaches the warehouse table's writer.

The steps are shared by ``lineage demo --streaming`` (which narrates them) and tests/integration/test_engines.py
(which asserts the graph they leave); the pipeline itself (collector, processor, sinks, ``lineage connect watch``)
is the caller's.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests
from neo4j import Driver
from openlineage.client import OpenLineageClient

from kafka_lineage.producers.client.hooks import sql_task
from kafka_lineage.schemas.naming import kafka_namespace
from kafka_lineage_devtools.processes import ChildProcess, Watched, child_process, free_port, wait_until
from kafka_lineage_devtools.stack.services import KafkaConnect

T = "org.apache.kafka.connect.transforms."
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
FLINK_NAMESPACE = "flink-jobs"  # the listener's default job namespace
SQL_NAMESPACE = "warehouse"
# How the SQL task's warehouse names its tables (SQLite stands in for that warehouse).
WAREHOUSE_URL = "hive://warehouse.local:10000/dw"
METASTORE_URI = "thrift://metastore.local:9083"  # the metastore the Spark listener names its catalog table by
REVENUE_SQL = """
INSERT INTO dw.revenue_by_country (country, revenue, orders)
SELECT country, SUM(amount) AS revenue, COUNT(order_id) AS orders
FROM lake.orders_clean
GROUP BY country
"""


@dataclass(frozen=True)
class EngineScenario:
    """Every name the scenario uses: unique per ``suffix``, files under ``workdir``."""

    workdir: Path
    suffix: str
    bootstrap: str
    registry_port: int
    connect_url: str
    collector_url: str

    @property
    def kafka(self) -> str:
        return kafka_namespace(self.bootstrap)

    @property
    def orders(self) -> str:
        return f"orders.{self.suffix}"

    @property
    def orders_clean(self) -> str:
        return f"orders_clean.{self.suffix}"

    @property
    def source_connector(self) -> str:
        return f"orders-source-{self.suffix}"

    @property
    def sink_connector(self) -> str:
        return f"orders-archive-{self.suffix}"

    @property
    def flink_job(self) -> str:
        return f"orders-clean-{self.suffix}"

    @property
    def spark_app(self) -> str:
        return f"orders_lake_{self.suffix}"

    @property
    def sql_job(self) -> str:
        return f"revenue-{self.suffix}"

    @property
    def source_file(self) -> Path:
        return self.workdir / "orders.txt"

    @property
    def archive_file(self) -> Path:
        return self.workdir / "archive.txt"

    @property
    def table_path(self) -> Path:
        return self.workdir / "orders_by_country"

    @property
    def warehouse(self) -> Path:
        return self.workdir / "lake"

    @property
    def lake_table(self) -> Path:
        return self.warehouse / "lake.db" / "orders_clean"

    def source_config(self, *, with_channel: bool = False) -> dict[str, str]:
        """The source connector: each line hoisted into ``line``, a static ``origin`` (and ``channel``) added."""
        config = {"connector.class": FILE_SOURCE, "file": str(self.source_file), "topic": self.orders,
                  "tasks.max": "1", **KafkaConnect.avro_converter_config(self.registry_port),
                  "transforms": "hoist,origin",
                  "transforms.hoist.type": T + "HoistField$Value", "transforms.hoist.field": "line",
                  "transforms.origin.type": T + "InsertField$Value",
                  "transforms.origin.static.field": "origin", "transforms.origin.static.value": "shop"}
        if with_channel:
            config |= {"transforms": "hoist,origin,channel", "transforms.channel.type": T + "InsertField$Value",
                       "transforms.channel.static.field": "channel", "transforms.channel.static.value": "web"}
        return config

    def sink_config(self) -> dict[str, str]:
        """The archive connector: the topic's Avro values, ``line`` renamed ``raw``, into a file."""
        return {"connector.class": FILE_SINK, "file": str(self.archive_file), "topics": self.orders,
                "tasks.max": "1", **KafkaConnect.avro_converter_config(self.registry_port),
                "transforms": "rename", "transforms.rename.type": T + "ReplaceField$Value",
                "transforms.rename.renames": "line:raw"}


def _put_connector(scenario: EngineScenario, name: str, config: dict[str, str]) -> None:
    response = requests.put(f"{scenario.connect_url}/connectors/{name}/config", json=config, timeout=30)
    if response.status_code not in (200, 201):
        raise RuntimeError(f"Kafka Connect refused connector {name}: {response.status_code} {response.text}")


@contextlib.contextmanager
def connectors(scenario: EngineScenario) -> Iterator[None]:
    """The source and archive connectors, deleted on the way out (whatever happened)."""
    scenario.workdir.mkdir(parents=True, exist_ok=True)
    scenario.source_file.write_text("o1,de,10.5\no2,fr,20\no3,de,7.25\n")
    created = []
    try:
        for name, config in ((scenario.source_connector, scenario.source_config()),
                             (scenario.sink_connector, scenario.sink_config())):
            created.append(name)
            _put_connector(scenario, name, config)
        yield
    finally:
        for name in created:
            with contextlib.suppress(requests.RequestException):
                requests.delete(f"{scenario.connect_url}/connectors/{name}", timeout=10)


@contextlib.contextmanager
def flink_job(scenario: EngineScenario) -> Iterator[ChildProcess]:
    """The streaming Flink job, submitted to a local mini-cluster in a child process (~20 s cold start)."""
    command = [sys.executable, "-m", "kafka_lineage_devtools.engine_jobs.flink_orders_clean", scenario.bootstrap,
               f"http://127.0.0.1:{scenario.registry_port}/apis/ccompat/v7", scenario.orders, scenario.orders_clean,
               str(scenario.table_path), scenario.collector_url, str(free_port()), scenario.flink_job]
    with child_process(command, "flink streaming job", is_ready=lambda _c, out: "JOB_ID" in out,
                       ready_timeout=240) as child:
        yield child


def cancel_flink(job: ChildProcess) -> None:
    """SIGTERM: the job script cancels the Flink job (the listener's ABORT) and ends."""
    job.process.terminate()
    job.process.wait(120)
    if "JOB_STATE CANCELED" not in job.output_so_far():
        raise RuntimeError(f"the Flink job did not end CANCELED:\n{job.tail()}")


def flink_run_states(driver: Driver, scenario: EngineScenario) -> list[str]:
    """The Flink job's run states in the graph, oldest run first."""
    rows = driver.execute_query("MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns, name: $name}) RETURN r.state "
                                "ORDER BY r.startTime", ns=FLINK_NAMESPACE, name=scenario.flink_job).records
    return [r[0] for r in rows]


def wait_for_streaming(driver: Driver, scenario: EngineScenario, watch: Iterable[Watched]) -> None:
    """Until Flink wrote the three source orders to ``orders_clean`` and its run is RUNNING in the graph."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    settling = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT}

    def clean_records() -> int:
        consumer = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": "engines-probe",
                             "enable.auto.commit": False})
        try:
            topic = consumer.list_topics(scenario.orders_clean, timeout=10).topics[scenario.orders_clean]
            if topic.error is not None:  # not created yet
                return 0
            marks = [consumer.get_watermark_offsets(TopicPartition(scenario.orders_clean, p), timeout=10)
                     for p in topic.partitions]
        except KafkaException as exc:  # a topic Flink just created has no leader for a moment: ask again
            if not (exc.args[0].retriable() or exc.args[0].code() in settling):
                raise
            return 0
        finally:
            consumer.close()
        return sum(high - low for low, high in marks)

    wait_until(lambda: clean_records() >= 3, 120, watch=watch)
    wait_until(lambda: "RUNNING" in flink_run_states(driver, scenario), 90, watch=watch)


def run_spark(scenario: EngineScenario) -> None:
    """The batch job (it ends by itself): ``orders_clean`` through Spark's Kafka source → ``lake.orders_clean``."""
    job = subprocess.run([sys.executable, "-m", "kafka_lineage_devtools.engine_jobs.spark_orders_lake",
                          scenario.bootstrap, scenario.orders_clean, str(scenario.warehouse), METASTORE_URI,
                          scenario.collector_url, scenario.spark_app],
                         capture_output=True, text=True, timeout=300)
    if job.returncode != 0 or "ROWS 3" not in job.stdout:
        raise RuntimeError(f"the Spark job failed ({job.returncode}):\n{job.stdout[-1000:]}\n{job.stderr[-3000:]}")


def run_sql_task(scenario: EngineScenario, client: OpenLineageClient) -> int:
    """The warehouse table from the Parquet table, through the SQL hook; returns the rows written."""
    import pyarrow.parquet as pq

    with sql_task(REVENUE_SQL, dialect="hive", url=WAREHOUSE_URL, job_name=scenario.sql_job,
                  job_namespace=SQL_NAMESPACE, client=client) as run:
        # The SQL names `lake.orders_clean` by the warehouse's catalog; the files it reads are Spark's table, by path.
        run.add_input(str(scenario.lake_table))
        db = sqlite3.connect(":memory:")
        db.execute("ATTACH ':memory:' AS lake")
        db.execute("ATTACH ':memory:' AS dw")
        db.execute("CREATE TABLE lake.orders_clean (order_id, country, amount, origin)")
        db.executemany("INSERT INTO lake.orders_clean VALUES (?, ?, ?, ?)",
                       [tuple(r.values()) for r in pq.read_table(scenario.lake_table).to_pylist()])
        db.execute("CREATE TABLE dw.revenue_by_country (country, revenue, orders)")
        rows = db.execute(REVENUE_SQL).rowcount
        run.set_output_statistics(row_count=rows)
    return rows


def change_source_schema(scenario: EngineScenario, timeout: float = 60.0) -> None:
    """The source connector gains a field (``channel``) and reads one more line: a new value-subject version.

    Connect restarts the task after the new config is stored; a line appended before the old task stopped is read by
    it, with the old schema (seen on a loaded CI machine: the demo then waited for an alert that could not come). So
    a line is appended again until the subject's latest version has the field."""
    _put_connector(scenario, scenario.source_connector, scenario.source_config(with_channel=True))
    latest = (f"http://127.0.0.1:{scenario.registry_port}/apis/ccompat/v7/subjects/{scenario.orders}-value/versions"
              "/latest")
    deadline, order = time.monotonic() + timeout, 4
    while time.monotonic() < deadline:
        with scenario.source_file.open("a") as handle:
            handle.write(f"o{order},fr,3\n")
        order += 1
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: "channel" in requests.get(latest, timeout=10).json().get("schema", ""), 5,
                       interval=0.5, what="the source's new schema version")
            return
    raise RuntimeError(f"{scenario.source_connector} wrote no record of its new schema within {timeout:.0f}s")
