"""Bad input on every surface of the pipeline, against the real stack (issue 6, item 5).

Four surfaces: the emitter API (``EventPublisher.encode``, ``KafkaAvroTransport``, the hooks), the HTTP collector,
the raw events topic (read by ``lineage processor``) and the CLI. Each case in the tables below is one kind of bad
input on one surface and the outcome it must have: a clear error naming the problem (``InvalidEvent``, an HTTP status
with a reason, one line on stderr and exit 1), a DLQ record with ``errorClass``/``errorMessage`` and the record's
source, or — for odd but valid input (hostile names, ancient times, unknown facets) — acceptance, with the event
delivered unchanged and, for hostile names, written to Neo4j exactly as sent without touching anything else.

Cost: one pipeline for the module (processor + graph sink + collector on topics of its own), started once. Every
topic record and every CLI run is sent at the start and checked later, while the emitter and collector cases run.
Good events go between the bad ones on every surface; the last tests check that each came out of the processor
exactly once and unchanged, and that the DLQ holds exactly the bad records. Inputs that stop a processor (known
bugs) get processors of their own, so they cannot take the shared one down. Known bugs are xfail(strict=True).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from openlineage.client import OpenLineageClient

from kafka_lineage.graph.driver import driver_for, write_events
from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.queries import Reached, ReachedField, field_lineage, upstream
from kafka_lineage.producers.client.hooks import lineage_task, sql_task
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import InvalidEvent, event_to_record, record_to_event
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import (
    ChildProcess,
    collector_process,
    pipeline_env,
    processor_process,
    sink_process,
)
from kafka_lineage_devtools.stack.smoke import ensure_topic
from tests.bad_inputs import (
    FUTURE_CONTENT,
    HOSTILE_NAMES,
    INVALID_CONTENT,
    PRODUCER,
    PYTHON_ONLY,
    VALID_CONTENT,
    Body,
    Content,
    avro_string,
    big_facet,
    deflate_body,
    dumps,
    event,
    frame,
    gzip_body,
    json_body,
    nested_text,
    zigzag,
)

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
NS = f"bad-input-{RUN}"  # job namespace of every event of this module (hostile ones: NS.hostile.<surface>)
TOKEN = f"token-{RUN}"
MAX_BYTES = 4_000_000  # the collector's body limit here: a 1.2 MB event fits, the bombs do not
DEADLINE_SECONDS = 150  # the longest the module waits for the pipeline to show an outcome
OL = "openlineage_event"


# --- outcomes ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refused:
    """Refused as an invalid event, with a reason that names ``field``."""

    field: str


@dataclass(frozen=True)
class Intact:
    """Accepted; the event comes out of the processor unchanged."""


@dataclass(frozen=True)
class Status:
    """The collector answers ``code``; its JSON reason contains ``text``."""

    code: int
    text: str = ""


@dataclass(frozen=True)
class Dead:
    """One processor DLQ record, errorClass one of ``classes``, errorMessage containing ``text``."""

    classes: frozenset[str]
    text: str = ""


def dead(*classes: str, text: str = "") -> Dead:
    return Dead(frozenset(classes), text)


# Classes for a corrupt Avro body: which one fastavro reports depends on where the bytes stop making sense.
CORRUPT_BODY = ("truncated", "undecodable", "trailing-bytes", "incompatible-schema")


@dataclass(frozen=True)
class Case:
    surface: str  # emitter | collector | topic | cli
    kind: str  # the kind of bad input; the same kind on several surfaces counts once
    build: Callable[..., Any]
    expect: Any
    bug: str | None = None  # a known product bug: xfail(strict=True, reason=bug)

    @property
    def id(self) -> str:
        return f"{self.surface}:{self.kind}"

    def param(self) -> Any:
        marks = [pytest.mark.xfail(strict=True, reason=self.bug)] if self.bug else []
        return pytest.param(self, id=self.id, marks=marks)


def content_case(surface: str, kind: str, content: Content) -> Case:
    return Case(surface, kind, content.build, Refused(content.field) if content.field else Intact(), content.bug)


# === the emitter API =================================================================================================
EMITTER_CASES = [content_case("emitter", kind, content)
                 for kind, content in {**INVALID_CONTENT, **VALID_CONTENT, **FUTURE_CONTENT, **PYTHON_ONLY}.items()]
# Hooks (producers/hooks): a mistake in the author's call raises at once, naming it (documented in hooks/runs.py).
HOOK_CASES = [
    Case("emitter", "hook-blank-job-name", lambda: lineage_task("  "), "job_name"),
    Case("emitter", "hook-malformed-dataset-tuple", lambda: lineage_task("j", inputs=[("only-one",)]),
         "dataset tuple"),
    Case("emitter", "hook-control-characters-in-path", lambda: lineage_task("j", inputs=["/data/a\x00b.csv"]),
         "control characters"),
    Case("emitter", "hook-unknown-sql-dialect", lambda: sql_task("SELECT 1", dialect="klingon",
                                                                 url="jdbc:postgresql://db:5432/shop", job_name="j"),
         "unknown SQL dialect"),
]


# === the HTTP collector ==============================================================================================
def _good_bytes(name: str) -> bytes:
    return dumps(event(NS, name))


def _bomb(size: int = 64_000_000) -> bytes:
    return b"[" + b" " * size + b"]"


def _cut_gzip(data: bytes, keep: Callable[[int], int]) -> Body:
    body = gzip_body(data)
    return Body(body.data[: keep(len(body.data))], body.headers)


def _gzip_with_bad_crc(data: bytes) -> Body:
    body = bytearray(gzip_body(data).data)
    body[-8:-4] = bytes(4)  # the CRC-32 of the data, zeroed
    return Body(bytes(body), {"Content-Encoding": "gzip"})


def _auth(value: str | None) -> Callable[[str, str], Body]:
    def build(_ns: str, name: str) -> Body:
        headers = {"Content-Type": "application/json", "X-No-Default-Auth": "1"}
        return Body(_good_bytes(name), headers | ({"Authorization": value} if value is not None else {}))

    return build


def _batch(count: int, bad_index: int | None = None) -> Callable[[str, str], Body]:
    def build(ns: str, name: str) -> Body:
        events = [event(ns, f"{name}/{i}") for i in range(count)]
        if bad_index is not None:
            events[bad_index]["run"]["runId"] = "not-a-uuid"
        return json_body(events)

    return build


def _duplicate_keys(ns: str, name: str) -> Body:
    first = _good_bytes(name)[:-1]  # the event's JSON without its closing brace, then the same keys again
    return Body(first + b', "eventType": "COMPLETE", "run": {"runId": "' + str(uuid.uuid4()).encode() + b'"}}')


def _nan_facet(ns: str, name: str) -> Body:
    payload = event(ns, name, run={"runId": str(uuid.uuid4()),
                                   "facets": {"m": {"_producer": PRODUCER, "_schemaURL": "u", "v": 1}}})
    return Body(dumps(payload).replace(b'"v": 1', b'"v": NaN'))



COLLECTOR_SPECIFIC = [
    # bodies that are not JSON
    Case("collector", "empty-body", lambda ns, n: Body(b""), Status(400, "not valid JSON")),
    Case("collector", "whitespace-body", lambda ns, n: Body(b" \r\n\t "), Status(400, "not valid JSON")),
    Case("collector", "malformed-json", lambda ns, n: Body(b'{"eventType": "START", nope'),
         Status(400, "not valid JSON")),
    Case("collector", "truncated-json", lambda ns, n: Body(_good_bytes(n)[:-7]), Status(400, "not valid JSON")),
    Case("collector", "python-literal-instead-of-json", lambda ns, n: Body(repr(event(ns, n)).encode()),
         Status(400, "not valid JSON")),
    Case("collector", "xml-body", lambda ns, n: Body(b"<event type='START'/>", {"Content-Type": "application/xml"}),
         Status(400, "not valid JSON")),
    Case("collector", "ndjson-body", lambda ns, n: Body(_good_bytes(n) + b"\n" + _good_bytes(n)),
         Status(400, "not valid JSON")),
    Case("collector", "invalid-utf8", lambda ns, n: Body(_good_bytes(n).replace(b'"START"', b'"ST\xff\xfeRT"')),
         Status(400, "not valid JSON")),
    Case("collector", "nan-literal", _nan_facet, Status(400, "NaN is not a JSON number")),
    Case("collector", "deep-nesting-1000-levels", lambda ns, n: Body(
        b'{"eventType": "START", "x": ' + nested_text(1000).encode() + b"}"), Status(400, "nested too deeply")),
    Case("collector", "deep-nesting-100k-levels", lambda ns, n: Body(b"[" * 100_000 + b"]" * 100_000),
         Status(400, "nested too deeply")),
    # JSON that is neither an event nor a batch of events
    Case("collector", "number-body", lambda ns, n: Body(b"42"), Status(400, "expected a JSON object, got int")),
    Case("collector", "string-body", lambda ns, n: Body(b'"START"'), Status(400, "expected a JSON object, got str")),
    Case("collector", "null-body", lambda ns, n: Body(b"null"), Status(400, "expected a JSON object, got NoneType")),
    Case("collector", "boolean-body", lambda ns, n: Body(b"true"), Status(400, "expected a JSON object, got bool")),
    Case("collector", "array-of-numbers", lambda ns, n: Body(b"[1, 2]"), Status(400, "2 of 2 events are invalid")),
    Case("collector", "nested-array-batch", lambda ns, n: json_body([[event(ns, n)]]),
         Status(400, "expected a JSON object, got list")),
    Case("collector", "empty-batch", lambda ns, n: Body(b"[]"), Status(400, "empty batch")),
    Case("collector", "batch-with-one-non-object", lambda ns, n: json_body([event(ns, n), 42]),
         Status(400, "1 of 2 event is invalid")),
    # content encodings
    Case("collector", "gzip-header-plain-body", lambda ns, n: Body(_good_bytes(n), {"Content-Encoding": "gzip"}),
         Status(400, "not valid gzip")),
    Case("collector", "deflate-header-gzip-body",
         lambda ns, n: Body(gzip.compress(_good_bytes(n)), {"Content-Encoding": "deflate"}),
         Status(400, "not valid deflate")),
    Case("collector", "unsupported-content-encoding", lambda ns, n: Body(_good_bytes(n), {"Content-Encoding": "br"}),
         Status(415, "unsupported Content-Encoding 'br'")),
    Case("collector", "stacked-content-encodings",
         lambda ns, n: Body(gzip.compress(_good_bytes(n)), {"Content-Encoding": "gzip, identity"}),
         Status(415, "unsupported Content-Encoding")),
    Case("collector", "truncated-gzip", lambda ns, n: _cut_gzip(_good_bytes(n), lambda size: size // 2),
         Status(400)),
    Case("collector", "gzip-cut-before-trailer", lambda ns, n: _cut_gzip(_good_bytes(n), lambda size: size - 8),
         Status(400, "truncated gzip body")),
    Case("collector", "gzip-with-trailing-garbage",
         lambda ns, n: Body(gzip.compress(_good_bytes(n)) + b"garbage", {"Content-Encoding": "gzip"}),
         Status(400, "bytes after the end of the compressed stream")),
    Case("collector", "gzip-bad-crc", lambda ns, n: _gzip_with_bad_crc(_good_bytes(n)),
         Status(400, "not valid gzip")),
    Case("collector", "gzip-bomb", lambda ns, n: gzip_body(_bomb()), Status(413, f"limit of {MAX_BYTES} bytes")),
    Case("collector", "deflate-bomb", lambda ns, n: deflate_body(_bomb()), Status(413, f"limit of {MAX_BYTES} bytes")),
    Case("collector", "body-over-size-limit", lambda ns, n: Body(b"[" + b" " * (MAX_BYTES + 10) + b"]"),
         Status(413, f"limit of {MAX_BYTES} bytes")),
    # authentication, method, path
    Case("collector", "missing-bearer-token", _auth(None), Status(401, "bearer token")),
    Case("collector", "wrong-bearer-token", _auth("Bearer not-the-token"), Status(401, "bearer token")),
    Case("collector", "basic-auth-instead-of-bearer", _auth(f"Basic {TOKEN}"), Status(401, "bearer token")),
    Case("collector", "get-instead-of-post", lambda ns, n: Body(b"", method="GET"), Status(405)),
    Case("collector", "unknown-path", lambda ns, n: Body(_good_bytes(n), path="/api/v2/lineage"), Status(404)),
    # batches
    Case("collector", "huge-batch-2000-events", _batch(2000), Intact()),
    Case("collector", "huge-batch-with-one-invalid-event", _batch(2000, bad_index=1234),
         Status(400, '1 of 2000 event is invalid; nothing was published", "errors": [{"index": 1234')),
    Case("collector", "batch-of-100k-non-objects", lambda ns, n: Body(b"[" + b",".join([b"1"] * 100_000) + b"]"),
         Status(413, "more than 10,000 events in one request")),
    Case("collector", "batch-of-9000-non-objects", lambda ns, n: Body(b"[" + b",".join([b"1"] * 9_000) + b"]"),
         Status(400, "9000 of 9000 events are invalid; nothing was published (the first 100 are listed)")),
    Case("collector", "gzip-bomb-of-empty-objects",  # ~9 KB on the wire, 3.6 MB of 1.2 million events inside
         lambda ns, n: gzip_body(b"[" + b",".join([b"{}"] * 1_200_000) + b"]"),
         Status(413, "more than 10,000 events in one request")),
    # odd but valid
    Case("collector", "duplicate-keys-last-wins", _duplicate_keys, Intact()),
    Case("collector", "utf8-byte-order-mark", lambda ns, n: Body(b"\xef\xbb\xbf" + _good_bytes(n)), Intact()),
    Case("collector", "event-over-1mb", lambda ns, n: event(ns, n, run={"runId": str(uuid.uuid4()),
                                                                         "facets": {"big": big_facet()}}),
         Intact()),
    Case("collector", "lone-surrogate-in-facet", PYTHON_ONLY["lone-surrogate-in-facet"].build,
         Refused("run.facets.acme")),
]
COLLECTOR_CASES = [
    *(content_case("collector", kind, content) for kind, content in {**INVALID_CONTENT, **VALID_CONTENT}.items()),
    *COLLECTOR_SPECIFIC,
]


# === the raw events topic ============================================================================================
@dataclass
class TopicContext:
    """What topic records are built from: a good event's framed Avro and the registry ids of the subjects."""

    good: bytes
    event_id: int
    dead_letter_id: int
    normalized_id: int
    json_schema_id: int
    codec: AvroCodec  # openlineage_event, to write valid Avro of invalid events

    def avro(self, payload: dict, **override: Any) -> bytes:
        """Valid Avro of ``payload``; ``override``: top-level keys its ``extra`` JSON replaces when decoded."""
        record = event_to_record(payload)
        if override:
            record["extra"] = json.dumps(override)
        return self.codec.encode(record, self.event_id)

    def with_facet_text(self, kind: str, facet: str, text: str) -> tuple[bytes, dict | None]:
        """An event of job ``topic/<kind>`` whose run facet ``facet`` travels as ``text`` (Avro holds facets as
        JSON text), and the event that stands for (None when ``text`` is not JSON)."""
        payload = event(NS, f"topic/{kind}")
        record = event_to_record(payload)
        record["run"] = (record["run"][0], dict(record["run"][1], facets={facet: text}, absent=[]))
        try:
            payload["run"]["facets"] = {facet: json.loads(text)}
        except (ValueError, RecursionError):
            payload = None
        return self.codec.encode(record, self.event_id), payload

    def header(self) -> bytes:
        """An event body's three leading strings (eventTime, producer, schemaURL)."""
        return avro_string(b"2024-05-01T12:00:00Z") + avro_string(PRODUCER.encode()) + avro_string(b"u")


