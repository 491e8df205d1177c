"""`lineage serve`'s pipeline views against the real stack: a dataset's schema history with its changes, a run's
detail, the latest drift alerts (and one arriving live over server-sent events) and dead letters."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.graph.queries import Reached
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.sink import build_alert
from kafka_lineage_devtools.processes import server_process

pytestmark = pytest.mark.integration
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/tests/integration/server"


def _event(kind: str, time_: str, run: dict, job: str, outputs: list[dict], inputs: list[dict] | None = None) -> dict:
    return {"eventType": kind, "eventTime": time_, "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": run, "job": {"namespace": "feeds", "name": job}, "inputs": inputs or [], "outputs": outputs}


def _dataset(ns: str, name: str, *fields: tuple[str, str]) -> dict[str, Any]:
    return {"namespace": ns, "name": name, "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": n, "type": t} for n, t in fields]}}}


@pytest.fixture
def topics(clients: ClientSettings) -> tuple[dict[str, str], ClientSettings]:
    prefix = f"test.feeds.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
           "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift"}
    settings = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(settings, 2)
    return env, settings


def test_schema_history_and_run_detail(clients: ClientSettings, topics: tuple[dict[str, str], ClientSettings]
                                       ) -> None:
    ns = f"s3://feeds-{uuid.uuid4().hex[:8]}"
    parent, child, first = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    quality = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/"
               "DataQualityMetricsInputDatasetFacet.json", "rowCount": 42, "columnMetrics": {"id": {"nullCount": 0}}}
    source = {"namespace": ns, "name": "src", "inputFacets": {"dataQualityMetrics": quality}}
    v1 = _dataset(ns, "orders", ("id", "INT"), ("amount", "DECIMAL"))
    v2 = _dataset(ns, "orders", ("id", "BIGINT"), ("amount", "DECIMAL"), ("note", "STRING"))
    child_run = {"runId": child, "facets": {"parent": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
        "run": {"runId": parent}, "job": {"namespace": "feeds", "name": "dag"}}}}
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, [
            _event("COMPLETE", "2024-05-01T10:00:00Z", {"runId": first}, "load", [{**v1, "outputFacets": {
                "outputStatistics": {"_producer": PRODUCER, "rowCount": 1000, "size": 4096, "_schemaURL":
                                     "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json"}}}]),
            _event("START", "2024-05-02T10:00:00Z", {**child_run, "facets": {**child_run["facets"], "processing_engine":
                {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                 "ProcessingEngineRunFacet.json", "version": "3.5.6", "name": "spark"}}}, "load", [v2], [source]),
            _event("FAIL", "2024-05-02T10:05:00Z", {**child_run, "facets": {**child_run["facets"], "errorMessage": {
                "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/"
                "ErrorMessageRunFacet.json", "message": "disk full", "programmingLanguage": "python"}}},
                   "load", [v2], [source]),
        ])
    env, _ = topics
    with server_process(env) as server:
        history = requests.get(f"{server.url}/api/v2/datasets/{requests.utils.quote(ns, safe='')}/orders/schema",
                               timeout=30).json()
        assert [len(v["fields"]) for v in history["versions"]] == [2, 3]
        assert history["versions"][1]["current"] and history["currentVersion"] == history["versions"][1]["version"]
        assert history["versions"][0]["changes"] == []
        assert {(c["path"], c["kind"]) for c in history["versions"][1]["changes"]} == {
            ("id", "TYPE_CHANGED"), ("note", "ADDED")}
        assert history["versions"][1]["severity"] == "COMPATIBLE"  # INT → BIGINT widens, a column added
        detail = requests.get(f"{server.url}/api/v2/runs/{child}", timeout=30).json()
        assert detail["run"]["state"] == "FAIL" and detail["run"]["errorMessage"] == "disk full"
        facets = detail["run"]["facets"]  # START's, updated by FAIL's
        assert set(facets) == {"parent", "processing_engine", "errorMessage"}
        assert facets["processing_engine"]["version"] == "3.5.6" and facets["errorMessage"]["message"] == "disk full"
        runs = requests.get(f"{server.url}/api/v1/namespaces/feeds/jobs/load/runs", timeout=30).json()["runs"]
        assert [(r["id"], set(r["facets"])) for r in runs if r["id"] in (child, first)] == [  # Marquez's too
            (child, set(facets)), (first, set())]
        assert detail["job"] == {"namespace": "feeds", "name": "load"}
        assert detail["parent"]["runId"] == parent and detail["parent"]["job"] == {"namespace": "feeds",
                                                                                   "name": "dag"}
        assert detail["inputs"][0]["dataQuality"] == {"rowCount": 42, "columnMetrics": {"id": {"nullCount": 0}}}
        assert [c["runId"] for c in requests.get(f"{server.url}/api/v2/runs/{parent}", timeout=30).json()[
            "children"]] == [child]
        assert requests.get(f"{server.url}/api/v2/runs/{uuid.uuid4()}", timeout=30).status_code == 404
        quoted = requests.utils.quote(ns, safe="")
        writes = requests.get(f"{server.url}/api/v2/datasets/{quoted}/orders/runs", timeout=30).json()["writes"]
        assert [(w["runId"], w["state"], w["rowCount"], w["bytes"]) for w in writes] == [
            (child, "FAIL", None, None), (first, "COMPLETE", 1000, 4096)]
        quality = requests.get(f"{server.url}/api/v2/datasets/{quoted}/src/runs", timeout=30).json()["quality"]
        assert [(q["runId"], q["dataQuality"]["rowCount"]) for q in quality] == [(child, 42)]


def test_alerts_live_and_dead_letters(topics: tuple[dict[str, str], ClientSettings]) -> None:
    env, settings = topics
    client = SchemaRegistryClient(settings.registry_config())
    alerts = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
    alert_id = registry.registered_id(client, settings.drift_topic, "schema_drift_alert")
    letters = AvroCodec("dead_letter", registry.schema_fetcher(client))
    letter_id = registry.registered_id(client, settings.dlq_topic, "dead_letter")
    producer = Producer(settings.kafka_config())

    def alert(name: str, run: str) -> bytes:
        change = {"namespace": "pg://db", "name": name, "previousVersion": "a", "newVersion": "b",
                  "previousSchema": "[]", "newSchema": "[]", "severity": "BREAKING",
                  "changes": [{"path": "id", "kind": "REMOVED", "oldType": "INT", "newType": None,
                               "severity": "BREAKING"}]}
        event = {"eventTime": "2024-05-01T10:00:00Z", "run": {"runId": run}, "job": {"namespace": "j", "name": "w"}}
        record = build_alert(change, event, [Reached(1, "job", "j", "reader")], 5, 200, datetime.now(UTC))
        return alerts.encode(record, alert_id)

    producer.produce(settings.drift_topic, key=b"pg://db/earlier", value=alert("earlier", str(uuid.uuid4())))
    producer.produce(settings.dlq_topic, key=b"k", value=letters.encode(dead_letter(
        stage="processor", error_class="invalid-event", error_message="eventTime: not a time", key=b"k",
        value=b'{"eventTime": "x"}', source_topic=settings.events_topic, source_partition=0, source_offset=5),
        letter_id))
    assert producer.flush(30) == 0
    with server_process(env) as server:
        deadline = time.monotonic() + 60
        while not (found := requests.get(f"{server.url}/api/v2/alerts", timeout=30).json()["alerts"]):
            assert time.monotonic() < deadline, "the earlier alert never reached the feed"
            time.sleep(0.5)
        assert [a["dataset"]["name"] for a in found] == ["earlier"]
        assert found[0]["impactedJobs"] == [{"namespace": "j", "name": "reader", "depth": 1, "owners": []}]
        assert found[0]["datasetOwners"] == [] and found[0]["datasetTags"] == []
        received: list[dict] = []

        def listen() -> None:
            with requests.get(f"{server.url}/api/v2/alerts/stream", stream=True, timeout=60) as stream:
                for line in stream.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        received.append(json.loads(line[6:]))
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        time.sleep(1.0)  # subscribed
        producer.produce(settings.drift_topic, key=b"pg://db/live", value=alert("live", str(uuid.uuid4())))
        assert producer.flush(30) == 0
        listener.join(30)
        assert [a["dataset"]["name"] for a in received] == ["live"]
        letters_found = requests.get(f"{server.url}/api/v2/dead-letters", params={"limit": 10}, timeout=30).json()
        [letter] = letters_found["deadLetters"]
        assert (letter["stage"], letter["errorClass"], letter["sourceOffset"]) == ("processor", "invalid-event", 5)
        assert letter["preview"] == '{"eventTime": "x"}' and letter["size"] == 18
        assert requests.get(f"{server.url}/api/v2/dead-letters", params={"limit": 10_000}, timeout=30
                            ).status_code == 400
        status = requests.get(f"{server.url}/api/v2/status", timeout=60).json()  # as `lineage status --json`
        assert status["dead_letters"] == {**status["dead_letters"], "topic": settings.dlq_topic, "count": 1}
        assert status["drift_alerts_last_hour"]["count"] == 2
        assert [s["stage"] for s in status["stages"]] == ["processor", "graph-sink", "alert-sink"]
        assert {s["name"] for s in status["services"]} == {"kafka", "neo4j", "registry", "connect"}
