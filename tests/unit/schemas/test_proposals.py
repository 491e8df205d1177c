"""Proposed schemas read from DDL, Avro, JSON Schema and OpenLineage, and what they change (``lineage check``)."""

from __future__ import annotations

import json

import pytest

from kafka_lineage.graph.check import RENAMED, allowed, proposed_changes
from kafka_lineage.schemas.limits import MAX_SCHEMA_FIELDS
from kafka_lineage.schemas.proposals import (
    ProposalError,
    ProposedSchema,
    from_dbt,
    from_ddl,
    proposals_of,
    read_proposals,
)

NS = "postgres://db:5432"
CURRENT = [{"name": "id", "type": "bigint"}, {"name": "email", "type": "varchar(100)"},
           {"name": "amount", "type": "decimal(10,2)"},
           {"name": "address", "type": "struct", "fields": [{"name": "zip", "type": "string"}]}]


def changes(proposal: ProposedSchema) -> list[tuple[str, str, str]]:
    found, _renames = proposed_changes(proposal, CURRENT)
    return [(c.path, c.kind, c.severity) for c in found]


def test_ddl_create_and_alter_with_statement_lines() -> None:
    text = ("-- the branch's migration\nCREATE TABLE shop.public.customers (id BIGINT NOT NULL, name TEXT);\n\n"
            "ALTER TABLE shop.public.orders DROP COLUMN email;\n"
            "ALTER TABLE shop.public.orders RENAME COLUMN address TO addr;\n"
            "ALTER TABLE shop.public.orders ALTER COLUMN amount TYPE DECIMAL(8, 2);\n")
    customers, orders = from_ddl(text, NS, "postgres", "migrations/0042.sql")
    assert (customers.name, customers.line, customers.source) == ("shop.public.customers", 2, "migrations/0042.sql")
    assert customers.fields == [{"name": "id", "type": "BIGINT"}, {"name": "name", "type": "TEXT"}]  # no NOT NULL
    assert (orders.name, orders.line, orders.fields) == ("shop.public.orders", 4, None)
    assert [op.line for op in orders.operations] == [4, 5, 6]  # each change annotated on its own statement
    found, renames = proposed_changes(orders, CURRENT)
    assert [(c.path, c.kind, c.severity) for c in found] == [
        ("email", "REMOVED", "BREAKING"), ("amount", "TYPE_CHANGED", "BREAKING"), ("address", RENAMED, "BREAKING")]
    assert renames == {"address": "addr"}  # the struct's nested field moves with it: no separate change


def test_ddl_widening_adding_and_nullability() -> None:
    (proposal,) = from_ddl("ALTER TABLE t ALTER COLUMN amount TYPE DECIMAL(12, 2);\nALTER TABLE t ADD COLUMN note TEXT;"
                           "\nALTER TABLE t ALTER COLUMN email SET NOT NULL;", NS, "postgres")
    assert changes(proposal) == [("email", "NULLABILITY_CHANGED", "BREAKING"),
                                 ("amount", "TYPE_CHANGED", "COMPATIBLE"), ("note", "ADDED", "COMPATIBLE")]


def test_ddl_create_then_alter_in_one_file_is_the_result() -> None:
    (proposal,) = from_ddl("CREATE TABLE t (a INT, b INT); ALTER TABLE t DROP COLUMN b;", NS)
    assert proposal.fields == [{"name": "a", "type": "INT"}] and proposal.operations == ()


def test_ddl_unquoted_names_match_case_insensitively() -> None:
    (proposal,) = from_ddl("ALTER TABLE t DROP COLUMN EMAIL", NS)
    assert changes(proposal) == [("email", "REMOVED", "BREAKING")]


@pytest.mark.parametrize(("text", "namespace", "message"), [
    ("ALTER TABLE t ADD COLUMN a TEXT, DROP COLUMN b", NS, "cannot read"),
    ("CREATE TABLE (", NS, "does not parse"),
    ("SELECT 1", NS, "no CREATE TABLE"),
    ("ALTER TABLE t DROP COLUMN a", "", "namespace"),
])
def test_ddl_errors_say_why(text: str, namespace: str, message: str) -> None:
    with pytest.raises(ProposalError, match=message):
        from_ddl(text, namespace)


