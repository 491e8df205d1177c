"""Topic settings at creation, and what a component does with the registry at start: pure parts, real error types."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from kafka_lineage.runtime.config import ClientSettings, ConfigError, TopicSettings
from kafka_lineage.runtime.kafka_io import PRODUCER_DEFAULTS, TOPIC_MAX_MESSAGE_BYTES, topic_config
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import RegistryUnavailable, SchemaNotFound


def test_the_raw_topic_keeps_everything_by_default_and_the_rest_follows_the_broker() -> None:
    topics = ClientSettings.from_env({}).topics
    assert topics.replication_factor == -1 and topics.min_insync_replicas is None
    limit = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
    assert topic_config(topics, raw=True) == {**limit, "retention.ms": "-1", "retention.bytes": "-1"}
    assert topic_config(topics, raw=False) == limit
    # one record limit on both sides: what the producer takes, its topic takes (plus the batch framing)
    assert 0 < TOPIC_MAX_MESSAGE_BYTES - int(PRODUCER_DEFAULTS["message.max.bytes"]) <= 1024


def test_topic_settings_from_the_environment() -> None:
    topics = ClientSettings.from_env({"LINEAGE_TOPIC_REPLICATION_FACTOR": "3", "LINEAGE_TOPIC_MIN_INSYNC_REPLICAS": "2",
                                      "LINEAGE_EVENTS_RETENTION_MS": "31536000000",
                                      "LINEAGE_TOPIC_RETENTION_MS": "604800000"}).topics
    assert (topics.replication_factor, topics.min_insync_replicas) == (3, 2)
    assert topic_config(topics, raw=True)["retention.ms"] == "31536000000"
    assert topic_config(topics, raw=False)["retention.ms"] == "604800000"
    assert topic_config(topics, raw=False)["min.insync.replicas"] == "2"
    for key, bad in (("LINEAGE_TOPIC_REPLICATION_FACTOR", "0"), ("LINEAGE_EVENTS_RETENTION_MS", "a week"),
                     ("LINEAGE_CREATE_TOPICS", "maybe")):
        with pytest.raises(ConfigError, match=key):
            ClientSettings.from_env({key: bad})


@pytest.mark.parametrize(("bootstrap", "create"), [
    ("127.0.0.1:9092", True), ("localhost:9092,127.0.0.2:9093", True), ("[::1]:9092", True),
    ("kafka-1.prod:9092", False), ("127.0.0.1:9092,kafka-1.prod:9092", False)])
def test_topics_are_created_by_default_only_against_a_broker_on_this_machine(bootstrap: str, create: bool) -> None:
    assert ClientSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": bootstrap}).topics.create is create
    assert ClientSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                                    "LINEAGE_CREATE_TOPICS": "false" if create else "true"}).topics.create is not create
    assert TopicSettings().create


class _Registry:
    """The SchemaRegistryClient calls ``schema_fetcher`` and ``ensure_registered`` make, answering with real
    SchemaRegistryError objects as a registry would."""

    def __init__(self, error: SchemaRegistryError | None = None, level: str = "FULL_TRANSITIVE",
                 compatible: bool = True, registered: bool = False) -> None:
        self.error, self.level, self.compatible, self.registered = error, level, compatible, registered
        self.changed_levels: list[str] = []
        self.registrations = 0

    def get_schema(self, schema_id: int):
        raise self.error

    def get_latest_version(self, subject: str):
        return object()

    def lookup_schema(self, subject: str, schema):
        if not self.registered:
            raise SchemaRegistryError(404, 40403, "The given schema does not match any schema under the subject")
        return type("Registered", (), {"schema_id": 7})()

    def get_compatibility(self, subject: str) -> str:
        return self.level

    def set_compatibility(self, subject: str, level: str) -> None:
        self.changed_levels.append(level)

    def test_compatibility(self, subject: str, schema) -> bool:
        return self.compatible

    def register_schema(self, subject: str, schema) -> int:
        self.registrations += 1
        return 8


def test_only_the_registrys_schema_not_found_code_makes_an_unknown_id() -> None:
    with pytest.raises(SchemaNotFound):
        registry.schema_fetcher(_Registry(SchemaRegistryError(404, 40403, "Schema 99 not found.")))(99)
    for error in (SchemaRegistryError(404, 404, "HTTP 404 Not Found"),  # a registry loading its store
                  SchemaRegistryError(404, -1, "Unknown"), SchemaRegistryError(500, 50001, "store error"),
                  SchemaRegistryError(503, -1, "unavailable")):
        with pytest.raises(RegistryUnavailable):
            registry.schema_fetcher(_Registry(error))(99)


def test_a_components_start_never_changes_a_subjects_compatibility_level() -> None:
    topics = {"openlineage.events": "openlineage_event"}
    already = _Registry(registered=True)
    assert all(r.ok for r in registry.ensure_registered(already, topics, register_missing=True))
    assert already.changed_levels == [] and already.registrations == 0
    newer = _Registry(compatible=True)
    [report] = registry.ensure_registered(newer, topics, register_missing=False)
    assert report.ok and "new version, FULL_TRANSITIVE" in report.detail and newer.changed_levels == []
    refused = _Registry(compatible=False)
    [report] = registry.ensure_registered(refused, topics, register_missing=True)
    assert not report.ok and "INCOMPATIBLE" in report.detail and refused.registrations == 0
