"""Request decoding of the HTTP collector and line parsing of `lineage emit`, without services."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from kafka_lineage.producers.backfill import parse_lines
from kafka_lineage.producers.collector import Rejection, bearer_token_ok, decode_body

LIMIT = 1024 * 1024


def test_single_event_and_batch_and_compressed_bodies() -> None:
    event = {"eventTime": "2024-01-01T00:00:00Z"}
    assert decode_body(json.dumps(event).encode(), None, LIMIT) == [event]
    assert decode_body(json.dumps([event, event]).encode(), "identity", LIMIT) == [event, event]
    assert decode_body(gzip.compress(json.dumps([event]).encode()), "GZIP", LIMIT) == [event]
    assert decode_body(zlib.compress(json.dumps(event).encode()), "deflate", LIMIT) == [event]


@pytest.mark.parametrize(
    ("body", "encoding", "status", "reason"),
    [
        (b"{not json", None, 400, "not valid JSON"),
        (b"\xff\xfe", None, 400, "not valid JSON"),
        (b"[]", None, 400, "empty batch"),
        (b"plain", "gzip", 400, "not valid gzip"),
        (b"{}", "br", 415, "unsupported Content-Encoding 'br'"),
        (gzip.compress(b" " * (LIMIT + 10)), "gzip", 413, "exceeds the limit"),  # a small body that expands
    ],
)
def test_bad_bodies_are_rejected_with_a_reason(body: bytes, encoding: str | None, status: int, reason: str) -> None:
    with pytest.raises(Rejection) as caught:
        decode_body(body, encoding, LIMIT)
    assert caught.value.status == status
    assert reason in caught.value.reason


def test_bearer_token_comparison() -> None:
    assert bearer_token_ok("Bearer s3cret", "s3cret")
    assert bearer_token_ok("bearer s3cret", "s3cret")
    assert not bearer_token_ok("Bearer wrong", "s3cret")
    assert not bearer_token_ok("Basic s3cret", "s3cret")
    assert not bearer_token_ok(None, "s3cret")


def test_ndjson_lines_are_numbered_and_bad_ones_explained() -> None:
    parsed = list(parse_lines(['{"a": 1}\n', "\n", "{oops\n", '{"b": 2}']))
    assert [(n, e) for n, e, problem in parsed if problem is None] == [(1, {"a": 1}), (4, {"b": 2})]
    ((number, event, problem),) = [p for p in parsed if p[2]]
    assert number == 3 and event is None and problem.startswith("not valid JSON")
