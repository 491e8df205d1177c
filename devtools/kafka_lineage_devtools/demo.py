"""``lineage demo``: the whole pipeline on the real local stack, with a small realistic data platform.

A PySpark pipeline (raw → cleaned → aggregated, with a join) emits through the official OpenLineage listener into
the HTTP collector; a file-load task and a SQL task emit through the hooks and the Kafka transport; a Kafka Connect
connector is picked up by the Connect hook. The processor, the graph sink and the alert sink run as the real
commands. Then the Spark job changes a column's type, and the demo shows what an operator sees. With ``--streaming``
the streaming engines follow (``kafka_lineage_devtools.engines``): a Kafka Connect source → a Flink job → a Spark
batch job → a SQL task in one graph, and a schema change at the connector's source alerts the warehouse's writer.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from openlineage.client import OpenLineageClient

from kafka_lineage.app import render
from kafka_lineage.app.formats import format_alert
from kafka_lineage.graph.driver import driver_for
from kafka_lineage.graph.partitions import UnknownDataset, dataset_partitions
from kafka_lineage.graph.queries import as_rows, traverse
from kafka_lineage.producers.client.hooks import load_task, sql_task
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.producers.service.connect_watcher import watch
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.tail import tail
from kafka_lineage.server.settings import ServerSettings
from kafka_lineage.sinks.alerts.routing.messages import delivery_id
from kafka_lineage_devtools import engines
from kafka_lineage_devtools.engines import EngineScenario
from kafka_lineage_devtools.processes import (
    alert_router_process,
    alert_sink_process,
    collector_process,
    http_live,
    lineage_process,
    processor_process,
    sink_process,
    sleep_watching,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack

TOP_COUNTRIES_SQL = """
INSERT INTO reporting.public.top_countries (country, revenue)
SELECT country, revenue FROM reporting.public.revenue_by_country WHERE revenue > 100
"""


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _write_raw_data(workdir: Path) -> None:
    raw = workdir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rows = [f"{i},{i % 7},{(i * 37) % 500 + 5}.50" for i in range(1, 400)]
    (raw / "orders.csv").write_text("order_id,customer_id,amount\n" + "\n".join(rows) + "\n")
    countries = ["UK", "FI", "DE", "FR", "NL", "SE", "PL"]
    (raw / "customers.csv").write_text("customer_id,name,country\n" + "\n".join(
        f"{i},customer-{i},{countries[i]}" for i in range(7)) + "\n")


def _spark(workdir: Path, collector_url: str, day: date, *flags: str) -> None:
    started = time.monotonic()
    job = subprocess.run([sys.executable, "-m", "kafka_lineage_devtools.demo_spark_job", str(workdir), collector_url,
                          day.isoformat(), *flags],
                         capture_output=True, text=True, timeout=900)
    if job.returncode != 0:
        raise RuntimeError(f"the Spark job failed:\n{job.stderr[-3000:]}")
    print(f"    Spark job finished in {time.monotonic() - started:.0f}s", flush=True)


def _downstream_tasks(workdir: Path, client: OpenLineageClient) -> None:
    with load_task("load_revenue_to_warehouse", str(workdir / "lake" / "revenue_by_country"),
                   "jdbc:postgresql://warehouse:5432/reporting", "public.revenue_by_country", client=client,
                   job_namespace="demo-tasks") as load:
        load.set_output_statistics(row_count=7)
    with sql_task(TOP_COUNTRIES_SQL, dialect="postgres", url="jdbc:postgresql://warehouse:5432/reporting",
                  job_name="top_countries", job_namespace="demo-tasks", client=client):
        pass  # the demo has no warehouse database: the hook's lineage is the point


def _connector(clients: ClientSettings, workdir: Path, client: OpenLineageClient) -> str:
    name = f"demo-orders-stream-{uuid.uuid4().hex[:6]}"
    source = workdir / "orders-stream.jsonl"
    source.write_text('{"order_id": 1}\n{"order_id": 2}\n')
    config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
              "file": str(source), "topic": "demo.orders-stream"}
    requests.put(f"{clients.connect_url}/connectors/{name}/config", json=config, timeout=30).raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = requests.get(f"{clients.connect_url}/connectors/{name}/status", timeout=10)
        if status.ok and status.json()["connector"]["state"] == "RUNNING":
            break
        time.sleep(0.5)
    watch(clients, clients.connect_url, once=True, client=client)
    return name


def _ready(table: str, day: date) -> subprocess.CompletedProcess[str]:
    """``lineage ready file TABLE --key date=DAY``, as a scheduler calls it."""
    return subprocess.run([sys.executable, "-m", "kafka_lineage.app.cli", "ready", "file", table, "--key",
                           f"date={day.isoformat()}"], capture_output=True, text=True, timeout=120)


def _show_ready(table: str, day: date, wanted: int) -> None:
    """Once the graph has caught up (the answer is ``wanted``), print what a scheduler reads: output and exit code."""
    answer = wait_until(lambda: (found := _ready(table, day)).returncode == wanted and found, 120)
    print(f"  $ lineage ready file {table} --key date={day.isoformat()}")
    for line in answer.stdout.splitlines():
        print(f"  {line}")
    print(f"  (exit {answer.returncode})", flush=True)


def _logical_day(clients: ClientSettings, table: str) -> date:
    """The day the demo's scheduler runs for: today, or, when a demo on this stack already wrote today's partition,
    the first later day it has not (so that "not ready, then ready" holds however often the demo runs)."""
    day = datetime.now(UTC).date()
    with driver_for(clients) as driver:
        try:
            written = {p.facts.key for p in dataset_partitions(driver, "file", table)}
        except UnknownDataset:
            written = set()
    while f"date={day.isoformat()}" in written:
        day += timedelta(days=1)
    return day


def _wait_for_downstream(clients: ClientSettings, dataset: str, timeout: float = 120) -> None:
    with driver_for(clients) as driver:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with driver.session() as session:
                if session.run("MATCH (:Dataset {namespace: 'file', name: $name})-[:INPUT_TO]->(j:Job) "
                               "RETURN count(j)", name=dataset).single()[0]:
                    return
            sleep_watching(0.5)  # a pipeline component that died ends the wait
    raise RuntimeError(f"the graph did not show the readers of {dataset} within {timeout:.0f}s")


class TeamChannel:
    """A stand-in for the data team's Slack channel: a local incoming-webhook URL keeping what is posted to it."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], Any]] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                posts.append((dict(self.headers.items()), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0DEMO/B0DEMO/demo-token"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="demo-channel").start()

    def routes(self, workdir: Path, ui: str) -> Path:
        """A routes file sending breaking changes to this channel (its URL in a file, as a real one's secret)."""
        (workdir / "channel-url").write_text(self.url)
        path = workdir / "alert-routes.yaml"
        path.write_text(json.dumps({"ui_url": ui, "routes": [{
            "name": "data-team", "match": {"severity": ["BREAKING"]},
            "destination": {"type": "slack", "url_file": "channel-url"}, "delivery": {"digest_after": 20}}]}))
        return path

    def wait_for(self, key: str, timeout: float = 60) -> Any:
        return wait_until(lambda: next((p for h, p in self.posts if h.get("X-Lineage-Delivery") == key), None),
                          timeout, what="the alert in the team's channel")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _show_post(post: dict[str, Any]) -> None:
    """A Slack message as the channel shows it, roughly: its blocks' text and buttons."""
    for block in post["blocks"]:
        if "text" in block:
            print(f"  {block['text']['text']}".replace("\n", "\n  "))
        for element in block.get("elements", []):
            print(f"  [{element['text']['text']}] {element['url']}" if element.get("type") == "button"
                  else f"  {element.get('text', '')}")


