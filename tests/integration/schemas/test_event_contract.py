"""The event contract against the real registry: subjects registered under BACKWARD, events through Avro."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.avro_schemas import load_schema, schema_text
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from kafka_lineage.schemas.registry import value_subject
from tests.integration.conftest import lineage
from tests.openlineage_samples import dataset_event, full_run_event, job_event

pytestmark = pytest.mark.integration


def test_schemas_register_then_check(clients: ClientSettings) -> None:
    registered = lineage("schemas", "register")
    for topic in clients.value_schemas():
        assert value_subject(topic) in registered.stdout
    client = SchemaRegistryClient(clients.registry_config())
    for topic, name in clients.value_schemas().items():
        assert client.get_compatibility(value_subject(topic)) == "BACKWARD"
        latest = client.get_latest_version(value_subject(topic))
        assert json.loads(latest.schema.schema_str)["name"] == load_schema(name)["name"]
    assert lineage("schemas", "register").returncode == 0  # idempotent: same schema, same id
    checked = lineage("schemas", "check")
    assert checked.stdout.count("compatible with the latest version under BACKWARD") == len(clients.value_schemas())


def test_an_incompatible_event_schema_change_is_caught(clients: ClientSettings) -> None:
    lineage("schemas", "register")
    client = SchemaRegistryClient(clients.registry_config())
    broken = load_schema("openlineage_event") | {"fields": [
        *load_schema("openlineage_event")["fields"], {"name": "tenant", "type": "string"}]}  # no default
    assert client.test_compatibility(value_subject(clients.events_topic), Schema(json.dumps(broken), "AVRO")) is False


@pytest.mark.parametrize("make", [full_run_event, dataset_event, job_event], ids=["run", "dataset", "job"])
def test_client_events_through_the_registry_are_unchanged(clients: ClientSettings, make) -> None:
    lineage("schemas", "register")
    client = SchemaRegistryClient(clients.registry_config())
    context = SerializationContext(clients.events_topic, MessageField.VALUE)
    serializer = AvroSerializer(client, schema_text("openlineage_event"),
                                to_dict=lambda event, _ctx: event_to_record(event),
                                conf={"auto.register.schemas": False, "use.latest.version": True})
    deserializer = AvroDeserializer(client, from_dict=lambda record, _ctx: record_to_event(record))
    event = make()
    payload = serializer(event, context)
    assert payload[0] == 0
    assert deserializer(payload, context) == event
