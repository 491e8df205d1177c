"""Schema drift: field-level diff with severity, schema versions, and out-of-order observations."""

from __future__ import annotations

import copy
import io
import json
import random

import fastavro
import pytest

from kafka_lineage.schemas.avro_schemas import load_schema
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.schema_diff import (
    DriftFinding,
    FieldChange,
    diff_schemas,
    drift_between,
    overall_severity,
    schema_fields,
    schema_version,
)
from kafka_lineage.schemas.schema_history import SchemaHistory
from tests.openlineage_samples import dataset_event, full_run_event


def f(name: str, type_: str | None = None, *nested: dict, description: str | None = None) -> dict:
    field: dict = {"name": name}
    if type_ is not None:
        field["type"] = type_
    if description is not None:
        field["description"] = description
    if nested:
        field["fields"] = list(nested)
    return field


BASE = [
    f("id", "BIGINT", description="key"),
    f("address", "STRUCT", f("city", "STRING"), f("zip", "INT")),
    f("amount", "decimal(10,2)"),
]


def test_schema_fields() -> None:
    event = full_run_event()
    first = schema_fields(event["outputs"][0])[0]
    assert (first["name"], first["type"], first["description"]) == ("id", "BIGINT", "key")
    assert [(x["name"], x["type"]) for x in schema_fields(dataset_event()["dataset"])] == [("id", "long")]
    assert schema_fields({"namespace": "n", "name": "x"}) is None
    assert schema_fields({"facets": {"schema": {"fields": []}}}) is None  # no information, not "all removed"
    assert schema_fields({"facets": {"schema": None}}) is None
    assert schema_fields({"facets": "x"}) is None
    assert schema_fields(None) is None  # type: ignore[arg-type]


def test_reordered_fields_and_description_changes_are_not_drift() -> None:
    shuffled = copy.deepcopy(BASE)
    random.Random(1).shuffle(shuffled)
    shuffled[0]["description"] = "something else"
    nested = next(x for x in shuffled if x["name"] == "address")
    nested["fields"].reverse()
    nested["fields"][0]["description"] = "new words"
    assert diff_schemas(BASE, shuffled) == []
    assert schema_version(BASE) == schema_version(shuffled)


@pytest.mark.parametrize(("old", "new"), [
    ("INT", "integer"), ("int32", "Int"), ("BIGINT", "long"), ("int64", "bigint"), ("STRING", "varchar"),
    ("text", "String"), ("decimal(10, 2)", "NUMERIC(10,2)"), ("double precision", "DOUBLE"), ("bool", "BOOLEAN"),
    ("array<int>", "ARRAY< integer >"), ("timestamp with time zone", "timestamptz"), ("varchar(max)", "string"),
    ("  INT ", "int"), ("Weird<Thing>", "weird<thing>"),
])
def test_spellings_of_one_type_are_not_drift(old: str, new: str) -> None:
    assert diff_schemas([f("x", old)], [f("x", new)]) == []
    assert schema_version([f("x", old)]) == schema_version([f("x", new)])


def test_version_is_stable_and_changes_with_the_schema() -> None:
    version = schema_version(BASE)
    assert len(version) == 64 and version == schema_version(json.loads(json.dumps(BASE)))
    assert schema_version([*BASE, f("extra", "int")]) != version
    assert schema_version(None) == schema_version([])


def test_added_and_removed_fields() -> None:
    new = [f("id", "BIGINT"), f("address", "STRUCT", f("city", "STRING"), f("zip", "INT"), f("street", "STRING")),
           f("currency", "STRING")]
    assert diff_schemas(BASE, new) == [  # the old schema's order, nested changes right after their parent
        FieldChange("address.street", "ADDED", None, "STRING", "COMPATIBLE"),
        FieldChange("amount", "REMOVED", "decimal(10,2)", None, "BREAKING"),
        FieldChange("currency", "ADDED", None, "STRING", "COMPATIBLE"),
    ]


def test_nested_struct_field_type_change_has_a_dotted_path() -> None:
    new = copy.deepcopy(BASE)
    new[1]["fields"][1]["type"] = "STRING"
    assert diff_schemas(BASE, new) == [FieldChange("address.zip", "TYPE_CHANGED", "INT", "STRING", "BREAKING")]


def test_removed_struct_reports_its_nested_fields_and_deep_nesting_works() -> None:
    deep = [f("a", "STRUCT", f("b", "STRUCT", f("c", "INT")))]
    deeper = [f("a", "STRUCT", f("b", "STRUCT", f("c", "BIGINT"), f("d", "INT")))]
    assert diff_schemas(deep, deeper) == [FieldChange("a.b.c", "TYPE_CHANGED", "INT", "BIGINT", "COMPATIBLE"),
                                          FieldChange("a.b.d", "ADDED", None, "INT", "COMPATIBLE")]
    assert [c.path for c in diff_schemas(deep, [])] == ["a", "a.b", "a.b.c"]
    assert [c.path for c in diff_schemas([], deep)] == ["a", "a.b", "a.b.c"]


