"""Connect hook columns: registry Avro schemas → fields, each SMT and chains of them, tracing source fields back."""

from __future__ import annotations

import json

import pytest

from kafka_lineage.producers.service.connect_schema import (
    Field,
    SourcePath,
    apply_chain,
    avro_root,
    facet_fields,
    leaves,
    source_paths,
    transforms_of,
)

T = "org.apache.kafka.connect.transforms."
ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": ["null", "string"], "default": None, "doc": "who"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"},
            {"name": "zip", "type": {"type": "int", "connect.type": "int16"}}]}]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "ship_to", "type": ["null", "Address"], "default": None},
    ]})


def chain(*transforms: tuple[str, dict[str, str]]) -> dict[str, str]:
    config = {"transforms": ",".join(f"t{i}" for i in range(len(transforms)))}
    for i, (kind, settings) in enumerate(transforms):
        config[f"transforms.t{i}.type"] = kind if "." in kind else T + kind
        config.update({f"transforms.t{i}.{k}": v for k, v in settings.items()})
    return config


def after(*transforms: tuple[str, dict[str, str]], schema: str = ORDER) -> Field:
    return apply_chain(avro_root(schema), transforms_of(chain(*transforms))).root


def names(root: Field) -> list[str]:
    return [f.name for f in root.fields]


def types(root: Field) -> dict[str, str]:
    return {path: f.type if f.nullable else f"{f.type} NOT NULL" for path, f in leaves(root)}


# --- Avro → fields ------------------------------------------------------------------------------------------------
def test_avro_record_to_schema_facet_fields() -> None:
    assert facet_fields(avro_root(ORDER)) == [
        {"name": "id", "type": "long NOT NULL"},
        {"name": "customer", "type": "string", "description": "who"},
        {"name": "amount", "type": "decimal(10,2) NOT NULL"},
        {"name": "created", "type": "timestamp NOT NULL"},
        {"name": "address", "type": "struct", "fields": [
            {"name": "city", "type": "string NOT NULL"}, {"name": "zip", "type": "smallint NOT NULL"}]},
        {"name": "tags", "type": "array<string> NOT NULL"},
        {"name": "attrs", "type": "map<string,long> NOT NULL"},
        {"name": "status", "type": "string NOT NULL"},
        {"name": "ship_to", "type": "struct", "fields": [  # a named type used again
            {"name": "city", "type": "string NOT NULL"}, {"name": "zip", "type": "smallint NOT NULL"}]},
    ]


def test_primitive_value_has_no_fields_and_connect_logical_types_are_read() -> None:
    assert facet_fields(avro_root('"string"')) == []
    stamp = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "int", "connect.name": "org.apache.kafka.connect.data.Date"}},
        {"name": "b", "type": {"type": "int", "connect.type": "int8"}}]}
    assert types(avro_root(stamp)) == {"d": "date NOT NULL", "b": "tinyint NOT NULL"}


def test_leaves_carry_their_own_paths_as_origin() -> None:
    paths = {path: f.origin for path, f in leaves(avro_root(ORDER))}
    assert paths["address.zip"] == ("address.zip",) and paths["id"] == ("id",)


# --- each SMT -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("include, exclude", [("include", "exclude"), ("whitelist", "blacklist")])
def test_replace_field_include_exclude_renames(include: str, exclude: str) -> None:
    root = after(("ReplaceField$Value", {include: "id,customer,amount", exclude: "amount",
                                         "renames": "customer:buyer,id:order_id"}))
    assert names(root) == ["order_id", "buyer"]
    assert [f.origin for f in root.fields] == [("id",), ("customer",)]
    assert not any(f.transformed for f in root.fields)


def test_extract_field_top_level_and_nested_v2() -> None:
    assert names(after(("ExtractField$Value", {"field": "address"}))) == ["city", "zip"]
    assert after(("ExtractField$Value", {"field": "address"})).fields[0].origin == ("address.city",)
    nested = after(("ExtractField$Value", {"field": "address.city", "field.syntax.version": "V2"}))
    assert (nested.type, nested.fields, nested.origin) == ("string", (), ("address.city",))
    assert after(("ExtractField$Value", {"field": "address.city"})).type == "null"  # V1: a literal name, absent


def test_hoist_field_wraps_the_value() -> None:
    root = after(("HoistField$Value", {"field": "line"}), schema='"string"')
    assert facet_fields(root) == [{"name": "line", "type": "string NOT NULL"}]
    assert root.fields[0].origin == ("",)  # the whole value of the topic: no column of it


def test_flatten_with_delimiter_makes_children_of_optional_structs_optional() -> None:
    root = after(("Flatten$Value", {"delimiter": "_"}))
    assert names(root)[4:6] == ["address_city", "address_zip"]
    flat = {f.name: f for f in root.fields}
    assert flat["address_city"].nullable and flat["address_city"].origin == ("address.city",)
    assert names(after(("Flatten$Value", {})))[4] == "address.city"  # default delimiter "."


def test_cast_fields_and_whole_value() -> None:
    root = after(("Cast$Value", {"spec": "id:string, amount:float64"}))
    cast = {f.name: f for f in root.fields}
    assert (cast["id"].type, cast["id"].transformed, cast["amount"].type) == ("string", True, "double")
    assert not cast["customer"].transformed
    whole = after(("ExtractField$Value", {"field": "id"}), ("Cast$Value", {"spec": "int32"}))
    assert (whole.type, whole.transformed, whole.origin) == ("int", True, ("id",))
    struct = after(("Cast$Value", {"spec": "address:string"}))
    assert {f.name: f for f in struct.fields}["address"].origin == ("address.city", "address.zip")


