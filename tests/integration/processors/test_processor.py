"""`lineage processor` (real Faust workers as subprocesses) against the real Kafka and registry."""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.runtime.transactions import TransactionalProducer, group_metadata
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import ChildProcess, processor_process
from tests.integration.conftest import consume, consume_all
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


@pytest.fixture
def pipeline(clients: ClientSettings, tmp_path: Path) -> dict[str, str]:
    """Topic names, consumer group and data dir of their own, as the environment of the processor."""
    prefix = f"test.proc.{uuid.uuid4().hex[:8]}"
    return {
        "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
        "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
        "LINEAGE_PROCESSOR_GROUP": f"{prefix}.group", "LINEAGE_PARTITIONS": "3", "LINEAGE_REPORT_SECONDS": "1",
        "LINEAGE_PROCESSOR_DATA_DIR": str(tmp_path / "processor"), "LINEAGE_REORDER_WINDOW": "1",
    }


def _event(run: str, job: str, event_type: str, second: int, **extra: object) -> dict:
    return {"eventType": event_type, "eventTime": f"2024-05-01T12:{second // 60:02d}:{second % 60:02d}Z",
            "producer": PRODUCER, "schemaURL": SCHEMA_URL, "run": {"runId": run},
            "job": {"namespace": "proc-test", "name": job}, "inputs": [], "outputs": [], **extra}


def _publish(clients: ClientSettings, topic: str, events: list[dict]) -> None:
    publisher = EventPublisher.from_settings(clients, topic)
    try:
        assert publisher.send([publisher.encode(e) for e in events]).result(60) == len(events)
    finally:
        publisher.close()


def _read(clients: ClientSettings, topic: str, schema: str, count: int | None, timeout: float = 60) -> list[tuple]:
    """``count`` records (waiting up to ``timeout``), or with ``count=None`` everything up to the end offsets."""
    codec = AvroCodec(schema, registry.schema_fetcher(SchemaRegistryClient(clients.registry_config())))
    messages = (consume_all(clients.kafka_bootstrap_servers, topic) if count is None
                else consume(clients.kafka_bootstrap_servers, topic, count, timeout))
    return [(m.key(), codec.decode(m.value()), m.partition()) for m in messages]


def _normalized(clients: ClientSettings, pipeline: dict[str, str], count: int | None, timeout: float = 60
                ) -> list[dict]:
    return [dict(record, event=record_to_event(record["event"]))
            for _, record, _ in _read(clients, pipeline["LINEAGE_NORMALIZED_TOPIC"], "normalized_event", count,
                                      timeout)]


def _exactly(clients: ClientSettings, pipeline: dict[str, str], count: int, timeout: float = 60) -> list[dict]:
    """The normalized topic once it holds ``count`` records, checked again a few seconds later for extras."""
    out = _normalized(clients, pipeline, count, timeout)
    assert len(out) == count, f"{len(out)} of {count} normalized events after {timeout}s"
    time.sleep(3)  # anything extra would have arrived by now
    assert len(_normalized(clients, pipeline, None)) == count, "more normalized events than expected"
    return out


def _processed(worker: ChildProcess) -> int:
    """The events a worker reported as read so far (its last stats line; 0 before the first)."""
    counts = [int(line.split("processor: ")[1].split(" in")[0]) for line in worker.output_so_far().splitlines()
              if "processor: " in line]
    return counts[-1] if counts else 0


def test_shuffled_duplicated_runs_come_out_deduped_in_order_with_canonical_namespaces(
    clients: ClientSettings, pipeline: dict[str, str]
) -> None:
    runs = {str(uuid.uuid4()): f"job-{i}" for i in range(12)}
    events = []
    for run, job in runs.items():
        for second, event_type in enumerate(("START", "RUNNING", "COMPLETE")):
            events.append(_event(run, job, event_type, second, inputs=[
                {"namespace": "s3a://Raw-Bucket", "name": "orders"},
                {"namespace": "kafka://b2.example:9092,B1.example:9092", "name": "clicks"}]))
    reversed_run = next(iter(runs))
    stream = [e for e in events if e["run"]["runId"] != reversed_run]
    random.Random(3).shuffle(stream)
    stream += [e for e in events if e["run"]["runId"] == reversed_run][::-1]  # COMPLETE, RUNNING, START
    stream += random.Random(4).sample(events, 10)  # exact repeats (client retries)
    with processor_process(pipeline):
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], stream)
        out = _exactly(clients, pipeline, len(events))
    assert len(out) == len(events)  # every distinct event once, no repeat
    assert Counter(r["processing"]["dedupeId"] for r in out).most_common(1)[0][1] == 1
    rank = {"START": 0, "RUNNING": 1, "COMPLETE": 2}
    for run in runs:
        mine = [r for r in out if r["event"]["run"]["runId"] == run]
        in_time = [rank[r["event"]["eventType"]] for r in mine if not r["processing"]["late"]]
        assert in_time == sorted(in_time), (run, [(r["event"]["eventType"], r["processing"]["late"]) for r in mine])
    reordered = [r["event"]["eventType"] for r in out if r["event"]["run"]["runId"] == reversed_run]
    assert reordered == ["START", "RUNNING", "COMPLETE"]
    inputs = out[0]["event"]["inputs"]
    assert {(d["namespace"], d["name"]) for d in inputs} == {("s3://raw-bucket", "orders"),
                                                             ("kafka://b1.example:9092", "clicks")}
    renamed = {(r["originalNamespace"], r["namespace"]) for r in out[0]["processing"]["renamedDatasets"]}
    assert ("s3a://Raw-Bucket", "s3://raw-bucket") in renamed