def _wait_for_alert(clients: ClientSettings, dataset: str, since: datetime, timeout: float = 120) -> dict[str, Any]:
    """This run's alert for the change made after ``since``: an earlier demo on the same stack left its own on the
    topic, and this run's first Spark job changed the schema back (an alert of its own, from an earlier event)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for alert in tail(clients, clients.drift_topic, "schema_drift_alert", 200, follow=False):
            if alert["kind"] == "schemaDrift" and alert["dataset"]["name"] == dataset \
                    and _event_time(alert["eventTime"]) >= since:
                return alert
        sleep_watching(1)
    raise RuntimeError(f"no schema-drift alert for {dataset} within {timeout:.0f}s")


def _event_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _streaming_engines(clients: ClientSettings, stack: StackSettings, workdir: Path, collector_url: str
                       ) -> tuple[EngineScenario, dict[str, Any]]:
    """The streaming-engines scenario under the running pipeline, with a Connect watcher of its own (the schema
    change is found by polling); the drift alert of the connector's topic."""
    scenario = EngineScenario(workdir / "engines", uuid.uuid4().hex[:6], clients.kafka_bootstrap_servers,
                              stack.registry_port, clients.connect_url, collector_url)
    _step("streaming engines: a Kafka Connect source (Avro through the registry) → a Flink job → a Spark batch job "
          "→ a SQL task")
    with lineage_process(["connect", "watch", "--interval", "1"], lambda _c, _o: True) as watcher, \
            driver_for(clients) as driver, engines.connectors(scenario), engines.flink_job(scenario) as flink:
        print(f"    connectors {scenario.source_connector} (file → topic {scenario.orders}) and "
              f"{scenario.sink_connector} (topic → file)", flush=True)
        engines.wait_for_streaming(driver, scenario, [watcher, flink])
        print(f"    Flink job {scenario.flink_job} is RUNNING: {scenario.orders} → {scenario.orders_clean} + "
              f"{scenario.table_path}", flush=True)
        engines.run_spark(scenario)
        print(f"    Spark job {scenario.spark_app}: {scenario.orders_clean} → {scenario.lake_table}", flush=True)
        client = OpenLineageClient(transport=KafkaAvroTransport(KafkaAvroConfig.from_dict({})))
        rows = engines.run_sql_task(scenario, client)
        client.transport.close()
        print(f"    SQL task {scenario.sql_job}: lake.orders_clean → dw.revenue_by_country ({rows} rows)", flush=True)
        _step(f"the connector's source gains a field (channel): a new schema version of topic {scenario.orders}")
        changed_at = datetime.now(UTC)
        engines.change_source_schema(scenario)
        alert = _wait_for_alert(clients, scenario.orders, changed_at)
        engines.cancel_flink(flink)
        wait_until(lambda: engines.flink_run_states(driver, scenario)[-1:] == ["ABORT"], 60, watch=[watcher])
        print(f"    Flink job {scenario.flink_job} cancelled: its run is ABORT in the graph", flush=True)
    return scenario, alert


