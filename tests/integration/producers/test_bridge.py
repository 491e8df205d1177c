"""`lineage bridge` (the real CLI) against the real Kafka and registry: events written by openlineage-python's own
Kafka transport (JSON) land on the events topic as Avro, keyed as the collector keys them; a record that is not an
event becomes a dead letter naming why; a second run publishes nothing again (committed offsets)."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from openlineage.client import OpenLineageClient
from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import ensure_topic, prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import partition_key
from kafka_lineage.schemas.wire import AvroCodec
from tests.integration.conftest import consume_all, decoded_events, lineage
from tests.openlineage_samples import full_run_event_object, to_json

pytestmark = pytest.mark.integration


def test_the_official_kafka_transport_switches_over_through_the_bridge(clients: ClientSettings) -> None:
    prefix = f"test.bridge.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq"}
    settings = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(settings, 3)
    source = f"{prefix}.openlineage-json"
    ensure_topic(settings.kafka_bootstrap_servers, source, partitions=2)
    transport = KafkaTransport(KafkaConfig(topic=source, config={"bootstrap.servers": settings.kafka_bootstrap_servers},
                                           flush=True))
    client = OpenLineageClient(transport=transport)
    sent = [full_run_event_object() for _ in range(3)]
    for event in sent:
        client.emit(event)
    garbage = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
    garbage.produce(source, key=b"k", value=b"{not json")
    garbage.flush(10)

    first = lineage("bridge", "--topic", source, "--group", f"{prefix}.bridge", "--once", env=env)
    assert "3 events published, 1 records dead-lettered" in first.stdout
    received = decoded_events(settings, settings.events_topic, 3)
    assert sorted(event["run"]["runId"] for _, event in received) == sorted(e.run.runId for e in sent)
    assert {key for key, _ in received} == {partition_key(to_json(sent[0]))}  # the root job's, as the collector
    letters = consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic)
    codec = AvroCodec("dead_letter", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    letter = codec.decode(letters[0].value())
    assert len(letters) == 1 and letter["stage"] == "bridge" and letter["errorClass"] == "not-json"
    assert letter["value"] == b"{not json" and letter["sourceTopic"] == source

    again = lineage("bridge", "--topic", source, "--group", f"{prefix}.bridge", "--once", env=env)
    assert "0 events published, 0 records dead-lettered" in again.stdout
