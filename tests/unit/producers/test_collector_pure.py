"""Request decoding of the HTTP collector and line parsing of `lineage emit`, without services."""

from __future__ import annotations

import gzip
import json
import zlib
from concurrent.futures import Future
from pathlib import Path

import jsonschema_rs
import pytest

from kafka_lineage.producers.service import emit as emit_module
from kafka_lineage.producers.service.collector import Rejection, batch_answer, bearer_token_ok, decode_body
from kafka_lineage.producers.service.emit import emit_lines, open_source, parse_lines
from kafka_lineage.producers.service.intake import message_max_bytes, oversize
from kafka_lineage.schemas.openlineage import InvalidEvent

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


# --- strict JSON, complete compressed streams, record sizes (bad-input suite, collector and `lineage emit`) ---------
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"v": NaN}', "NaN is not a JSON number"),
        (b'{"v": Infinity}', "Infinity is not a JSON number"),
        (b'[{"v": -Infinity}]', "-Infinity is not a JSON number"),
        (b'{"v": 1e400}', "too large"),
        (b'{"a":' * 999 + b"{}" + b"}" * 999, "nested too deeply"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_json_that_only_python_reads_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(Rejection) as caught:
        decode_body(body, None, 10 * LIMIT)
    assert caught.value.status == 400 and reason in caught.value.reason


def test_finite_numbers_and_moderate_nesting_are_fine() -> None:
    assert decode_body(b'{"v": 1.5e300, "w": -0.0}', None, LIMIT) == [{"v": 1.5e300, "w": -0.0}]
    assert decode_body(b'{"a":' * 300 + b"{}" + b"}" * 300, None, LIMIT)


def test_compressed_bodies_must_be_complete() -> None:
    data = json.dumps({"eventTime": "2024-01-01T00:00:00Z"}).encode()
    gz, deflated = gzip.compress(data), zlib.compress(data)
    for body, encoding, reason in ((gz[:-8], "gzip", "truncated gzip body"), (gz[:-1], "gzip", "truncated gzip"),
                                   (deflated[:-4], "deflate", "truncated deflate body"),
                                   (gz + b"garbage", "gzip", "7 bytes after the end"),
                                   (deflated + b"\x00", "deflate", "1 bytes after the end")):
        with pytest.raises(Rejection) as caught:
            decode_body(body, encoding, LIMIT)
        assert (caught.value.status, reason in caught.value.reason) == (400, True), caught.value.reason
    # several gzip members are one gzip body (RFC 1952), within one limit
    assert decode_body(gzip.compress(b"[") + gzip.compress(data) + gzip.compress(b"]"), "gzip", LIMIT) == [
        json.loads(data)]
    with pytest.raises(Rejection) as caught:
        decode_body(gzip.compress(b"[" + b" " * 600) + gzip.compress(b" " * 600 + b"]"), "gzip", 1000)
    assert caught.value.status == 413


def test_oversize_names_the_size_and_the_limit() -> None:
    assert oversize((b"k", b"v" * 100), 1000) is None
    reason = oversize((b"k", b"v" * 2000), 1000)
    assert reason is not None and "2,065 bytes" in reason and "limit of 1,000 bytes" in reason
    assert message_max_bytes() >= 1_000_000


def test_ndjson_bytes_are_decoded_line_by_line() -> None:
    lines = [b'\xef\xbb\xbf{"a": 1}\n', b'{"b": "\xff\xfe"}\n', b'{"c": NaN}\n', b"[" * 5000 + b"]" * 5000 + b"\n",
             b'{"d": 4}\r\n']
    parsed = {number: (event, problem) for number, event, problem in parse_lines(lines)}
    assert parsed[1] == ({"a": 1}, None) and parsed[5] == ({"d": 4}, None)
    assert parsed[2][1].startswith("not valid UTF-8") and "NaN" in parsed[3][1]
    assert "nested too deeply" in parsed[4][1]


class FakePublisher:
    """encode: the event's JSON as the value (InvalidEvent for a non-dict); send: acknowledged at once."""

    topic = "fake"

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def encode(self, event: object) -> tuple[bytes, bytes]:
        if not isinstance(event, dict):
            raise InvalidEvent("event: expected a JSON object")
        return b"k", json.dumps(event).encode()

    def send(self, records: list[tuple[bytes, bytes]]) -> Future[int]:
        self.sent += [value for _, value in records]
        done: Future[int] = Future()
        done.set_result(len(records))
        return done


def test_backfill_publishes_the_lines_before_a_truncated_gzip_file(tmp_path: Path) -> None:
    good = b"".join(json.dumps({"n": i}).encode() + b"\n" for i in range(2000))
    path = tmp_path / "cut.ndjson.gz"
    path.write_bytes(gzip.compress(good + b"x" * 100_000, compresslevel=1)[:-2000])
    publisher = FakePublisher()
    with open_source(str(path)) as source:
        report = emit_lines(source, publisher)  # type: ignore[arg-type]
    # gzip loses what it decompressed in the read that hit the end: the lines it did return are published
    assert 1000 < report.published == len(publisher.sent) and not report.ok
    assert report.failure is not None and f"after line {report.published}:" in report.failure
    assert "ended before" in report.failure


def test_backfill_reports_a_plain_file_named_gz(tmp_path: Path) -> None:
    path = tmp_path / "plain.ndjson.gz"
    path.write_bytes(b'{"n": 1}\n')
    with open_source(str(path)) as source:
        report = emit_lines(source, FakePublisher())  # type: ignore[arg-type]
    assert report.published == 0 and report.failure is not None and "Not a gzipped file" in report.failure


def test_backfill_reports_bad_lines_by_number_and_publishes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emit_module, "message_max_bytes", lambda: 1_000_000)
    lines = [b'{"n": 1}\n', b'{"bad": "\xff"}\n', b"42\n", json.dumps({"big": "x" * 1_100_000}).encode() + b"\n",
             b'{"n": 2}\n']
    publisher = FakePublisher()
    report = emit_lines(lines, publisher)  # type: ignore[arg-type]
    assert report.published == 2 and report.failure is None
    assert [problem.split(":")[0] for problem in report.problems] == ["line 2", "line 3", "line 4"]
    assert "UTF-8" in report.problems[0] and "above the limit" in report.problems[2]


