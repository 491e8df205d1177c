"""Hostile names through the real pipeline (publisher → processor → graph sink + alert sink) into every CLI output an
operator reads: control and direction characters arrive escaped on the terminal, exact in JSON."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import alert_sink_process, pipeline_env, processor_process, sink_process
from tests.openlineage_samples import PRODUCER

from .conftest import consume_all, lineage

pytestmark = pytest.mark.integration
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
EVIL = "evil\x1b[31mRED\x1b[0m\x1b]0;pwned\x07\rSPOOF\u202e"
EVIL_SHOWN = "evil\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07\\x0dSPOOF\\u202e"
JOB = "job\x1b[2Jx"
UNSAFE = ("\x1b", "\x07", "\r", "\u202e")


def _run(namespace: str, job: str, second: int, inputs: list[dict], outputs: list[dict]) -> list[dict]:
    run = str(uuid.uuid4())
    return [{"eventType": kind, "eventTime": f"2024-05-01T12:00:{second + offset:02d}Z", "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": run}, "job": {"namespace": namespace, "name": job}, "inputs": inputs,
             "outputs": outputs} for kind, offset in (("START", 0), ("COMPLETE", 1))]


def _dataset(name: str, column_type: str | None = None) -> dict:
    facets = {"schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
                         "fields": [{"name": "id", "type": column_type}]}} if column_type else {}
    return {"namespace": "s3://lake", "name": name, "facets": facets}


def _unvalidated(event: dict, settings: ClientSettings) -> bytes:
    """Framed Avro of an event the processor will refuse (the publisher would refuse it first)."""
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("openlineage_event", registry.schema_fetcher(client))
    return codec.encode(event_to_record(event), registry.registered_id(client, settings.events_topic,
                                                                       "openlineage_event"))


def _clean(text: str) -> None:
    assert not any(char in text for char in UNSAFE), text[-2000:]


def test_hostile_names_from_events_reach_every_cli_output_escaped(clients: ClientSettings, tmp_path: Path) -> None:
    prefix = f"test.hostile.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 1, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    ns = f"hostile-{uuid.uuid4().hex[:6]}"
    source, evil = f"{ns}/source", f"{ns}/{EVIL}"
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        events = _run(ns, "load", 0, [], [_dataset(source, "bigint")])
        events += _run(ns, JOB, 10, [_dataset(source)], [_dataset(evil, "bigint")])
        publisher.send([publisher.encode(e) for e in events]).result(30)
        with driver_for(settings) as driver:  # the downstream job is in the graph before the change
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not driver.execute_query(
                    "MATCH (:Job {name: $job})-[:OUTPUTS]->(:Dataset {name: $name}) RETURN 1", job=JOB,
                    name=evil).records:
                time.sleep(0.3)
        changed = _run(ns, JOB, 20, [_dataset(source)], [_dataset(evil, "string")])
        publisher.send([publisher.encode(e) for e in changed]).result(30)
        unstamped = AckingProducer(settings.kafka_config())  # (the publisher stamps what it sends as validated)
        unstamped.send(settings.events_topic, [(b"bad", _unvalidated(
            {**changed[0], "run": {"runId": f"not-a-uuid {EVIL}"}}, settings))]
                       ).result(30)  # a dead letter of an event carrying hostile text
        unstamped.close()
        publisher.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)
                                                   and consume_all(settings.kafka_bootstrap_servers,
                                                                   settings.dlq_topic)):
            time.sleep(0.5)
        alerts = lineage("alerts", "tail", env=env)
        alerts_json = lineage("alerts", "tail", "--json", env=env)
        dead = lineage("dlq", "tail", env=env)
    impact = lineage("impact", "s3://lake", source)
    upstream = lineage("upstream", "s3://lake", evil)
    missing = lineage("impact", "s3://lake", evil + "x", check=False)
    for result in (alerts, dead, impact, upstream, missing):
        _clean(result.stdout + result.stderr)
    assert EVIL_SHOWN in alerts.stdout and "job\\x1b[2Jx" in impact.stdout and EVIL_SHOWN in impact.stdout
    assert "job\\x1b[2Jx" in upstream.stdout and EVIL_SHOWN in missing.stderr
    assert "invalid-event" in dead.stdout and "run.runId" in dead.stdout  # reasons name fields, never echo values
    assert json.loads(alerts_json.stdout.splitlines()[0])["dataset"]["name"] == evil  # JSON carries it exactly
    rows = json.loads(lineage("impact", "s3://lake", source, "--format", "json").stdout)
    assert {row["name"] for row in rows} == {JOB, evil}
