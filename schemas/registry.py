"""Register the pipeline's Avro schemas (TopicNameStrategy subjects) with a compatibility level, and check them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.wire import RegistryUnavailable, SchemaNotFound

SUBJECT_NOT_FOUND = 40401
SCHEMA_NOT_FOUND = 40403  # also "this schema is not under the subject" of a lookup


def value_subject(topic: str) -> str:
    """TopicNameStrategy: the value schema of `topic` lives under `<topic>-value`."""
    return f"{topic}-value"


@dataclass(frozen=True)
class SubjectReport:
    subject: str
    schema_name: str
    detail: str
    ok: bool


def _latest_exists(client: SchemaRegistryClient, subject: str) -> bool:
    try:
        client.get_latest_version(subject)
        return True
    except SchemaRegistryError as exc:
        if exc.error_code == SUBJECT_NOT_FOUND:  # not any 404: a registry still loading its store answers 404 too
            return False
        raise


def register(
    client: SchemaRegistryClient,
    schemas_by_topic: dict[str, str],
    compatibility: str = "BACKWARD",
) -> list[SubjectReport]:
    """Register each topic's value schema; the compatibility level guards every later change of the subject."""
    reports = []
    for topic, schema_name in schemas_by_topic.items():
        subject = value_subject(topic)
        schema = Schema(schema_text(schema_name), "AVRO")
        existed = _latest_exists(client, subject)
        if existed:  # set the level first so that this very registration is checked against it
            client.set_compatibility(subject, compatibility)
        try:
            schema_id = client.register_schema(subject, schema)
        except SchemaRegistryError as exc:
            reports.append(SubjectReport(subject, schema_name, f"rejected: {exc.error_message}", False))
            continue
        if not existed:
            client.set_compatibility(subject, compatibility)
        reports.append(SubjectReport(subject, schema_name, f"schema id {schema_id}, {compatibility}", True))
    return reports


def ensure_registered(client: SchemaRegistryClient, schemas_by_topic: dict[str, str], register_missing: bool,
                      compatibility: str = "BACKWARD") -> list[SubjectReport]:
    """What a component checks at start, never changing a subject's compatibility level: an existing subject holds
    the project's schema already, or takes it as a new version under its own level; a missing subject is registered
    (with ``compatibility``) only when ``register_missing``. Every other case is a report with ``ok`` False."""
    reports = []
    for topic, schema_name in schemas_by_topic.items():
        subject = value_subject(topic)
        schema = Schema(schema_text(schema_name), "AVRO")
        if not _latest_exists(client, subject):
            if not register_missing:
                reports.append(SubjectReport(subject, schema_name, "not registered (run: lineage schemas register)",
                                             False))
                continue
            reports += register(client, {topic: schema_name}, compatibility)
            continue
        try:
            reports.append(SubjectReport(subject, schema_name,
                                         f"schema id {client.lookup_schema(subject, schema).schema_id}", True))
            continue
        except SchemaRegistryError as exc:
            if exc.error_code not in (SUBJECT_NOT_FOUND, SCHEMA_NOT_FOUND):
                raise
        level = _level(client, subject)
        if not client.test_compatibility(subject, schema):
            reports.append(SubjectReport(subject, schema_name, f"the project's schema is INCOMPATIBLE with the "
                                         f"latest version under the subject's {level}", False))
            continue
        schema_id = client.register_schema(subject, schema)
        reports.append(SubjectReport(subject, schema_name, f"schema id {schema_id} (new version, {level})", True))
    return reports


def _level(client: SchemaRegistryClient, subject: str) -> str:
    try:
        return client.get_compatibility(subject)
    except SchemaRegistryError:  # no level of its own (Confluent: 40408): the registry's global one applies
        return "the registry's global level"


def check(client: SchemaRegistryClient, schemas_by_topic: dict[str, str]) -> list[SubjectReport]:
    """Would the project's current schemas be accepted by the registry under each subject's compatibility level?"""
    reports = []
    for topic, schema_name in schemas_by_topic.items():
        subject = value_subject(topic)
        if not _latest_exists(client, subject):
            reports.append(
                SubjectReport(subject, schema_name, "not registered yet (run: lineage schemas register)", False)
            )
            continue
        level = client.get_compatibility(subject)
        compatible = client.test_compatibility(subject, Schema(schema_text(schema_name), "AVRO"))
        detail = (
            f"compatible with the latest version under {level}"
            if compatible
            else (f"INCOMPATIBLE with the latest version under {level}")
        )
        reports.append(SubjectReport(subject, schema_name, detail, bool(compatible)))
    return reports


def schema_fetcher(client: SchemaRegistryClient) -> Callable[[int], str]:
    """``id -> schema text`` for ``wire.AvroCodec``, telling an unknown id from an unreachable registry."""

    def fetch(schema_id: int) -> str:
        try:
            return client.get_schema(schema_id).schema_str
        except SchemaRegistryError as exc:
            # Only the registry's own "schema not found" code: any other 404 (Apicurio answers 404 while its store
            # loads after a restart), a 5xx or a broken connection is the registry's trouble, retried, never a
            # dead letter for the record.
            if exc.error_code == SCHEMA_NOT_FOUND:
                raise SchemaNotFound(schema_id) from None
            raise RegistryUnavailable(f"schema registry error for id {schema_id}: {exc}") from exc
        except Exception as exc:  # connection refused, timeout, TLS …
            raise RegistryUnavailable(f"schema registry unreachable: {exc}") from exc

    return fetch


def registered_id(client: SchemaRegistryClient, topic: str, schema_name: str) -> int:
    """The id of the project's current ``schema_name`` under the topic's subject (it must be registered)."""
    try:
        return client.lookup_schema(value_subject(topic), Schema(schema_text(schema_name), "AVRO")).schema_id
    except SchemaRegistryError as exc:
        if exc.error_code in (SUBJECT_NOT_FOUND, SCHEMA_NOT_FOUND):
            raise RegistryUnavailable(f"{schema_name} is not registered under {value_subject(topic)}; run "
                                      "`lineage schemas register`") from None
        raise RegistryUnavailable(f"schema registry error: {exc}") from exc