def _content_on_topic(kind: str) -> Case:
    content = INVALID_CONTENT.get(kind) or VALID_CONTENT.get(kind) or FUTURE_CONTENT[kind]

    def build(ctx: TopicContext) -> tuple[bytes, dict]:
        payload = content.build(NS, f"topic/{kind}")
        return ctx.avro(payload), payload

    if kind in FUTURE_CONTENT:
        return Case("topic", kind, build, dead("event-time-in-future", text="ahead"))
    return Case("topic", kind, build, dead("invalid-event", text=content.field) if content.field else Intact())


def _override(kind: str, **override: Any) -> Callable[[TopicContext], bytes]:
    return lambda ctx: ctx.avro(event(NS, f"topic/{kind}"), **override)


def _extra(kind: str, extra: str) -> Callable[[TopicContext], bytes]:
    return lambda ctx: ctx.codec.encode({**event_to_record(event(NS, f"topic/{kind}")), "extra": extra},
                                        ctx.event_id)


# Events the Avro schema can carry (a required string cannot be left out: those kinds use an ``extra`` override).
TOPIC_CONTENT_KINDS = [
    "missing-job", "invalid-uuid-runId", "uuid-with-bad-hex-digit", "unparsable-eventTime",
    "impossible-calendar-time", "date-without-time", "unknown-eventType", "lowercase-eventType",
    "string-where-object", "array-where-object", "null-where-object", "object-where-array", "strings-where-datasets",
    "facets-as-array", "string-as-facet", "null-as-facet", "dataset-event-with-string-dataset",
    "no-run-job-or-dataset", "parent-root-not-an-object", "parent-without-job", "parent-root-without-run",
    "parent-with-wrong-types", "nested-over-the-depth-limit", "job-name-over-64k", "schema-fields-nested-33-levels",
    "schema-field-path-over-4096", *VALID_CONTENT, *FUTURE_CONTENT,
]
TOPIC_CASES = [
    # framing
    Case("topic", "json-instead-of-avro", lambda ctx: b'{"eventType": "START"}', dead("bad-magic-byte", text="0x7b")),
    Case("topic", "wrong-magic-byte", lambda ctx: b"\x01" + ctx.good[1:], dead("bad-magic-byte", text="0x01")),
    Case("topic", "unknown-schema-id", lambda ctx: frame(2_000_000_000, ctx.good[5:]),
         dead("unknown-schema-id", text="2000000000")),
    Case("topic", "schema-id-zero", lambda ctx: frame(0, ctx.good[5:]), dead("unknown-schema-id")),
    Case("topic", "schema-id-max-uint32", lambda ctx: frame(2**32 - 1, ctx.good[5:]),
         dead("unknown-schema-id", text="4294967295")),
    Case("topic", "truncated-record", lambda ctx: ctx.good[:40], dead("truncated")),
    Case("topic", "header-only-record", lambda ctx: ctx.good[:5], dead("truncated")),
    Case("topic", "shorter-than-header", lambda ctx: b"\x00\x00\x01", dead("truncated", text="5-byte")),
    Case("topic", "trailing-bytes", lambda ctx: ctx.good + b"junk", dead("trailing-bytes", text="4 bytes")),
    Case("topic", "empty-value", lambda ctx: b"", dead("empty-payload")),
    Case("topic", "null-value", lambda ctx: None, dead("empty-payload")),
    # valid Avro of another schema
    Case("topic", "valid-avro-of-another-subject", lambda ctx: AvroCodec("dead_letter", lambda _id: "").encode(
        dead_letter(stage="x", error_class="y", error_message="z"), ctx.dead_letter_id),
        dead("incompatible-schema", text="cannot be read as openlineage_event")),
    Case("topic", "event-body-framed-with-another-subjects-id", lambda ctx: frame(ctx.normalized_id, ctx.good[5:]),
         dead(*CORRUPT_BODY)),
    Case("topic", "schema-id-of-a-json-schema", lambda ctx: frame(ctx.json_schema_id, ctx.good[5:]),
         dead("incompatible-schema", text="not Avro")),
    # corrupt Avro bodies
    Case("topic", "invalid-utf8-in-avro-string",
         lambda ctx: frame(ctx.event_id, avro_string(b"\xff\xfe") + ctx.good[5 + 21:]), dead("undecodable")),
    Case("topic", "negative-string-length", lambda ctx: frame(ctx.event_id, zigzag(-5) + b"x" * 40),
         dead(*CORRUPT_BODY)),
    Case("topic", "huge-string-length", lambda ctx: frame(ctx.event_id, zigzag(2**40) + b"x" * 40),
         dead(*CORRUPT_BODY)),
    Case("topic", "enum-index-out-of-range",
         lambda ctx: frame(ctx.event_id, ctx.header() + zigzag(1) + zigzag(99) + bytes(20)), dead(*CORRUPT_BODY)),
    Case("topic", "union-branch-out-of-range",
         lambda ctx: frame(ctx.event_id, ctx.header() + zigzag(0) + zigzag(7) + bytes(20)), dead(*CORRUPT_BODY)),
    Case("topic", "overlong-varint", lambda ctx: frame(ctx.event_id, b"\xff" * 30), dead(*CORRUPT_BODY)),
    # valid Avro, invalid OpenLineage
    Case("topic", "missing-runId", _override("missing-runId", run={}), dead("invalid-event", text="run.runId")),
    Case("topic", "missing-job-name", _override("missing-job-name", job={"namespace": NS}),
         dead("invalid-event", text="job.name")),
    Case("topic", "number-as-runId", _override("number-as-runId", run={"runId": 12345}),
         dead("invalid-event", text="run.runId")),
    Case("topic", "facet-text-not-json", lambda ctx: ctx.with_facet_text("facet-text-not-json", "x", "{not json"),
         dead("undecodable")),
    Case("topic", "facet-text-not-an-object", lambda ctx: ctx.with_facet_text("facet-text-not-an-object", "x", "42"),
         dead("invalid-event", text="run.facets.x")),
    Case("topic", "extra-json-not-an-object", _extra("extra-json-not-an-object", "[1, 2]"), dead("undecodable")),
    Case("topic", "extra-json-malformed", _extra("extra-json-malformed", "{oops"), dead("undecodable")),
    # odd but valid
    Case("topic", "duplicate-keys-in-facet-text",
         lambda ctx: ctx.with_facet_text("duplicate-keys-in-facet-text", "dup",
                                             '{"_producer": "p", "_schemaURL": "u", "v": 1, "v": 2}'), Intact()),
    *(_content_on_topic(kind) for kind in TOPIC_CONTENT_KINDS),
]

