"""The alert sink's exactly-once publishing against the real stack: a batch's alerts and its offsets commit in one
Kafka transaction, and a sink killed between producing and committing leaves nothing a read_committed reader sees,
while its restart publishes each alert once."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import end_offsets, prepare_pipeline, reading_consumer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import ChildExited, alert_sink_process, wait_until
from tests.integration.conftest import consume_all

from .test_alert_sink import normalized_with_finding
from .test_graph_sink import _settings

pytestmark = pytest.mark.integration


def _pipeline(tag: str) -> tuple[dict[str, str], ClientSettings]:
    prefix = f"test.alerttx.{tag}.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
           "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq",
           "LINEAGE_ALERT_GROUP": f"{prefix}.alerts", "LINEAGE_SINK_GROUP": f"{prefix}.graph",
           "LINEAGE_PARTITIONS": "2", "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_ALERT_GRAPH_WAIT": "1"}  # no graph sink here: do not wait for one
    settings = _settings(env)
    prepare_pipeline(settings, 2)
    return env, settings


def _publish(settings: ClientSettings, records: list[dict]) -> None:
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    schema_id = registry.registered_id(client, settings.normalized_topic, "normalized_event")
    producer = Producer(settings.kafka_config())
    for number, record in enumerate(records):
        producer.produce(settings.normalized_topic, key=f"k{number}".encode(), value=codec.encode(record, schema_id))
    assert producer.flush(30) == 0


def _committed(settings: ClientSettings, group: str, stable: bool = True) -> dict[int, int]:
    """The group's committed offsets; ``stable`` False: without waiting for a transaction still open to end (a
    read_committed consumer asks for stable offsets, which the coordinator withholds until then)."""
    isolation = "read_committed" if stable else "read_uncommitted"
    consumer = Consumer(settings.kafka_config({"group.id": group, "isolation.level": isolation}))
    try:
        partitions = [TopicPartition(settings.normalized_topic, p) for p in (0, 1)]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def _caught_up(settings: ClientSettings, group: str) -> bool:
    """Whether the group committed the normalized topic's end on every partition (read_committed: its LSO)."""
    consumer = reading_consumer(settings, "test-ends")
    try:
        ends = end_offsets(consumer, settings.normalized_topic)
    finally:
        consumer.close()
    try:
        committed = _committed(settings, group)
    except KafkaException:  # offsets in a transaction still open: not stable yet
        return False
    return all(committed.get(p, -1) >= end for p, end in ends.items() if end > 0)


def _alert_ids(settings: ClientSettings) -> list[str]:
    """The alert ids a read_committed reader sees on the drift topic."""
    codec = AvroCodec("schema_drift_alert", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    return [codec.decode(m.value())["alertId"] for m in consume_all(settings.kafka_bootstrap_servers,
                                                                    settings.drift_topic)]


def _all_records(settings: ClientSettings, topic: str) -> int:
    """How many records ``topic`` holds, aborted and still open ones included (read_uncommitted)."""
    consumer = Consumer(settings.kafka_config({"group.id": f"test-{uuid.uuid4()}", "enable.auto.commit": False,
                                               "isolation.level": "read_uncommitted"}))
    try:
        ends = end_offsets(consumer, topic)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        count = 0

        def done() -> bool:
            nonlocal count
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                count += 1
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in ends])}
            return all(end == 0 or positions[p] >= end for p, end in ends.items())

        wait_until(done, 30, interval=0.0, what=f"reading {topic} to its end")
        return count
    finally:
        consumer.close()


def test_a_batch_s_alerts_are_published_once_and_its_offsets_commit_with_them(clients: ClientSettings) -> None:
    env, settings = _pipeline("once")
    findings = [normalized_with_finding("alerttx", f"{settings.normalized_topic}/t{n}") for n in range(3)]
    quiet = {**normalized_with_finding("alerttx", "quiet"), "schemaChanges": []}
    _publish(settings, [findings[0], quiet, findings[1], findings[2], quiet])
    with alert_sink_process(env) as sink:
        wait_until(lambda: _caught_up(settings, env["LINEAGE_ALERT_GROUP"]), 90, watch=[sink],
                   what="the alert sink's offsets at the topic's end")
        ids = _alert_ids(settings)
    assert len(ids) == len(set(ids)) == 3
    assert _all_records(settings, settings.drift_topic) == 3  # nothing aborted, nothing written twice
    assert "alert sink stopped: 3 alerts published" in sink.output


def test_a_sink_killed_before_its_commit_shows_nothing_and_its_restart_publishes_each_alert_once(
        clients: ClientSettings) -> None:
    env, settings = _pipeline("crash")
    _publish(settings, [normalized_with_finding("alerttx", f"{settings.normalized_topic}/t{n}") for n in range(2)])
    with pytest.raises(ChildExited) as died, \
            alert_sink_process({**env, "LINEAGE_ALERT_CRASH_POINTS": "before-commit=1.0"}) as crashing:
        wait_until(lambda: crashing.process.poll() is not None, 90, watch=[crashing], what="the crash point")
    assert died.value.code == -9, died.value
    assert "crash point before-commit: killing this sink" in died.value.tail
    assert _all_records(settings, settings.drift_topic) == 2  # on the broker, in the open transaction
    assert _alert_ids(settings) == []  # invisible to read_committed readers
    assert all(offset < 0 for offset in _committed(settings, env["LINEAGE_ALERT_GROUP"], stable=False).values())

    # The restart waits for the broker to abort the dead sink's transaction (its offsets are unstable until then).
    with alert_sink_process(env) as sink:
        wait_until(lambda: _caught_up(settings, env["LINEAGE_ALERT_GROUP"]), 150, watch=[sink],
                   what="the restarted sink's offsets at the topic's end")
        ids = _alert_ids(settings)
    assert len(ids) == len(set(ids)) == 2
    assert _all_records(settings, settings.drift_topic) == 4  # the aborted two and the committed two
    assert "alert sink stopped: 2 alerts published" in sink.output
