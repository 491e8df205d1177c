"""`lineage sink` (a real subprocess) from a normalized topic into the real Neo4j."""

from __future__ import annotations

import os
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import lineage_process, sink_process
from kafka_lineage_devtools.stack.manager import Stack
from tests.integration.conftest import consume_all, lineage
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"


@pytest.fixture
def sink_env(clients: ClientSettings, tmp_path: Path) -> dict[str, str]:
    prefix = f"test.sink.{uuid.uuid4().hex[:8]}"
    return {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_SINK_GROUP": f"{prefix}.sink", "LINEAGE_PARTITIONS": "3", "LINEAGE_SINK_POLL_SECONDS": "0.2"}


def _settings(env: dict[str, str]) -> ClientSettings:
    return ClientSettings.from_env({**os.environ, **env})


def _normalized_record(event: dict) -> dict:
    return {"event": event_to_record(event), "schemaChanges": [], "processing": {
        "dedupeId": uuid.uuid4().hex, "processedAt": datetime.now(UTC), "late": False, "sourceTopic": None,
        "sourcePartition": None, "sourceOffset": None, "producedAt": None, "renamedDatasets": []}}


def _publish(settings: ClientSettings, events: list[dict], extra: list[bytes] = ()) -> None:
    client = SchemaRegistryClient(settings.registry_config())
    schema_id = registry.registered_id(client, settings.normalized_topic, "normalized_event")
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
    for event in events:
        producer.produce(settings.normalized_topic, key=b"k", value=codec.encode(_normalized_record(event), schema_id))
    for value in extra:
        producer.produce(settings.normalized_topic, key=b"poison", value=value)
    assert producer.flush(30) == 0


def _event(namespace: str, run: str, job: str, event_type: str, second: int, **extra: object) -> dict:
    return {"eventType": event_type, "eventTime": f"2024-05-01T12:00:{second:02d}Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run}, "job": {"namespace": namespace, "name": job}, **extra}


def _wait_for(driver, query: str, parameters: dict, expected, timeout: float = 30):
    deadline, value = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        with driver.session() as session:
            value = session.run(query, parameters).single(strict=False)
            value = value[0] if value is not None else None
        if value == expected:
            return value
        time.sleep(0.3)
    return value


def test_lineage_lands_in_neo4j_order_independent_and_idempotent(clients: ClientSettings, sink_env: dict[str, str]
                                                                 ) -> None:
    settings = _settings(sink_env)
    prepare_pipeline(settings, 3)
    namespace = f"sink-{uuid.uuid4().hex[:6]}"
    run, other = str(uuid.uuid4()), str(uuid.uuid4())
    schema = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
              "fields": [{"name": "id", "type": "bigint"}, {"name": "total", "type": "double"}]}
    column_lineage = {"_producer": PRODUCER,
                      "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
                      "fields": {"total": {"inputFields": [
                          {"namespace": "postgres://db:5432", "name": "shop.public.orders", "field": "amount"}]}}}
    io = {"inputs": [{"namespace": "postgres://db:5432", "name": "shop.public.orders"}],
          "outputs": [{"namespace": "s3://lake", "name": f"{namespace}/totals",
                       "facets": {"schema": schema, "columnLineage": column_lineage}}]}
    events = [_event(namespace, run, "totals", "COMPLETE", 9, **io),  # COMPLETE before START
              _event(namespace, run, "totals", "START", 1, **io),
              _event(namespace, other, "downstream", "START", 10,
                     inputs=[{"namespace": "s3://lake", "name": f"{namespace}/totals"}], outputs=[])]
    with sink_process(sink_env) as sink:
        _publish(settings, events, extra=[b"not avro at all"])
        with driver_for(settings) as driver:
            assert _wait_for(driver, "MATCH (r:Run {runId: $run}) RETURN r.state", {"run": run}, "COMPLETE") \
                == "COMPLETE"
            assert _wait_for(driver, "MATCH (r:Run {runId: $run}) RETURN r.state", {"run": other}, "START") == "START"
            with driver.session() as session:
                downstream = session.run(
                    "MATCH (:Job {namespace: $ns, name: 'totals'})-[:OUTPUTS]->(d:Dataset)-[:INPUT_TO]->(j:Job) "
                    "RETURN collect(j.name)", {"ns": namespace}).single()[0]
                derived = session.run(
                    "MATCH (:Dataset {namespace: 's3://lake', name: $name})-[:HAS_FIELD]->(f:Field {field: 'total'})"
                    "-[:DERIVES_FROM]->(i:Field) RETURN i.name + '.' + i.field", {"name": f"{namespace}/totals"}
                ).single()[0]
            assert downstream == ["downstream"] and derived == "shop.public.orders.amount"
            feeds = lineage("upstream", "s3://lake", f"{namespace}/totals", "--column", "total", env=sink_env)
            assert "postgres://db:5432  shop.public.orders.amount" in feeds.stdout
            derived_from = lineage("impact", "postgres://db:5432", "shop.public.orders", "--column", "amount",
                                   "--format", "json", env=sink_env)
            assert f'"name": "{namespace}/totals"' in derived_from.stdout and '"field": "total"' in derived_from.stdout
            before = graph_fingerprint(driver)
            _publish(settings, events)  # the same events again: nothing changes
            time.sleep(3)
            assert graph_fingerprint(driver) == before
    assert sink.returncode == 0 and "graph sink stopped" in sink.output
    dead = consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic)
    assert len(dead) == 1
    codec = AvroCodec("dead_letter", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    letter = codec.decode(dead[0].value())
    assert letter["stage"] == "graph-sink" and letter["errorClass"] == "bad-magic-byte"
    assert letter["value"] == b"not avro at all"
    shown = lineage("dlq", "tail", env=sink_env)
    assert "graph-sink" in shown.stdout and "bad-magic-byte" in shown.stdout and "first byte is 0x6e" in shown.stdout


def test_neo4j_outage_is_waited_out_without_loss(clients: ClientSettings, sink_env: dict[str, str],
                                                 stack_settings) -> None:
    settings = _settings(sink_env)
    prepare_pipeline(settings, 3)
    namespace = f"outage-{uuid.uuid4().hex[:6]}"
    runs = [str(uuid.uuid4()) for _ in range(20)]
    stack = Stack(stack_settings)
    with sink_process(sink_env) as sink:
        stack.down(["neo4j"])
        try:
            _publish(settings, [_event(namespace, run, f"job-{i}", "COMPLETE", i % 60) for i, run in enumerate(runs)])
            time.sleep(5)  # the sink is retrying against a stopped database
        finally:
            stack.up(["neo4j"])
        with driver_for(settings) as driver:
            assert _wait_for(driver, "MATCH (r:Run)-[:OF_JOB]->(j:Job {namespace: $ns}) RETURN count(r)",
                             {"ns": namespace}, len(runs), timeout=90) == len(runs)
    assert sink.returncode == 0 and ("Neo4j cannot take writes" in sink.output or "Connection refused" in sink.output)
    assert consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic) == []


