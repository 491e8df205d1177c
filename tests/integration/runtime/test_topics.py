"""What a component finds or makes of its topics and schemas at start, on the real Kafka and registry."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import PublishError, ensure_topic, prepare_pipeline, replication_factor
from tests.integration.conftest import lineage

pytestmark = pytest.mark.integration


def _settings(prefix: str, **env: str) -> ClientSettings:
    return ClientSettings.from_env({**os.environ, "LINEAGE_EVENTS_TOPIC": f"{prefix}.events",
                                    "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
                                    "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq",
                                    **env})


def _topic_setting(settings: ClientSettings, topic: str, name: str) -> str:
    admin = AdminClient(settings.kafka_config())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=10)[name].value


def test_topics_are_created_with_their_settings_and_the_raw_topic_keeps_everything(clients: ClientSettings) -> None:
    prefix = f"test.topics.{uuid.uuid4().hex[:8]}"
    settings = _settings(prefix, LINEAGE_TOPIC_RETENTION_MS="86400000", LINEAGE_TOPIC_MIN_INSYNC_REPLICAS="2")
    prepare_pipeline(settings, 2)
    assert _topic_setting(settings, settings.events_topic, "retention.ms") == "-1"
    assert _topic_setting(settings, settings.dlq_topic, "retention.ms") == "86400000"
    assert _topic_setting(settings, settings.normalized_topic, "min.insync.replicas") == "2"  # nothing produced here
    assert replication_factor(settings) == 1  # the local broker's default.replication.factor


def test_a_start_keeps_the_compatibility_an_operator_chose(clients: ClientSettings) -> None:
    prefix = f"test.compat.{uuid.uuid4().hex[:8]}"
    settings = _settings(prefix)
    env = {"LINEAGE_EVENTS_TOPIC": settings.events_topic, "LINEAGE_NORMALIZED_TOPIC": settings.normalized_topic,
           "LINEAGE_DRIFT_TOPIC": settings.drift_topic, "LINEAGE_DLQ_TOPIC": settings.dlq_topic}
    lineage("schemas", "register", "--compatibility", "FULL_TRANSITIVE", env=env)
    prepare_pipeline(settings, 1)  # what every component does when it starts
    client = SchemaRegistryClient(settings.registry_config())
    assert client.get_compatibility(f"{settings.events_topic}-value") == "FULL_TRANSITIVE"


def test_without_permission_to_create_a_start_names_what_is_missing(clients: ClientSettings) -> None:
    prefix = f"test.nocreate.{uuid.uuid4().hex[:8]}"
    settings = _settings(prefix, LINEAGE_CREATE_TOPICS="false")
    with pytest.raises(PublishError, match=f"missing topics: {prefix}.events.*LINEAGE_CREATE_TOPICS"):
        prepare_pipeline(settings, 1)
    for topic in settings.value_schemas():
        ensure_topic(settings.kafka_config(), topic)
    with pytest.raises(PublishError, match=f"{prefix}.events-value: not registered"):
        prepare_pipeline(settings, 1)