@pytest.mark.parametrize(("old", "new", "severity"), [
    # widenings
    ("int", "bigint", "COMPATIBLE"), ("INTEGER", "LONG", "COMPATIBLE"), ("smallint", "int", "COMPATIBLE"),
    ("tinyint", "bigint", "COMPATIBLE"), ("int16", "int32", "COMPATIBLE"), ("float", "double", "COMPATIBLE"),
    ("real", "double precision", "COMPATIBLE"), ("int", "double", "COMPATIBLE"), ("smallint", "float", "COMPATIBLE"),
    ("decimal(10,2)", "decimal(12,2)", "COMPATIBLE"), ("decimal(10,2)", "decimal(13,3)", "COMPATIBLE"),
    ("int", "decimal(10,0)", "COMPATIBLE"), ("bigint", "decimal(38,2)", "COMPATIBLE"),
    ("varchar(10)", "varchar(20)", "COMPATIBLE"), ("varchar(10)", "string", "COMPATIBLE"),
    ("VARCHAR(10)", "TEXT", "COMPATIBLE"), ("char(5)", "varchar(5)", "COMPATIBLE"),
    ("char(3)", "char(5)", "COMPATIBLE"),
    ("date", "timestamp", "COMPATIBLE"), ("timestamp(3)", "timestamp(6)", "COMPATIBLE"),
    ("array<int>", "array<bigint>", "COMPATIBLE"), ("map<string,int>", "map<string,bigint>", "COMPATIBLE"),
    # narrowings and other changes
    ("bigint", "int", "BREAKING"), ("double", "float", "BREAKING"), ("bigint", "double", "BREAKING"),
    ("int", "float", "BREAKING"), ("decimal(12,2)", "decimal(10,2)", "BREAKING"),
    ("decimal(10,2)", "decimal(10,3)", "BREAKING"), ("int", "decimal(5,0)", "BREAKING"),
    ("varchar(20)", "varchar(10)", "BREAKING"), ("string", "varchar(10)", "BREAKING"),
    ("varchar(5)", "char(5)", "BREAKING"), ("int", "string", "BREAKING"), ("string", "int", "BREAKING"),
    ("timestamp", "date", "BREAKING"), ("timestamp(6)", "timestamp(3)", "BREAKING"),
    ("array<bigint>", "array<int>", "BREAKING"), ("map<string,int>", "map<int,int>", "BREAKING"),
    ("struct<a:int>", "struct<a:bigint>", "BREAKING"), ("STRUCT", "STRING", "BREAKING"),
    ("boolean", "int", "BREAKING"), ("mystery", "enigma", "BREAKING"),
])
def test_type_change_severity(old: str, new: str, severity: str) -> None:
    assert diff_schemas([f("x", old)], [f("x", new)]) == [FieldChange("x", "TYPE_CHANGED", old, new, severity)]


@pytest.mark.parametrize(("old", "new", "severity"), [
    ("INT", "INT NOT NULL", "BREAKING"),
    ("INT NOT NULL", "INT", "COMPATIBLE"),
    ("int null", "int not  null", "BREAKING"),
    ("Nullable(Int32)", "Int32", "BREAKING"),
    ("Int32", "Nullable(Int32)", "COMPATIBLE"),
    ("String", "String!", "BREAKING"),
    ("String!", "String", "COMPATIBLE"),
])
def test_nullability_changes(old: str, new: str, severity: str) -> None:
    assert diff_schemas([f("x", old)], [f("x", new)]) == [FieldChange("x", "NULLABILITY_CHANGED", old, new, severity)]


def test_type_and_nullability_change_together() -> None:
    changes = diff_schemas([f("x", "Nullable(Int32)")], [f("x", "Int64")])
    assert [(c.kind, c.severity) for c in changes] == [("TYPE_CHANGED", "COMPATIBLE"),
                                                      ("NULLABILITY_CHANGED", "BREAKING")]
    assert overall_severity(changes) == "BREAKING"


def test_explicit_nullable_key_is_honoured() -> None:
    old = [{"name": "x", "type": "int", "nullable": True}]
    new = [{"name": "x", "type": "int", "nullable": False}]
    assert [c.kind for c in diff_schemas(old, new)] == ["NULLABILITY_CHANGED"]