def test_a_schema_change_produces_exactly_one_finding(clients: ClientSettings, pipeline: dict[str, str]) -> None:
    def writes(second: int, fields: list[tuple[str, str]]) -> list[dict]:
        run = str(uuid.uuid4())
        outputs = [{"namespace": "s3://lake", "name": "mart/orders", "facets": {"schema": {
            "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": name, "type": kind} for name, kind in fields]}}}]
        return [_event(run, "orders-daily", "START", second, outputs=outputs),
                _event(run, "orders-daily", "COMPLETE", second + 1, outputs=outputs)]

    v1 = [("id", "bigint"), ("amount", "decimal(10,2)"), ("country", "string")]
    v2 = [("id", "bigint"), ("amount", "string")]  # type changed and a column removed
    with processor_process(pipeline):
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], writes(0, v1) + writes(10, v1) + writes(20, v2)
                 + writes(30, v2))
        out = _exactly(clients, pipeline, 8)
    findings = [(r["event"]["eventTime"], change) for r in out for change in r["schemaChanges"]]
    assert len(findings) == 1
    event_time, change = findings[0]
    assert event_time == "2024-05-01T12:00:20Z"
    assert change["severity"] == "BREAKING" and change["previousEventTime"] == "2024-05-01T12:00:00Z"
    assert {(c["path"], c["kind"]) for c in change["changes"]} == {("amount", "TYPE_CHANGED"), ("country", "REMOVED")}


def test_poison_messages_go_to_the_dlq_while_good_events_flow(clients: ClientSettings, pipeline: dict[str, str]
                                                              ) -> None:
    topic = pipeline["LINEAGE_EVENTS_TOPIC"]
    good = [_event(str(uuid.uuid4()), f"good-{i}", "START", i) for i in range(6)]
    invalid = _event("not-a-uuid", "bad", "START", 0)
    with processor_process(pipeline):
        publisher = EventPublisher.from_settings(clients, topic)
        key, value = publisher.encode(good[0])
        schema_id = int.from_bytes(value[1:5], "big")
        invalid_value = AvroCodec("openlineage_event", lambda _id: "").encode(event_to_record(invalid), schema_id)
        poison = [b'{"eventType": "START"}', b"\x00\x00\x0f\x42\x40" + value[5:], value[:40], invalid_value]
        producer = Producer({"bootstrap.servers": clients.kafka_bootstrap_servers})
        for index, good_event in enumerate(good):
            producer.produce(topic, key=b"poison", value=poison[index % len(poison)])
            producer.produce(topic, key=key, value=publisher.encode(good_event)[1])
        assert producer.flush(30) == 0
        publisher.close()
        out = _exactly(clients, pipeline, 6)
        dead = _read(clients, pipeline["LINEAGE_DLQ_TOPIC"], "dead_letter", 6, timeout=30)
    assert sorted(r["event"]["job"]["name"] for r in out) == sorted(e["job"]["name"] for e in good)
    reasons = Counter(record["errorClass"] for _, record, _ in dead)
    assert reasons == {"bad-magic-byte": 2, "unknown-schema-id": 2, "truncated": 1, "invalid-event": 1}
    for key_bytes, record, _ in dead:
        assert key_bytes == b"poison" and record["key"] == b"poison" and record["value"] in poison
        assert record["stage"] == "processor" and record["sourceTopic"] == topic and record["sourceOffset"] >= 0
    assert any("run.runId" in record["errorMessage"] for _, record, _ in dead)


