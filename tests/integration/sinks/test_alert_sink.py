"""The alert sink against the real stack: a finding seen again after a restart does not alert twice, a recurring
change alerts every time, and impact is computed against a graph that holds what came with the change."""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.local import replay
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.routing.messages import delivery_id
from kafka_lineage_devtools.processes import (
    alert_router_process,
    alert_sink_process,
    pipeline_env,
    processor_process,
    sink_process,
)
from tests.integration.conftest import consume_all, lineage
from tests.openlineage_samples import PRODUCER

from .receivers import Receiver
from .test_graph_sink import _event, _settings

pytestmark = pytest.mark.integration


def _finding(namespace: str, name: str) -> dict:
    return {"namespace": namespace, "name": name, "previousVersion": "v1", "newVersion": "v2",
            "previousSchema": '[{"name":"id","type":"bigint"}]', "newSchema": '[{"name":"id","type":"string"}]',
            "previousEventTime": "2024-05-01T12:00:00Z", "severity": "BREAKING",
            "changes": [{"path": "id", "kind": "TYPE_CHANGED", "oldType": "bigint", "newType": "string",
                         "severity": "BREAKING"}]}


def normalized_with_finding(job_namespace: str, dataset: str) -> dict:
    """A normalized record as the processor writes it: a job's COMPLETE carrying one finding on s3://lake/<dataset>."""
    event = _event(job_namespace, str(uuid.uuid4()), "ingest", "COMPLETE", 1)
    return {"event": event_to_record(event), "schemaChanges": [_finding("s3://lake", dataset)],
            "processing": {"dedupeId": uuid.uuid4().hex, "processedAt": datetime.now(UTC), "late": False,
                           "sourceTopic": None, "sourcePartition": None, "sourceOffset": None,
                           "producedAt": datetime.now(UTC), "renamedDatasets": []}}


def test_a_finding_redelivered_after_a_restart_alerts_once(clients: ClientSettings) -> None:
    prefix = f"test.alerts.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
           "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq",
           "LINEAGE_ALERT_GROUP": f"{prefix}.first", "LINEAGE_PARTITIONS": "2", "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_ALERT_GRAPH_WAIT": "1"}  # no graph sink here: do not wait for one
    settings = _settings(env)
    prepare_pipeline(settings, 2)
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    record = normalized_with_finding("alerts", f"{prefix}/orders")
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
    value = codec.encode(record, registry.registered_id(client, settings.normalized_topic, "normalized_event"))
    producer.produce(settings.normalized_topic, key=b"k", value=value)
    assert producer.flush(30) == 0

    def alerts_after(group: str) -> list:
        with alert_sink_process({**env, "LINEAGE_ALERT_GROUP": group}):
            deadline = time.monotonic() + 30
            while not consume_all(settings.kafka_bootstrap_servers, settings.drift_topic):
                assert time.monotonic() < deadline, "no alert"
                time.sleep(0.3)
            time.sleep(2)  # a repeat would be published by now
            return consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)

    assert len(alerts_after(f"{prefix}.first")) == 1
    # A new group re-reads the finding from the beginning, as a sink restarted before its commit would.
    assert len(alerts_after(f"{prefix}.second")) == 1


SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
LINEAGE_FACET = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
LAKE = "s3://lake"


def _run(namespace: str, job: str, minute: int, inputs: list[dict], outputs: list[dict]) -> list[dict]:
    run = str(uuid.uuid4())
    return [{"eventType": kind, "eventTime": f"2024-05-01T12:{minute:02d}:{second:02d}Z", "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": run}, "job": {"namespace": namespace, "name": job}, "inputs": inputs,
             "outputs": outputs} for kind, second in (("START", 0), ("COMPLETE", 1))]