# The 200 response of `POST /lineage/batch` in OpenLineage's OpenAPI document (spec/OpenLineage.yml), transcribed:
# the document is not shipped in any package the build can depend on.
BATCH_RESPONSE_SCHEMA = {
    "type": "object", "required": ["status", "summary"],
    "properties": {
        "status": {"type": "string", "enum": ["success", "partial_success"]},
        "summary": {"type": "object", "required": ["received", "successful", "failed"], "properties": {
            name: {"type": "integer"} for name in ("received", "successful", "failed", "retriable", "non_retriable")}},
        "failed_events": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"}, "reason": {"type": "string"}, "retriable": {"type": "boolean"}}}},
    },
}


@pytest.mark.parametrize("failed", [[], [{"index": 1, "reason": "run.runId: not a UUID", "kind": "invalid"}],
                                    [{"index": i, "reason": "too large", "kind": "too_large"} for i in range(500)]])
def test_batch_answers_follow_the_specs_openapi_document(failed: list[dict]) -> None:
    answer = batch_answer(600, failed)
    jsonschema_rs.validate(BATCH_RESPONSE_SCHEMA, answer)
    assert answer["status"] == ("partial_success" if failed else "success")
    assert answer["summary"]["successful"] + answer["summary"]["failed"] == 600
    assert answer["summary"]["failed"] == len(failed) and len(answer["failed_events"]) <= len(failed)
    with pytest.raises(jsonschema_rs.ValidationError):  # the transcribed schema can fail
        jsonschema_rs.validate(BATCH_RESPONSE_SCHEMA, {**answer, "status": "partial"})
