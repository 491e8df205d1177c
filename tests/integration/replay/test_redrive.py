"""`lineage dlq redrive` on the real Kafka and registry: dead letters go back to their source topics as the very
bytes they were, filtered by reason, once (a second redrive publishes nothing), and what cannot go back is said."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.wire import AvroCodec
from tests.integration.conftest import consume_all, lineage

pytestmark = pytest.mark.integration


def test_dead_letters_are_redriven_to_their_source_once_by_reason(clients: ClientSettings) -> None:
    prefix = f"test.redrive.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
           "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift"}
    settings = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(settings, 2)
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("dead_letter", registry.schema_fetcher(client))
    letter_id = registry.registered_id(client, settings.dlq_topic, "dead_letter")
    letters = [dead_letter(stage="graph-sink", error_class="neo4j-rejected", error_message="m", key=b"k1",
                           value=b"original normalized bytes", source_topic=settings.normalized_topic,
                           source_partition=0, source_offset=7),
               dead_letter(stage="processor", error_class="invalid-event", error_message="m", key=b"k2",
                           value=b"original raw bytes", source_topic=settings.events_topic, source_partition=1,
                           source_offset=3),
               dead_letter(stage="processor", error_class="too-large", error_message="m", source_topic=None)]
    producer = Producer(settings.kafka_config())
    for letter in letters:
        producer.produce(settings.dlq_topic, key=b"x", value=codec.encode(letter, letter_id))
    producer.produce(settings.dlq_topic, key=b"x", value=b"not a dead letter")
    assert producer.flush(30) == 0

    dry = lineage("dlq", "redrive", "--dry-run", env=env)
    assert f"would redrive 1 dead letters to {settings.events_topic} (reason invalid-event)" in dry.stdout
    assert "1 dead letters of reason too-large hold no original record" in dry.stdout
    assert "1 DLQ records are not dead letters" in dry.stdout
    assert consume_all(settings.kafka_bootstrap_servers, settings.events_topic) == []

    first = lineage("dlq", "redrive", "--reason", "neo4j-rejected", env=env)
    assert f"redrove 1 dead letters to {settings.normalized_topic} (reason neo4j-rejected)" in first.stdout
    assert "2 dead letters outside the filters" in first.stdout
    [normalized] = consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)
    assert (normalized.key(), normalized.value()) == (b"k1", b"original normalized bytes")

    rest = lineage("dlq", "redrive", env=env)
    assert f"redrove 1 dead letters to {settings.events_topic} (reason invalid-event)" in rest.stdout
    assert "1 dead letters were redriven before" in rest.stdout
    again = lineage("dlq", "redrive", env=env)
    assert "redrove nothing" in again.stdout and "2 dead letters were redriven before" in again.stdout
    [raw] = consume_all(settings.kafka_bootstrap_servers, settings.events_topic)
    assert (raw.key(), raw.value()) == (b"k2", b"original raw bytes")
    assert len(consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)) == 1  # not twice
