"""The Kafka Connect hook against the real Connect worker: real connectors, real failures, events on a real topic."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent
from openlineage.client.transport.noop import NoopConfig, NoopTransport

from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.producers.service.connect_watcher import ConnectWatcher, watch
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.naming import kafka_namespace
from kafka_lineage.schemas.openlineage import partition_key
from tests.integration.conftest import decoded_events

pytestmark = pytest.mark.integration
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


class OnlyConnectors:
    """Client that forwards only the given connectors' events: the worker is shared with other sessions."""

    def __init__(self, client: OpenLineageClient, names: set[str]) -> None:
        self.client, self.names, self.forwarded = client, names, 0

    def emit(self, event: RunEvent) -> None:
        if event.job.name in self.names:
            self.client.emit(event)
            self.forwarded += 1


@pytest.fixture
def connectors(clients: ClientSettings) -> Iterator[dict[str, str]]:
    """name → unique suffix; every connector created under these names is deleted afterwards."""
    created: dict[str, str] = {}
    yield created
    for name in created:
        requests.delete(f"{clients.connect_url}/connectors/{name}", timeout=10)


def put_config(clients: ClientSettings, name: str, config: dict[str, str]) -> None:
    response = requests.put(f"{clients.connect_url}/connectors/{name}/config", json=config, timeout=30)
    assert response.status_code in (200, 201), response.text