# Inputs that stop the processor (known bugs): each on a processor of its own, between two good events.
PROBE_CASES = [
    Case("topic", "deep-nesting-1000-levels-in-facet",
         lambda ctx: ctx.with_facet_text("deep-nesting-1000-levels-in-facet", "deep", nested_text(1000)),
         dead("undecodable")),
    Case("topic", "event-over-1mb", lambda ctx: ctx.avro(event(NS, "topic/event-over-1mb", run={
        "runId": str(uuid.uuid4()), "facets": {"big": big_facet()}})), Intact()),
]


# === the CLI =========================================================================================================
@dataclass(frozen=True)
class CliRun:
    """``lineage ARGS`` with extra environment; ``{dir}`` (the case's folder) and topic names are filled in."""

    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


Check = Callable[[subprocess.CompletedProcess], None]


def one_line_error(*texts: str, code: int = 1) -> Check:
    """Exit ``code``, no traceback, stderr one line naming the problem (every one of ``texts``)."""

    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == code, (result.returncode, result.stderr[-2000:])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("lineage"), result.stderr[-2000:]
        for text in texts:
            assert text in lines[0], (text, lines[0])

    return check


def usage_error(option: str) -> Check:
    """argparse's own refusal of a malformed option: exit 2, the option named, no traceback."""

    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == 2 and f"argument {option}: invalid" in result.stderr, result.stderr

    return check


def succeeds(*texts: str) -> Check:
    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == 0, (result.returncode, result.stdout[-1000:], result.stderr[-2000:])
        for text in texts:
            assert text in result.stdout, (text, result.stdout[-2000:])

    return check


def not_found(name: str) -> Check:
    """An unknown dataset: exit 1, nothing on stdout (no empty answer), stderr naming it, no traceback."""

    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == 1 and result.stdout == "", (result.returncode, result.stdout[-1000:])
        assert "not found in the graph: dataset" in result.stderr and name in result.stderr, result.stderr[-2000:]

    return check


def reports(*texts: str) -> Check:
    """No traceback, and the output names the problem (exit code and wording are the command's choice)."""

    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        output = result.stdout + result.stderr
        assert any(text in output for text in texts), output[-2000:]

    return check


def emit_reports(line: int, text: str, published: int) -> Check:
    """`lineage emit`: the bad line reported by number and reason, the good lines published, exit 1, no traceback."""

    def check(result: subprocess.CompletedProcess) -> None:
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
        problem = next((row for row in result.stderr.splitlines() if row.strip().startswith(f"line {line}: ")), "")
        assert text in problem, result.stderr[-2000:]
        assert f"published {published} events" in result.stdout, result.stdout[-1000:]

    return check


# The shared `lineage emit` run: one file, a bad line of each kind, a good line after each.
EMIT_LINES: dict[str, tuple[Callable[[], str], str | None]] = {
    "malformed-json": (lambda: '{"eventType": "START", nope', "not valid JSON"),
    "truncated-json": (lambda: json.dumps(event(NS, "cli/emit-truncated"))[:-9], "not valid JSON"),
    "python-literal-instead-of-json": (lambda: repr(event(NS, "cli/emit-python")), "not valid JSON"),
    "number-line": (lambda: "42", "event: expected a JSON object, got int"),
    "array-line": (lambda: json.dumps([event(NS, "cli/emit-array")]), "event: expected a JSON object, got list"),
    "null-line": (lambda: "null", "event: expected a JSON object, got NoneType"),
    **{kind: (lambda kind=kind: json.dumps(INVALID_CONTENT[kind].build(NS, "cli/x")), INVALID_CONTENT[kind].field)
       for kind in ("missing-runId", "missing-eventTime", "missing-job", "missing-producer", "invalid-uuid-runId",
                    "unparsable-eventTime", "unknown-eventType", "null-as-facet", "lone-surrogate-in-name",
                    "parent-root-not-an-object", "nested-over-the-depth-limit")},
    "crlf-line-ending": (lambda: json.dumps(event(NS, "cli/emit-crlf")) + "\r", None),
    "whitespace-only-line": (lambda: " \t ", None),
    "duplicate-keys-last-wins": (lambda: json.dumps(event(NS, "cli/emit-dup-first"))[:-1]
                                 + ', "job": {"namespace": "' + NS + '", "name": "cli/emit-dup-last"}}', None),
}


