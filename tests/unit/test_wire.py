"""Confluent wire format with fastavro: round trip, resolution across versions, and every kind of bad payload."""

from __future__ import annotations

import json

import fastavro
import pytest
from kafka_lineage.schemas.avro_schemas import load_schema, schema_text
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from kafka_lineage.schemas.wire import AvroCodec, RegistryUnavailable, SchemaNotFound, WireFormatError, split_frame

from tests.openlineage_samples import full_run_event

OLDER = load_schema("openlineage_event") | {
    "fields": [f for f in load_schema("openlineage_event")["fields"] if f["name"] != "absent"]}


def _registry(schemas: dict[int, str]):
    def fetch(schema_id: int) -> str:
        if schema_id not in schemas:
            raise SchemaNotFound(schema_id)
        return schemas[schema_id]
    return fetch


CODEC = AvroCodec("openlineage_event", _registry({1: schema_text("openlineage_event"), 2: json.dumps(OLDER),
                                                  3: '"string"', 4: "not json"}))


def test_round_trip_and_header() -> None:
    event = full_run_event()
    payload = CODEC.encode(event_to_record(event), 1)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"
    assert split_frame(payload)[0] == 1
    assert record_to_event(CODEC.decode(payload)) == event


def test_records_of_an_older_writer_schema_resolve_into_the_current_one() -> None:
    older = AvroCodec("openlineage_event", _registry({}))
    older._reader = fastavro.parse_schema(OLDER)  # a producer still on the previous version
    record = event_to_record(full_run_event())
    record.pop("absent")
    decoded = CODEC.decode(older.encode(record, 2))
    assert decoded["absent"] == []  # the new field's default


@pytest.mark.parametrize(
    ("payload", "error_class"),
    [
        (None, "empty-payload"),
        (b"", "empty-payload"),
        (b'{"eventTime": "2024"}', "bad-magic-byte"),
        (b"\x00\x00\x01", "truncated"),
        (b"\x00\x00\x00\x00\x09" + b"\x02", "unknown-schema-id"),
        (b"\x00\x00\x00\x00\x03" + b"\x06abc", "incompatible-schema"),
        (b"\x00\x00\x00\x00\x04" + b"\x06abc", "incompatible-schema"),
    ],
)
def test_bad_payloads_are_classified(payload: bytes | None, error_class: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        CODEC.decode(payload)
    assert caught.value.error_class == error_class


def test_truncated_and_padded_bodies() -> None:
    payload = CODEC.encode(event_to_record(full_run_event()), 1)
    for cut in (6, len(payload) // 2, len(payload) - 1):
        with pytest.raises(WireFormatError) as caught:
            CODEC.decode(payload[:cut])
        assert caught.value.error_class in ("truncated", "undecodable")
    with pytest.raises(WireFormatError) as caught:
        CODEC.decode(payload + b"\x00")
    assert caught.value.error_class == "trailing-bytes"


def test_an_unreachable_registry_is_not_the_records_fault() -> None:
    def down(_schema_id: int) -> str:
        raise RegistryUnavailable("connection refused")

    codec = AvroCodec("openlineage_event", down)
    with pytest.raises(RegistryUnavailable):
        codec.decode(CODEC.encode(event_to_record(full_run_event()), 1))