def poll_until(watcher: ConnectWatcher, name: str, event_type: str, timeout: float = 60.0) -> list[RunEvent]:
    """Poll until ``name`` gets an ``event_type`` event; every event of ``name`` seen on the way."""
    seen: list[RunEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += [e for e in watcher.poll_once() if e.job.name == name]
        if any(e.eventType.value == event_type for e in seen):
            return seen
        time.sleep(0.5)
    raise AssertionError(f"no {event_type} for {name} within {timeout}s; saw {[e.eventType.value for e in seen]}")


def datasets(event: dict, side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def test_source_connector_start_restart_and_delete(clients: ClientSettings, events_topic: str, tmp_path: Path,
                                                   connectors: dict[str, str]) -> None:
    name, topic = f"test-file-source-{uuid.uuid4().hex[:8]}", f"test.connect.{uuid.uuid4().hex[:8]}"
    source_file = tmp_path / "in.txt"
    source_file.write_text("one\ntwo\n")
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    client = OnlyConnectors(OpenLineageClient(transport=transport), {name})
    watcher = ConnectWatcher(clients.connect_url, client, clients=clients, interval=0.5)

    connectors[name] = topic
    put_config(clients, name, {"connector.class": FILE_SOURCE, "file": str(source_file), "topic": topic,
                               "tasks.max": "1"})
    assert [e.eventType.value for e in poll_until(watcher, name, "START")] == ["START"]
    assert [e for e in watcher.poll_once() if e.job.name == name] == []  # nothing changed, nothing said
    watch(clients, clients.connect_url, once=True, client=client)  # a restarted watcher: START again, same run
    assert client.forwarded == 2
    requests.delete(f"{clients.connect_url}/connectors/{name}", timeout=10).raise_for_status()
    assert [e.eventType.value for e in poll_until(watcher, name, "COMPLETE")] == ["COMPLETE"]
    assert transport.close() is True

    received = decoded_events(clients, events_topic, 3)
    assert [e["eventType"] for _, e in received] == ["START", "START", "COMPLETE"]  # one key, one partition: ordered
    start = received[0][1]
    assert len({e["run"]["runId"] for _, e in received}) == 1
    worker = clients.connect_url.removeprefix("http://")  # host:port, the worker's id and the job's namespace
    assert start["job"] == {**start["job"], "namespace": f"kafka-connect://{worker}", "name": name}
    assert start["job"]["facets"]["jobType"]["integration"] == "KAFKA_CONNECT"
    assert datasets(start, "inputs") == [("file", str(source_file))]
    assert datasets(start, "outputs") == [(kafka_namespace(clients.kafka_bootstrap_servers), topic)]
    facet = start["run"]["facets"]["kafkaConnect"]
    assert (facet["connectorClass"], facet["state"], facet["workerId"]) == (FILE_SOURCE, "RUNNING", worker)
    for key, event in received:
        assert key == partition_key(event) == f"run:kafka-connect://{worker}/{name}"


def test_sink_task_failure_fix_by_reconfiguring_and_delete(clients: ClientSettings, events_topic: str,
                                                          tmp_path: Path, connectors: dict[str, str]) -> None:
    name, topic = f"test-file-sink-{uuid.uuid4().hex[:8]}", f"test.connect.{uuid.uuid4().hex[:8]}"
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    watcher = ConnectWatcher(clients.connect_url, OnlyConnectors(OpenLineageClient(transport=transport), {name}),
                             clients=clients, interval=0.5)
    missing_dir = tmp_path / "no-such-dir" / "out.txt"  # the task's start() cannot create the file: task FAILED
    fixed = tmp_path / "out.txt"

    connectors[name] = topic
    put_config(clients, name, {"connector.class": FILE_SINK, "file": str(missing_dir), "topics": topic})
    failing = poll_until(watcher, name, "FAIL")  # START first if a poll caught the task before it failed
    assert [e.eventType.value for e in failing] in (["FAIL"], ["START", "FAIL"])
    put_config(clients, name, {"connector.class": FILE_SINK, "file": str(fixed), "topics": topic})
    assert [e.eventType.value for e in poll_until(watcher, name, "START")] == ["START"]  # the failed run stays closed
    requests.delete(f"{clients.connect_url}/connectors/{name}", timeout=10).raise_for_status()
    assert [e.eventType.value for e in poll_until(watcher, name, "COMPLETE")] == ["COMPLETE"]
    assert transport.close() is True

    received = [e for _, e in decoded_events(clients, events_topic, len(failing) + 2)]
    fail, start, complete = received[-3:]
    assert fail["eventType"] == "FAIL" and fail["run"]["runId"] != start["run"]["runId"] == complete["run"]["runId"]
    error = fail["run"]["facets"]["errorMessage"]
    assert error["programmingLanguage"] == "JAVA"
    assert str(missing_dir) in error["message"] and "FileStreamSinkTask" in error["stackTrace"]
    assert fail["run"]["facets"]["kafkaConnect"]["tasks"][0]["state"] == "FAILED"
    kafka = kafka_namespace(clients.kafka_bootstrap_servers)
    assert datasets(fail, "inputs") == [(kafka, topic)] and datasets(fail, "outputs") == [("file", str(missing_dir))]
    assert datasets(start, "outputs") == datasets(complete, "outputs") == [("file", str(fixed))]


def test_unreachable_worker_is_one_log_line_and_no_events(clients: ClientSettings,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    watcher = ConnectWatcher("http://127.0.0.1:1", OpenLineageClient(transport=NoopTransport(NoopConfig())),
                             clients=clients, timeout=2)
    with caplog.at_level(logging.WARNING):
        assert watcher.poll_once() == [] and watcher.poll_once() == []
    assert len([r for r in caplog.records if "not answering" in r.message]) == 1


def test_watch_once_publishes_to_the_configured_events_topic(clients: ClientSettings, events_topic: str,
                                                             tmp_path: Path, connectors: dict[str, str]) -> None:
    """What `lineage connect watch --once` does: the default client, to the settings' events topic."""
    name, topic = f"test-watch-once-{uuid.uuid4().hex[:8]}", f"test.connect.{uuid.uuid4().hex[:8]}"
    (tmp_path / "in.txt").write_text("x\n")
    connectors[name] = topic
    put_config(clients, name, {"connector.class": FILE_SOURCE, "file": str(tmp_path / "in.txt"), "topic": topic})
    deadline = time.monotonic() + 60
    while requests.get(f"{clients.connect_url}/connectors/{name}/status", timeout=10).json().get(
            "connector", {}).get("state") != "RUNNING":
        assert time.monotonic() < deadline, "connector never RUNNING"
        time.sleep(0.5)
    # every connector on the shared worker: at least ours
    emitted = watch(dataclasses.replace(clients, events_topic=events_topic), once=True)
    assert emitted >= 1
    received = decoded_events(clients, events_topic, emitted)
    assert [e["eventType"] for _, e in received if e["job"]["name"] == name] == ["START"]


def test_pause_resume_and_stop(clients: ClientSettings, events_topic: str, tmp_path: Path,
                               connectors: dict[str, str]) -> None:
    name, topic = f"test-pause-{uuid.uuid4().hex[:8]}", f"test.connect.{uuid.uuid4().hex[:8]}"
    (tmp_path / "in.txt").write_text("x\n")
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    watcher = ConnectWatcher(clients.connect_url, OnlyConnectors(OpenLineageClient(transport=transport), {name}),
                             clients=clients, interval=0.5)
    connectors[name] = topic
    put_config(clients, name, {"connector.class": FILE_SOURCE, "file": str(tmp_path / "in.txt"), "topic": topic})
    poll_until(watcher, name, "START")
    requests.put(f"{clients.connect_url}/connectors/{name}/pause", timeout=10).raise_for_status()
    assert [e.eventType.value for e in poll_until(watcher, name, "RUNNING")] == ["RUNNING"]
    requests.put(f"{clients.connect_url}/connectors/{name}/resume", timeout=10).raise_for_status()
    assert [e.eventType.value for e in poll_until(watcher, name, "RUNNING")] == ["RUNNING"]
    requests.put(f"{clients.connect_url}/connectors/{name}/stop", timeout=10).raise_for_status()
    assert [e.eventType.value for e in poll_until(watcher, name, "COMPLETE")] == ["COMPLETE"]
    assert transport.close() is True

    received = [e for _, e in decoded_events(clients, events_topic, 4)]
    assert [(e["eventType"], e["run"]["facets"]["kafkaConnect"]["state"]) for e in received] == [
        ("START", "RUNNING"), ("RUNNING", "PAUSED"), ("RUNNING", "RUNNING"), ("COMPLETE", "STOPPED")]
    assert len({e["run"]["runId"] for e in received}) == 1