def emit_file() -> tuple[bytes, dict[str, int], list[str]]:
    """The shared emit file, each kind's line number, and the job names it must publish."""
    lines, numbers, published = [json.dumps(event(NS, "cli/emit-good-first"))], {}, ["cli/emit-good-first"]
    for index, (kind, (build, _)) in enumerate(EMIT_LINES.items()):
        lines.append(build())
        numbers[kind] = len(lines)
        lines.append(json.dumps(event(NS, f"cli/emit-good-{index}")))
        published.append(f"cli/emit-good-{index}")
    return ("\n".join(lines) + "\n").encode(), numbers, [*published, "cli/emit-crlf", "cli/emit-dup-last"]




def _lines(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


def _good_line(name: str) -> bytes:
    return json.dumps(event(NS, name)).encode()


def _emit_case(kind: str, bad: bytes, expect: Check, bug: str | None = None) -> Case:
    files = {"events.ndjson": _lines(_good_line(f"cli/{kind}-before"), bad, _good_line(f"cli/{kind}-after"))}
    return Case("cli", kind, lambda: CliRun(("emit", "{dir}/events.ndjson", "--topic", "{cli_emit}"), files=files),
                expect, bug)


def _cmd(*args: str, **env: str) -> Callable[[], CliRun]:
    return lambda: CliRun(args, env)


CLI_CASES = [
    Case("cli", "emit-file-with-bad-lines", _cmd("emit", "{dir}/mixed.ndjson", "--topic", "{events}"),
         "checked line by line in test_cli_emit_line"),
    _emit_case("invalid-utf8-line", b'{"eventType": "ST\xff\xfeRT"}', emit_reports(2, "UTF-8", 2)),
    _emit_case("deep-nesting-1000-levels", nested_text(1000).encode(), emit_reports(2, "nested too deeply", 2)),
    _emit_case("lone-surrogate-in-facet",
               json.dumps(PYTHON_ONLY["lone-surrogate-in-facet"].build(NS, "cli/surrogate")).encode(),
               emit_reports(2, "run.facets.acme", 2)),
    _emit_case("event-over-1mb", json.dumps(event(NS, "cli/big", run={
        "runId": str(uuid.uuid4()), "facets": {"big": big_facet()}})).encode(), succeeds("published 3 events")),
    Case("cli", "truncated-gzip-file", lambda: CliRun(("emit", "{dir}/cut.ndjson.gz", "--topic", "{cli_emit}"), files={
        "cut.ndjson.gz": gzip.compress(_good_line("cli/gz") * 50)[:200]}), one_line_error("cut.ndjson.gz")),
    Case("cli", "not-gzip-with-gz-suffix", lambda: CliRun(("emit", "{dir}/plain.ndjson.gz", "--topic", "{cli_emit}"),
                                                          files={"plain.ndjson.gz": _good_line("cli/plain")}),
         one_line_error("plain.ndjson.gz")),
    Case("cli", "missing-input-file", _cmd("emit", "/nonexistent/events.ndjson"), one_line_error("no such file")),
    Case("cli", "directory-as-input-file", _cmd("emit", "{dir}"), one_line_error("no such file")),
    # replay --from / --to
    Case("cli", "unparsable-replay-time", _cmd("replay", "--from", "yesterday"), one_line_error("--from", "ISO-8601")),
    Case("cli", "impossible-replay-date", _cmd("replay", "--from", "2024-02-30T00:00:00Z"),
         one_line_error("--from", "2024-02-30")),
    Case("cli", "replay-offset-out-of-range", _cmd("replay", "--from", "2024-05-01T00:00:00+25:00"),
         one_line_error("--from")),
    Case("cli", "garbage-replay-end", _cmd("replay", "--to", "soon"), one_line_error("--to", "soon")),
    Case("cli", "replay-from-year-0001", _cmd("replay", "--from", "0001-01-01T00:00:00Z",
                                              LINEAGE_EVENTS_TOPIC="{replay}"), succeeds("replayed 1 records")),
    Case("cli", "replay-from-year-9999", _cmd("replay", "--from", "9999-12-31T23:59:59Z",
                                              LINEAGE_EVENTS_TOPIC="{replay}"), succeeds("replayed 0 records")),
    # impact / upstream
    Case("cli", "depth-zero", _cmd("impact", "s3://x", "y", "--depth", "0"), one_line_error("--depth", "1 to 50")),
    Case("cli", "depth-too-large", _cmd("upstream", "s3://x", "y", "--depth", "1000"),
         one_line_error("--depth", "1000")),
    Case("cli", "depth-not-a-number", _cmd("impact", "s3://x", "y", "--depth", "ten"), usage_error("--depth")),
    Case("cli", "cypher-injection-as-dataset-name",
         _cmd("impact", f"{NS}.canary", "'}) DETACH DELETE n //", "--format", "json"),
         not_found("'}) DETACH DELETE n //")),
    Case("cli", "backtick-injection-as-namespace", _cmd("upstream", "`) MATCH (n) DETACH DELETE n //", "x"),
         not_found("`) MATCH (n) DETACH DELETE n // x")),
    Case("cli", "column-lineage-as-picture", _cmd("impact", "s3://x", "y", "--column", "c", "--format", "svg"),
         one_line_error("--column")),
    # ports and settings
    Case("cli", "port-flag-out-of-range", _cmd("collector", "--port", "70000"), one_line_error("--port", "70000")),
    Case("cli", "negative-port-flag", _cmd("collector", "--port", "-1"), one_line_error("--port", "-1")),
    Case("cli", "port-flag-not-a-number", _cmd("collector", "--port", "http"), usage_error("--port")),
    Case("cli", "port-setting-not-a-number", _cmd("collector", LINEAGE_COLLECTOR_PORT="fivethousand"),
         one_line_error("LINEAGE_COLLECTOR_PORT", "expected an integer")),
    Case("cli", "port-setting-out-of-range", _cmd("stack", "status", LINEAGE_KAFKA_PORT="99999"),
         one_line_error("LINEAGE_KAFKA_PORT", "not a valid TCP port")),
    Case("cli", "port-setting-zero", _cmd("collector", LINEAGE_COLLECTOR_PORT="0"),
         one_line_error("LINEAGE_COLLECTOR_PORT", "not a valid TCP port")),
    Case("cli", "metrics-port-out-of-range", _cmd("processor", LINEAGE_PROCESSOR_METRICS_PORT="65536"),
         one_line_error("LINEAGE_PROCESSOR_METRICS_PORT")),
    Case("cli", "nan-setting", _cmd("processor", LINEAGE_PARTITIONS="nan"), one_line_error("LINEAGE_PARTITIONS")),
    Case("cli", "infinite-setting", _cmd("sink", LINEAGE_SINK_BATCH="inf"), one_line_error("LINEAGE_SINK_BATCH")),
    Case("cli", "fractional-count-setting", _cmd("processor", LINEAGE_PARTITIONS="0.5",
                                                 LINEAGE_EVENTS_TOPIC="{cli_fraction}"),
         one_line_error("LINEAGE_PARTITIONS", "positive integer")),
    Case("cli", "negative-duration-setting", _cmd("processor", LINEAGE_REORDER_WINDOW="-1"),
         one_line_error("LINEAGE_REORDER_WINDOW", "must be positive")),
    Case("cli", "size-setting-not-a-number", _cmd("collector", LINEAGE_COLLECTOR_MAX_BYTES="16MB"),
         one_line_error("LINEAGE_COLLECTOR_MAX_BYTES", "expected a number")),
    Case("cli", "unknown-log-level", _cmd("processor", LINEAGE_LOG_LEVEL="loud"),
         one_line_error("LINEAGE_LOG_LEVEL", "loud")),
    Case("cli", "unknown-log-format", _cmd("sink", LINEAGE_LOG_FORMAT="xml"),
         one_line_error("LINEAGE_LOG_FORMAT", "xml")),
    Case("cli", "malformed-namespace-aliases", _cmd("processor", LINEAGE_NAMESPACE_ALIASES="nonsense"),
         one_line_error("LINEAGE_NAMESPACE_ALIASES", "nonsense")),
    Case("cli", "wrong-neo4j-uri-scheme", _cmd("graph", "fingerprint", NEO4J_URI="http://127.0.0.1:7474"),
         one_line_error("NEO4J_URI", "http://127.0.0.1:7474")),
    Case("cli", "unknown-security-protocol", _cmd("processor", KAFKA_SECURITY_PROTOCOL="TLS1.3"),
         one_line_error("KAFKA_SECURITY_PROTOCOL", "TLS1.3")),
    Case("cli", "sasl-without-credentials", _cmd("sink", KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT"),
         one_line_error("KAFKA_SASL_USERNAME")),
    Case("cli", "missing-certificate-file", _cmd("processor", KAFKA_SECURITY_PROTOCOL="SSL",
                                                 KAFKA_SSL_CA_LOCATION="/nonexistent/ca.pem"),
         one_line_error("KAFKA_SSL_CA_LOCATION", "/nonexistent/ca.pem")),
    Case("cli", "basic-auth-without-colon", _cmd("schemas", "check", SCHEMA_REGISTRY_BASIC_AUTH="admin"),
         one_line_error("SCHEMA_REGISTRY_BASIC_AUTH", "user:password")),
    Case("cli", "malformed-memory-size", _cmd("stack", "status", LINEAGE_KAFKA_HEAP="lots"),
         one_line_error("LINEAGE_KAFKA_HEAP", "lots")),
    Case("cli", "config-file-missing", _cmd("stack", "status", LINEAGE_CONFIG="/nonexistent/lineage.yaml"),
         one_line_error("LINEAGE_CONFIG", "/nonexistent/lineage.yaml")),
    Case("cli", "config-file-not-a-mapping", lambda: CliRun(("stack", "status"), {"LINEAGE_CONFIG": "{dir}/list.yaml"},
                                                            {"list.yaml": b"- KAFKA_BOOTSTRAP_SERVERS\n- x\n"}),
         one_line_error("LINEAGE_CONFIG", "mapping")),
    Case("cli", "config-file-malformed-yaml", lambda: CliRun(("stack", "status"),
                                                             {"LINEAGE_CONFIG": "{dir}/broken.yaml"},
                                                             {"broken.yaml": b"KAFKA_BOOTSTRAP_SERVERS: [x\n"}),
         one_line_error("LINEAGE_CONFIG", "broken.yaml", "line 2, column 1")),
    Case("cli", "dlq-record-that-is-not-a-dead-letter", _cmd("dlq", "tail", LINEAGE_DLQ_TOPIC="{garbage_dlq}"),
         reports("record at partition 0 offset 0 is not a dead letter: first byte is 0x67")),
]


# === the pipeline ====================================================================================================
class Watcher:
    """Reads Avro topics in the background from their beginning; ``records[topic]`` grows as records arrive."""

    def __init__(self, settings: ClientSettings, schemas: dict[str, str]) -> None:
        fetch = registry.schema_fetcher(SchemaRegistryClient(settings.registry_config()))
        self._codecs = {topic: AvroCodec(schema, fetch) for topic, schema in schemas.items()}
        self.records: dict[str, list[tuple[bytes | None, Any]]] = {topic: [] for topic in schemas}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._consumer = Consumer(settings.kafka_config({
            "group.id": f"test-watch-{uuid.uuid4()}", "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "isolation.level": "read_committed"}))
        self._consumer.subscribe(list(schemas))
        self._thread = threading.Thread(target=self._run, name="bad-input-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.2):
                if message.error() is not None:
                    continue
                try:
                    decoded: Any = self._codecs[message.topic()].decode(message.value())
                except Exception as exc:  # a record the test cannot read is a finding of its own
                    decoded = exc
                with self._changed:
                    self.records[message.topic()].append((message.key(), decoded))
                    self._changed.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


@dataclass
class Lane:
    """One processor and its topics: the shared pipeline, or a probe's own."""

    env: dict[str, str]
    settings: ClientSettings
    child: ChildProcess | None = None

    @property
    def events(self) -> str:
        return self.env["LINEAGE_EVENTS_TOPIC"]

    @property
    def normalized(self) -> str:
        return self.env["LINEAGE_NORMALIZED_TOPIC"]

    @property
    def dlq(self) -> str:
        return self.env["LINEAGE_DLQ_TOPIC"]


def _lane(name: str, tmp: Path) -> Lane:
    prefix = f"test.bad.{RUN}.{name}"
    env = {**pipeline_env(prefix, 3, tmp / name), "LINEAGE_REPORT_SECONDS": "5", "LINEAGE_REORDER_WINDOW": "1",
           "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    return Lane(env, ClientSettings.from_env({**os.environ, **env}))


@dataclass
class Pipeline:
    main: Lane
    probes: dict[str, Lane]
    collector_url: str
    publisher: EventPublisher
    reader: AvroCodec  # openlineage_event with the registry: decodes what publisher.encode wrote
    normalized_codec: AvroCodec  # normalized_event with the registry: decodes the graph sink's dead letters
    watcher: Watcher
    topic: TopicContext
    sent: dict[str, bytes | None]  # topic case kind → the value produced
    cli: dict[str, Future[subprocess.CompletedProcess]]
    emit_lines: dict[str, int]
    canary: list[dict[str, Any]]
    nodes_before: int
    deadline: float
    expected: dict[tuple[str, str], dict | None] = field(default_factory=dict)  # (job ns, name) → event or None

    def expect(self, payload: dict | None, name: str | None = None) -> None:
        """A good event that must come out of the processor exactly once (unchanged, when ``payload`` is given)."""
        key = (NS, name) if payload is None else (payload["job"]["namespace"], payload["job"]["name"])
        self.expected[key] = payload

    def normalized(self, lane: Lane | None = None) -> list[tuple[bytes | None, Any]]:
        return list(self.watcher.records[(lane or self.main).normalized])

    def dead(self, lane: Lane | None = None) -> list[tuple[bytes | None, Any]]:
        return list(self.watcher.records[(lane or self.main).dlq])

    def alive(self, lane: Lane | None = None) -> bool:
        child = (lane or self.main).child
        return child is not None and child.process.poll() is None

    def remaining(self, at_most: float = DEADLINE_SECONDS) -> float:
        return min(at_most, max(1.0, self.deadline - time.monotonic()))


def _start_all(stack: contextlib.ExitStack, managers: list[contextlib.AbstractContextManager]) -> list[Any]:
    """Enter context managers concurrently: each child process takes seconds to become ready."""
    with ThreadPoolExecutor(len(managers)) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
        results, error = [], None
        for manager, future in zip(managers, futures, strict=True):
            try:
                results.append(future.result())
                stack.push(manager.__exit__)
            except Exception as exc:
                error = error or exc
    if error is not None:
        raise error
    return results


def _fill(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def _run_cli(case: Case, tmp: Path, names: dict[str, str]) -> subprocess.CompletedProcess:
    run: CliRun = case.build()
    folder = tmp / "cli" / case.kind
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in run.files.items():
        (folder / name).write_bytes(data)
    values = {**names, "dir": str(folder)}
    env = {**os.environ,  # topics, groups and ports of its own: a command that does start touches nothing shared
           "LINEAGE_EVENTS_TOPIC": names["cli_events"], "LINEAGE_NORMALIZED_TOPIC": f"{names['cli_events']}.n",
           "LINEAGE_DLQ_TOPIC": f"{names['cli_events']}.dlq", "LINEAGE_DRIFT_TOPIC": f"{names['cli_events']}.drift",
           "LINEAGE_PROCESSOR_GROUP": f"{names['cli_events']}.group", "LINEAGE_SINK_GROUP": f"{names['cli_events']}.g",
           "LINEAGE_PROCESSOR_METRICS_PORT": "0", "LINEAGE_SINK_METRICS_PORT": "0",
           "LINEAGE_PROCESSOR_DATA_DIR": str(folder / "processor"),
           **{key: _fill(value, values) for key, value in run.env.items()}}
    command = [sys.executable, "-m", "kafka_lineage.app.cli", *(_fill(arg, values) for arg in run.args)]
    try:
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, cwd=folder)
    except subprocess.TimeoutExpired as exc:
        out, err = (part.decode() if isinstance(part, bytes) else part or "" for part in (exc.stdout, exc.stderr))
        return subprocess.CompletedProcess(command, -9, out, err + "\n[still running after 60 s: killed]")


CANARY_RUN = str(uuid.uuid4())


def _canary(driver: Any) -> list[dict[str, Any]]:
    with driver.session() as session:
        rows = session.run("MATCH (n) WHERE n.namespace = $ns OR n.runId = $run "
                           "RETURN properties(n) AS props, labels(n) AS labels", ns=f"{NS}.canary", run=CANARY_RUN)
        return sorted(({**row["props"], "labels": sorted(row["labels"])} for row in rows), key=json.dumps)


def _node_count(driver: Any) -> int:
    with driver.session() as session:
        return session.run("MATCH (n) RETURN count(n)").single()[0]


@pytest.fixture(scope="module")
def pipeline(clients: ClientSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    tmp = tmp_path_factory.mktemp("bad-input")
    main = _lane("main", tmp)
    probes = {case.kind: _lane(f"probe{i}", tmp) for i, case in enumerate(PROBE_CASES)}
    settings = main.settings
    for lane in (main, *probes.values()):
        prepare_pipeline(lane.settings, 3)
    client = SchemaRegistryClient(settings.registry_config())
    names = {"events": main.events, "replay": f"test.bad.{RUN}.replay", "garbage_dlq": f"test.bad.{RUN}.garbage-dlq",
             "cli_emit": f"test.bad.{RUN}.cli-emit", "cli_events": f"test.bad.{RUN}.cli",
             "cli_fraction": f"test.bad.{RUN}.cli-fraction"}
    for topic in (names["replay"], names["garbage_dlq"], names["cli_emit"]):
        ensure_topic(settings.kafka_config(), topic, partitions=1)
    registry.register(client, {names["replay"]: OL, names["cli_emit"]: OL, names["garbage_dlq"]: "dead_letter"})
    json_schema_id = client.register_schema(f"test.bad.{RUN}.json-value", Schema(json.dumps(
        {"type": "object", "properties": {"eventType": {"type": "string"}}}), "JSON"))
    publisher = EventPublisher.from_settings(settings, main.events)
    raw = Producer(settings.kafka_config({"linger.ms": "5"}))
    replay_publisher = EventPublisher.from_settings(settings, names["replay"])
    raw.produce(names["replay"], key=b"replay", value=replay_publisher.encode(event(f"{NS}.replay", "replayed"))[1])
    replay_publisher.close()
    raw.produce(names["garbage_dlq"], key=b"garbage", value=b"garbage, not a DeadLetter")
    assert raw.flush(30) == 0

    # A canary written straight to Neo4j: no hostile name may delete or change it.
    canary_event = event(f"{NS}.canary", "canary-job", run={"runId": CANARY_RUN},
                         inputs=[{"namespace": f"{NS}.canary", "name": "canary-in"}],
                         outputs=[{"namespace": f"{NS}.canary", "name": "canary-out"}])
    with driver_for(settings) as driver:
        write_events(driver, [canary_event])
        canary, nodes_before = _canary(driver), _node_count(driver)
    assert len(canary) == 4, canary

    good = publisher.encode(event(NS, "topic/template"))[1]
    ctx = TopicContext(good, int.from_bytes(good[1:5], "big"), registry.registered_id(client, main.dlq, "dead_letter"),
                       registry.registered_id(client, main.normalized, "normalized_event"), json_schema_id,
                       AvroCodec(OL, lambda _id: ""))

    with contextlib.ExitStack() as stack:
        stack.callback(publisher.close)
        children = _start_all(stack, [
            processor_process(main.env), sink_process(main.env),
            collector_process({**main.env, "LINEAGE_COLLECTOR_TOKEN": TOKEN,
                               "LINEAGE_COLLECTOR_MAX_BYTES": str(MAX_BYTES)}),
            *(processor_process(lane.env) for lane in probes.values())])
        main.child, _sink, collector = children[:3]
        for lane, child in zip(probes.values(), children[3:], strict=True):
            lane.child = child
        watcher = Watcher(settings, {topic: schema for lane in (main, *probes.values()) for topic, schema in (
            (lane.normalized, "normalized_event"), (lane.dlq, "dead_letter"))})
        stack.callback(watcher.close)

        # Every CLI run at once, in the background: each is a Python process of its own.
        content, numbers, emitted = emit_file()
        (tmp / "cli" / "emit-file-with-bad-lines").mkdir(parents=True)
        (tmp / "cli" / "emit-file-with-bad-lines" / "mixed.ndjson").write_bytes(content)
        pool = stack.enter_context(ThreadPoolExecutor(4))
        cli = {case.kind: pool.submit(_run_cli, case, tmp, names) for case in CLI_CASES}

        fetch = registry.schema_fetcher(client)
        result = Pipeline(main, probes, collector.url, publisher, AvroCodec(OL, fetch),
                          AvroCodec("normalized_event", fetch), watcher, ctx, {}, cli, numbers, canary, nodes_before,
                          time.monotonic() + DEADLINE_SECONDS)
        for name in emitted:
            result.expect(None, name)
        _publish_topic_cases(result, raw)
        yield result


def _publish_topic_cases(pipeline: Pipeline, raw: Producer) -> None:
    """Each topic case after a good event; every hostile name as a valid event; each probe between two good events
    on its own processor's topic."""
    main = pipeline.main.events
    for case in TOPIC_CASES:
        before = event(NS, f"good/topic/{case.kind}")
        raw.produce(main, key=b"good:" + case.kind.encode(), value=pipeline.publisher.encode(before)[1])
        pipeline.expect(before)
        built = case.build(pipeline.topic)
        value, payload = built if isinstance(built, tuple) else (built, None)
        pipeline.sent[case.kind] = value
        raw.produce(main, key=f"case:{case.kind}".encode(), value=value)
        if isinstance(case.expect, Intact):
            pipeline.expect(payload, f"topic/{case.kind}")
    for kind, name in HOSTILE_NAMES.items():
        payload = hostile_event("topic", name)
        raw.produce(main, key=f"hostile:{kind}".encode(), value=pipeline.topic.avro(payload))
        pipeline.expect(payload)
    foreign = Producer(pipeline.main.settings.kafka_config({"message.max.bytes": "10000000",
                                                            "compression.type": "zstd"}))
    for case in PROBE_CASES:
        lane = pipeline.probes[case.kind]
        built = case.build(pipeline.topic)
        pipeline.sent[case.kind] = built[0] if isinstance(built, tuple) else built
        for position in ("before", "case", "after"):
            value = pipeline.sent[case.kind] if position == "case" else pipeline.publisher.encode(
                event(NS, f"probe/{case.kind}/{position}"))[1]
            foreign.produce(lane.events, key=f"probe:{position}".encode(), value=value, partition=0)
    assert raw.flush(60) == 0 and foreign.flush(60) == 0


def hostile_event(surface: str, name: str) -> dict:
    """A valid event whose job and output dataset are both named ``name`` (namespace NS.hostile.<surface>)."""
    namespace = f"{NS}.hostile.{surface}"
    return event(namespace, name, inputs=[{"namespace": namespace, "name": "hostile-input"}],
                 outputs=[{"namespace": namespace, "name": name}])


# === emitter tests ===================================================================================================
@pytest.mark.parametrize("case", [c.param() for c in EMITTER_CASES])
def test_emitter_encode(pipeline: Pipeline, case: Case) -> None:
    """EventPublisher.encode — what every emitter, the collector and `lineage emit` call: InvalidEvent naming the
    field, or (valid input) framed Avro that decodes to the very same event."""
    payload = case.build(NS, f"emitter/{case.kind}")
    if isinstance(case.expect, Refused):
        with pytest.raises(InvalidEvent) as raised:
            pipeline.publisher.encode(payload)
        assert case.expect.field in str(raised.value)
    else:
        key, value = pipeline.publisher.encode(payload)
        assert key and record_to_event(pipeline.reader.decode(value)) == payload


@pytest.mark.parametrize("case", [c.param() for c in HOOK_CASES])
def test_hook_argument_errors_raise_at_once(case: Case) -> None:
    with pytest.raises(ValueError, match=case.expect):
        case.build()


def test_transport_counts_bad_events_as_invalid_and_delivers_the_rest(pipeline: Pipeline) -> None:
    """KafkaAvroTransport: each refused event is counted ``invalid``, never raised into the job; the good events
    around them, the odd-but-valid ones and hostile names are delivered; a hook whose SQL does not parse still
    emits its run (with an extractionError facet)."""
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": pipeline.main.events}))
    refused = [c for c in EMITTER_CASES if isinstance(c.expect, Refused) and not c.bug]
    accepted = [c for c in EMITTER_CASES if isinstance(c.expect, Intact) and c.kind not in FUTURE_CONTENT]
    sent = 0
    for case in refused + accepted:
        payload = case.build(NS, f"emitter/{case.kind}")
        transport.emit(payload)  # never raises
        if case in accepted:
            pipeline.expect(payload)
            sent += 1
        good = event(NS, f"good/emitter/{case.kind}")
        transport.emit(good)
        pipeline.expect(good)
        sent += 1
    for name in HOSTILE_NAMES.values():
        payload = hostile_event("emitter", name)
        transport.emit(payload)
        pipeline.expect(payload)
        sent += 1
    with sql_task("SELEKT * FROMM nowhere WHERE", dialect="postgres", url="jdbc:postgresql://db:5432/shop",
                  job_name="emitter/hook-unparsable-sql", job_namespace=f"{NS}.hook",
                  client=OpenLineageClient(transport=transport)) as run:
        pass
    assert [e.eventType.value for e in run.events] == ["START", "COMPLETE"]
    assert all(e.run.facets.get("extractionError") for e in run.events)
    assert transport.close() is True
    assert transport.invalid == len(refused) and transport.delivered == sent + 2
    assert transport.undelivered == transport.dropped == 0


def test_transport_is_not_stalled_by_an_unserializable_event(pipeline: Pipeline) -> None:
    """An event the JSON encoder cannot write (a uuid.UUID runId: `uuid.uuid4()` without str()) must be counted
    invalid, and the events after it delivered while the job runs."""
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": pipeline.main.events, "flush_timeout": 2}))
    try:
        transport.emit(PYTHON_ONLY["uuid-object-as-runId"].build(NS, "emitter/stalled"))
        after = event(NS, "emitter/after-stalled")
        transport.emit(after)
        deadline = time.monotonic() + 6
        while transport.delivered < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (transport.delivered, transport.invalid) == (1, 1)
    finally:
        transport.close(2)


def test_transport_goes_on_after_an_unexpected_error_in_one_event(pipeline: Pipeline) -> None:
    """Issue 16 item 4: an exception that is neither "invalid" nor "registry unavailable" (a bug of ours on one
    event, here injected into the real publisher) is that event's error: counted invalid at once, never retried as
    if the registry were down, and the events after it are delivered."""
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": pipeline.main.events, "flush_timeout": 5}))
    encode = transport._publisher.encode

    def failing(payload: Any) -> tuple[bytes, bytes]:
        if (payload.get("job") or {}).get("name") == "emitter/unexpected-error":
            raise AttributeError("'int' object has no attribute 'get'")  # what partition_key raised before
        return encode(payload)

    transport._publisher.encode = failing  # type: ignore[method-assign]
    try:
        transport.emit(event(NS, "emitter/unexpected-error"))
        transport.emit(INVALID_CONTENT["parent-root-not-an-object"].build(NS, "emitter/issue-16-reproducer"))
        after = event(NS, "good/emitter/after-unexpected-error")
        transport.emit(after)
        pipeline.expect(after)
        deadline = time.monotonic() + 10
        while transport.delivered < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (transport.delivered, transport.invalid, transport.undelivered) == (1, 2, 0)
    finally:
        assert transport.close() is True


def test_transport_delivers_an_event_over_1mb(pipeline: Pipeline) -> None:
    """An event over 1 MB (under the producers' 16 MB limit; lineage JSON compresses well) is delivered, and so is
    the next one."""
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": pipeline.main.events}))
    big = event(NS, "emitter/event-over-1mb", run={"runId": str(uuid.uuid4()), "facets": {"big": big_facet()}})
    transport.emit(big)
    after = event(NS, "good/emitter/after-event-over-1mb")
    transport.emit(after)
    pipeline.expect(big)
    pipeline.expect(after)
    transport.close()
    assert transport.delivered == 2 and transport.undelivered + transport.invalid == 0


# === collector tests =================================================================================================
def _post(pipeline: Pipeline, body: Body) -> requests.Response:
    headers = dict(body.headers)
    if headers.pop("X-No-Default-Auth", None) is None:
        headers["Authorization"] = f"Bearer {TOKEN}"
    return requests.request(body.method, pipeline.collector_url + body.path, data=body.data, headers=headers,
                            timeout=120)


@pytest.mark.parametrize("case", [c.param() for c in COLLECTOR_CASES])
def test_collector(pipeline: Pipeline, case: Case) -> None:
    built = case.build(NS, f"collector/{case.kind}")
    body = built if isinstance(built, Body) else json_body(built)
    answer = _post(pipeline, body)
    good = event(NS, f"good/collector/{case.kind}")  # and the collector keeps taking good events
    assert _post(pipeline, json_body(good)).json() == {"accepted": 1}
    pipeline.expect(good)
    if isinstance(case.expect, Intact):
        assert answer.status_code == 200, (answer.status_code, answer.text[:2000])
        sent = json.loads(body.data.decode("utf-8-sig"))  # what a JSON reader makes of the body: last key wins
        sent = sent if isinstance(sent, list) else [sent]
        assert answer.json() == {"accepted": len(sent)}
        for payload in sent:
            pipeline.expect(payload)
        return
    status, text = (400, case.expect.field) if isinstance(case.expect, Refused) else (case.expect.code,
                                                                                       case.expect.text)
    assert answer.status_code == status, (answer.status_code, answer.text[:2000])
    if status != 405 and status != 404:
        reason = answer.json()
        assert text in json.dumps(reason, ensure_ascii=False), str(reason)[:2000]
        if isinstance(case.expect, Refused):
            assert reason["errors"][0]["index"] == 0 and "nothing was published" in reason["error"]


# === CLI tests =======================================================================================================
@pytest.mark.parametrize("case", [c.param() for c in CLI_CASES if c.kind != "emit-file-with-bad-lines"])
def test_cli(pipeline: Pipeline, case: Case) -> None:
    case.expect(pipeline.cli[case.kind].result(timeout=pipeline.remaining()))


@pytest.mark.parametrize("kind", list(EMIT_LINES))
def test_cli_emit_line(pipeline: Pipeline, kind: str) -> None:
    """`lineage emit` over one file with a bad line of each kind between good ones: each bad line reported with
    its number and the reason, every other line published, exit 1, no traceback."""
    result = pipeline.cli["emit-file-with-bad-lines"].result(timeout=pipeline.remaining())
    assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr[-3000:]
    problems = {int(row.strip().split(":")[0].split()[1]): row for row in result.stderr.splitlines()
                if row.strip().startswith("line ")}
    number, text = pipeline.emit_lines[kind], EMIT_LINES[kind][1]
    if text is None:
        assert number not in problems, problems[number]
    else:
        assert text in problems.get(number, ""), result.stderr[-3000:]
    assert len(problems) == sum(1 for _, expected in EMIT_LINES.values() if expected)
    assert f"published {len(EMIT_LINES) + 3} events" in result.stdout, result.stdout


# === topic tests =====================================================================================================
def _records_of(pipeline: Pipeline, key: bytes, lane: Lane, wait: float) -> tuple[list[dict], list[dict]]:
    """(dead letters, normalized records) with ``key``, once there is one (or ``wait`` seconds passed)."""

    def found() -> bool:
        return any(k == key for k, _ in pipeline.dead(lane) + pipeline.normalized(lane)) or not pipeline.alive(lane)

    pipeline.watcher.wait(found, wait)
    return ([r for k, r in pipeline.dead(lane) if k == key], [r for k, r in pipeline.normalized(lane) if k == key])


def _check_dead_letter(letter: dict, expect: Dead, key: bytes, value: bytes | None, lane: Lane) -> None:
    assert letter["errorClass"] in expect.classes, (letter["errorClass"], letter["errorMessage"][:500])
    assert expect.text in letter["errorMessage"], letter["errorMessage"][:500]
    assert letter["stage"] == "processor" and letter["key"] == key and letter["value"] == value
    assert letter["sourceTopic"] == lane.events and letter["sourcePartition"] in (0, 1, 2)
    assert letter["sourceOffset"] >= 0


@pytest.mark.parametrize("case", [c.param() for c in TOPIC_CASES])
def test_topic(pipeline: Pipeline, case: Case) -> None:
    key = f"case:{case.kind}".encode()
    dead_letters, normalized = _records_of(pipeline, key, pipeline.main, pipeline.remaining())
    assert pipeline.alive(), "the processor stopped"
    if isinstance(case.expect, Dead):
        assert not normalized and len(dead_letters) == 1, (normalized, dead_letters)
        _check_dead_letter(dead_letters[0], case.expect, key, pipeline.sent[case.kind], pipeline.main)
    else:
        assert not dead_letters and len(normalized) == 1, [d["errorMessage"][:300] for d in dead_letters]
        assert record_to_event(normalized[0]["event"])["job"]["name"] == f"topic/{case.kind}"


@pytest.mark.parametrize("case", [c.param() for c in PROBE_CASES])
def test_topic_input_that_stops_a_processor(pipeline: Pipeline, case: Case) -> None:
    """On a processor of its own: the record is dead-lettered (or normalized), the good event after it flows."""
    lane = pipeline.probes[case.kind]
    dead_letters, normalized = _records_of(pipeline, b"probe:after", lane, pipeline.remaining(60))
    assert pipeline.alive(lane), f"the processor stopped:\n{lane.child.process.poll()}"
    assert normalized, "the good event after it never came out"
    dead_letters, normalized = _records_of(pipeline, b"probe:case", lane, 5)
    if isinstance(case.expect, Dead):
        assert len(dead_letters) == 1 and not normalized
        _check_dead_letter(dead_letters[0], case.expect, b"probe:case", pipeline.sent[case.kind], lane)
    else:
        assert len(normalized) == 1 and not dead_letters




def test_a_stopped_processor_commits_nothing_it_did_not_process(pipeline: Pipeline) -> None:
    """If bad input does stop a worker, its group's committed offset must not pass a record that neither came out
    normalized nor went to the DLQ: a restarted worker must see it again."""
    lane = pipeline.probes[PROBE_CASES[0].kind]
    _records_of(pipeline, b"probe:after", lane, pipeline.remaining(60))
    time.sleep(2)
    done = {r["processing"]["sourceOffset"] for _, r in pipeline.normalized(lane)} | {
        r["sourceOffset"] for _, r in pipeline.dead(lane)}
    first_not_done = min(set(range(3)) - done, default=3)  # the lane's records are at offsets 0, 1, 2 of partition 0
    consumer = Consumer(lane.settings.kafka_config({"group.id": lane.env["LINEAGE_PROCESSOR_GROUP"]}))
    try:
        (committed,) = consumer.committed([TopicPartition(lane.events, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset <= first_not_done, (f"committed offset {committed.offset}; records out: {sorted(done)}; "
                                               f"processor alive: {pipeline.alive(lane)}")


# === the graph, delivery, the DLQ, the count =========================================================================
@pytest.mark.parametrize("kind", list(HOSTILE_NAMES))
@pytest.mark.parametrize("surface", ["emitter", "collector", "topic"])
def test_hostile_name_reaches_the_graph_intact(pipeline: Pipeline, surface: str, kind: str) -> None:
    """A valid event whose job and output dataset carry a hostile name: in Neo4j exactly as sent, found by that
    name. (A name over ~2 KB is keyed by its hash, ``graph.keys.stored_key``, and kept whole in ``fullName``: Neo4j
    indexes no key over ~8 KB, so 10,000 characters were dead-lettered as neo4j-rejected before.)"""
    name, namespace = HOSTILE_NAMES[kind], f"{NS}.hostile.{surface}"
    if surface == "collector":
        payload = hostile_event(surface, name)
        answer = _post(pipeline, json_body(payload))
        assert answer.status_code == 200, answer.text[:1000]
        pipeline.expect(payload)
    with driver_for(pipeline.main.settings) as driver:
        deadline = time.monotonic() + pipeline.remaining(60)
        while True:
            with driver.session() as session:
                found = session.run("MATCH (j:Job {namespace: $ns, name: $name})-[:OUTPUTS]->(d:Dataset) "
                                    "RETURN coalesce(j.fullName, j.name) AS job, "
                                    "coalesce(d.fullName, d.name) AS dataset", ns=namespace,
                                    name=stored_key(name)).data()
            if found or time.monotonic() > deadline or _sink_refused(pipeline, namespace, name):
                break
            time.sleep(0.3)
    refused = _sink_refused(pipeline, namespace, name)
    assert not refused, f"the graph sink dead-lettered it: {refused}"
    assert found == [{"job": name, "dataset": name}], f"{len(found)} matches"


def _sink_letters(pipeline: Pipeline) -> list[tuple[tuple[str, str], str]]:
    """The graph sink's dead letters: ((job namespace, job name), reason)."""
    out = []
    for _, letter in pipeline.dead():
        if isinstance(letter, dict) and letter["stage"] == "graph-sink":
            job = record_to_event(pipeline.normalized_codec.decode(letter["value"])["event"]).get("job") or {}
            out.append(((job.get("namespace"), job.get("name")), letter["errorMessage"][:300]))
    return out


def _sink_refused(pipeline: Pipeline, namespace: str, name: str) -> list[str]:
    return [reason for job, reason in _sink_letters(pipeline) if job == (namespace, name)]


def test_names_at_the_limits_are_written_and_found_by_their_whole_value(pipeline: Pipeline) -> None:
    """Namespace, name and field at their limits (64 KiB, 10 K, a 4,096-character path of 4-byte characters) as job,
    dataset, schema field and column lineage: written to Neo4j (twice: idempotent), each node found by
    ``stored_key`` of its whole value and holding that value."""
    namespace, name, path = "s3://" + "b" * 65_531, "n" * 10_000, "\U0001f4c8" * 4096
    payload = event(namespace, name, outputs=[{"namespace": namespace, "name": name, "facets": {
        "schema": {"_producer": PRODUCER, "_schemaURL": "u", "fields": [{"name": path, "type": "int"}]},
        "columnLineage": {"_producer": PRODUCER, "_schemaURL": "u", "fields": {path: {"inputFields": [
            {"namespace": namespace, "name": name, "field": path}]}}}}}])
    pipeline.publisher.encode(payload)  # valid, within every limit
    keys = {"ns": stored_key(namespace), "name": stored_key(name), "field": stored_key(path)}
    with driver_for(pipeline.main.settings) as driver:
        for _ in range(2):
            write_events(driver, [payload])
        with driver.session() as session:
            found = session.run(
                "MATCH (j:Job {namespace: $ns, name: $name})-[:OUTPUTS]->(d:Dataset {namespace: $ns, name: $name})"
                "-[:HAS_FIELD]->(f:Field {namespace: $ns, name: $name, field: $field})-[:DERIVES_FROM]->(f) "
                "MATCH (d)-[:HAS_SCHEMA]->(s:SchemaVersion) "
                "RETURN count(*) AS n, j.fullNamespace AS ns, j.fullName AS job, d.fullName AS dataset, "
                "f.fullField AS field, s.fullNamespace AS schemaNamespace", **keys).data()
        # the queries find them by their whole values and answer with them
        assert upstream(driver, namespace, name, 1) == [Reached(1, "job", namespace, name)]
        assert field_lineage(driver, namespace, name, path, 1) == [ReachedField(1, namespace, name, path)]
    assert found == [{"n": 1, "ns": namespace, "job": name, "dataset": name, "field": path,
                      "schemaNamespace": namespace}], [{k: str(v)[:40] for k, v in row.items()} for row in found]


def test_no_hostile_name_touched_anything_else(pipeline: Pipeline) -> None:
    with driver_for(pipeline.main.settings) as driver:
        assert _canary(driver) == pipeline.canary
        assert _node_count(driver) >= pipeline.nodes_before
        with driver.session() as session:
            for surface in ("emitter", "collector", "topic"):
                names = session.run("MATCH (n) WHERE n.namespace = $ns AND NOT n:Field "
                                    "RETURN collect(coalesce(n.fullName, n.name))", ns=f"{NS}.hostile.{surface}"
                                    ).single()[0]
                assert set(names) <= {*HOSTILE_NAMES.values(), "hostile-input"}, "a node under a name never sent"


def _events_by_job(records: list[tuple[bytes | None, Any]]) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for _, record in records:
        if isinstance(record, dict):
            payload = record_to_event(record["event"])
            job = payload.get("job") or {}
            out.setdefault((job.get("namespace"), job.get("name")), []).append(payload)
    return out


def test_every_good_event_came_out_of_the_processor_once_unchanged(pipeline: Pipeline) -> None:
    def complete() -> bool:
        seen = _events_by_job(pipeline.normalized())
        return all(key in seen for key in pipeline.expected) or not pipeline.alive()

    pipeline.watcher.wait(complete, pipeline.remaining())
    assert pipeline.alive(), "the processor stopped"
    seen = _events_by_job(pipeline.normalized())
    missing = sorted(str(key) for key in pipeline.expected if key not in seen)
    assert not missing, f"{len(missing)} of {len(pipeline.expected)} good events never came out: {missing[:20]}"
    repeated = {key: len(seen[key]) for key in pipeline.expected if len(seen[key]) != 1}
    assert not repeated, repeated
    changed = [key for key, payload in pipeline.expected.items() if payload is not None and seen[key][0] != payload]
    assert not changed, changed[:10]
    unreadable = [r for _, r in pipeline.normalized() + pipeline.dead() if not isinstance(r, dict)]
    assert not unreadable, unreadable[:3]


def test_the_dlq_holds_exactly_the_bad_records(pipeline: Pipeline) -> None:
    """Processor dead letters: one per bad topic record, nothing else; the graph sink refused nothing."""
    expected = Counter(f"case:{c.kind}".encode() for c in TOPIC_CASES if isinstance(c.expect, Dead))
    pipeline.watcher.wait(lambda: {k for k, _ in pipeline.dead()} >= set(expected), pipeline.remaining())
    time.sleep(2)  # anything extra would be there by now
    letters = [r for _, r in pipeline.dead() if isinstance(r, dict)]
    assert Counter(r["key"] for r in letters if r["stage"] == "processor") == expected
    refused = [(job[1][:40], reason) for job, reason in _sink_letters(pipeline)]
    assert not refused, refused


def test_at_least_60_distinct_kinds_of_bad_input() -> None:
    cases = [*EMITTER_CASES, *HOOK_CASES, *COLLECTOR_CASES, *TOPIC_CASES, *PROBE_CASES, *CLI_CASES]
    assert len({c.id for c in cases}) == len(cases), "two cases with one id"
    kinds = {c.kind for c in cases} | set(EMIT_LINES) | set(HOSTILE_NAMES)
    surfaces = Counter(c.surface for c in cases)
    print(f"\n{len(kinds)} distinct kinds of bad input; cases per surface: {dict(surfaces)}; "
          f"{len(HOSTILE_NAMES)} hostile names x 3 surfaces into Neo4j; {len(EMIT_LINES)} kinds of bad emit lines")
    assert len(kinds) >= 60
