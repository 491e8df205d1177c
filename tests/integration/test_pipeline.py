"""Emit → processor → graph sink + alert sink, all real processes: a schema change reaches operators with its impact."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.graph.queries import column_impact
from kafka_lineage.graph.store import GraphStore
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.local import wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import alert_sink_process, pipeline_env, processor_process, sink_process
from tests.openlineage_samples import PRODUCER

from .conftest import consume_all, lineage, settled_fingerprint

pytestmark = pytest.mark.integration
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"


def _run(namespace: str, job: str, second: int, inputs: list[dict], outputs: list[dict]) -> list[dict]:
    run = str(uuid.uuid4())
    return [{"eventType": kind, "eventTime": f"2024-05-01T12:{second // 60:02d}:{second % 60 + offset:02d}Z",
             "producer": PRODUCER, "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": run}, "job": {"namespace": namespace, "name": job}, "inputs": inputs,
             "outputs": outputs} for kind, offset in (("START", 0), ("COMPLETE", 1))]


def _dataset(name: str, fields: list[tuple[str, str]] | None = None) -> dict:
    facets = {"schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
                         "fields": [{"name": n, "type": t} for n, t in fields]}} if fields else {}
    return {"namespace": "s3a://lake", "name": name, "facets": facets}


def test_a_schema_change_becomes_an_alert_with_its_impact_and_a_rebuild_matches(
    clients: ClientSettings, tmp_path: Path
) -> None:
    prefix = f"test.e2e.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    ns = f"e2e-{uuid.uuid4().hex[:6]}"
    orders, mart = f"{ns}/orders", f"{ns}/orders_by_day"
    v1 = [("id", "bigint"), ("amount", "decimal(10,2)")]
    v2 = [("id", "string"), ("amount", "decimal(10,2)")]
    with driver_for(settings) as driver:
        wipe(driver)  # the graph holds this test's lineage only, so its fingerprint can be compared after a rebuild
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        baseline = _run(ns, "ingest_orders", 0, [], [_dataset(orders, v1)])
        baseline += _run(ns, "daily_mart", 10, [_dataset(orders)], [_dataset(mart, [("day", "date")])])
        publisher.send([publisher.encode(e) for e in baseline]).result(30)
        with driver_for(settings) as driver:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the graph knows the downstream job before the change comes
                with driver.session() as session:
                    if session.run("MATCH (:Dataset {name: $name})-[:INPUT_TO]->(j:Job) RETURN count(j)",
                                   name=orders).single()[0]:
                        break
                time.sleep(0.3)
        changed = _run(ns, "ingest_orders", 20, [], [_dataset(orders, v2)])
        publisher.send([publisher.encode(e) for e in changed]).result(30)
        publisher.close()
        deadline = time.monotonic() + 60
        alerts = []
        while time.monotonic() < deadline and not alerts:
            alerts = consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)
            time.sleep(0.5)
        time.sleep(2)
        tail = lineage("alerts", "tail", env=env)
        as_json = lineage("alerts", "tail", "--json", env=env)
        impact = lineage("impact", "s3://lake", orders, "--format", "json", env=env)
        upstream = lineage("upstream", "s3://lake", mart, env=env)
        dot = lineage("impact", "s3://lake", orders, "--format", "dot", env=env)
        page = lineage("impact", "s3://lake", orders, "--format", "html", "--output", str(tmp_path / "i.html"),
                       env=env)
        with driver_for(settings) as driver:
            live = settled_fingerprint(driver)
    rebuilt = lineage("replay", "--from", "earliest", "--fresh", "--yes", env=env)
    assert "replayed 6 records" in rebuilt.stdout and "6 events written" in rebuilt.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == live  # the rebuilt graph is the live one
    assert len(consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)) == 1  # exactly one alert
    assert alerts[0].key() == f"s3://lake/{orders}".encode()  # normalized namespace (s3a → s3)
    assert f"[BREAKING] s3://lake {orders}" in tail.stdout and "TYPE_CHANGED" in tail.stdout
    assert f"impacted jobs: {ns} daily_mart (depth 1)" in tail.stdout
    assert f'"name": "{mart}"' in as_json.stdout and '"runId"' in as_json.stdout
    assert '"name": "daily_mart"' in impact.stdout and f'"name": "{mart}"' in impact.stdout
    assert "ingest_orders" in upstream.stdout and orders in upstream.stdout
    assert dot.stdout.startswith("digraph lineage") and dot.stdout.count("->") == 2  # orders → job → mart
    assert "picture in" in page.stdout and "daily_mart" in (tmp_path / "i.html").read_text()


def test_static_lineage_flows_to_the_graph_and_impact(clients: ClientSettings, tmp_path: Path) -> None:
    """A JobEvent (a job's declared inputs and outputs, no run) and a DatasetEvent (a schema, no job) through the
    real processor and graph sink: the impact question follows the static edges, the dataset has its schema."""
    prefix = f"test.static.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    ns = f"static-{uuid.uuid4().hex[:6]}"
    source, target = f"{ns}/raw", f"{ns}/curated"
    job_event = {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
                 "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
                 "job": {"namespace": ns, "name": "declared_etl"}, "inputs": [_dataset(source)],
                 "outputs": [_dataset(target)]}
    dataset_event = {"eventTime": "2024-05-01T12:00:01Z", "producer": PRODUCER,
                     "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                     "dataset": _dataset(source, [("id", "bigint"), ("payload", "string")])}
    with processor_process(env), sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        publisher.send([publisher.encode(e) for e in (job_event, dataset_event)]).result(30)
        publisher.close()
        with driver_for(settings) as driver:
            deadline, found = time.monotonic() + 60, None
            while time.monotonic() < deadline and not found:
                found = driver.execute_query(
                    "MATCH (d:Dataset {namespace: 's3://lake', name: $name})-[:HAS_SCHEMA]->(s:SchemaVersion) "
                    "MATCH (d)-[:INPUT_TO]->(:Job {name: 'declared_etl'})-[:OUTPUTS]->(:Dataset {name: $target}) "
                    "RETURN s.fields", name=source, target=target).records
                time.sleep(0.3)
    assert found and [f["name"] for f in json.loads(found[0][0])] == ["id", "payload"]
    impact = lineage("impact", "s3://lake", source, "--format", "json", env=env)
    assert '"name": "declared_etl"' in impact.stdout and f'"name": "{target}"' in impact.stdout


def test_a_path_and_its_table_symlink_are_one_lineage_under_their_own_names(clients: ClientSettings,
                                                                           tmp_path: Path) -> None:
    """Spark writes a path that a Hive table names (a TABLE symlink); the next job reads the table by name only.
    Both datasets keep their own identities, linked SAME_AS, and every lineage question crosses the link: the CLI's
    impact and upstream, the lineage server's graph. A replay rebuilds the link."""
    prefix = f"test.symlink.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    ns = f"sym-{uuid.uuid4().hex[:6]}"
    path, table, mart = f"{ns}/warehouse/orders", f"{ns}.orders", f"{ns}/mart"
    written = _dataset(path, [("id", "bigint")])
    written["facets"]["symlinks"] = {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": [{"namespace": "hive://metastore:9083", "name": table, "type": "TABLE"}]}
    events = _run(ns, "write_orders", 0, [], [written])
    derived = _dataset(mart, [("order_id", "bigint")])
    derived["facets"]["columnLineage"] = {  # the mart's column comes from the table's, named by the table only
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
        "fields": {"order_id": {"inputFields": [{"namespace": "hive://metastore:9083", "name": table, "field": "id"}]}}}
    events += _run(ns, "orders_mart", 10, [{"namespace": "hive://metastore:9083", "name": table}], [derived])
    with driver_for(settings) as driver:
        wipe(driver)
    with processor_process(env), sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        publisher.send([publisher.encode(e) for e in events]).result(30)
        publisher.close()
        with driver_for(settings) as driver:
            deadline, linked = time.monotonic() + 60, []
            while time.monotonic() < deadline and not linked:
                linked = driver.execute_query(
                    "MATCH (d:Dataset {namespace: 's3://lake'})-[e:SAME_AS]->(t:Dataset)-[:INPUT_TO]->(:Job) "
                    "RETURN d.name, t.namespace, t.name, e.type").records
                time.sleep(0.3)
            live = settled_fingerprint(driver)
            graph = GraphStore(driver).neighbourhood("dataset", "s3://lake", path, 1, 100)
            columns = GraphStore(driver).column_graph("s3://lake", path, "id", 2, ("down",), 100)
            derived_columns = column_impact(driver, "s3://lake", path, ["id"], depth=1)
    assert [list(r) for r in linked] == [[path, "hive://metastore:9083", table, "TABLE"]]  # the path kept its name
    impact = lineage("impact", "s3://lake", path, "--format", "json", env=env)
    assert '"name": "orders_mart"' in impact.stdout and f'"name": "{mart}"' in impact.stdout
    upstream = lineage("upstream", "s3://lake", mart, env=env)
    assert "write_orders" in upstream.stdout and path in upstream.stdout
    assert {(n.kind, n.name) for n in graph.nodes.values()} >= {("dataset", table), ("job", "orders_mart")}
    # column lineage crosses the link too: the path's column is the table's, from which the mart's derives
    assert {(n.name, n.field) for n in columns.nodes.values()} == {(path, "id"), (table, "id"), (mart, "order_id")}
    assert [(c.name, c.field) for c in derived_columns] == [(mart, "order_id")]
    rebuilt = lineage("replay", "--from", "earliest", "--fresh", "--yes", env=env)
    assert "4 events written" in rebuilt.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == live
