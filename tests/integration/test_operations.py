"""Operating the pipeline: every component's metrics and health endpoints scraped during an end-to-end run, the
status table, and a graceful restart (SIGTERM) that loses and repeats nothing."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from prometheus_client.parser import text_string_to_metric_families

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.processes import (
    alert_sink_process,
    collector_process,
    pipeline_env,
    processor_process,
    sink_process,
)
from tests.openlineage_samples import PRODUCER

from .conftest import consume_all, lineage

pytestmark = pytest.mark.integration
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"


def _env(tmp_path: Path) -> dict[str, str]:
    prefix = f"test.ops.{uuid.uuid4().hex[:8]}"
    return {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2",
            "LINEAGE_LOG_FORMAT": "json"}


def _event(namespace: str, job: str, kind: str, run: str, fields: list[str]) -> dict:
    output = {"namespace": "s3://ops", "name": f"{namespace}/{job}", "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": SCHEMA_FACET, "fields": [{"name": f, "type": "string"} for f in fields]}}}
    return {"eventType": kind, "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER, "schemaURL": RUN_EVENT,
            "run": {"runId": run}, "job": {"namespace": namespace, "name": job}, "inputs": [], "outputs": [output]}


def _samples(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a Prometheus endpoint: (name, sorted labels) → value."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _value(samples: dict, name: str, **labels: str) -> float:
    return sum(value for (sample, found), value in samples.items()
               if sample == name and set(labels.items()) <= set(found))


def _committed(settings: ClientSettings, group: str) -> dict[int, int]:
    """The group's committed offset per partition of the events topic."""
    consumer = Consumer(settings.kafka_config({"group.id": group}))
    try:
        partitions = [TopicPartition(settings.events_topic, p) for p in range(3)]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def _missing_sources(settings: ClientSettings) -> dict[int, list[int]]:
    """Per partition of the events topic: the offsets no normalized record names as its source."""
    deserializer = AvroDeserializer(SchemaRegistryClient(settings.registry_config()))
    context = SerializationContext(settings.normalized_topic, MessageField.VALUE)
    seen = set()
    for message in consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic):
        processing = deserializer(message.value(), context)["processing"]
        seen.add((processing["sourcePartition"], processing["sourceOffset"]))
    counts = Counter(m.partition() for m in consume_all(settings.kafka_bootstrap_servers, settings.events_topic))
    return {p: [o for o in range(n) if (p, o) not in seen] for p, n in sorted(counts.items())}  # offsets from 0


