"""The local stack against its real servers: Kafka, Apicurio Registry (Confluent API), Neo4j, Kafka Connect."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.stack.smoke import ensure_topic
from tests.integration.conftest import consume, lineage

pytestmark = pytest.mark.integration


def test_stack_started_from_a_clean_state_dir(stack_settings: StackSettings) -> None:
    rows = Stack(stack_settings).status()
    assert {row.name: row.state for row in rows} == {"kafka": "up", "neo4j": "up", "registry": "up", "connect": "up"}
    assert (stack_settings.state_dir / "kafka" / "data" / "meta.properties").is_file()  # KRaft storage formatted
    password_file = stack_settings.neo4j_password_file
    assert password_file.stat().st_mode & 0o777 == 0o600
    password = password_file.read_text().strip()
    assert len(password) >= 20
    status = lineage("stack", "status").stdout
    assert password not in status and str(password_file) in status  # where to read it, never the secret itself
    assert "kafka.Kafka" in (stack_settings.state_dir / "logs" / "kafka.log").read_text()  # it logs to a file


def test_kafka_produce_consume_round_trip_keeps_per_key_order(clients: ClientSettings) -> None:
    topic = f"test.roundtrip.{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.kafka_bootstrap_servers, topic, partitions=3)
    producer = Producer(
        {"bootstrap.servers": clients.kafka_bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    delivered = []
    for i in range(30):
        producer.produce(
            topic,
            key=f"run-{i % 3}".encode(),
            value=str(i).encode(),
            on_delivery=lambda err, msg: delivered.append(err),
        )
    assert producer.flush(30) == 0
    assert delivered == [None] * 30
    messages = consume(clients.kafka_bootstrap_servers, topic, 30)
    by_key: dict[bytes, list[int]] = {}
    for message in messages:
        by_key.setdefault(message.key(), []).append(int(message.value()))
    assert sorted(v for values in by_key.values() for v in values) == list(range(30))
    for key, values in by_key.items():
        assert values == sorted(values), f"order broken for {key!r}"


RECORD_V1 = {"type": "record", "name": "Thing", "namespace": "test", "fields": [{"name": "id", "type": "string"}]}


def test_avro_through_the_registry_with_confluent_serializers(clients: ClientSettings) -> None:
    topic = f"test.avro.{uuid.uuid4().hex[:8]}"
    registry = SchemaRegistryClient(clients.registry_config())
    context = SerializationContext(topic, MessageField.VALUE)
    payload = AvroSerializer(registry, json.dumps(RECORD_V1))({"id": "abc"}, context)
    assert payload[0] == 0  # Confluent wire format: magic byte, then the 4-byte schema id
    schema_id = int.from_bytes(payload[1:5], "big")
    registered = registry.get_latest_version(f"{topic}-value")  # TopicNameStrategy subject
    assert registered.schema_id == schema_id
    ensure_topic(clients.kafka_bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": clients.kafka_bootstrap_servers})
    producer.produce(topic, value=payload)
    assert producer.flush(30) == 0
    (message,) = consume(clients.kafka_bootstrap_servers, topic, 1)
    # A deserializer with a fresh client fetches the schema by id from the registry.
    fresh = SchemaRegistryClient(clients.registry_config())
    assert AvroDeserializer(fresh)(message.value(), context) == {"id": "abc"}


def test_backward_compatibility_rejects_an_incompatible_schema(clients: ClientSettings) -> None:
    subject = f"test.compat.{uuid.uuid4().hex[:8]}-value"
    registry = SchemaRegistryClient(clients.registry_config())
    registry.register_schema(subject, Schema(json.dumps(RECORD_V1), "AVRO"))
    registry.set_compatibility(subject, "BACKWARD")
    assert registry.get_compatibility(subject) == "BACKWARD"

    required_field = {**RECORD_V1, "fields": [*RECORD_V1["fields"], {"name": "owner", "type": "string"}]}
    assert registry.test_compatibility(subject, Schema(json.dumps(required_field), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as rejected:
        registry.register_schema(subject, Schema(json.dumps(required_field), "AVRO"))
    assert rejected.value.http_status_code == 409

    optional_field = {
        **RECORD_V1,
        "fields": [*RECORD_V1["fields"], {"name": "owner", "type": ["null", "string"], "default": None}],
    }
    registry.register_schema(subject, Schema(json.dumps(optional_field), "AVRO"))
    assert len(registry.get_versions(subject)) == 2


def test_neo4j_write_and_read_over_bolt_with_auth(clients: ClientSettings) -> None:
    marker = uuid.uuid4().hex
    with GraphDatabase.driver(clients.neo4j_uri, auth=(clients.neo4j_user, clients.neo4j_password)) as driver:
        driver.execute_query("MERGE (d:SmokeDataset {name: $name}) SET d.seen = coalesce(d.seen, 0) + 1", name=marker)
        records, _, _ = driver.execute_query("MATCH (d:SmokeDataset {name: $name}) RETURN d.seen AS seen", name=marker)
        assert [r["seen"] for r in records] == [1]
        driver.execute_query("MATCH (d:SmokeDataset {name: $name}) DELETE d", name=marker)
    with GraphDatabase.driver(clients.neo4j_uri, auth=(clients.neo4j_user, "wrong-password")) as driver:  # noqa: SIM117
        with pytest.raises(AuthError):
            driver.execute_query("RETURN 1")


def test_connector_created_listed_and_running(clients: ClientSettings, tmp_path: Path) -> None:
    source = tmp_path / "lines.txt"
    source.write_text("first line\nsecond line\n")
    name, topic = f"test-file-source-{uuid.uuid4().hex[:8]}", f"test.connect.{uuid.uuid4().hex[:8]}"
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source),
        "topic": topic,
        "tasks.max": "1",
    }
    response = requests.put(f"{clients.connect_url}/connectors/{name}/config", json=config, timeout=30)
    assert response.status_code in (200, 201), response.text
    try:
        assert name in requests.get(f"{clients.connect_url}/connectors", timeout=10).json()
        deadline, state = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            status = requests.get(f"{clients.connect_url}/connectors/{name}/status", timeout=10).json()
            state = status.get("connector", {}).get("state")
            if state == "RUNNING" and status.get("tasks"):
                break
            time.sleep(0.5)
        assert state == "RUNNING"
        values = [m.value() for m in consume(clients.kafka_bootstrap_servers, topic, 2, timeout=60)]
        assert values == [b'"first line"', b'"second line"']  # JsonConverter, schemas disabled
    finally:
        requests.delete(f"{clients.connect_url}/connectors/{name}", timeout=30)


def test_registry_keeps_schemas_across_a_restart(stack_settings: StackSettings, clients: ClientSettings) -> None:
    subject = f"test.durable.{uuid.uuid4().hex[:8]}-value"
    schema_id = SchemaRegistryClient(clients.registry_config()).register_schema(
        subject, Schema(json.dumps(RECORD_V1), "AVRO")
    )
    lineage("stack", "down", "registry")
    lineage("stack", "up", "registry")
    fetched = SchemaRegistryClient(clients.registry_config()).get_schema(schema_id)
    assert json.loads(fetched.schema_str)["name"] == "Thing"  # KafkaSQL storage replayed from Kafka


def test_stack_up_twice_is_harmless(stack_settings: StackSettings) -> None:
    stack = Stack(stack_settings)
    before = {row.name: row.pid for row in stack.status()}
    result = lineage("stack", "up")
    assert "stack is up" in result.stdout
    after = {row.name: row.pid for row in stack.status()}
    assert after == before  # every running process was reused, none restarted
    assert all(row.healthy for row in stack.status())


def test_a_killed_service_is_reported_and_up_repairs_it(stack_settings: StackSettings) -> None:
    stack = Stack(stack_settings)
    pid = stack.running_pid("connect")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while stack.running_pid("connect") is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    status = lineage("stack", "status", check=False)
    assert status.returncode == 1
    connect_line = next(line for line in status.stdout.splitlines() if line.startswith("connect"))
    assert "dead" in connect_line and str(pid) in connect_line
    assert "is gone" in status.stdout
    lineage("stack", "up")
    assert lineage("stack", "status").returncode == 0
    assert stack.running_pid("connect") not in (None, pid)


def test_a_service_that_cannot_start_is_named_with_its_log(tmp_path: Path) -> None:
    # A second, throwaway stack on other ports whose broker cannot start (a heap far too small for the JVM).
    env = {
        "LINEAGE_STATE_DIR": str(tmp_path / "broken"),
        "LINEAGE_KAFKA_PORT": "19092",
        "LINEAGE_KAFKA_CONTROLLER_PORT": "19093",
        "LINEAGE_KAFKA_SASL_PORT": "19094",
        "LINEAGE_KAFKA_HEAP": "1m",
    }
    result = lineage("stack", "up", "kafka", check=False, env=env)
    assert result.returncode == 1
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1
    assert "kafka did not come up" in error_lines[0]
    assert str(tmp_path / "broken" / "logs" / "kafka.log") in error_lines[0]
    lineage("stack", "down", env=env)