def test_refused_credentials_dead_letter_nothing_and_make_the_sink_not_ready(clients: ClientSettings,
                                                                             sink_env: dict[str, str]) -> None:
    """Wrong credentials are the environment's fault, not 20 records': the sink waits, says it is not ready,
    and a SIGTERM ends the wait at once without committing; restarted with the right password it writes them all."""
    settings = _settings(sink_env)
    prepare_pipeline(settings, 3)
    namespace = f"auth-{uuid.uuid4().hex[:6]}"
    runs = [str(uuid.uuid4()) for _ in range(20)]
    _publish(settings, [_event(namespace, run, f"job-{i}", "COMPLETE", i % 60) for i, run in enumerate(runs)])
    refused_env = {**sink_env, "NEO4J_PASSWORD": "not-the-password"}
    with lineage_process(["sink"], lambda _child, output: "Neo4j cannot take writes" in output, refused_env) as sink:
        time.sleep(3)  # a few retries
        ready = requests.get(f"{sink.metrics_url}/health/ready", timeout=10)
        assert ready.status_code == 503 and "neo4j-writes" in ready.text, ready.text
        started = time.monotonic()
        sink.process.send_signal(signal.SIGTERM)
        sink.process.wait(30)
        assert time.monotonic() - started < 10  # the wait is stop-aware
    assert sink.returncode == 0, sink.output[-2000:]
    assert "AuthError" in sink.output or "Unauthorized" in sink.output
    assert consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic) == []
    time.sleep(6)  # Neo4j locks the user for 5 s after repeated failed logins (dbms.security.auth_lock_time)
    with sink_process(sink_env), driver_for(settings) as driver:
        assert _wait_for(driver, "MATCH (r:Run)-[:OF_JOB]->(j:Job {namespace: $ns}) RETURN count(r)",
                         {"ns": namespace}, len(runs), timeout=60) == len(runs)
    assert consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic) == []