def _ready(url: str) -> dict:
    answer = requests.get(f"{url}/health/ready", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_component_exposes_metrics_and_health_during_an_end_to_end_run(clients: ClientSettings,
                                                                              tmp_path: Path) -> None:
    env = _env(tmp_path)
    namespace = f"ops-{uuid.uuid4().hex[:6]}"
    runs = [str(uuid.uuid4()) for _ in range(20)]
    events = [_event(namespace, f"job-{i % 5}", kind, run, ["id", "amount"])
              for i, run in enumerate(runs) for kind in ("START", "COMPLETE")]
    changed = [_event(namespace, "job-0", kind, str(uuid.uuid4()), ["id"]) for kind in ("START", "COMPLETE")]
    # The processor first: it creates the topics and registers their schemas (the collector answers 503 until then).
    with (processor_process(env) as processor, sink_process(env) as sink, alert_sink_process(env) as alerts,
          collector_process(env) as collector):
        answer = requests.post(f"{collector.url}/api/v1/lineage", json=events, timeout=30)
        assert answer.status_code == 200, answer.text
        time.sleep(2)  # the schema change comes after the first version was seen
        assert requests.post(f"{collector.url}/api/v1/lineage", json=changed, timeout=30).status_code == 200
        total = len(events) + len(changed)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            graph, alerting = _samples(sink.metrics_url), _samples(alerts.metrics_url)
            if (_value(graph, "lineage_events_out_total", stage="graph-sink") >= total
                    and _value(alerting, "lineage_events_out_total", stage="alert-sink") >= 1):
                break
            time.sleep(0.5)
        status = lineage("status", "--json", env=env, check=False)
        received, worked = _samples(collector.url), _samples(processor.metrics_url)
        readiness = {name: _ready(child.metrics_url) for name, child in
                     (("processor", processor), ("graph sink", sink), ("alert sink", alerts))}
        assert requests.get(f"{collector.url}/health/ready", timeout=10).status_code == 200
    assert _value(received, "lineage_events_in_total", stage="collector") == total
    assert _value(received, "lineage_events_out_total", stage="collector") == total
    assert _value(worked, "lineage_events_in_total", stage="processor") == total
    assert _value(worked, "lineage_events_out_total", stage="processor") == total
    assert _value(worked, "lineage_schema_changes_total", stage="processor") == 1
    assert _value(worked, "lineage_batch_size_count", stage="processor") >= 1
    assert _value(graph, "lineage_events_out_total", stage="graph-sink") == total
    assert _value(graph, "lineage_end_to_end_latency_seconds_count", path="graph") == total
    assert _value(graph, "lineage_neo4j_transaction_seconds_count") >= 1
    assert _value(alerting, "lineage_end_to_end_latency_seconds_count", path="alert") == 1
    assert any(name == "lineage_consumer_lag" for name, _ in graph), "no lag gauge"
    for name, answer in readiness.items():
        assert answer["status"] == "ready" and set(answer["checks"].values()) == {"ok"}, (name, answer)
    assert {"kafka", "registry", "neo4j"} <= set(readiness["graph sink"]["checks"])
    report = json.loads(status.stdout)
    assert report["services"] and all(service["state"] == "up" for service in report["services"]), status.stdout
    outputs = "".join(child.output for child in (collector, processor, sink, alerts))
    assert clients.neo4j_password not in outputs  # no secret in any component's log
    json_lines = [line for line in sink.output.splitlines() if line.startswith("{")]
    assert json_lines and all("level" in json.loads(line) for line in json_lines)  # LINEAGE_LOG_FORMAT=json


def test_a_processor_stopped_with_sigterm_restarts_without_loss_or_repeats(clients: ClientSettings,
                                                                           tmp_path: Path) -> None:
    env = _env(tmp_path)
    namespace = f"ops-{uuid.uuid4().hex[:6]}"
    events = [_event(namespace, f"job-{i % 40}", kind, run, ["id"])
              for i, run in enumerate(str(uuid.uuid4()) for _ in range(1500)) for kind in ("START", "COMPLETE")]
    settings = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(settings, 3)  # topics and schemas, as the processor would at start
    with collector_process(env) as collector:
        for start in range(0, len(events), 500):
            assert requests.post(f"{collector.url}/api/v1/lineage", json=events[start:start + 500],
                                 timeout=30).status_code == 200
    with processor_process({**env, "LINEAGE_PROCESSOR_BATCH": "50"}) as first:  # small batches: stopped mid-stream
        deadline = time.monotonic() + 60
        while len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)) < 300:
            assert time.monotonic() < deadline, first.output_so_far()[-3000:]
            time.sleep(0.2)
        stopping = time.monotonic()
        first.process.send_signal(signal.SIGTERM)
        first.process.wait(60)
        stopped_in = time.monotonic() - stopping
    assert first.returncode == 0 and stopped_in < 30, first.output[-3000:]
    partial = len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic))
    assert partial < len(events), "the worker had finished before SIGTERM: nothing was tested"
    first_stats = [line for line in first.output.splitlines() if "normalized," in line][-1:]
    committed = _committed(settings, env["LINEAGE_PROCESSOR_GROUP"])
    (tmp_path / "first-worker.log").write_text(first.output)  # kept by pytest for a failure's post-mortem
    with processor_process(env) as second:
        deadline = time.monotonic() + 90
        while (done := len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic))) < len(events):
            second_stats = [line for line in second.output_so_far().splitlines() if "normalized," in line][-1:]
            if time.monotonic() >= deadline:  # post-mortem: mode's worker logs every task's stack on SIGUSR1
                second.process.send_signal(signal.SIGUSR1)
                time.sleep(3)
                (tmp_path / "second-worker.log").write_text(second.output_so_far())
            assert time.monotonic() < deadline, (
                f"{done} of {len(events)} outputs; {partial} after the first worker ({first_stats}), which committed "
                f"{committed}; second worker: {second_stats}; source offsets without an output: "
                f"{_missing_sources(settings)}")
            time.sleep(0.5)
        time.sleep(3)  # anything repeated would have arrived by now
    out = consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)
    keys = Counter((message.partition(), message.value()[5:]) for message in out)
    assert len(out) == len(events) and max(keys.values()) == 1, f"{len(out)} records for {len(events)} events"