def _dataset(name: str, fields: list[tuple[str, str]] | None = None,
             lineage: dict[str, list[tuple[str, str]]] | None = None) -> dict:
    facets: dict = {}
    if fields:
        facets["schema"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
                            "fields": [{"name": n, "type": t} for n, t in fields]}
    if lineage:
        facets["columnLineage"] = {"_producer": PRODUCER, "_schemaURL": LINEAGE_FACET, "fields": {
            out: {"inputFields": [{"namespace": LAKE, "name": source, "field": field} for source, field in inputs]}
            for out, inputs in lineage.items()}}
    return {"namespace": LAKE, "name": name, "facets": facets}


def _pipeline(tmp_path: Path) -> tuple[dict[str, str], ClientSettings]:
    prefix = f"test.alerts.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    return env, ClientSettings.from_env({**os.environ, **env})


def _drift_alerts(settings: ClientSettings, count: int, timeout: float = 90, quiet: float = 3.0) -> list[dict]:
    """The drift topic's alerts once ``count`` are there and ``quiet`` seconds brought no more."""
    codec = AvroCodec("schema_drift_alert", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    deadline = time.monotonic() + timeout
    while len(found := consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)) < count:
        assert time.monotonic() < deadline, f"{len(found)} of {count} alerts within {timeout:.0f}s"
        time.sleep(0.5)
    time.sleep(quiet)
    return [codec.decode(m.value()) for m in consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)]


def test_a_dataset_flapping_between_two_schemas_alerts_at_every_change(clients: ClientSettings,
                                                                        tmp_path: Path) -> None:
    env, settings = _pipeline(tmp_path)
    ns = f"flap-{uuid.uuid4().hex[:6]}"
    table = f"{ns}/orders"
    a, b = [("id", "bigint")], [("id", "string")]
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        events = [e for minute, fields in enumerate((a, b, a, b))
                  for e in _run(ns, "ingest", minute, [], [_dataset(table, fields)])]
        publisher.send([publisher.encode(e) for e in events]).result(30)
        publisher.close()
        alerts = _drift_alerts(settings, 3)
    assert len(alerts) == 3, [(x["previousVersion"][:8], x["newVersion"][:8]) for x in alerts]
    alerts.sort(key=lambda x: x["eventTime"])
    assert [x["eventTime"][:16] for x in alerts] == ["2024-05-01T12:01", "2024-05-01T12:02", "2024-05-01T12:03"]
    assert len({x["alertId"] for x in alerts}) == 3  # three sources
    assert alerts[0]["changeId"] == alerts[2]["changeId"] != alerts[1]["changeId"]  # A→B twice, B→A once
    assert alerts[0]["newVersion"] == alerts[2]["newVersion"] == alerts[1]["previousVersion"]


def test_a_change_and_its_downstream_runs_in_one_shuffled_burst_give_the_true_impact(clients: ClientSettings,
                                                                                     tmp_path: Path) -> None:
    env, settings = _pipeline(tmp_path)
    ns = f"burst-{uuid.uuid4().hex[:6]}"
    raw, clean, mart, other, unrelated = (f"{ns}/{n}" for n in ("raw", "clean", "mart", "other", "unrelated"))
    v1 = [("id", "bigint"), ("amount", "double")]
    v2 = [("id", "string"), ("amount", "double")]
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        baseline = _run(ns, "ingest", 0, [], [_dataset(raw, v1)])
        publisher.send([publisher.encode(e) for e in baseline]).result(30)
        normalized = 0
        deadline = time.monotonic() + 60
        while normalized < len(baseline):  # the first schema is known before the burst
            assert time.monotonic() < deadline, "the baseline did not come through the processor"
            normalized = len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic))
            time.sleep(0.3)
        burst = (_run(ns, "ingest", 1, [], [_dataset(raw, v2)])
                 + _run(ns, "clean_orders", 2, [_dataset(raw)],
                        [_dataset(clean, [("id", "string"), ("total", "double")],
                                  {"id": [(raw, "id")], "total": [(raw, "amount")]})])
                 + _run(ns, "daily_mart", 3, [_dataset(clean)],
                        [_dataset(mart, [("n", "bigint")], {"n": [(clean, "id")]})])
                 + _run(ns, "side_copy", 2, [_dataset(raw)], [_dataset(other)])
                 + _run(ns, "unrelated", 2, [_dataset(unrelated)], [_dataset(f"{ns}/elsewhere")]))
        random.Random(5).shuffle(burst)
        publisher.send([publisher.encode(e) for e in burst]).result(30)
        publisher.close()
        alerts = _drift_alerts(settings, 1)
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["dataset"] == {"namespace": LAKE, "name": raw}
    assert sorted((j["name"], j["depth"]) for j in alert["impactedJobs"]) == [
        ("clean_orders", 1), ("daily_mart", 2), ("side_copy", 1)]
    assert sorted((d["name"], d["depth"]) for d in alert["impactedDatasets"]) == [(clean, 1), (mart, 2), (other, 1)]
    assert alert["impactedColumns"] == [{"namespace": LAKE, "name": clean, "field": "id", "depth": 1},
                                        {"namespace": LAKE, "name": mart, "field": "n", "depth": 2}]
    assert not alert["impactTruncated"] and alert["impactComplete"] is True


