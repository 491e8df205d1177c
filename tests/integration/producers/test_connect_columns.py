"""Connect hook columns on the real stack: connectors writing Avro through the registry (Apicurio's converter on the
worker's plugin.path), the topic's value subject as schema facet, SMT chains as column lineage, a new subject
version re-emitting the lineage."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent

from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.producers.service.connect_watcher import ConnectWatcher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.naming import kafka_namespace
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import KafkaConnect
from tests.integration.conftest import decoded_events
from tests.integration.producers.test_connect_hook import FILE_SINK, FILE_SOURCE, OnlyConnectors, put_config

pytestmark = pytest.mark.integration
T = "org.apache.kafka.connect.transforms."


@pytest.fixture
def connectors(clients: ClientSettings) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for name in created:
        requests.delete(f"{clients.connect_url}/connectors/{name}", timeout=10)


def poll_for(watcher: ConnectWatcher, name: str, done: Callable[[RunEvent], bool], timeout: float = 90.0
             ) -> list[RunEvent]:
    """Poll until an event of ``name`` satisfies ``done``; every event of ``name`` on the way, that one last. Events
    of other connectors polled meanwhile wait in ``BACKLOG`` for their own call."""
    seen: list[RunEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        BACKLOG.extend(watcher.poll_once())
        while mine := next((e for e in BACKLOG if e.job.name == name), None):
            BACKLOG.remove(mine)
            seen.append(mine)
            if done(mine):
                return seen
        time.sleep(0.5)
    raise AssertionError(f"no matching event for {name} within {timeout}s; saw "
                         f"{[(e.eventType.value, e.run.facets['kafkaConnect'].schemaVersions) for e in seen]}")


BACKLOG: list[RunEvent] = []


def versions(event: RunEvent) -> dict[str, int]:
    return event.run.facets["kafkaConnect"].schemaVersions


def fields(facets: dict, name: str = "schema") -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in facets[name]["fields"]]


def lineage(facets: dict) -> dict[str, list[tuple[str, str, str, str, bool]]]:
    return {out: [(i["namespace"], i["name"], i["field"], i["transformations"][0]["subtype"],
                   i["transformations"][0]["masking"]) for i in value["inputFields"]]
            for out, value in facets["columnLineage"]["fields"].items()}


def test_avro_connectors_give_schema_and_column_lineage_and_a_new_version_re_emits(
        clients: ClientSettings, stack_settings: StackSettings, events_topic: str, tmp_path: Path,
        connectors: list[str]) -> None:
    suffix = uuid.uuid4().hex[:8]
    source_name, sink_name, topic = f"test-avro-source-{suffix}", f"test-avro-sink-{suffix}", f"test.avro.{suffix}"
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("one\ntwo\n")
    avro = KafkaConnect.avro_converter_config(stack_settings.registry_port)
    hoist_insert = {"transforms": "hoist,origin",
                    "transforms.hoist.type": T + "HoistField$Value", "transforms.hoist.field": "line",
                    "transforms.origin.type": T + "InsertField$Value",
                    "transforms.origin.static.field": "origin", "transforms.origin.static.value": "file"}
    source_config = {"connector.class": FILE_SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1",
                     **avro, **hoist_insert}
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    client = OnlyConnectors(OpenLineageClient(transport=transport), {source_name, sink_name})
    watcher = ConnectWatcher(clients.connect_url, client, clients=clients, interval=0.5)
    kafka = kafka_namespace(clients.kafka_bootstrap_servers)

    # 1. The source writes Avro: its topic's value subject appears, and the open run is re-emitted with its columns.
    connectors.append(source_name)
    put_config(clients, source_name, source_config)
    source_events = poll_for(watcher, source_name, lambda e: versions(e) == {topic: 1})
    assert [e.eventType.value for e in source_events] in (["START"], ["START", "RUNNING"])
    described = source_events[-1]
    (output,) = described.outputs
    assert (output.namespace, output.name) == (kafka, topic)
    out_facets = {k: v for k, v in _dicts(output.facets).items()}
    assert fields(out_facets) == [("line", "string NOT NULL"), ("origin", "string")]
    assert "columnLineage" not in out_facets  # the file has no columns: nothing to trace back to
    assert [(d.namespace, d.name) for d in described.inputs] == [("file", str(source_file))]
    subject = requests.get(f"{clients.schema_registry_url}/subjects/{topic}-value/versions/latest", timeout=10)
    assert subject.json()["version"] == 1

    # 2. A sink reads the topic through the same converter, renames and masks: column lineage topic → file.
    sink_config = {"connector.class": FILE_SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1",
                   **avro, "transforms": "rename,mask",
                   "transforms.rename.type": T + "ReplaceField$Value", "transforms.rename.renames": "line:text",
                   "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "origin"}
    connectors.append(sink_name)
    put_config(clients, sink_name, sink_config)
    (sink_start,) = poll_for(watcher, sink_name, lambda e: e.eventType.value == "START")
    assert versions(sink_start) == {topic: 1}
    (sink_input,), (sink_output,) = sink_start.inputs, sink_start.outputs
    assert (sink_input.namespace, sink_input.name) == (kafka, topic)
    assert (sink_output.namespace, sink_output.name) == ("file", str(sink_file))
    assert fields(_dicts(sink_input.facets)) == [("line", "string NOT NULL"), ("origin", "string")]
    written = _dicts(sink_output.facets)
    assert fields(written) == [("text", "string NOT NULL"), ("origin", "string")]
    assert lineage(written) == {"text": [(kafka, topic, "line", "IDENTITY", False)],
                                "origin": [(kafka, topic, "origin", "TRANSFORMATION", True)]}
    deadline = time.monotonic() + 60  # the sink really wrote what the lineage says: renamed, masked
    while "Struct{text=two" not in (sink_file.read_text() if sink_file.exists() else ""):
        assert time.monotonic() < deadline, "the sink never wrote the records"
        time.sleep(0.5)
    assert sink_file.read_text().splitlines()[0] == "Struct{text=one,origin=}"

    # 3. Schema change at the source: one more inserted field → subject version 2 → the sink's open run re-emits.
    put_config(clients, source_name, {**source_config, "transforms": "hoist,origin,host",
                                      "transforms.host.type": T + "InsertField$Value",
                                      "transforms.host.static.field": "host",
                                      "transforms.host.static.value": "worker-1"})
    with source_file.open("a") as handle:
        handle.write("three\n")
    (sink_running,) = poll_for(watcher, sink_name, lambda e: versions(e) == {topic: 2})
    assert sink_running.eventType.value == "RUNNING" and sink_running.run.runId == sink_start.run.runId
    assert fields(_dicts(sink_running.inputs[0].facets)) == [
        ("line", "string NOT NULL"), ("origin", "string"), ("host", "string")]
    rewritten = _dicts(sink_running.outputs[0].facets)
    assert fields(rewritten) == [("text", "string NOT NULL"), ("origin", "string"), ("host", "string")]
    assert lineage(rewritten)["host"] == [(kafka, topic, "host", "IDENTITY", False)]
    new_source = poll_for(watcher, source_name, lambda e: versions(e) == {topic: 2})
    assert "COMPLETE" in [e.eventType.value for e in source_events + new_source]  # reconfigured: the old run ended
    assert fields(_dicts(new_source[-1].outputs[0].facets))[-1] == ("host", "string")

    # Every event went through the pipeline's Avro transport, facets intact.
    assert transport.close() is True
    received = [e for _, e in decoded_events(clients, events_topic, client.forwarded)]
    sink_events = [e for e in received if e["job"]["name"] == sink_name]
    assert [e["eventType"] for e in sink_events] == ["START", "RUNNING"]
    assert sink_events[1]["outputs"][0]["facets"]["columnLineage"]["fields"]["text"]["inputFields"][0]["field"] == (
        "line")


def _dicts(facets: dict | None) -> dict:
    from openlineage.client.serde import Serde

    return {key: Serde.to_dict(value) for key, value in (facets or {}).items()}
