"""Bad inputs for the bad-input suite (tests/integration/test_bad_input.py): builders and the table of cases.

Pure: nothing here talks to Kafka, the registry or Neo4j. A *kind* is one kind of bad input (an invalid runId, a
truncated gzip body, a Cypher fragment as a job name); the same kind may be tried on several *surfaces* (the emitter
API, the HTTP collector, the raw events topic, the CLI). Every case says what must happen: a clear error naming the
problem, a DLQ record with the reason, or — for inputs that are odd but valid — acceptance with the event intact.
"""

from __future__ import annotations

import datetime
import gzip
import json
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_lineage.schemas.limits import MAX_JSON_DEPTH, MAX_NAME_CHARS

PRODUCER = "https://github.com/kafka-lineage/tests/bad-input"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SCHEMA_FACET_URL = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
Event = dict[str, Any]


# --- events ----------------------------------------------------------------------------------------------------------
def event(namespace: str, name: str, **over: Any) -> Event:
    """A valid START RunEvent of job ``namespace``/``name`` with a fresh runId; ``over`` replaces top-level keys."""
    return {"eventType": "START", "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER, "schemaURL": SCHEMA_URL,
            "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": namespace, "name": name}, **over}


def without(payload: Event, *path: str) -> Event:
    """A copy of ``payload`` without the key at ``path`` (``"run", "runId"``)."""
    copy = json.loads(json.dumps(payload))
    target = copy
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copy


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": … {}}}``: ``depth`` + 1 objects deep (``nested(0)`` is ``{}``)."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth: int) -> str:
    """The JSON text of ``nested(depth)``, built without recursion (a JSON encoder cannot write it at 1000)."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def chain(levels: int, name: str = "f") -> list[dict[str, Any]]:
    """Schema fields nested ``levels`` deep (a struct in a struct …), each named ``name``."""
    fields: list[dict[str, Any]] = [{"name": name, "type": "int"}]
    for _ in range(levels - 1):
        fields = [{"name": name, "type": "struct", "fields": fields}]
    return fields


def schema_facet(fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET_URL, "fields": fields}


def wide_schema(count: int = 10_000) -> list[dict[str, str]]:
    return [{"name": f"col_{i:05d}", "type": "bigint" if i % 2 else "string"} for i in range(count)]


def big_facet(size: int = 1_200_000) -> dict[str, Any]:
    """A custom facet of ``size`` characters of incompressible-looking but deterministic text (an event of 1 MB+)."""
    chunk = "".join(f"{i:08x}" for i in range(size // 8 + 1))
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/BigFacet.json", "blob": chunk[:size]}


class Circular(dict):
    """A dict that (through a facet) contains itself: no JSON encoder can write it."""


def circular_event(namespace: str, name: str) -> Event:
    payload = event(namespace, name)
    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": "https://example.com/Loop.json"}
    facet["self"] = facet
    payload["run"]["facets"] = {"loop": facet}
    return payload


# --- hostile names: valid events that must reach the graph exactly as written -------------------------------------
HOSTILE_NAMES: dict[str, str] = {
    "name-single-quotes": "o'brien's 'orders'",
    "name-double-quotes": 'the "daily" job',
    "name-backticks": "`n`) DETACH DELETE n //",
    "name-cypher-injection": "'}) DETACH DELETE n //",
    "name-cypher-injection-double-quoted": '"}) MATCH (n) DETACH DELETE n RETURN 1 //',
    "name-cypher-parameter": "$namespace} WITH 1 AS x MATCH (m) DETACH DELETE m //",
    "name-sql-injection": "x'; DROP TABLE jobs; --",
    "name-backslashes": "C:\\data\\new\\table\\",
    "name-emoji": "sales \U0001f4c8 \U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f9ea",
    "name-right-to-left": ("\u202etxt.exe\u202c \u0627\u0644\u0637\u0644\u0628\u0627\u062a "
                           "\u05d4\u05d6\u05de\u05e0\u05d5\u05ea"),
    "name-cjk": "\u6ce8\u6587\u30c6\u30fc\u30d6\u30eb",
    "name-combining-marks": "e\u0301\u0301\u0301 z\u0336\u0336",
    "name-zero-width": "a\u200bb\ufeffc\u2060d",
    "name-nul-byte": "before\x00after",
    "name-control-characters": "tab\there\nnew line\r\n\x1b[31mred\x7f",
    "name-10k-characters": "n" * 10_000,
    "name-html": "<script>alert('x')</script>",
    "name-log4j-lookup": "${jndi:ldap://127.0.0.1:1/a}",
    "name-whitespace-only": "   ",
    "name-json-text": '{"namespace": "x", "name": "y"}',
}


# --- event-content kinds, shared by the emitter, the collector and `lineage emit` --------------------------------
@dataclass(frozen=True)
class Content:
    """An event of one kind: ``build(namespace, name)``; ``field`` names what the rejection must name (None: the
    event is valid and must be accepted and delivered intact)."""

    build: Callable[[str, str], Any]
    field: str | None
    bug: str | None = None  # a known product bug: the case is an xfail(strict=True) with this reason


def _with(**over: Any) -> Callable[[str, str], Event]:
    return lambda ns, name: event(ns, name, **over)


def _run(**run: Any) -> Callable[[str, str], Event]:
    return lambda ns, name: event(ns, name, run={"runId": str(uuid.uuid4()), **run})


def _job(**job: Any) -> Callable[[str, str], Event]:
    return lambda ns, name: event(ns, name, job={"namespace": ns, "name": name, **job})


def _output(**dataset: Any) -> Callable[[str, str], Event]:
    return lambda ns, name: event(ns, name, outputs=[{"namespace": ns, "name": f"{name}/out", **dataset}])


# Invalid events: every surface must refuse them with a reason that names ``field``.
INVALID_CONTENT: dict[str, Content] = {
    "missing-runId": Content(lambda ns, n: without(event(ns, n), "run", "runId"), "run.runId"),
    "missing-eventTime": Content(lambda ns, n: without(event(ns, n), "eventTime"), "eventTime"),
    "missing-job": Content(lambda ns, n: without(event(ns, n), "job"), "job"),
    "missing-job-name": Content(lambda ns, n: without(event(ns, n), "job", "name"), "job.name"),
    "missing-job-namespace": Content(lambda ns, n: without(event(ns, n), "job", "namespace"), "job.namespace"),
    "missing-producer": Content(lambda ns, n: without(event(ns, n), "producer"), "producer"),
    "missing-schemaURL": Content(lambda ns, n: without(event(ns, n), "schemaURL"), "schemaURL"),
    "invalid-uuid-runId": Content(_run(runId="not-a-uuid"), "run.runId"),
    "uuid-with-bad-hex-digit": Content(_run(runId="6f1c2a3e-9b1d-4c2e-8f3a-2b4c6d8e0f1g"), "run.runId"),
    "number-as-runId": Content(_run(runId=12345), "run.runId"),
    "unparsable-eventTime": Content(_with(eventTime="yesterday at noon"), "eventTime"),
    "impossible-calendar-time": Content(_with(eventTime="2024-02-30T25:61:00Z"), "eventTime"),
    "date-without-time": Content(_with(eventTime="2024-05-01"), "eventTime"),
    "epoch-number-as-eventTime": Content(_with(eventTime=1714564800), "eventTime"),
    "unknown-eventType": Content(_with(eventType="EXPLODED"), "eventType"),
    "lowercase-eventType": Content(_with(eventType="start"), "eventType"),
    "string-where-object": Content(_with(job="orders-daily"), "job"),
    "array-where-object": Content(_with(run=[]), "run"),
    "null-where-object": Content(_with(run=None), "run"),
    "object-where-array": Content(lambda ns, n: event(ns, n, inputs={"namespace": ns, "name": "in"}), "inputs"),
    "strings-where-datasets": Content(_with(inputs=["s3://bucket/orders"]), "inputs.0"),
    "number-where-string": Content(_with(producer=42), "producer"),
    "number-as-dataset-namespace": Content(lambda ns, n: event(ns, n, outputs=[{"namespace": 7, "name": "x"}]),
                                           "outputs.0.namespace"),
    "null-eventType": Content(_with(eventType=None), "eventType"),  # the spec's enum has no null
    # facet contents are checked by the facet's schema (issue 20)
    "wrong-types-inside-facets": Content(lambda ns, n: event(ns, n, outputs=[{
        "namespace": ns, "name": f"{n}/out",
        "outputFacets": {"outputStatistics": {"_producer": PRODUCER, "_schemaURL": "u", "rowCount": "ten"}}}]),
        "outputs.0.outputFacets.outputStatistics.rowCount"),
    "numbers-where-strings-in-schema-fields": Content(_output(facets={"schema": schema_facet(
        [{"name": 5, "type": 7}])}), "outputs.0.facets.schema.fields.0.name"),
    "facet-without-producer": Content(_run(facets={"acme": {"v": 1}}), "run.facets.acme._producer"),
    "facets-as-array": Content(_job(facets=[]), "job.facets"),
    "string-as-facet": Content(_job(facets={"sql": "SELECT 1"}), "job.facets.sql"),
    "null-as-facet": Content(_run(facets={"parent": None}), "run.facets.parent"),
    "lone-surrogate-in-name": Content(_job(name="bad\ud800name"), "job.name"),
    "dataset-event-with-string-dataset": Content(
        lambda ns, n: {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER, "schemaURL": SCHEMA_URL,
                       "dataset": f"{ns}/{n}"}, "dataset"),
    "no-run-job-or-dataset": Content(
        lambda ns, n: {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER, "schemaURL": SCHEMA_URL},
        "none of run, job, dataset"),
    # issue 16 item 4: this one made the partition key raise (collector 500, emit aborted, transport stalled)
    "parent-root-not-an-object": Content(_run(facets={"parent": {"root": 1}}), "run.facets.parent.root"),
    "parent-without-job": Content(_run(facets={"parent": {"run": {"runId": str(uuid.uuid4())}}}),
                                  "run.facets.parent.job"),
    "parent-root-without-run": Content(_run(facets={"parent": {
        "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "n", "name": "p"},
        "root": {"job": {"namespace": "n", "name": "r"}}}}), "run.facets.parent.root.run"),
    "parent-with-wrong-types": Content(_run(facets={"parent": {"_producer": PRODUCER, "_schemaURL": "u",
                                                               "run": "x", "job": 5}}), "run.facets.parent.run"),
    # issue 16 item 6: the limits of schemas/limits.py
    "nested-over-the-depth-limit": Content(_run(facets={"deep": {"_producer": PRODUCER, "_schemaURL": "u",
                                                                 "v": nested(MAX_JSON_DEPTH - 4)}}),
                                           "run.facets.deep.v.a"),
    "job-name-over-64k": Content(_job(name="n" * (MAX_NAME_CHARS + 1)), "job.name"),
    "schema-fields-nested-33-levels": Content(_output(facets={"schema": schema_facet(chain(33))}),
                                              "outputs.0.facets.schema.fields.0.fields.0.fields"),
    "schema-field-path-over-4096": Content(_output(facets={"schema": schema_facet(chain(20, "c" * 250))}),
                                           "outputs.0.facets.schema.fields.0.fields"),
}

# Odd but valid events: every surface must accept them and deliver them unchanged.
VALID_CONTENT: dict[str, Content] = {
    "unknown-custom-facet": Content(_run(facets={"acme_costCenter": {
        "_producer": PRODUCER, "_schemaURL": "https://acme.example/CostCenter.json", "center": "42",
        "nested": {"list": [1, "two", None, {"x": True}]}}}), None),
    "unknown-top-level-field": Content(_with(acmeExtra={"team": "data", "ids": [1, 2, 3]}), None),
    # the spec sets no minimum length (an empty job name is accepted too: test_spec_conformance; here the job name
    # identifies the case's event)
    "empty-dataset-name": Content(lambda ns, n: event(ns, n, outputs=[{"namespace": ns, "name": ""}]), None),
    "ancient-time-year-0001": Content(_with(eventTime="0001-01-01T00:00:00Z"), None),
    "ancient-time-with-offset": Content(_with(eventTime="0001-01-01T00:00:00+01:00"), None),
    "schema-facet-10k-fields": Content(_output(facets={"schema": schema_facet(wide_schema())}), None),
    # event > run > facets > deep > v: exactly MAX_JSON_DEPTH levels
    "nested-at-the-depth-limit": Content(_run(facets={"deep": {"_producer": PRODUCER, "_schemaURL": "u",
                                                               "v": nested(MAX_JSON_DEPTH - 5)}}), None),
    "schema-fields-nested-32-levels": Content(_output(facets={"schema": schema_facet(chain(32))}), None),
    "parent-and-root": Content(_run(facets={"parent": {
        "_producer": PRODUCER, "_schemaURL": "u", "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "n", "name": "p"},
        "root": {"run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "n", "name": "r"}}}}), None),
}

# Valid events every emitter accepts, which the processor dead-letters as ``event-time-in-future`` (an eventTime over
# an hour ahead of the record's Kafka timestamp: docs/ARCHITECTURE.md decision 33). Sent only to the emitter API
# (encode) and the raw topic.
FUTURE_CONTENT: dict[str, Content] = {
    "far-future-year-9999": Content(_with(eventTime="9999-12-31T23:59:59.999999Z"), None),
    "far-future-with-negative-offset": Content(_with(eventTime="9999-12-31T23:59:59-01:00"), None),
}

# Python-only inputs of the emitter API (no JSON body can hold them). They are invalid as events: the emitter must
# refuse them as InvalidEvent naming the field (or accept them intact) — never with a "retry later" PublishError.
PYTHON_ONLY: dict[str, Content] = {
    "uuid-object-as-runId": Content(lambda ns, n: event(ns, n, run={"runId": uuid.uuid4()}), "run.runId"),
    "datetime-object-in-facet": Content(
        _run(facets={"acme": {"_producer": PRODUCER, "_schemaURL": "u", "at": datetime.datetime(2024, 5, 1)}}),
        "run.facets.acme"),
    "bytes-in-facet": Content(_run(facets={"acme": {"_producer": PRODUCER, "_schemaURL": "u", "raw": b"\x00\x01"}}),
                              "run.facets.acme"),
    "circular-reference": Content(circular_event, "run.facets.loop"),
    "lone-surrogate-in-facet": Content(
        _run(facets={"acme": {"_producer": PRODUCER, "_schemaURL": "u", "v": "bad\udc80text"}}), "run.facets.acme"),
    "nested-1000-levels": Content(_run(facets={"deep": {"_producer": PRODUCER, "_schemaURL": "u",
                                                        "v": nested(1000)}}), "run.facets.deep"),
    "non-string-keys": Content(lambda ns, n: {**event(ns, n), 5: "five"}, "5"),
    "not-a-dict-list": Content(lambda ns, n: [event(ns, n)], "expected a JSON object"),
    "not-a-dict-none": Content(lambda ns, n: None, "expected a JSON object"),
    "json-text-instead-of-dict": Content(lambda ns, n: json.dumps(event(ns, n)), "expected a JSON object"),
}


# --- HTTP bodies ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Body:
    """A raw request: body bytes, extra headers, method and path (relative to the collector's URL)."""

    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"
    path: str = "/api/v1/lineage"


def json_body(payload: Any) -> Body:
    return Body(json.dumps(payload).encode(), {"Content-Type": "application/json"})


def gzip_body(data: bytes) -> Body:
    return Body(gzip.compress(data), {"Content-Type": "application/json", "Content-Encoding": "gzip"})


def deflate_body(data: bytes) -> Body:
    return Body(zlib.compress(data), {"Content-Type": "application/json", "Content-Encoding": "deflate"})


def dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode()


# --- Avro, crafted by hand -------------------------------------------------------------------------------------------
def zigzag(value: int) -> bytes:
    """An Avro long: zig-zag encoded varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def avro_string(data: bytes) -> bytes:
    return zigzag(len(data)) + data


def frame(schema_id: int, body: bytes) -> bytes:
    """Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro body."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body
