"""The bridge's sorting of foreign records: events to publish, dead letters naming why, offsets to commit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_lineage.producers.client.publisher import PublishError
from kafka_lineage.producers.service.bridge import sort_out
from kafka_lineage.schemas.openlineage import partition_key, validate_event
from tests.openlineage_samples import full_run_event


class FakeMessage:
    def __init__(self, value: bytes, offset: int, partition: int = 0) -> None:
        self._value, self._offset, self._partition = value, offset, partition

    def topic(self) -> str:
        return "ol-json"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"their-key"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"1")]


class Encoder:
    """What EventPublisher.encode does, without a registry: validate, key by the partition rule."""

    def __init__(self, down: bool = False) -> None:
        self.down = down

    def encode(self, event: Any) -> tuple[bytes, bytes]:
        if self.down:
            raise PublishError("schema registry unavailable")
        validate_event(event)
        return partition_key(event).encode(), json.dumps(event).encode()


def test_events_are_published_and_everything_else_dead_lettered_with_the_reason() -> None:
    event = full_run_event()
    invalid = {**event, "run": {"runId": "not-a-uuid"}}
    messages = [FakeMessage(json.dumps(event).encode(), 7), FakeMessage(b"{nope", 8),
                FakeMessage(json.dumps(invalid).encode(), 9), FakeMessage(b'{"x": NaN}', 3, partition=1),
                FakeMessage(json.dumps(event).encode(), 10)]
    batch = sort_out(messages, Encoder(), max_record_bytes=1_000_000)
    assert [key for key, _ in batch.records] == [partition_key(event).encode()] * 2
    assert [(letter["errorClass"], letter["sourceOffset"]) for _, letter in batch.letters] == [
        ("not-json", 8), ("invalid-event", 9), ("not-json", 3)]
    assert "run.runId" in batch.letters[1][1]["errorMessage"]
    assert batch.letters[0][1]["value"] == b"{nope" and batch.letters[0][1]["headers"] == [{"key": "h", "value": b"1"}]
    assert batch.offsets == {("ol-json", 0): 11, ("ol-json", 1): 4}  # past every record, each decided
    small = sort_out(messages[:1], Encoder(), max_record_bytes=100)
    assert not small.records and small.letters[0][1]["errorClass"] == "too-large"


def test_a_registry_outage_decides_nothing() -> None:
    with pytest.raises(PublishError):
        sort_out([FakeMessage(json.dumps(full_run_event()).encode(), 1)], Encoder(down=True), 1_000_000)
