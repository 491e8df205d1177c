"""End-to-end proof that every service of a running stack answers real requests (used by `lineage demo`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from neo4j import GraphDatabase

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import ensure_topic

SMOKE_TOPIC = "lineage.smoke"
SMOKE_SCHEMA = """{"type": "record", "name": "Smoke", "namespace": "kafka_lineage.smoke",
 "fields": [{"name": "id", "type": "string"}]}"""


def kafka_round_trip(bootstrap: str, topic: str, value: bytes, timeout: float = 30.0) -> bytes:
    """Produce `value` (acks=all) and read it back from the topic's end with a fresh consumer group."""
    ensure_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    producer.produce(topic, key=b"smoke", value=value)
    if producer.flush(timeout) != 0:
        raise RuntimeError(f"Kafka did not acknowledge the message on {topic} within {timeout}s")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lineage-smoke-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            if message.value() == value:
                return message.value()
        raise RuntimeError(f"message not read back from {topic} within {timeout}s")
    finally:
        consumer.close()


def prove_stack(settings: ClientSettings) -> Iterator[str]:
    marker = uuid.uuid4().hex
    kafka_round_trip(settings.kafka_bootstrap_servers, SMOKE_TOPIC, marker.encode())
    yield f"Kafka {settings.kafka_bootstrap_servers}: produced and consumed a message on {SMOKE_TOPIC}"

    registry = SchemaRegistryClient(settings.registry_config())
    context = SerializationContext(SMOKE_TOPIC, MessageField.VALUE)
    payload = AvroSerializer(registry, SMOKE_SCHEMA)({"id": marker}, context)
    decoded = AvroDeserializer(registry)(payload, context)
    if decoded != {"id": marker}:
        raise RuntimeError(f"registry round trip changed the record: {decoded!r}")
    yield (
        f"Schema Registry {settings.schema_registry_url}: Avro record serialized with schema id "
        f"{int.from_bytes(payload[1:5], 'big')} and read back"
    )

    with GraphDatabase.driver(settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password)) as driver:
        records, _, _ = driver.execute_query(
            "CALL dbms.components() YIELD name, versions, edition RETURN name, versions[0] AS version, edition"
        )
    component = records[0]
    yield f"Neo4j {settings.neo4j_uri}: {component['name']} {component['version']} {component['edition']} (auth on)"

    plugins = requests.get(f"{settings.connect_url}/connector-plugins", timeout=10).json()
    names = sorted(p["class"].rsplit(".", 1)[-1] for p in plugins)
    yield f"Kafka Connect {settings.connect_url}: plugins {', '.join(names)}"