def test_a_killed_worker_restarts_without_loss_or_duplicates(clients: ClientSettings, pipeline: dict[str, str],
                                                             tmp_path: Path) -> None:
    runs = [str(uuid.uuid4()) for _ in range(1500)]
    events = [_event(run, f"job-{i % 50}", kind, i) for i, run in enumerate(runs) for kind in ("START", "COMPLETE")]
    topic = pipeline["LINEAGE_EVENTS_TOPIC"]
    with processor_process(pipeline) as first:
        _publish(clients, topic, events[:1000])
        consume(clients.kafka_bootstrap_servers, pipeline["LINEAGE_NORMALIZED_TOPIC"], 300, timeout=60)
        _publish(clients, topic, events[1000:])
        first.process.kill()  # SIGKILL mid-stream: no shutdown, no final commit
        first.process.wait(30)
    with processor_process(pipeline) as second:
        _normalized(clients, pipeline, len(events), timeout=120)
        time.sleep(3)
        out = _normalized(clients, pipeline, None)
    # Both workers' whole logs stay beside the test (pytest keeps the last runs' tmp dirs) for a post-mortem.
    (tmp_path / "killed-worker.log").write_text(first.output)
    (tmp_path / "restarted-worker.log").write_text(second.output)
    ids = Counter(r["processing"]["dedupeId"] for r in out)
    assert len(ids) == len(events), f"events were lost; worker logs in {tmp_path}:\n{second.output[-3000:]}"
    # At-least-once: outputs are acknowledged before the state that marks their inputs done, so a kill between the
    # two repeats at most the batch in flight — as identical records, which the idempotent sinks absorb.
    repeated = [r for r in out if ids[r["processing"]["dedupeId"]] > 1]
    assert len(out) - len(ids) <= 1000, f"{len(out) - len(ids)} repeated records"
    for record in repeated:
        twins = [r["event"] for r in repeated if r["processing"]["dedupeId"] == record["processing"]["dedupeId"]]
        assert all(twin == record["event"] for twin in twins)


def test_a_restarted_worker_reads_the_partitions_its_group_never_committed(
    clients: ClientSettings, pipeline: dict[str, str]
) -> None:
    """A worker killed before its first offset commit leaves changelog state but no offsets. Faust discards what it
    fetches during table recovery and seeks back only to committed offsets: the restarted worker used to skip the
    whole backlog (processors/faust_transport.py)."""
    events = [_event(str(uuid.uuid4()), f"job-{i}", "START", i % 60) for i in range(600)]
    with processor_process(pipeline) as first:
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], events[:300])
        _exactly(clients, pipeline, 300)
        first.process.kill()
        first.process.wait(30)
    _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], events[300:])
    group = pipeline["LINEAGE_PROCESSOR_GROUP"]
    admin = AdminClient({"bootstrap.servers": clients.kafka_bootstrap_servers})
    deadline = time.monotonic() + 60
    while True:  # possible once the killed member's session expired (10 s)
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result()
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the killed worker's group never became empty"
            time.sleep(2)
    with processor_process(pipeline) as second:
        _normalized(clients, pipeline, len(events), timeout=60)
        time.sleep(3)
        out = _normalized(clients, pipeline, None)
    assert len({r["processing"]["dedupeId"] for r in out}) == len(events), second.output[-3000:]


def test_a_worker_whose_group_offsets_stay_pending_settles_its_own_and_goes_on(
    clients: ClientSettings, pipeline: dict[str, str]
) -> None:
    """Offsets that a transaction still carries cannot be read (KIP-447's stable read). A worker that cannot read
    them within 30 s commits a settling transaction of its own under its membership (what ends a hanging transaction
    of its own transactional id, ARCHITECTURE 76; a real broker must take it) and waits on; once the other
    producer's transaction ends, it goes on without loss or repeat."""
    events = [_event(str(uuid.uuid4()), f"job-{i}", "START", i % 60) for i in range(200)]
    topic, group = pipeline["LINEAGE_EVENTS_TOPIC"], pipeline["LINEAGE_PROCESSOR_GROUP"]
    with processor_process(pipeline):
        _publish(clients, topic, events[:100])
        _exactly(clients, pipeline, 100)
    reader = Consumer({"bootstrap.servers": clients.kafka_bootstrap_servers, "group.id": group})
    try:
        offsets = reader.committed([TopicPartition(topic, partition) for partition in range(3)], timeout=30)
    finally:
        reader.close()
    # Another producer carries the group's offsets, unchanged, in a transaction left open (the group is empty now:
    # the broker takes them without a membership).
    other = TransactionalProducer({"bootstrap.servers": clients.kafka_bootstrap_servers},
                                  f"{group}.other-{uuid.uuid4().hex[:6]}", timeout_ms=120_000)
    other.begin()
    other.send_offsets({(tp.topic, tp.partition): tp.offset for tp in offsets}, group_metadata(group, -1, ""))
    _publish(clients, topic, events[100:])
    with processor_process(pipeline) as worker:
        deadline = time.monotonic() + 90
        while "settling what this worker's transactional id" not in worker.output_so_far():
            assert time.monotonic() < deadline, worker.output_so_far()[-3000:]
            time.sleep(1)
        other.abort()  # the pending offsets end: the worker reads them and goes on
        out = _exactly(clients, pipeline, len(events), timeout=90)
        assert "settling the group's offsets did not commit" not in worker.output_so_far()
    assert len({r["processing"]["dedupeId"] for r in out}) == len(events)