def test_insert_field_adds_metadata_fields_without_origin() -> None:
    root = after(("InsertField$Value", {"topic.field": "src_topic!", "partition.field": "part?",
                                        "offset.field": "off", "timestamp.field": "ts", "static.field": "origin",
                                        "static.value": "file"}))
    added = {f.name: f for f in root.fields[-5:]}
    assert {n: (f.type, f.nullable, f.origin) for n, f in added.items()} == {
        "src_topic": ("string", False, ()), "part": ("int", True, ()), "off": ("long", True, ()),
        "ts": ("timestamp", True, ()), "origin": ("string", True, ())}


def test_mask_field_keeps_type_marks_masking() -> None:
    masked = {f.name: f for f in after(("MaskField$Value", {"fields": "customer", "replacement": "x"})).fields}
    assert (masked["customer"].type, masked["customer"].masked, masked["customer"].transformed) == (
        "string", True, True)
    assert not masked["id"].masked


def test_timestamp_converter_field_and_whole_value() -> None:
    root = after(("TimestampConverter$Value", {"field": "created", "target.type": "string",
                                               "format": "yyyy-MM-dd"}))
    created = {f.name: f for f in root.fields}["created"]
    assert (created.type, created.transformed) == ("string", True)
    assert after(("ExtractField$Value", {"field": "created"}),
                 ("TimestampConverter$Value", {"target.type": "unix"})).type == "long"
    assert {f.name: f for f in after(("TimestampConverter$Value", {"field": "id", "target.type": "Timestamp"})
                                     ).fields}["id"].type == "timestamp"


def test_key_smts_neutral_smts_and_unknown_smts() -> None:
    original = avro_root(ORDER)
    config = chain(("ReplaceField$Key", {"exclude": "id"}), ("RegexRouter", {"regex": ".*", "replacement": "x"}),
                   ("com.example.Encrypt", {"fields": "id"}), ("Filter", {}))
    result = apply_chain(original, transforms_of(config))
    assert result.root == original  # nothing modelled touches the value
    assert result.unknown == ("com.example.Encrypt",)


def test_debezium_unwrap_takes_the_after_state() -> None:
    row = {"type": "record", "name": "Value", "fields": [{"name": "id", "type": "int"}]}
    envelope = json.dumps({"type": "record", "name": "Envelope", "fields": [
        {"name": "before", "type": ["null", row]}, {"name": "after", "type": ["null", "Value"]},
        {"name": "op", "type": "string"}]})
    root = after(("io.debezium.transforms.ExtractNewRecordState", {}), schema=envelope)
    assert facet_fields(root) == [{"name": "id", "type": "int NOT NULL"}]
    assert root.fields[0].origin == ("after.id",)


# --- chains -------------------------------------------------------------------------------------------------------
def test_chain_flatten_rename_mask_cast_insert() -> None:
    root = after(("Flatten$Value", {"delimiter": "_"}),
                 ("ReplaceField$Value", {"exclude": "tags,attrs,ship_to_city,ship_to_zip",
                                         "renames": "address_city:city"}),
                 ("MaskField$Value", {"fields": "customer"}),
                 ("Cast$Value", {"spec": "address_zip:string"}),
                 ("InsertField$Value", {"static.field": "origin", "static.value": "db"}))
    assert types(root) == {"id": "long NOT NULL", "customer": "string", "amount": "decimal(10,2) NOT NULL",
                           "created": "timestamp NOT NULL", "city": "string", "address_zip": "string",
                           "status": "string NOT NULL", "origin": "string"}
    by_name = {f.name: f for f in root.fields}
    assert by_name["city"].origin == ("address.city",) and not by_name["city"].transformed
    assert by_name["address_zip"].origin == ("address.zip",) and by_name["address_zip"].transformed
    assert by_name["customer"].masked and by_name["origin"].origin == ()


def test_hoist_then_insert_like_a_file_source() -> None:
    root = after(("HoistField$Value", {"field": "line"}), ("InsertField$Value", {"static.field": "origin"}),
                 schema='"string"')
    assert facet_fields(root) == [{"name": "line", "type": "string NOT NULL"}, {"name": "origin", "type": "string"}]


# --- source connectors: back from the topic's fields --------------------------------------------------------------
def test_source_paths_undo_the_chain() -> None:
    steps = transforms_of(chain(("ReplaceField$Value", {"renames": "id:order_id"}),
                                ("Cast$Value", {"spec": "order_id:string"}),
                                ("MaskField$Value", {"fields": "email"}),
                                ("InsertField$Value", {"static.field": "origin"})))
    assert source_paths("order_id", steps) == SourcePath("id", transformed=True)
    assert source_paths("email", steps) == SourcePath("email", transformed=True, masked=True)
    assert source_paths("origin", steps) is None  # created by the chain
    assert source_paths("name", steps) == SourcePath("name")
    hoisted = transforms_of(chain(("HoistField$Value", {"field": "line"}), ("InsertField$Value",
                                                                           {"static.field": "origin"})))
    assert source_paths("line", hoisted) == SourcePath("")  # the whole value: no column
    unwrap = transforms_of(chain(("io.debezium.transforms.ExtractNewRecordState", {"add.fields": "op"}),
                                 ("Flatten$Value", {"delimiter": "."})))
    assert source_paths("id", unwrap) == SourcePath("after.id")
    assert source_paths("__op", unwrap) is None


def test_transforms_of_reads_each_alias_settings_in_order() -> None:
    config = {"transforms": "b, a", "transforms.a.type": T + "HoistField$Value", "transforms.a.field": "x",
              "transforms.b.type": T + "Flatten$Value", "transforms.ab.type": "nope"}
    assert [(t.alias, t.short, dict(t.config)) for t in transforms_of(config)] == [
        ("b", "Flatten$Value", {}), ("a", "HoistField$Value", {"field": "x"})]
    assert transforms_of({}) == []
