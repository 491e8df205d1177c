"""Register the pipeline's Avro schemas (TopicNameStrategy subjects) with a compatibility level, and check them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.wire import RegistryUnavailable, SchemaNotFound

SUBJECT_NOT_FOUND = 40401


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
        if exc.error_code == SUBJECT_NOT_FOUND or exc.http_status_code == 404:
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
            if exc.http_status_code == 404:
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
        if exc.http_status_code == 404:
            raise RegistryUnavailable(f"{schema_name} is not registered under {value_subject(topic)}; run "
                                      "`lineage schemas register`") from None
        raise RegistryUnavailable(f"schema registry error: {exc}") from exc