def test_a_change_whose_runs_arrive_in_reverse_order_alerts_once_marked_late(clients: ClientSettings,
                                                                               tmp_path: Path) -> None:
    # issue 34: day 2's run (amount: string) is sent before day 1's (amount: int), as an emitter's buffer flushed
    # after an outage sends them
    env, settings = _pipeline(tmp_path)
    ns = f"late-{uuid.uuid4().hex[:6]}"
    table = f"{ns}/orders"
    day1, day2 = [("id", "bigint"), ("amount", "int")], [("id", "bigint"), ("amount", "string")]
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        events = _run(ns, "ingest", 2, [], [_dataset(table, day2)]) + _run(ns, "ingest", 1, [], [_dataset(table, day1)])
        publisher.send([publisher.encode(e) for e in events]).result(30)
        publisher.close()
        (alert,) = _drift_alerts(settings, 1)
    assert alert["severity"] == "BREAKING" and alert["late"] is True
    assert [(c["path"], c["oldType"], c["newType"]) for c in alert["changes"]] == [("amount", "int", "string")]
    assert alert["changedAt"][:16] == "2024-05-01T12:02" and alert["supersedes"] is None
    # a replay of the topic finds the same change by the same rule
    (change,) = replay(settings, processing=ProcessorSettings()).schema_changes
    assert (change.namespace, change.name, change.previous_version, change.new_version, change.event_time) == (
        alert["dataset"]["namespace"], alert["dataset"]["name"], alert["previousVersion"], alert["newVersion"],
        alert["changedAt"])


OWNERSHIP_DATASET = "https://openlineage.io/spec/facets/1-0-1/OwnershipDatasetFacet.json"
OWNERSHIP_JOB = "https://openlineage.io/spec/facets/1-0-1/OwnershipJobFacet.json"
TAGS_FACET = "https://openlineage.io/spec/facets/1-0-0/TagsDatasetFacet.json"


def _owned(dataset: dict, *owners: str, tags: list[dict] | None = None) -> dict:
    """``dataset`` with an ownership facet naming ``owners`` (and a tags facet)."""
    facets = {**dataset["facets"], "ownership": {"_producer": PRODUCER, "_schemaURL": OWNERSHIP_DATASET,
                                                 "owners": [{"name": o, "type": "MAINTAINER"} for o in owners]}}
    if tags is not None:
        facets["tags"] = {"_producer": PRODUCER, "_schemaURL": TAGS_FACET, "tags": tags}
    return {**dataset, "facets": facets}


def _owned_job(events: list[dict], *owners: str) -> list[dict]:
    """A run's events whose job carries an ownership facet naming ``owners``."""
    facet = {"_producer": PRODUCER, "_schemaURL": OWNERSHIP_JOB, "owners": [{"name": o} for o in owners]}
    return [{**e, "job": {**e["job"], "facets": {"ownership": facet}}} for e in events]


