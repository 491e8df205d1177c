"""Input limits (schemas/limits.py): each is accepted at its value and refused just above it, naming the field;
checked without recursion, and once per facet object of a FacetCache."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.facets import field_paths
from kafka_lineage.schemas import limits
from kafka_lineage.schemas.limits import LimitExceeded, check_limits
from kafka_lineage.schemas.openlineage import (
    FacetCache,
    InvalidEvent,
    event_to_record,
    record_to_event,
    validate_event,
)
from kafka_lineage.schemas.schema_diff import diff_schemas, schema_version
from tests.bad_inputs import event, nested, schema_facet, wide_schema


def _valid(payload: Any) -> None:
    check_limits(payload)
    validate_event(payload)


def _refused(payload: Any, *texts: str) -> str:
    with pytest.raises(InvalidEvent) as caught:
        validate_event(payload)
    message = str(caught.value)
    for text in texts:
        assert text in message, message
    return message


def _output(**facets: Any) -> dict[str, Any]:
    return event("ns", "job", outputs=[{"namespace": "ns", "name": "out", "facets": facets}])


def _chain(levels: int, name: str = "f") -> list[dict[str, Any]]:
    """Schema fields nested ``levels`` deep: a struct in a struct … in a struct."""
    fields: list[dict[str, Any]] = [{"name": name, "type": "int"}]
    for _ in range(levels - 1):
        fields = [{"name": name, "type": "struct", "fields": fields}]
    return fields


def test_json_depth_of_the_whole_event() -> None:
    # event(1) > run(2) > facets(3) > facet(4) > "v": nested(k) is k + 1 objects deep
    def deep(k: int) -> dict[str, Any]:
        return event("ns", "job", run={"runId": "0190b2c4-6c4e-7a3e-8f2a-1b2c3d4e5f60",
                                       "facets": {"deep": {"_producer": "p", "_schemaURL": "u", "v": nested(k)}}})

    _valid(deep(limits.MAX_JSON_DEPTH - 5))
    _refused(deep(limits.MAX_JSON_DEPTH - 4), "run.facets.deep.v.a.a", "nested deeper than 500 levels")
    # anywhere: an unknown top-level key, a dataset's unknown key, a list
    _valid(event("ns", "job", extra=nested(limits.MAX_JSON_DEPTH - 2)))
    _refused(event("ns", "job", extra=nested(limits.MAX_JSON_DEPTH - 1)), "extra.a.a")
    _refused(event("ns", "job", inputs=[{"namespace": "n", "name": "i", "x": nested(600)}]), "inputs.0.x.a")
    _refused(event("ns", "job", extra=[[[[[nested(600)]]]]]), "extra.0.0.0.0.0.a")


def test_depth_is_checked_without_recursion() -> None:
    deep: Any = []
    for _ in range(200_000):  # far past the interpreter's recursion limit
        deep = [deep]
    payload = event("ns", "job", extra=deep)
    with pytest.raises(LimitExceeded, match=r"^extra\.0\.0\.0.*…: nested deeper"):
        check_limits(payload)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(120)  # and with almost no stack left
    try:
        with pytest.raises(LimitExceeded):
            check_limits(payload)
    finally:
        sys.setrecursionlimit(limit)


def test_a_circular_facet_is_refused_as_too_deep() -> None:
    facet: dict[str, Any] = {"_producer": "p"}
    facet["self"] = facet
    payload = event("ns", "job")
    payload["run"]["facets"] = {"loop": facet}
    _refused(payload, "run.facets.loop.self.self")


def test_schema_field_count_nested_included() -> None:
    _valid(_output(schema=schema_facet(wide_schema(12_000))))  # a wide real table
    _valid(_output(schema=schema_facet(wide_schema(limits.MAX_SCHEMA_FIELDS))))
    _refused(_output(schema=schema_facet(wide_schema(limits.MAX_SCHEMA_FIELDS + 1))),
             "outputs.0.facets.schema.fields.25000: more than 25,000 schema fields")
    nested_fields = [{"name": f"s{i}", "type": "struct", "fields": wide_schema(999)} for i in range(26)]
    _refused(_output(schema=schema_facet(nested_fields)), "more than 25,000 schema fields (nested ones included)")


def test_schema_field_nesting() -> None:
    _valid(_output(schema=schema_facet(_chain(limits.MAX_SCHEMA_FIELD_DEPTH))))
    message = _refused(_output(schema=schema_facet(_chain(limits.MAX_SCHEMA_FIELD_DEPTH + 1))),
                       "outputs.0.facets.schema.fields.0.fields.0.fields", "nested deeper than 32 levels")
    assert len(message) < 600


def test_field_path_length_and_total() -> None:
    # 16 levels of 255-character names: a 4,095-character path (16 * 255 + 15 dots); one more character is over
    name = "n" * 255
    _valid(_output(schema=schema_facet(_chain(16, name))))
    longer = _chain(16, name)
    longer[0]["name"] += "xx"
    _refused(_output(schema=schema_facet(longer)), "field path of 4,097 characters, above the limit of 4,096")
    # the paths' total: 1,000 fields of 4,096 characters (4.1 M)
    flat = [{"name": f"{i:04d}" + "c" * 4092, "type": "int"} for i in range(1000)]
    _refused(_output(schema=schema_facet(flat)), "field paths exceed 4,000,000 characters in total")


def test_limited_schemas_bound_what_the_graph_and_the_diff_produce() -> None:
    """At every schema limit at once, the Field rows stay linear in the limits (the quadratic case is cut)."""
    name = "n" * 120
    fields = [{"name": f"{i:05d}", "type": "int"} for i in range(limits.MAX_SCHEMA_FIELDS - 32)]
    fields.append(_chain(limits.MAX_SCHEMA_FIELD_DEPTH, name)[0])
    payload = _output(schema=schema_facet(fields))
    _valid(payload)
    paths = field_paths(fields)
    assert len(paths) == limits.MAX_SCHEMA_FIELDS
    assert max(map(len, paths)) <= limits.MAX_FIELD_PATH_CHARS
    assert sum(map(len, paths)) <= limits.MAX_SCHEMA_PATH_CHARS
    assert len(graph_batch([payload])["fields"]) == limits.MAX_SCHEMA_FIELDS
    assert schema_version(fields) and diff_schemas(fields, fields[:-1])


def test_name_lengths() -> None:
    big = "x" * limits.MAX_NAME_CHARS
    _valid(event(big, big, outputs=[{"namespace": big, "name": big}]))
    over = big + "x"
    _refused(event("ns", over), "job.name: 65,537 characters, above the limit of 65,536")
    _refused(event(over, "j"), "job.namespace: 65,537")
    _refused(event("ns", "j", inputs=[{"namespace": "n", "name": "i"}, {"namespace": "n", "name": over}]),
             "inputs.1.name: 65,537")
    payload = event("ns", "j")
    payload["run"]["facets"] = {"parent": {"run": {"runId": payload["run"]["runId"]},
                                           "job": {"namespace": "n", "name": "p"},
                                           "root": {"run": {"runId": payload["run"]["runId"]},
                                                    "job": {"namespace": over, "name": "r"}}}}
    _refused(payload, "run.facets.parent.root.job.namespace: 65,537")
    dataset_event = {"eventTime": "2024-05-01T12:00:00Z", "producer": "p", "schemaURL": "u",
                     "dataset": {"namespace": "n", "name": over}}
    _refused(dataset_event, "dataset.name: 65,537")


def _lineage(fields: dict[str, Any], datasets: list[Any] | None = None) -> dict[str, Any]:
    return {"_producer": "p", "_schemaURL": "u", "fields": fields, **({"dataset": datasets} if datasets else {})}


def test_column_lineage() -> None:
    ref = {"namespace": "n", "name": "src", "field": "a"}
    wide = {f"c{i}": {"inputFields": [ref] * 4} for i in range(limits.MAX_COLUMN_LINEAGE_INPUTS // 4)}
    _valid(_output(columnLineage=_lineage(wide)))
    _refused(_output(columnLineage=_lineage(wide, [ref])), "outputs.0.facets.columnLineage.dataset: more than "
                                                           "100,000 input field references")
    wide["c0"]["inputFields"] = [ref] * 5
    _refused(_output(columnLineage=_lineage(wide)), "inputFields: more than 100,000 input field references")
    many = {f"c{i}": {"inputFields": []} for i in range(limits.MAX_COLUMN_LINEAGE_FIELDS + 1)}
    _refused(_output(columnLineage=_lineage(many)), "columnLineage.fields: more than 25,000 output fields")
    long_field = "f" * (limits.MAX_FIELD_PATH_CHARS + 1)
    _refused(_output(columnLineage=_lineage({"a": {"inputFields": [{**ref, "field": long_field}]}})),
             "columnLineage.fields.a.inputFields.0.field: field name of 4,097 characters")
    _refused(_output(columnLineage=_lineage({long_field: {"inputFields": [ref]}})), "field name of 4,097")
    _refused(_output(columnLineage=_lineage({"a": {"inputFields": [{**ref, "name": "x" * 70_000}]}})),
             "columnLineage.fields.a.inputFields.0.name: 70,000 characters")


def test_any_shape_is_measured_without_other_errors() -> None:
    for value in (None, 1, "x", [], {"run": 1}, {"inputs": 5}, {"inputs": [1, None, {"facets": 1}]},
                  {"run": {"facets": {"parent": 1, "schema": [], 5: {}}}},
                  {"outputs": [{"facets": {"schema": {"fields": [1, {"name": 2}, {"name": "a", "fields": 3}]},
                                           "columnLineage": {"fields": [1], "dataset": {}}}}]}):
        check_limits(value)


def test_each_cached_facet_is_checked_once() -> None:
    cache = FacetCache(admit_after=0)
    payload = _output(schema=schema_facet(wide_schema(100)))
    record = event_to_record(payload)
    first, second = record_to_event(record, cache), record_to_event(record, cache)
    schema = first["outputs"][0]["facets"]["schema"]
    assert schema is second["outputs"][0]["facets"]["schema"] and cache.holds(schema)
    calls = []
    original = limits._FACET_CHECKS["schema"]
    limits._FACET_CHECKS["schema"] = lambda facet: calls.append(1) or original(facet)
    try:
        for decoded in (first, second, first):
            validate_event(decoded, cache)
        validate_event(json.loads(json.dumps(payload)), cache)  # not the cache's object: checked again
    finally:
        limits._FACET_CHECKS["schema"] = original
    assert len(calls) == 2
