"""The openlineage-python transport against the real Kafka and registry."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.openlineage import partition_key
from tests.integration.conftest import decoded_events
from tests.openlineage_samples import PRODUCER, full_run_event, to_json

pytestmark = pytest.mark.integration
TRANSPORT = "kafka_lineage.producers.client.kafka_avro_transport.KafkaAvroTransport"


def _run_event(job: str) -> RunEvent:
    return RunEvent(eventType=RunState.START, eventTime="2024-05-01T12:00:00Z", producer=PRODUCER,
                    run=Run(runId=str(uuid.uuid4())), job=Job(namespace="tests", name=job))


def test_client_events_arrive_as_avro_keyed_by_root_job(clients: ClientSettings, events_topic: str) -> None:
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    client = OpenLineageClient(transport=transport)
    events = [_run_event(f"job-{i}") for i in range(20)]
    started = time.perf_counter()
    for event in events:
        client.emit(event)
    per_event = (time.perf_counter() - started) / len(events)
    transport.emit(full_run_event())  # a dict with every standard facet and a custom one
    assert transport.close() is True
    assert transport.delivered == 21 and transport.undelivered == transport.dropped == 0
    received = decoded_events(clients, events_topic, 21)
    expected = [to_json(e) for e in events] + [full_run_event()]
    assert sorted(e["job"]["name"] for _, e in received) == sorted(e["job"]["name"] for e in expected)
    for key, event in received:
        assert key == partition_key(event)
    full = next(e for _, e in received if e["job"]["name"] == "orders.etl")
    assert full["outputs"][0]["facets"]["myCompany_custom"]["big"] == 2**63 + 1
    assert per_event < 0.05  # the job's thread only enqueues (the benchmark measures the real figure)


def test_selected_by_class_path_in_openlineage_yml(clients: ClientSettings, events_topic: str, tmp_path: Path) -> None:
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: {TRANSPORT}\n  topic: {events_topic}\n")
    script = (
        "import uuid\n"
        "from openlineage.client import OpenLineageClient\n"
        "from openlineage.client.event_v2 import Job, Run, RunEvent, RunState\n"
        "client = OpenLineageClient()\n"
        "client.emit(RunEvent(eventType=RunState.COMPLETE, eventTime='2024-05-01T12:00:00Z', producer='p',\n"
        "                     run=Run(runId=str(uuid.uuid4())), job=Job(namespace='yml', name='job')))\n"
    )  # no close(): the atexit hook must flush
    emitter = subprocess.run([sys.executable, "-c", script], timeout=120, capture_output=True, text=True,
                             env={**os.environ, "OPENLINEAGE_CONFIG": str(config)})
    assert emitter.returncode == 0, emitter.stderr
    received = decoded_events(clients, events_topic, 1)
    assert len(received) == 1, emitter.stderr
    ((key, event),) = received
    assert key == "run:yml/job" and event["eventType"] == "COMPLETE"


def test_broker_outage_never_blocks_or_raises_and_is_reported(clients: ClientSettings, events_topic: str) -> None:
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({
        "topic": events_topic, "queue_size": 5, "metrics_port": 0,
        "config": {"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": "2000"}}))
    metrics_url = transport.endpoint.url
    started = time.perf_counter()
    for i in range(50):
        transport.emit(_run_event(f"outage-{i}"))
    assert time.perf_counter() - started < 1.0
    assert "lineage_emitter_queue_depth" in requests.get(f"{metrics_url}/metrics", timeout=5).text
    transport.emit({"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER, "schemaURL": "x",
                    "run": {"runId": "not-a-uuid"}, "job": {"namespace": "a", "name": "b"}})
    assert transport.close(timeout=10) is False
    assert transport.delivered == 0
    assert transport.dropped > 0
    assert transport.dropped + transport.undelivered + transport.invalid == 51
    exposed = transport.metrics.exposition()[0].decode()  # what the endpoint served until close
    assert "lineage_emitter_undelivered_total 51.0" in exposed and "lineage_emitter_queue_depth" in exposed
    with pytest.raises(requests.ConnectionError):  # closed with the transport
        requests.get(f"{metrics_url}/metrics", timeout=2)