def test_committed_offsets_never_pass_the_graph_and_a_killed_sink_loses_nothing(clients: ClientSettings,
                                                                                 sink_env: dict[str, str]) -> None:
    """The sink polls and prepares the next batch while one is written (issue 23): at every moment each record below
    the group's committed offsets is in Neo4j, and a sink killed mid-stream leaves nothing out after a restart."""
    env = {**sink_env, "LINEAGE_SINK_BATCH": "50"}  # many batches, many commits
    settings = _settings(env)
    prepare_pipeline(settings, 3)
    namespace = f"commit-{uuid.uuid4().hex[:6]}"
    runs = [str(uuid.uuid4()) for _ in range(1500)]
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    schema_id = registry.registered_id(client, settings.normalized_topic, "normalized_event")
    placed: dict[tuple[int, int], str] = {}  # (partition, offset) → run id
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
    for i, run in enumerate(runs):
        value = codec.encode(_normalized_record(_event(namespace, run, f"job-{i % 40}", "COMPLETE", i % 60)), schema_id)
        producer.produce(settings.normalized_topic, key=run.encode(), value=value,
                         on_delivery=lambda error, message, run=run: placed.__setitem__(
                             (message.partition(), message.offset()), run) if error is None else None)
    assert producer.flush(30) == 0 and len(placed) == len(runs)
    watcher = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": env["LINEAGE_SINK_GROUP"],
                        "enable.auto.commit": False})
    partitions = [TopicPartition(settings.normalized_topic, partition) for partition in range(3)]
    query = "MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns}) RETURN collect(r.runId)"
    checks = 0
    try:
        with driver_for(settings) as driver:
            with lineage_process(["sink"], lambda _child, output: "graph sink ready" in output, env) as sink:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    committed = {tp.partition: tp.offset for tp in watcher.committed(partitions, timeout=10)}
                    with driver.session() as session:
                        in_graph = set(session.run(query, {"ns": namespace}).single()[0])  # read after the offsets
                    promised = {run for (partition, offset), run in placed.items()
                                if offset < committed.get(partition, -1)}
                    assert promised <= in_graph, f"{len(promised - in_graph)} committed records not in the graph"
                    checks += bool(promised)
                    if len(promised) >= len(runs) // 3:
                        break
                    time.sleep(0.05)
                sink.process.kill()  # mid-stream, a batch likely in flight
                sink.process.wait(30)
            assert checks > 0
            with sink_process(env):
                assert _wait_for(driver, "MATCH (r:Run)-[:OF_JOB]->(:Job {namespace: $ns}) RETURN count(r)",
                                 {"ns": namespace}, len(runs), timeout=120) == len(runs)
    finally:
        watcher.close()
    assert consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic) == []



def test_a_graph_sink_whose_consumer_stalls_rejoins_and_writes_on(clients: ClientSettings, sink_env: dict[str, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from kafka_lineage.sinks import consumer as consumer_module
    from kafka_lineage.sinks.graph import sink as sink_module
    from kafka_lineage.sinks.graph.settings import SinkSettings

    paused = threading.Event()

    def consume_then_pause(consumer, size, timeout, stage):  # in the sink's own thread, as a consumer must be used
        messages = consumer_module.consume_batch(consumer, size, timeout, stage)
        if not paused.is_set() and consumer.assignment():
            consumer.pause(consumer.assignment())  # it polls on and gets nothing: a stall
            paused.set()
        return messages

    monkeypatch.setattr(sink_module, "consume_batch", consume_then_pause)
    settings = _settings(sink_env)
    sink = sink_module.GraphSink(settings, SinkSettings.from_env({**os.environ, **sink_env}))
    sink.member.watch = consumer_module.StallWatch(1.0)  # looks after 1 s of silence instead of a minute
    stop = threading.Event()
    runner = threading.Thread(target=sink.run, args=(stop,), daemon=True)
    runner.start()
    try:
        assert paused.wait(30), "the sink never got its partitions"
        namespace = f"stall-{uuid.uuid4().hex[:6]}"
        _publish(settings, [_event(namespace, str(uuid.uuid4()), f"job{number}", "COMPLETE", number)
                            for number in range(5)])
        with driver_for(settings) as driver:
            jobs = _wait_for(driver, "MATCH (j:Job {namespace: $ns}) RETURN count(j)", {"ns": namespace}, 5, 60)
        assert jobs == 5, f"{jobs} of 5 jobs written; consumer rebuilt {sink.member.rebuilt} times"
        assert sink.member.rebuilt == 1
    finally:
        stop.set()
        runner.join(30)
