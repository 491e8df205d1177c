"""Validate, serialize and publish OpenLineage events to the events topic; one shell shared by every emitter.

``encode`` turns an event into (key, Confluent-framed Avro value) or raises ``InvalidEvent`` naming the field;
``send`` produces a batch of encoded records with an idempotent producer (acks=all) and returns a future that
completes only when Kafka has acknowledged every record of the batch — the HTTP collector answers 2xx on that,
``lineage emit`` waits on it. A background thread serves librdkafka's delivery callbacks so callers never have to
poll. Every record carries the stamp of the rules that validated it (``schemas.validation_stamp``): the processor
does not validate it again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import requests
from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_lineage.runtime.config import REGISTRY_TIMEOUT_SECONDS, ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, DeliveryCallback, PublishError
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import (
    InvalidEvent,
    event_to_record,
    partition_key,
    unwritable_path,
    validate_event,
)
from kafka_lineage.schemas.registry import value_subject
from kafka_lineage.schemas.validation_stamp import STAMPED

# A minimal valid event: if it serializes, the registry is reachable and holds the schema.
KNOWN_GOOD_EVENT: dict[str, Any] = {
    "eventTime": "1970-01-01T00:00:00Z",
    "producer": "kafka_lineage",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": "00000000-0000-0000-0000-000000000000"},
    "job": {"namespace": "kafka_lineage", "name": "serializer-priming"},
}


class EventPublisher:
    def __init__(self, producer_config: dict[str, str], registry_config: dict[str, str], topic: str) -> None:
        self.topic = topic
        self._kafka = AckingProducer(producer_config)
        self._registry = SchemaRegistryClient({"timeout": REGISTRY_TIMEOUT_SECONDS, **registry_config})
        self._serialize = AvroSerializer(
            self._registry,
            schema_text("openlineage_event"),
            to_dict=lambda event, _ctx: event_to_record(event),
            # The registry is the contract: an emitter never registers or changes a schema by accident. It writes
            # with its own schema version, looked up once by its id under the subject (use.latest.version would
            # re-run data-contract rule and tag processing over the whole schema on every event: ~70 µs each).
            # TopicNameStrategy, named: the client's default strategy first asks the registry for "associations"
            # (an endpoint Apicurio does not have) before falling back to it.
            conf={"auto.register.schemas": False, "use.latest.version": False,
                  "subject.name.strategy": topic_subject_name_strategy},
        )
        self._context = SerializationContext(topic, MessageField.VALUE)

    @classmethod
    def from_settings(cls, settings: ClientSettings, topic: str | None = None,
                      producer: dict[str, str] | None = None) -> EventPublisher:
        """``producer``: librdkafka settings over the pipeline's (the collector bounds its queue and delivery time)."""
        return cls(
            settings.kafka_config(producer),
            settings.registry_config(),
            topic or settings.events_topic,
        )

    def encode(self, event: Any) -> tuple[bytes, bytes]:
        """(partition key, Avro value) of a valid event; raises InvalidEvent naming the offending field, or
        PublishError when the registry cannot be asked (the event is fine: retry later)."""
        validate_event(event)
        try:
            value = self._serialize(event, self._context)
        except (TypeError, ValueError, RecursionError, UnicodeError) as exc:
            if isinstance(exc, (requests.RequestException, json.JSONDecodeError)):  # the registry's answer
                raise PublishError(f"cannot serialize with the registered schema of {self.topic}: {exc}") from exc
            raise InvalidEvent(f"{unwritable_path(event)}: cannot be written as JSON ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
        except Exception as exc:  # the registry lookup (cached after the first event) failed — or this event did
            if self._serializes(KNOWN_GOOD_EVENT):  # the registry answers: the failure is this event's
                raise InvalidEvent(f"event: cannot be written as Avro ({type(exc).__name__}: {str(exc)[:200]})"
                                   ) from None
            raise PublishError(f"cannot serialize with the registered schema of {self.topic}: {exc}") from exc
        return partition_key(event).encode(), value

    def _serializes(self, event: dict[str, Any]) -> bool:
        try:
            self._serialize(event, self._context)
        except Exception:
            return False
        return True

    def produce(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        """Queue one record ``encode`` made: stamped as validated (``schemas.validation_stamp``)."""
        self._kafka.produce(self.topic, key, value, on_delivery, headers=STAMPED)

    def send(self, records: Sequence[tuple[bytes, bytes]], wait_for_room: bool = True) -> Future[int]:
        """Produce every record (each one ``encode`` made: they go out stamped as validated); the future gives their
        count once all are acknowledged, or a PublishError (``QueueFull`` at once when the local queue is full and
        ``wait_for_room`` is False)."""
        return self._kafka.send(self.topic, records, wait_for_room, STAMPED)

    @property
    def kafka_down(self) -> bool:
        """Every broker was unreachable at last report, and nothing has been delivered since."""
        return self._kafka.brokers_down

    def check_connected(self, timeout: float = 5.0) -> None:
        """Raise unless the broker answers for the topic and the registry holds the topic's value schema."""
        metadata = self._kafka.producer.list_topics(self.topic, timeout=timeout)
        if self.topic not in metadata.topics or metadata.topics[self.topic].error is not None:
            raise PublishError(f"topic {self.topic} is not available on the Kafka cluster")
        self._registry.get_latest_version(value_subject(self.topic))

    def flush(self, timeout: float) -> int:
        """Wait for outstanding deliveries; the number still unacknowledged."""
        return self._kafka.flush(timeout)

    def close(self, timeout: float = 30.0) -> int:
        return self._kafka.close(timeout)
