"""The HTTP collector (`lineage collector`, a real subprocess) against the real Kafka and registry."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from confluent_kafka.schema_registry import SchemaRegistryClient
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import ensure_topic, prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage_devtools.processes import free_port, lineage_process
from tests.integration.conftest import decoded_events, lineage, running_collector
from tests.openlineage_samples import PRODUCER, full_run_event

pytestmark = pytest.mark.integration


def _event(job: str, run_id: str | None = None, event_type: str = "START") -> dict:
    return {"eventType": event_type, "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id or str(uuid.uuid4())}, "job": {"namespace": "collector-test", "name": job}}


@pytest.fixture
def collector(events_topic: str) -> Iterator[str]:
    with running_collector(events_topic) as url:
        yield url


def test_single_events_and_gzip_batches_are_published_after_ack(
    clients: ClientSettings, events_topic: str, collector: str
) -> None:
    assert requests.get(f"{collector}/health/ready", timeout=10).json() == {
        "status": "ready", "checks": {"kafka-and-registry": "ok"}}
    full = full_run_event()
    answer = requests.post(f"{collector}/api/v1/lineage", json=full, timeout=30)
    assert answer.status_code == 200 and answer.json() == {"accepted": 1}
    batch = [_event(f"batch-{i}") for i in range(50)]
    answer = requests.post(f"{collector}/api/v1/lineage", data=gzip.compress(json.dumps(batch).encode()),
                           headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, timeout=30)
    assert answer.status_code == 200 and answer.json() == {"accepted": 50}
    received = decoded_events(clients, events_topic, 51)
    assert len(received) == 51
    by_job = {event["job"]["name"]: (key, event) for key, event in received}
    assert by_job["orders.etl"][1] == full  # lossless through HTTP, Avro and Kafka
    assert by_job["batch-7"] == ("run:collector-test/batch-7", batch[7])


def test_an_invalid_event_rejects_its_request_and_publishes_nothing_of_it(
    clients: ClientSettings, events_topic: str, collector: str
) -> None:
    bad = _event("bad", run_id="not-a-uuid")
    answer = requests.post(f"{collector}/api/v1/lineage", json=[_event("good-in-bad-batch"), bad], timeout=30)
    assert answer.status_code == 400
    body = answer.json()
    assert "1 of 2 event is invalid" in body["error"]
    assert body["errors"][0]["index"] == 1 and "run.runId" in body["errors"][0]["error"]
    for payload, status in ((b"{nope", 400), (b"[]", 400)):
        assert requests.post(f"{collector}/api/v1/lineage", data=payload, timeout=30).status_code == status
    missing_job = {k: v for k, v in _event("x").items() if k != "job"}
    answer = requests.post(f"{collector}/api/v1/lineage", json=missing_job, timeout=30)
    assert answer.status_code == 400 and "job" in answer.json()["errors"][0]["error"]
    assert requests.post(f"{collector}/api/v1/lineage", json=_event("marker"), timeout=30).status_code == 200
    received = decoded_events(clients, events_topic, 2, timeout=5)
    assert [event["job"]["name"] for _, event in received] == ["marker"]


def test_the_spec_batch_endpoint_publishes_what_is_valid_and_names_the_rest(
    clients: ClientSettings, events_topic: str, collector: str
) -> None:
    batch = [_event("batch-good-1"), _event("batch-bad", run_id="not-a-uuid"), _event("batch-good-2")]
    answer = requests.post(f"{collector}/api/v1/lineage/batch", json=batch, timeout=30)
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "partial_success"
    assert body["summary"] == {"received": 3, "successful": 2, "failed": 1, "retriable": 0, "non_retriable": 1}
    assert [(f["index"], f["retriable"]) for f in body["failed_events"]] == [(1, False)]
    assert "run.runId" in body["failed_events"][0]["reason"]
    whole = requests.post(f"{collector}/api/v1/lineage/batch", json=[_event("batch-good-3")], timeout=30).json()
    assert whole["status"] == "success" and whole["summary"]["successful"] == 1
    assert requests.post(f"{collector}/api/v1/lineage/batch", json=_event("not-an-array"), timeout=30
                         ).status_code == 400
    received = decoded_events(clients, events_topic, 3)
    assert sorted(event["job"]["name"] for _, event in received) == ["batch-good-1", "batch-good-2", "batch-good-3"]


def test_openlineage_python_http_transport_with_gzip(clients: ClientSettings, events_topic: str, collector: str
                                                     ) -> None:
    transport = HttpTransport(HttpConfig.from_dict({"url": collector, "compression": "gzip"}))
    client = OpenLineageClient(transport=transport)
    run_id = str(uuid.uuid4())
    for state in (RunState.START, RunState.COMPLETE):
        client.emit(RunEvent(eventType=state, eventTime="2024-05-01T12:00:00Z", producer=PRODUCER,
                             run=Run(runId=run_id), job=Job(namespace="collector-test", name="http-client")))
    client.close()
    received = decoded_events(clients, events_topic, 2)
    assert [event["eventType"] for _, event in received] == ["START", "COMPLETE"]  # one key, one partition: in order
    first = received[0][1]
    assert first["run"]["runId"] == run_id and first["job"]["name"] == "http-client"
    assert first["run"]["facets"]["tags"]["tags"][0]["key"] == "openlineage_client_version"  # the client's own facet


def test_bearer_token_and_size_limit(events_topic: str) -> None:
    with running_collector(events_topic, LINEAGE_COLLECTOR_TOKEN="s3cret", LINEAGE_COLLECTOR_MAX_BYTES="4096") as url:
        endpoint = f"{url}/api/v1/lineage"
        unauthorized = requests.post(endpoint, json=_event("t"), timeout=30)
        assert unauthorized.status_code == 401 and unauthorized.headers["WWW-Authenticate"] == "Bearer"
        wrong = requests.post(endpoint, json=_event("t"), headers={"Authorization": "Bearer nope"}, timeout=30)
        assert wrong.status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert requests.post(endpoint, json=_event("t"), headers=auth, timeout=30).status_code == 200
        huge = _event("big") | {"job": {"namespace": "n", "name": "x" * 10_000}}
        too_big = requests.post(endpoint, json=huge, headers=auth, timeout=30)
        assert too_big.status_code == 413 and "limit of 4096 bytes" in too_big.json()["error"]
        bomb = gzip.compress(json.dumps(huge).encode())
        assert len(bomb) < 4096
        exploded = requests.post(endpoint, data=bomb, headers={**auth, "Content-Encoding": "gzip"}, timeout=30)
        assert exploded.status_code == 413


def test_kafka_unreachable_is_a_503_with_retry_after(events_topic: str) -> None:
    with running_collector(events_topic, KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1",
                           LINEAGE_COLLECTOR_ACK_TIMEOUT="2") as url:
        answer = requests.post(f"{url}/api/v1/lineage", json=_event("no-kafka"), timeout=30)
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
        assert "did not acknowledge" in answer.json()["error"] or "unreachable" in answer.json()["error"]
        assert requests.get(f"{url}/health/ready", timeout=30).status_code == 503
        time.sleep(1)  # librdkafka has reported every broker down by now: later requests learn it within a second
        started = time.monotonic()
        again = requests.post(f"{url}/api/v1/lineage", json=_event("no-kafka"), timeout=30)
        assert again.status_code == 503 and "Kafka is unreachable" in again.json()["error"]
        assert time.monotonic() - started < 1.5


def test_emit_backfills_ndjson_and_reports_bad_lines(clients: ClientSettings, events_topic: str, tmp_path: Path
                                                     ) -> None:
    good = [_event(f"backfill-{i}") for i in range(25)]
    lines = [json.dumps(e) for e in good[:10]] + ["{broken", json.dumps(_event("x", run_id="nope")), ""]
    lines += [json.dumps(e) for e in good[10:]]
    source = tmp_path / "events.ndjson.gz"
    source.write_bytes(gzip.compress("\n".join(lines).encode()))
    result = lineage("emit", str(source), "--topic", events_topic, check=False)
    assert result.returncode == 1
    assert "published 25 events" in result.stdout
    assert "line 11: not valid JSON" in result.stderr
    assert "line 12: invalid OpenLineage event: invalid RunEvent: run.runId" in result.stderr
    received = decoded_events(clients, events_topic, 25)
    assert sorted(event["job"]["name"] for _, event in received) == sorted(e["job"]["name"] for e in good)
    missing = lineage("emit", str(tmp_path / "nope.ndjson"), check=False)
    assert missing.returncode == 1 and missing.stderr.startswith("lineage: no such file")


def _incompressible_event(size: int) -> dict:
    """A valid event carrying ``size`` random bytes (hex) in a run facet: zstd cannot shrink it."""
    event = _event("big-job")
    event["run"]["facets"] = {"blob": {"_producer": PRODUCER, "_schemaURL": "https://example.com/blob.json",
                                       "data": os.urandom(size // 2).hex()}}
    return event


def test_a_record_the_topic_refuses_for_its_size_is_413_not_retry_forever(clients: ClientSettings) -> None:
    """The broker refusing a record for its size is permanent: 413 with the reason, not 503 Retry-After forever.
    The pipeline's own topics take what its producer takes (both 8 MiB): a 3 MB event is accepted."""
    small = f"test.small.{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.kafka_config(), small, config={"max.message.bytes": "1048576"})  # an operator's topic
    client = SchemaRegistryClient(clients.registry_config())
    assert all(report.ok for report in registry.register(client, {small: "openlineage_event"}))
    event = _incompressible_event(3_000_000)  # hex: zstd halves it, still 1.5 MB
    with running_collector(small) as url:
        refused = requests.post(f"{url}/api/v1/lineage", json=event, timeout=60)
    assert refused.status_code == 413 and "Retry-After" not in refused.headers, refused.text
    assert "too large" in refused.text.lower() or "MSG_SIZE_TOO_LARGE" in refused.text
    ours = f"test.ours.{uuid.uuid4().hex[:8]}"
    prepare_pipeline(ClientSettings.from_env({**os.environ, "LINEAGE_EVENTS_TOPIC": ours}), 1)
    with running_collector(ours) as url:
        accepted = requests.post(f"{url}/api/v1/lineage", json=event, timeout=60)
        assert accepted.status_code == 200, accepted.text
        too_big = requests.post(f"{url}/api/v1/lineage", json=_incompressible_event(9_000_000), timeout=60)
    assert too_big.status_code == 413 and "above the limit" in too_big.text
    assert decoded_events(clients, ours, 1)[0][1]["run"]["facets"]["blob"]["data"] == event["run"]["facets"]["blob"][
        "data"]