def test_two_workers_split_the_partitions(clients: ClientSettings, pipeline: dict[str, str]) -> None:
    events = [_event(str(uuid.uuid4()), f"job-{i}", "START", i % 60) for i in range(300)]
    with processor_process(pipeline) as one, processor_process(pipeline) as two:
        time.sleep(8)  # the second worker's join makes the group rebalance
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], events)
        out = _exactly(clients, pipeline, len(events))
    assert len({r["processing"]["dedupeId"] for r in out}) == len(events)
    for child in (one, two):
        assert _processed(child) > 0, child.output[-2000:]


@pytest.mark.parametrize("leaving", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_workers_joining_and_leaving_mid_stream_lose_nothing(clients: ClientSettings, pipeline: dict[str, str],
                                                             tmp_path: Path, leaving: signal.Signals) -> None:
    """Scaling out and in under a live stream: partitions move to a joining worker (with their dedupe state), and
    back to the first one when the joined worker leaves. Every event comes out; a worker stopped with SIGTERM repeats
    nothing, a killed one at most what it had not committed, as identical records."""
    runs = [str(uuid.uuid4()) for _ in range(6000)]
    events = [_event(run, f"job-{i % 60}", kind, i % 3600)
              for i, run in enumerate(runs) for kind in ("START", "COMPLETE")]
    prepare_pipeline(ClientSettings.from_env({**os.environ, **pipeline}), 3)  # topics and schemas, as a worker would
    chunks = [events[start:start + 200] for start in range(0, len(events), 200)]

    def publish_live() -> None:  # a live stream: ~800 events/s for ~15 s
        for chunk in chunks:
            _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], chunk)
            time.sleep(0.25)

    def wait_until(condition: Callable[[], bool], *workers: ChildProcess) -> None:
        deadline = time.monotonic() + 120
        while not condition():
            assert time.monotonic() < deadline, [worker.output_so_far()[-2000:] for worker in workers]
            time.sleep(0.3)

    with processor_process(pipeline) as first, ThreadPoolExecutor(1) as executor:
        publishing = executor.submit(publish_live)
        wait_until(lambda: _processed(first) > 0, first)
        with processor_process(pipeline) as second:
            wait_until(lambda: _processed(second) > 0, first, second)  # the join moved partitions mid-stream
            second.process.send_signal(leaving)
            second.process.wait(60)
            handed_back_live = not publishing.done()
        publishing.result()  # raises what failed the publishing
        _normalized(clients, pipeline, len(events), timeout=120)
        time.sleep(3)  # anything repeated would have arrived by now
        out = _normalized(clients, pipeline, None)
    (tmp_path / "first-worker.log").write_text(first.output)
    (tmp_path / "second-worker.log").write_text(second.output)
    assert handed_back_live, "the stream ended before the second worker left"
    assert second.returncode == (0 if leaving == signal.SIGTERM else -signal.SIGKILL)
    ids = Counter(r["processing"]["dedupeId"] for r in out)
    assert len(ids) == len(events), f"{len(events) - len(ids)} events lost; worker logs in {tmp_path}"
    if leaving == signal.SIGTERM:
        assert len(out) == len(ids), f"{len(out) - len(ids)} events repeated; worker logs in {tmp_path}"
    repeated: dict[str, list[dict]] = {}
    for record in out:
        if ids[record["processing"]["dedupeId"]] > 1:
            repeated.setdefault(record["processing"]["dedupeId"], []).append(record["event"])
    assert all(twin == twins[0] for twins in repeated.values() for twin in twins)
