"""The collector's cached encode (facet_memo) writes the publisher's bytes and refuses what it refuses."""

from __future__ import annotations

import copy
import io
import json
import uuid
from typing import Any

import fastavro
import pytest

from kafka_lineage.producers.service.collector import decode_body
from kafka_lineage.producers.service.facet_memo import VERIFY_EVENTS, FacetMemo
from kafka_lineage.schemas.avro_schemas import load_schema
from kafka_lineage.schemas.openlineage import InvalidEvent, event_to_record, partition_key, validate_event
from kafka_lineage_devtools.bench_events import run_pairs
from tests.openlineage_samples import full_run_event

SCHEMA = fastavro.parse_schema(load_schema("openlineage_event"))
SCHEMA_ID = 7


class Publisher:
    """Encodes as EventPublisher does (validate, then the Avro record framed with the registry's id), no registry."""

    def __init__(self, alter: bool = False) -> None:
        self.calls = 0
        self.alter = alter

    def encode(self, event: Any) -> tuple[bytes, bytes]:
        self.calls += 1
        validate_event(event)
        buffer = io.BytesIO()
        buffer.write(b"\x00" + SCHEMA_ID.to_bytes(4, "big"))
        fastavro.schemaless_writer(buffer, SCHEMA, event_to_record(event))
        return partition_key(event).encode(), buffer.getvalue() + (b"!" if self.alter else b"")


def _memo(publisher: Publisher) -> FacetMemo:
    memo = FacetMemo(publisher)  # type: ignore[arg-type]
    assert memo.take()
    return memo


def test_repeated_facets_encode_to_the_publishers_bytes_and_stop_being_checked_twice() -> None:
    events = run_pairs(600, "realistic", seed=3, jobs=40)  # 40 jobs: their facets recur
    reference = Publisher()
    expected = [reference.encode(copy.deepcopy(event)) for event in events]
    publisher = Publisher()
    memo = _memo(publisher)
    # as the collector parses them (msgspec): each event its own objects
    got = [memo.encode(decode_body(json.dumps(event).encode(), None, 10**7)[0]) for event in events]
    assert got == expected
    assert memo.enabled and len(memo._by_text) > 0
    assert publisher.calls == 1 + VERIFY_EVENTS  # the first (schema id), then the verified ones only


def test_refusals_are_the_publishers_own() -> None:
    memo = _memo(Publisher())
    good = full_run_event()
    memo.encode(copy.deepcopy(good))
    for _ in range(3):  # its facets are cached by now
        memo.encode({**copy.deepcopy(good), "run": {**good["run"], "runId": str(uuid.uuid4())}})
    bad = {**copy.deepcopy(good), "run": {**good["run"], "runId": "not-a-uuid"}}
    with pytest.raises(InvalidEvent) as cached:
        memo.encode(bad)
    with pytest.raises(InvalidEvent) as plain:
        Publisher().encode(copy.deepcopy(bad))
    assert str(cached.value) == str(plain.value) and "run.runId" in str(cached.value)
    with pytest.raises(InvalidEvent):
        memo.encode(["not", "an", "event"])


def test_a_difference_from_the_publisher_turns_the_cache_off() -> None:
    publisher = Publisher(alter=True)  # as if the cached path wrote other bytes
    memo = _memo(publisher)
    first, second = run_pairs(2, "realistic", seed=5)
    assert memo.encode(first)[1].endswith(b"!") and memo.enabled
    assert memo.encode(second)[1].endswith(b"!")  # the publisher's answer, then never the cache again
    assert not memo.enabled
    memo.release()
    assert not memo.take()


def test_the_cache_is_bounded_and_a_busy_cache_is_not_shared() -> None:
    memo = _memo(Publisher())
    memo.max_chars = 20_000
    for event in run_pairs(400, "realistic", seed=9, jobs=30):
        memo.encode(event)
    assert 0 < memo._chars <= 20_000 and memo._chars == sum(map(len, memo._by_text))
    assert not memo.take()  # held by this test: a second request (the worker thread) encodes without it
    memo.release()
    assert memo.take()


def test_the_body_is_read_as_json_loads_reads_it() -> None:
    for body in (b'{"a": 1.5, "b": 12345678901234567890123, "c": -0.0, "d": "\\ud83d\\ude00", "a": 2}',
                 b'{"s": "\\ud800"}', b'\xef\xbb\xbf{"a": [1e-400]}'):
        assert decode_body(body, None, 10**6) == [json.loads(body.decode("utf-8-sig"))]
    deep = b"[" * 450 + b"]" * 450  # beyond the fast reader's bracket bound: json's own reading
    assert decode_body(deep, None, 10**6) == json.loads(deep)