def test_a_flood_of_requests_beyond_the_concurrency_limit_is_answered_503_at_once(events_topic: str) -> None:
    batch = [_event(f"job-{i}") for i in range(2000)]
    with running_collector(events_topic, LINEAGE_COLLECTOR_MAX_CONCURRENT="2") as url, \
            ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: requests.post(f"{url}/api/v1/lineage", json=batch, timeout=60), range(12)))
        assert requests.get(f"{url}/health/live", timeout=5).status_code == 200
    statuses = Counter(answer.status_code for answer in answers)
    assert set(statuses) <= {200, 503} and statuses[200] >= 1 and statuses[503] >= 1, statuses
    assert all(answer.headers.get("Retry-After") == "1" for answer in answers if answer.status_code == 503)


def test_a_stalled_upload_is_cut_at_the_read_timeout(events_topic: str) -> None:
    with running_collector(events_topic, LINEAGE_COLLECTOR_READ_TIMEOUT="1") as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b'Content-Length: 1000\r\n\r\n{"eventType"')  # and nothing more
            started = time.monotonic()
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 5, answer[:200]


def test_the_collector_serves_https_with_its_certificate(events_topic: str, clients: ClientSettings,
                                                         tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = free_port()
    env = {"LINEAGE_EVENTS_TOPIC": events_topic, "LINEAGE_COLLECTOR_TLS_CERT": str(cert),
           "LINEAGE_COLLECTOR_TLS_KEY": str(key)}
    with lineage_process(["collector", "--port", str(port)], lambda _child, output: "collector on https://" in output,
                         env):
        time.sleep(1)
        answer = requests.post(f"https://127.0.0.1:{port}/api/v1/lineage", json=_event("over-tls"), verify=str(cert),
                               timeout=30)
        assert answer.status_code == 200, answer.text
        with pytest.raises(requests.ConnectionError):  # plain HTTP is not served beside it
            requests.get(f"http://127.0.0.1:{port}/health/live", timeout=5)
    assert decoded_events(clients, events_topic, 1)[0][1]["job"]["name"] == "over-tls"
    half = lineage("collector", env={"LINEAGE_COLLECTOR_TLS_CERT": str(cert)}, check=False)
    assert half.returncode == 1 and "set both" in half.stderr