def test_alter_of_a_column_the_schema_lacks_is_an_input_error() -> None:
    (proposal,) = from_ddl("ALTER TABLE t DROP COLUMN nope", NS)
    with pytest.raises(ProposalError, match="nope"):
        proposed_changes(proposal, CURRENT)


def test_renaming_the_table_removes_every_column_of_this_name() -> None:
    (proposal,) = from_ddl("ALTER TABLE t RENAME TO t2", NS, "postgres")
    assert {kind for _path, kind, _severity in changes(proposal)} == {"REMOVED"}


def test_avro_record_types_and_nested_records() -> None:
    schema = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "address", "type": ["null", {"type": "record", "name": "A", "fields": [
            {"name": "zip", "type": "string"}]}]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    (proposal,) = read_proposals(json.dumps(schema), source="order.avsc", dataset=(NS, "orders"))
    assert proposal.fields[2] == {"name": "address", "type": "struct", "fields": [{"name": "zip", "type": "string"}]}
    assert [f["type"] for f in proposal.fields] == ["long", "decimal(12,2)", "struct", "array<string>", "timestamp"]
    assert changes(proposal) == [("email", "REMOVED", "BREAKING"), ("amount", "TYPE_CHANGED", "COMPATIBLE"),
                                 ("tags", "ADDED", "COMPATIBLE"), ("at", "ADDED", "COMPATIBLE")]


def test_json_schema_with_refs_and_nullable_types() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {
        "id": {"type": "integer"}, "email": {"type": ["string", "null"]}, "amount": {"type": "number"},
        "address": {"$ref": "#/$defs/Address"}}, "$defs": {"Address": {"type": "object", "properties": {
            "zip": {"type": "string"}}}}}
    (proposal,) = read_proposals(json.dumps(schema), source="orders.schema.json", dataset=(NS, "orders"))
    assert proposal.fields[3] == {"name": "address", "type": "struct", "fields": [{"name": "zip", "type": "string"}]}
    assert changes(proposal) == [("email", "TYPE_CHANGED", "COMPATIBLE"), ("amount", "TYPE_CHANGED", "BREAKING")]


def test_openlineage_events_propose_their_outputs_schemas() -> None:
    event = {"eventType": "COMPLETE", "run": {"runId": "r"}, "job": {"namespace": "j", "name": "j"},
             "inputs": [{"namespace": NS, "name": "src", "facets": {"schema": {"fields": [{"name": "x"}]}}}],
             "outputs": [{"namespace": NS, "name": "orders", "facets": {"schema": {"fields": CURRENT[:2]}}}]}
    (proposal,) = read_proposals(json.dumps(event) + "\n", source="run.ndjson")
    assert (proposal.namespace, proposal.name) == (NS, "orders")
    assert changes(proposal) == [("amount", "REMOVED", "BREAKING"), ("address", "REMOVED", "BREAKING"),
                                 ("address.zip", "REMOVED", "BREAKING")]
    (facet,) = read_proposals(json.dumps({"fields": CURRENT}), dataset=(NS, "orders"))
    assert changes(facet) == []
    with pytest.raises(ProposalError, match="--dataset"):
        read_proposals(json.dumps({"fields": CURRENT}))


def test_a_proposed_column_without_a_type_keeps_the_current_one_and_partial_proposals_remove_nothing() -> None:
    untyped = ProposedSchema(NS, "orders", [{"name": "id"}, {"name": "email"}])
    assert changes(untyped) == [("amount", "REMOVED", "BREAKING"), ("address", "REMOVED", "BREAKING"),
                                ("address.zip", "REMOVED", "BREAKING")]
    partial = ProposedSchema(NS, "orders", [{"name": "email", "type": "text"}, {"name": "new"}], complete=False)
    assert changes(partial) == [("email", "TYPE_CHANGED", "COMPATIBLE"), ("new", "ADDED", "COMPATIBLE")]