def test_an_alert_carries_the_owners_and_tags_of_its_dataset_and_the_owners_of_what_it_impacts(
        clients: ClientSettings, tmp_path: Path) -> None:
    """… and the alert router takes it to the channel of each team that owns the dataset or what it impacts."""
    env, settings = _pipeline(tmp_path)
    channels = {team: Receiver("slack") for team in ("payments", "bi", "web")}
    for team, channel in channels.items():
        (tmp_path / f"{team}-url").write_text(channel.url)
    (tmp_path / "routes.yaml").write_text(json.dumps({"routes": [
        {"name": f"{team}-slack", "match": {"owners": [f"team:{team}"]},
         "destination": {"type": "slack", "url_file": f"{team}-url"}} for team in channels]}))
    router_env = {**env, "LINEAGE_ALERT_ROUTES": str(tmp_path / "routes.yaml"), "LINEAGE_ROUTER_START": "earliest",
                  "LINEAGE_ROUTER_GROUP": f"{settings.drift_topic}.router"}
    ns = f"owners-{uuid.uuid4().hex[:6]}"
    raw, clean, mart = (f"{ns}/{n}" for n in ("raw", "clean", "mart"))
    v1, v2 = [("id", "bigint")], [("id", "string")]
    tags = [{"key": "PII", "value": "true"}, {"key": "Tier", "value": "Gold"},
            {"key": "pii", "value": "email", "field": "id"}]  # a column's tag: not the dataset's
    with processor_process(env), sink_process(env), alert_sink_process(env), alert_router_process(router_env), \
            contextlib.ExitStack() as closing:
        for channel in channels.values():
            closing.callback(channel.close)
        publisher = EventPublisher.from_settings(settings)
        # the first schema, its owner then, and the dataset's tags: known to the graph only
        baseline = _run(ns, "ingest", 0, [], [_owned(_dataset(raw, v1), "team:old", tags=tags)])
        publisher.send([publisher.encode(e) for e in baseline]).result(30)
        deadline = time.monotonic() + 60
        while len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)) < len(baseline):
            assert time.monotonic() < deadline, "the baseline did not come through the processor"
            time.sleep(0.3)
        # the change's own event names the owners now (a repeat among them); downstream owners are the graph's
        burst = (_run(ns, "ingest", 1, [], [_owned(_dataset(raw, v2), "team:payments", "user:ann", "team:payments")])
                 + _owned_job(_run(ns, "clean_orders", 2, [_dataset(raw)], [_owned(_dataset(clean), "team:bi")]),
                              "team:etl")
                 + _run(ns, "daily_mart", 3, [_dataset(clean)], [_dataset(mart)]))
        publisher.send([publisher.encode(e) for e in burst]).result(30)
        publisher.close()
        (alert,) = _drift_alerts(settings, 1)
        # the dataset's team and the team of a dataset it impacts each get it once; a third team does not
        for team in ("payments", "bi"):
            (post,) = channels[team].wait_for(1, 30)
            assert post.headers["X-Lineage-Delivery"] == delivery_id(f"{team}-slack", [alert["alertId"]])
            assert not post.problems and f"/{raw}" in post.json["text"]
        time.sleep(3)
        assert [len(channel.received) for channel in channels.values()] == [1, 1, 0]
    assert alert["dataset"] == {"namespace": LAKE, "name": raw} and alert["impactComplete"] is True
    assert alert["datasetOwners"] == ["team:payments", "user:ann"]
    assert alert["datasetTags"] == ["pii", "tier:gold"]
    assert sorted((j["name"], j["owners"]) for j in alert["impactedJobs"]) == [
        ("clean_orders", ["team:etl"]), ("daily_mart", [])]
    assert sorted((d["name"], d["owners"]) for d in alert["impactedDatasets"]) == [(clean, ["team:bi"]), (mart, [])]
    text = lineage("alerts", "tail", env=env).stdout
    assert "    owners: team:payments, user:ann" in text