def test_overall_severity() -> None:
    compatible = FieldChange("a", "ADDED", None, "int", "COMPATIBLE")
    unknown = FieldChange("b", "OTHER", None, None, "UNKNOWN")
    breaking = FieldChange("c", "REMOVED", "int", None, "BREAKING")
    assert overall_severity([]) == "COMPATIBLE"
    assert overall_severity([compatible]) == "COMPATIBLE"
    assert overall_severity([compatible, unknown]) == "UNKNOWN"
    assert overall_severity([unknown, breaking, compatible]) == "BREAKING"


def test_odd_fields_do_not_raise() -> None:
    odd = [None, 1, "x", {"type": "int"}, {"name": 5}, {"name": "dup", "type": "int"},
           {"name": "dup", "type": "str"}, {"name": "t", "type": None}, {"name": "n", "type": "int", "fields": "nope"},
           {"name": "p", "type": "dec(a,b)"}]
    assert diff_schemas(odd, odd) == []
    assert schema_version(odd) == schema_version(list(reversed(odd[:5])) + odd[5:])
    assert [c.path for c in diff_schemas(None, odd)] == ["dup", "t", "n", "p"]
    assert [c.kind for c in diff_schemas(odd, [])] == ["REMOVED"] * 4


# --- over time -----------------------------------------------------------------------------------------------------
def test_versions_are_ordered_by_instant_whatever_the_offset() -> None:
    history = SchemaHistory()
    history.observe("2024-05-01T12:00:00Z", "A")
    (change,) = history.observe("2024-05-01T13:30:00+02:00", "B")  # 11:30Z: before A, late
    assert (change.previous_version, change.version, change.at, change.late) == ("B", "A", "2024-05-01T12:00:00Z", True)
    (change,) = history.observe("2024-05-01T10:00:00.001Z", "C")  # 10:00:00.001Z: before B
    assert (change.previous_version, change.version) == ("C", "B")
    assert history.observe("garbage", "D")[0].previous_version == "A"  # an unusable time sorts last


def _finding(old: list, new: list) -> DriftFinding:
    return drift_between(old, new, schema_version(old), schema_version(new), "2024-05-01T12:00:00Z",
                         "2024-05-01T12:05:00Z", "s3://b", "orders")


def test_drift_between_two_versions() -> None:
    new = copy.deepcopy(BASE)
    new[0]["type"] = "INT"
    new.append(f("note", "STRING"))
    finding = _finding(BASE, new)
    assert isinstance(finding, DriftFinding)
    assert (finding.namespace, finding.name) == ("s3://b", "orders")
    assert finding.previous_version == schema_version(BASE) and finding.new_version == schema_version(new)
    assert json.loads(finding.previous_schema) == BASE and json.loads(finding.new_schema) == new
    assert finding.previous_event_time == "2024-05-01T12:00:00Z" and finding.event_time == "2024-05-01T12:05:00Z"
    assert finding.changes == (FieldChange("id", "TYPE_CHANGED", "BIGINT", "INT", "BREAKING"),
                               FieldChange("note", "ADDED", None, "STRING", "COMPATIBLE"))
    assert finding.severity == "BREAKING"


def test_versions_differing_without_field_changes_still_report_other() -> None:
    old = [{"name": "x", "type": "int", "nullable": True}, {"name": "x", "type": "bigint"}]
    new = [{"name": "x", "type": "int", "nullable": True}]
    assert schema_version(old) == schema_version(new)  # later duplicates are ignored: one version
    odd_old = [{"name": "x", "type": "int"}]
    odd_new = [{"name": "x", "type": "int"}, {"name": 3}]  # a nameless entry is ignored too
    assert schema_version(odd_old) == schema_version(odd_new)
    unknown = drift_between(None, odd_new, "gone", schema_version(odd_new), "2024-05-01T12:00:00Z",
                            "2024-05-01T12:00:01Z")  # the old fields not known any more: still reported
    assert [(c.kind, c.severity) for c in unknown.changes] == [("OTHER", "UNKNOWN")]


def test_records_encode_as_avro_schema_changes() -> None:
    new = copy.deepcopy(BASE)
    new[1]["fields"][1]["type"] = "BIGINT"
    del new[2]
    finding = _finding(BASE, new)
    record = {
        "event": event_to_record(full_run_event()),
        "processing": {"dedupeId": "0" * 64, "processedAt": 0},
        "schemaChanges": [finding.as_record()],
    }
    schema = fastavro.parse_schema(load_schema("normalized_event"))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    buffer.seek(0)
    decoded = fastavro.schemaless_reader(buffer, schema, schema)
    assert decoded["schemaChanges"] == [finding.as_record()]
    assert decoded["schemaChanges"][0]["changes"][0] == {"path": "address.zip", "kind": "TYPE_CHANGED",
                                                         "oldType": "INT", "newType": "BIGINT",
                                                         "severity": "COMPATIBLE"}
