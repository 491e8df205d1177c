"""SQL and file/load hooks emitting through the project's Kafka Avro transport to the real Kafka and registry."""

from __future__ import annotations

import uuid

import pytest
from openlineage.client import OpenLineageClient

from kafka_lineage.producers.client.hooks import lineage_task, load_task, sql_task
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.runtime.config import ClientSettings
from tests.integration.conftest import decoded_events

pytestmark = pytest.mark.integration

PG = "jdbc:postgresql://DB.example:5432/shop?user=etl&password=secret"
PG_NS = "postgres://db.example:5432"
SQL = """
INSERT INTO analytics.daily_sales (day, customer, total)
SELECT o.day, c.name AS customer, SUM(o.amount) AS total
FROM sales.orders o JOIN crm.customers c ON o.customer_id = c.id
GROUP BY o.day, c.name
"""


def _client(topic: str) -> tuple[OpenLineageClient, KafkaAvroTransport]:
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": topic}))
    return OpenLineageClient(transport=transport), transport


def _by_run(received: list[tuple[str, dict]]) -> dict[str, dict[str, tuple[str, dict]]]:
    runs: dict[str, dict[str, tuple[str, dict]]] = {}
    for key, event in received:
        runs.setdefault(event["run"]["runId"], {})[event["eventType"]] = (key, event)
    return runs


def test_sql_task_events_arrive_with_datasets_and_column_lineage(clients: ClientSettings, events_topic: str) -> None:
    client, transport = _client(events_topic)
    namespace = f"hooks-{uuid.uuid4().hex[:6]}"
    with sql_task(SQL, dialect="postgres", url=PG, job_name="daily-sales", job_namespace=namespace,
                  client=client) as ok:
        ok.set_output_statistics(row_count=3)
    with pytest.raises(RuntimeError, match="deadlock"), \
            sql_task(SQL, dialect="postgres", url=PG, job_name="daily-sales", job_namespace=namespace, client=client):
        raise RuntimeError("deadlock detected")
    assert transport.close() is True

    runs = _by_run(decoded_events(clients, events_topic, 4))
    assert set(runs[ok.run_id]) == {"START", "COMPLETE"}
    (failed_id,) = set(runs) - {ok.run_id}
    assert set(runs[failed_id]) == {"START", "FAIL"}
    for events in runs.values():
        for key, event in events.values():
            assert key == f"run:{namespace}/daily-sales"
            assert event["job"]["facets"]["sql"]["query"] == SQL
            assert event["job"]["facets"]["jobType"]["integration"] == "SQL"
            assert {(d["namespace"], d["name"]) for d in event["inputs"]} == {
                (PG_NS, "shop.sales.orders"), (PG_NS, "shop.crm.customers")}
            (output,) = event["outputs"]
            assert (output["namespace"], output["name"]) == (PG_NS, "shop.analytics.daily_sales")
            fields = output["facets"]["columnLineage"]["fields"]
            assert fields["total"]["inputFields"] == [
                {"namespace": PG_NS, "name": "shop.sales.orders", "field": "amount", "transformations": []}]
            assert fields["customer"]["inputFields"][0]["name"] == "shop.crm.customers"
    complete = runs[ok.run_id]["COMPLETE"][1]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    fail = runs[failed_id]["FAIL"][1]
    assert fail["run"]["facets"]["errorMessage"]["message"] == "RuntimeError: deadlock detected"
    assert "Traceback" in fail["run"]["facets"]["errorMessage"]["stackTrace"]
    assert "secret" not in str(runs)


def test_file_and_load_tasks_arrive_keyed_by_root_job(clients: ClientSettings, events_topic: str) -> None:
    client, transport = _client(events_topic)
    namespace = f"hooks-{uuid.uuid4().hex[:6]}"
    with lineage_task("nightly", inputs=["s3a://raw/orders.csv"], outputs=["/data/clean/orders.parquet"],
                      job_namespace=namespace, client=client) as parent:
        with load_task("load-orders", "/data/clean/orders.parquet", PG, "staging.orders", job_namespace=namespace,
                       client=client, parent=parent) as load:
            load.set_output_statistics(row_count=1000)
        with pytest.raises(OSError, match="disk full"), \
                lineage_task("export", outputs=["gs://exports/orders.csv"], job_namespace=namespace, client=client,
                             parent=parent):
            raise OSError("disk full")
    assert transport.close() is True

    received = decoded_events(clients, events_topic, 6)
    assert len(received) == 6
    assert {key for key, _ in received} == {f"run:{namespace}/nightly"}  # one partition, in order, per root
    runs = _by_run(received)
    assert set(runs[parent.run_id]) == {"START", "COMPLETE"}
    nightly = runs[parent.run_id]["COMPLETE"][1]
    assert [(d["namespace"], d["name"]) for d in nightly["inputs"]] == [("s3://raw", "orders.csv")]
    assert [(d["namespace"], d["name"]) for d in nightly["outputs"]] == [("file", "/data/clean/orders.parquet")]
    loaded = runs[load.run_id]["COMPLETE"][1]
    assert [(d["namespace"], d["name"]) for d in loaded["inputs"]] == [("file", "/data/clean/orders.parquet")]
    assert [(d["namespace"], d["name"]) for d in loaded["outputs"]] == [(PG_NS, "shop.staging.orders")]
    assert loaded["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 1000
    assert loaded["run"]["facets"]["parent"]["run"]["runId"] == parent.run_id
    (export_id,) = set(runs) - {parent.run_id, load.run_id}
    failed = runs[export_id]["FAIL"][1]
    assert failed["run"]["facets"]["errorMessage"]["message"] == "OSError: disk full"
    assert failed["run"]["facets"]["parent"]["root"]["job"]["name"] == "nightly"
