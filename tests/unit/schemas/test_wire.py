"""Confluent wire format with fastavro: round trip, resolution across versions, and every kind of bad payload."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import fastavro
import pytest

from kafka_lineage.schemas.avro_schemas import load_schema, schema_text
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from kafka_lineage.schemas.wire import (
    HEADER,
    MAGIC,
    AvroCodec,
    FrozenRecord,
    RegistryUnavailable,
    SchemaNotFound,
    WireFormatError,
    _compile_root,
    split_frame,
)
from tests.openlineage_samples import dataset_event, full_run_event, job_event

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
    assert split_frame(payload)[0] == 1 and split_frame(payload, body=False) == (1, b"")
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


# --- the plain writer: fastavro's bytes, or fastavro itself --------------------------------------------------------
def _fastavro(codec: AvroCodec, record: dict, schema_id: int = 1) -> bytes:
    buffer = io.BytesIO()
    buffer.write(HEADER.pack(MAGIC, schema_id))
    fastavro.schemaless_writer(buffer, codec._reader, record)
    return buffer.getvalue()


def _dead_letter(**changes) -> dict:
    return dead_letter(stage="processor", error_class="invalid-event", error_message="run.runId: ü " + "x" * 9000,
                       key=b"k", value=b"\x00" * 300, headers=[("h", b"v"), ("n", None)], source_topic="events",
                       source_partition=2**31 - 1, source_offset=-(2**40), failed_at_ms=1_714_521_600_000) | changes


@pytest.mark.parametrize("make", [full_run_event, dataset_event, job_event], ids=["run", "dataset", "job"])
def test_plain_writer_writes_fastavros_bytes(make) -> None:
    event = make()
    event["custom"] = {"big": 2**70, "neg": -1, "text": "\u2603" * 5000}  # multi-byte varints, long strings
    record = event_to_record(event)
    assert CODEC.encode(record, 1) == _fastavro(CODEC, record)
    frozen = {**record, "job": (record["job"][0], FrozenRecord(record["job"][1]))} if "job" in event else record
    assert CODEC.encode(frozen, 1) == CODEC.encode(frozen, 1) == _fastavro(CODEC, record)
    codec = AvroCodec("dead_letter", _registry({}))
    for letter in (_dead_letter(), _dead_letter(key=None, value=None, headers=[], source_offset=None)):
        assert codec.encode(letter, 7) == _fastavro(codec, letter, 7)


def test_frozen_records_are_encoded_once() -> None:
    record = event_to_record(full_run_event())
    job = FrozenRecord(record["job"][1])
    CODEC.encode({**record, "job": (record["job"][0], job)}, 1)
    assert list(job.encoded) == ["io.kafka_lineage.openlineage.Job"]
    job.encoded["io.kafka_lineage.openlineage.Job"] = b"\x02x"  # what it holds is what is written
    assert CODEC.encode({**record, "job": (record["job"][0], job)}, 1) != _fastavro(CODEC, record)


@pytest.mark.parametrize("change", [
    {"failedAt": datetime(2024, 5, 1, tzinfo=UTC)},  # a datetime for timestamp-millis: fastavro converts it
    {"sourcePartition": True},  # bool where an int goes: fastavro takes it
    {"sourcePartition": 2**31},  # out of the int range: fastavro's error
    {"stage": None},  # no null in the type: fastavro's error
    {"headers": ({"key": "h", "value": None},)},  # a tuple for an array: fastavro takes it
    {"sourceTopic": ("string", "events")},  # fastavro's union hint
    {"sourceTopic": ("int", "events")},  # a hint naming no branch: fastavro's error
    {"errorMessage": "lone \ud800"},  # not UTF-8: fastavro's error
])
def test_anything_unusual_is_fastavros(change: dict) -> None:
    codec = AvroCodec("dead_letter", _registry({}))
    letter = _dead_letter(**change)
    try:
        expected = _fastavro(codec, letter, 7)
    except Exception as error:  # whatever fastavro raises, encode raises too
        with pytest.raises(type(error)):
            codec.encode(letter, 7)
    else:
        assert codec.encode(letter, 7) == expected


def test_missing_fields_are_written_as_fastavro_writes_them() -> None:
    codec = AvroCodec("dead_letter", _registry({}))
    letter = _dead_letter()
    for name in ("key", "headers", "sourceTopic", "origin"):  # defaults
        partial = {k: v for k, v in letter.items() if k != name}
        assert codec.encode(partial, 7) == _fastavro(codec, partial, 7)
    with pytest.raises(ValueError):
        codec.encode({k: v for k, v in letter.items() if k != "stage"}, 7)


def test_schemas_the_plain_writer_leaves_to_fastavro() -> None:
    assert _compile_root(fastavro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "x", "type": "double"}]})) is None
    assert _compile_root(fastavro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "x", "type": ["string", "long"]}]})) is None
    for name in ("openlineage_event", "normalized_event", "dead_letter", "schema_drift_alert"):
        assert _compile_root(fastavro.parse_schema(load_schema(name))) is not None


def _random_datum(schema, named: dict, rng) -> object:
    """A random value of a parsed schema, as plain Python (what the processor and sinks build)."""
    if isinstance(schema, str):
        schema = named.get(schema, {"type": schema})
    if isinstance(schema, list):
        branch = rng.choice(schema)
        return None if branch == "null" else _random_datum(branch, named, rng)
    kind = schema["type"]
    if isinstance(kind, dict | list):
        return _random_datum(kind, named, rng)
    if kind == "string":
        return "aZ\u00fc\u2603\U0001f4e6 "[rng.randrange(6):] * rng.choice([0, 1, 20, 1500])  # 1- to 4-byte UTF-8
    if kind in ("int", "long"):
        bits = 31 if kind == "int" else 63
        return rng.choice([0, -1, 63, -64, 64, 8191, 8192, 2**bits - 1, -(2**bits), rng.randrange(-(2**bits), 2**bits)])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 5, 200])))
    if kind == "enum":
        return rng.choice(schema["symbols"])
    if kind == "array":
        return [_random_datum(schema["items"], named, rng) for _ in range(rng.choice([0, 1, 3]))]
    if kind == "map":
        return {f"k{i}": _random_datum(schema["values"], named, rng) for i in range(rng.choice([0, 1, 3]))}
    assert kind == "record"
    return {field["name"]: _random_datum(field["type"], named, rng) for field in schema["fields"]
            if "default" not in field or rng.random() < 0.8}  # fields with a default are sometimes left out


@pytest.mark.parametrize("name", ["openlineage_event", "normalized_event", "dead_letter", "schema_drift_alert"])
def test_plain_writer_matches_fastavro_on_random_records(name: str) -> None:
    import random

    codec = AvroCodec(name, _registry({}))
    rng = random.Random(name)
    for _ in range(150):
        record = _random_datum(codec._reader, codec._reader["__named_schemas"], rng)
        assert codec.encode(record, 9) == _fastavro(codec, record, 9)