def test_allow_patterns() -> None:
    assert allowed(["orders:email"], NS, "orders", "email")
    assert allowed([f"{NS}/orders:*"], NS, "orders", "amount")
    assert allowed(["shop.*"], NS, "shop.orders", "x")  # a whole dataset
    assert not allowed(["orders:email"], NS, "orders", "emails")
    assert not allowed(["other:*"], NS, "orders", "email")


def test_inputs_are_bounded_and_errors_are_clear() -> None:
    wide = {"fields": [{"name": f"c{i}", "type": "int"} for i in range(MAX_SCHEMA_FIELDS + 1)]}
    with pytest.raises(ProposalError, match="more than"):
        read_proposals(json.dumps(wide), dataset=(NS, "t"))
    with pytest.raises(ProposalError, match="not JSON"):
        read_proposals("{", source="x.json")
    with pytest.raises(ProposalError, match="not an OpenLineage event"):
        read_proposals(json.dumps({"hello": 1}))
    with pytest.raises(ProposalError, match="local"):
        read_proposals(json.dumps({"properties": {"a": {"$ref": "http://x/y"}}}), dataset=(NS, "t"))


def test_check_request_bodies() -> None:
    proposals, options = proposals_of({
        "proposals": [{"namespace": NS, "name": "orders", "fields": CURRENT[:1]}],
        "documents": [{"text": "ALTER TABLE t DROP COLUMN a", "format": "ddl", "namespace": NS}],
        "allow": ["t:a"], "depth": 3})
    assert [(p.name, p.origin) for p in proposals] == [("orders", "schema proposal"), ("t", "DDL ALTER TABLE")]
    assert options == {"allow": ["t:a"], "depth": 3, "knownConsumersOnly": False}
    for body, message in (([], "JSON object"), ({}, "nothing to check"),
                          ({"proposals": [{"namespace": NS, "name": "t", "fields": "x"}]}, "list of objects"),
                          ({"proposals": [{"name": "t", "fields": []}]}, "namespace"),
                          ({"documents": [{"text": "{}"}], "depth": 0}, "not an OpenLineage")):
        with pytest.raises(ProposalError, match=message):
            proposals_of(body)


def test_dbt_artifacts_name_datasets_as_dbt_ol_does() -> None:
    manifest = {"nodes": {
        "model.shop.stg": {"resource_type": "model", "database": "shop", "schema": "main", "alias": "stg_customers",
                           "name": "stg", "original_file_path": "models/stg.sql", "columns": {
                               "email": {"name": "email", "meta": {"classification": "pii"}, "tags": ["contact"]}}},
        "model.shop.docs_only": {"resource_type": "model", "database": "shop", "schema": "main", "alias": "docs_only",
                                 "name": "docs_only", "original_file_path": "models/docs_only.sql",
                                 "columns": {"id": {"name": "id", "data_type": "integer"}}},
        "model.shop.unbuilt": {"resource_type": "model", "database": "shop", "schema": "main", "alias": "unbuilt",
                               "name": "unbuilt", "columns": {}},
        "test.shop.not_null": {"resource_type": "test", "database": "shop", "schema": "main", "alias": "t"}}}
    catalog = {"nodes": {"model.shop.stg": {"columns": {
        "email": {"name": "email", "type": "VARCHAR", "index": 2}, "id": {"name": "id", "type": "INTEGER",
                                                                         "index": 1}}}}}
    docs_only, stg = from_dbt(manifest, catalog, "duckdb:///w/shop.duckdb", "analytics")  # by unique id
    assert (stg.namespace, stg.name, stg.source, stg.origin) == (
        "duckdb:///w/shop.duckdb", "shop.main.stg_customers", "analytics/models/stg.sql", "dbt model stg")
    assert stg.fields == [{"name": "id", "type": "INTEGER"}, {"name": "email", "type": "VARCHAR"}] and stg.complete
    assert stg.tags == {"email": ["contact", "pii"]}
    assert docs_only.complete is False and docs_only.fields == [{"name": "id", "type": "integer"}]
    with pytest.raises(ProposalError, match="--namespace"):
        from_dbt(manifest, catalog, "")
    with pytest.raises(ProposalError, match="manifest"):
        from_dbt({"metadata": {}}, None, "n")