def _show_streaming(clients: ClientSettings, scenario: EngineScenario, alert: dict[str, Any], ui: str) -> None:
    _step(f"streaming engines: what the operator sees (lineage impact {scenario.kafka} {scenario.orders})")
    print(format_alert(alert))
    with driver_for(clients) as driver:
        graph = traverse(driver, scenario.kafka, scenario.orders, depth=10)
    for row in as_rows(graph.nodes):
        print(f"  {row['depth']:>3}  {row['kind']:8} {row['namespace']}  {row['name']}")
    node = quote(f"dataset:{scenario.kafka}:{scenario.orders}", safe="")
    print(f"  web UI: {ui}/#/lineage?node={node}&depth=6&dir=down")


def _start_server(stack: StackSettings) -> str:
    """`lineage serve`, left running beside the stack (stopped by `lineage stack down`); its URL."""
    url = f"http://127.0.0.1:{ServerSettings.from_env().port}"
    Stack(stack).start_background("lineage-server", [sys.executable, "-m", "kafka_lineage.app.cli", "serve"],
                                  lambda: http_live(url))
    return url


def run_demo(clients: ClientSettings, stack: StackSettings, *, streaming: bool = False) -> None:
    workdir = stack.state_dir / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    _write_raw_data(workdir)
    cleaned = str(workdir / "lake" / "orders_cleaned")
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({}))
    client = OpenLineageClient(transport=transport)
    ui = f"http://127.0.0.1:{ServerSettings.from_env().port}"
    channel = TeamChannel()
    _step("starting the pipeline: HTTP collector, stream processor, Neo4j graph sink, schema-drift alert sink, and "
          "the alert router (breaking changes → the data team's Slack channel, a local stand-in)")
    with contextlib.ExitStack() as running:
        running.callback(channel.close)
        collector = running.enter_context(collector_process())
        for start in (processor_process, sink_process, alert_sink_process):
            running.enter_context(start())
        running.enter_context(alert_router_process({"LINEAGE_ALERT_ROUTES": str(channel.routes(workdir, ui))}))
        print(f"    collector at {collector.url}/api/v1/lineage", flush=True)

        _step("PySpark pipeline (official OpenLineage listener → collector): raw CSV → orders_cleaned (join) → "
              "revenue_by_country")
        daily = str(workdir / "lake" / "daily_revenue")
        today = _logical_day(clients, daily)
        _spark(workdir, collector.url, today - timedelta(days=1))
        _step("a file-load task and a SQL task in the warehouse (hooks → Kafka transport)")
        _downstream_tasks(workdir, client)
        _step("a Kafka Connect connector (Connect hook)")
        connector = _connector(clients, workdir, client)
        print(f"    connector {connector} is RUNNING; its run is in the graph", flush=True)
        _wait_for_downstream(clients, cleaned)
        _step(f"a scheduler asks whether daily_revenue's partition of {today} is ready (the job has written "
              f"date={today - timedelta(days=1)} so far)")
        _show_ready(daily, today, wanted=1)

        _step(f"the upstream Spark job changes a column: orders_cleaned.amount double → string (and writes the "
              f"partition of {today})")
        changed_at = datetime.now(UTC)
        _spark(workdir, collector.url, today, "--amount-as-string")
        alert = _wait_for_alert(clients, cleaned, changed_at)
        post = channel.wait_for(delivery_id("data-team", [alert["alertId"]]))
        _step(f"the partition of {today}, once the run completed")
        _show_ready(daily, today, wanted=0)
        transport.close()
        requests.delete(f"{clients.connect_url}/connectors/{connector}", timeout=30)
        streamed = _streaming_engines(clients, stack, workdir, collector.url) if streaming else None

    _step("what the data team reads in its channel (lineage alerts route: Slack blocks, links into the web UI)")
    _show_post(post)
    _step("what the operator sees on lineage.schema-drift (lineage alerts tail)")
    print(format_alert(alert))
    columns = ", ".join(f"{c['name']}.{c['field']} (depth {c['depth']})" for c in alert["impactedColumns"]) or "none"
    print(f"  columns derived from the changed field: {columns}")
    if not alert["impactComplete"]:
        print("  (the graph sink had not caught up when the impact was read: the lists may be incomplete)")
    _step(f"impact of the change (lineage impact file {cleaned})")
    with driver_for(clients) as driver:
        graph = traverse(driver, "file", cleaned, depth=5)
    for row in as_rows(graph.nodes):
        print(f"  {row['depth']:>3}  {row['kind']:8} {row['namespace']}  {row['name']}")
    picture = workdir / "impact.html"
    picture.write_text(render.to_html(graph, f"downstream of {cleaned}"))
    _start_server(stack)
    if streamed is not None:
        _show_streaming(clients, *streamed, ui)
    _step("explore")
    print(f"  web UI (lineage serve): {ui}/#/lineage?node={quote(f'dataset:file:{cleaned}', safe='')}&depth=3"
          "&dir=down")
    print(f"  HTTP API:               {ui}/api/docs  (Marquez-compatible under /api/v1)")
    print(f"  picture of the impact:  {picture}")
    print(f"  Neo4j Browser:          http://127.0.0.1:{stack.neo4j_http_port}  (user {clients.neo4j_user}, "
          f"password: cat {stack.neo4j_password_file})")
    print("      MATCH p=(:Dataset)-[:INPUT_TO|OUTPUTS*1..6]->() RETURN p LIMIT 100")
    print("  questions:              lineage impact file <path> | lineage upstream … | lineage alerts tail | "
          "lineage dlq tail")
    print("  run the pipeline:       lineage collector | lineage processor | lineage sink | lineage alerts run | "
          "lineage alerts route")
    print("  stop the stack:         lineage stack down")
