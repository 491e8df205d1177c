"""Canonical dataset identities on whole events: spec forms, aliases, symlinks, column lineage, odd input."""

from __future__ import annotations

import copy
import io

import fastavro
import pytest

from kafka_lineage.processors.normalize import Rename, canonical_identity, normalize_event, parse_aliases
from kafka_lineage.schemas.avro_schemas import load_schema
from kafka_lineage.schemas.openlineage import event_to_record, validate_event
from tests.openlineage_samples import dataset_event, full_run_event, job_event


@pytest.mark.parametrize(("namespace", "name", "expected", "rule"), [
    # object stores and HDFS
    ("s3a://bucket", "warehouse/orders", ("s3://bucket", "warehouse/orders"), "s3a-scheme"),
    ("s3n://bucket", "warehouse/orders", ("s3://bucket", "warehouse/orders"), "s3a-scheme"),
    ("s3a://Bucket", "k", ("s3://bucket", "k"), "s3a-scheme+host-case"),
    ("s3a://bucket/warehouse/", "orders/part-0.parquet", ("s3://bucket", "warehouse/orders/part-0.parquet"),
     "s3a-scheme"),
    ("gcs://b", "k", ("gs://b", "k"), "gcs-scheme"),
    ("abfs://c@acct.dfs.core.windows.net", "/data", ("abfss://c@acct.dfs.core.windows.net", "/data"), "azure-scheme"),
    ("wasb://c@acct.blob.core.windows.net", "data/x", ("wasbs://c@acct.dfs.core.windows.net", "data/x"),
     "azure-scheme"),
    ("wasbs://c@acct.blob.core.windows.net", "x", ("wasbs://c@acct.dfs.core.windows.net", "x"), "azure-scheme"),
    ("hdfs://NameNode:8020", "/data", ("hdfs://namenode:8020", "/data"), "host-case"),
    ("hdfs://namenode", "/data", ("hdfs://namenode:8020", "/data"), "default-port"),
    ("s3://bucket", "s3://bucket/k/x", ("s3://bucket", "k/x"), "name-uri"),
    # Kafka
    ("kafka://b2:9092,b1:9092", "orders", ("kafka://b1:9092", "orders"), "kafka-bootstrap-order"),
    ("kafka://B2:9092,b1:9092", "orders", ("kafka://b1:9092", "orders"), "kafka-bootstrap-order+host-case"),
    ("kafka://SASL_SSL://b2:9093,SASL_SSL://b1:9093", "t", ("kafka://b1:9093", "t"), "kafka-bootstrap-order"),
    ("kafka://broker", "orders", ("kafka://broker:9092", "orders"), "default-port"),
    ("kafka://Broker:9092", "orders", ("kafka://broker:9092", "orders"), "host-case"),
    # connection URLs
    ("jdbc:postgresql://db:5432/shop", "public.orders", ("postgres://db:5432", "shop.public.orders"), "jdbc-url"),
    ("jdbc:postgresql://DB/shop", "orders", ("postgres://db:5432", "shop.public.orders"),
     "jdbc-url+host-case+default-port"),
    ("postgresql://db:5432", "shop.public.orders", ("postgres://db:5432", "shop.public.orders"), "jdbc-url"),
    ("postgres://db", "shop.public.orders", ("postgres://db:5432", "shop.public.orders"), "default-port"),
    ("jdbc:mysql://h:3306/shop", "orders", ("mysql://h:3306", "shop.orders"), "jdbc-url"),
    ("mysql://user:Secret@h/shop", "orders", ("mysql://h:3306", "shop.orders"), "jdbc-url+default-port"),
    ("jdbc:sqlserver://h;databaseName=sales", "dbo.t", ("sqlserver://h:1433", "sales.dbo.t"),
     "jdbc-url+default-port"),
    ("jdbc:oracle:thin:@h:1521/svc", "hr.emp", ("oracle://h:1521", "svc.hr.emp"), "jdbc-url"),
    ("jdbc:redshift://c1.abc.us-east-1.redshift.amazonaws.com:5439/dev", "public.t",
     ("redshift://c1.us-east-1:5439", "dev.public.t"), "jdbc-url"),
    ("jdbc:snowflake://org-acct.snowflakecomputing.com/?db=DB", "S.T", ("snowflake://org-acct", "DB.S.T"),
     "jdbc-url"),
    ("snowflake://ORG-ACCT", "db.s.t", ("snowflake://org-acct", "db.s.t"), "host-case"),
    ("jdbc:postgresql://db:5432/shop", "a.b.c.d", ("postgres://db:5432", "a.b.c.d"), "jdbc-url"),  # too many levels
    # files
    ("file", "file:///data/x.csv", ("file", "/data/x.csv"), "file-uri"),
    ("file", "file:/data/x.csv", ("file", "/data/x.csv"), "file-uri"),
    ("file:", "/data/x.csv", ("file", "/data/x.csv"), "file-uri"),
    ("file:///", "data/x.csv", ("file", "/data/x.csv"), "file-uri"),
    ("file://localhost", "/data/x.csv", ("file", "/data/x.csv"), "file-uri"),
    ("file://Host", "/data/x.csv", ("file://host", "/data/x.csv"), "file-uri+host-case"),
])
def test_namespace_forms_become_canonical(namespace: str, name: str, expected: tuple[str, str], rule: str) -> None:
    assert canonical_identity(namespace, name) == (*expected, rule)
    event = dataset_event()
    event["dataset"].update(namespace=namespace, name=name)
    out, renames = normalize_event(event)
    assert (out["dataset"]["namespace"], out["dataset"]["name"]) == expected
    assert renames == [Rename(namespace, name, *expected, rule)]


@pytest.mark.parametrize(("namespace", "name"), [
    ("postgres://db:5432", "shop.public.orders"),
    ("s3://bucket", "warehouse/orders"),
    ("kafka://broker:9092", "orders"),
    ("file", "/data/x.csv"),
    ("file", "relative/x.csv"),
    ("bigquery", "p.d.t"),
    ("hdfs://nn:9000", "/x"),
    ("abfss://c@acct.dfs.core.windows.net", "/x"),
    ("redshift://c1.us-east-1:5439", "dev.public.t"),
    ("my-custom-namespace", "whatever"),  # unknown forms: kept as they are
    ("weird://Host:1", "x"),
    ("arn:aws:glue:us-east-1:123456789012", "table/db/t"),
    ("kafka://", "t"),
    ("s3a://", "k"),
    ("jdbc:postgresql://", "t"),
    ("file://[bad", "x"),
    ("  ", "x"),
])
def test_canonical_and_unknown_identities_are_left_alone(namespace: str, name: str) -> None:
    assert canonical_identity(namespace, name) == (namespace, name, "")
    event = dataset_event()
    event["dataset"].update(namespace=namespace, name=name)
    out, renames = normalize_event(event)
    assert out == event and renames == []


def test_input_event_is_not_mutated_and_output_is_new() -> None:
    event = full_run_event()
    event["inputs"][0]["namespace"] = "jdbc:postgresql://DB/shop"
    event["inputs"][0]["name"] = "public.orders"
    event["outputs"][0]["namespace"] = "s3a://bucket"
    before = copy.deepcopy(event)
    out, _ = normalize_event(event, {"hive://meta:9083": "hive://prod"})
    assert event == before
    assert out is not event
    assert out["outputs"][0]["namespace"] == "s3://bucket"


def test_a_symlinked_dataset_keeps_its_own_identity_and_its_symlinks_as_sent() -> None:
    # The sample input is postgres://db:5432 shop.public.orders with a TABLE symlink hive://meta:9083 shop.orders,
    # and the output's column lineage reads from that input: all keep naming the input itself (the graph sink links
    # the two names with SAME_AS); nothing is renamed, no identifier is added.
    event = full_run_event()
    out, renames = normalize_event(event)
    assert out == event and renames == []
    validate_event(out)


def test_symlink_identifiers_take_canonical_form_and_alias_but_never_replace_the_identity() -> None:
    event = full_run_event()
    physical = event["outputs"][0]
    physical.update(namespace="s3a://Warehouse", name="orders")
    physical["facets"]["symlinks"] = {"_producer": "p", "_schemaURL": "s", "identifiers": [
        {"namespace": "s3a://warehouse", "name": "orders/_delta_log", "type": "LOCATION"},
        {"namespace": "jdbc:postgresql://Meta/db", "name": "public.orders_t", "type": "table"},
    ]}
    event["inputs"] = []
    out, renames = normalize_event(event, {"postgres://meta:5432": "postgres://catalog:5432"})
    dataset = out["outputs"][0]
    assert (dataset["namespace"], dataset["name"]) == ("s3://warehouse", "orders")
    assert dataset["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "s3://warehouse", "name": "orders/_delta_log", "type": "LOCATION"},
        {"namespace": "postgres://catalog:5432", "name": "db.public.orders_t", "type": "table"},
    ]
    by_original = {(r.original_namespace, r.original_name): r for r in renames}
    assert by_original[("s3a://Warehouse", "orders")].rule == "s3a-scheme+host-case"
    table = by_original[("jdbc:postgresql://Meta/db", "public.orders_t")]
    assert (table.namespace, table.name) == ("postgres://catalog:5432", "db.public.orders_t")
    assert table.rule.endswith("alias")


def test_a_spark_delta_output_is_not_given_a_path_that_does_not_exist() -> None:
    # Spark's Delta/CTAS output: the path, with the warehouse directory and the table as a TABLE symlink.
    event = full_run_event()
    event["inputs"] = []
    event["outputs"][0].update(namespace="file", name="/tmp/delta/tbl")
    event["outputs"][0]["facets"]["symlinks"] = {"_producer": "p", "_schemaURL": "s", "identifiers": [
        {"namespace": "file:/tmp/delta", "name": "default.tbl", "type": "TABLE"}]}
    out, _ = normalize_event(event)
    assert (out["outputs"][0]["namespace"], out["outputs"][0]["name"]) == ("file", "/tmp/delta/tbl")
    # the table is named under its warehouse location: a table name, not a path inside it
    assert out["outputs"][0]["facets"]["symlinks"] is event["outputs"][0]["facets"]["symlinks"]


def test_column_lineage_references_take_canonical_form_dataset_level_lineage_and_unknown_inputs() -> None:
    event = full_run_event()
    event["inputs"][0].update(namespace="s3a://raw", name="orders")
    event["inputs"][0]["facets"]["symlinks"]["identifiers"][0] = {
        "namespace": "hive://meta:9083", "name": "raw.orders", "type": "TABLE"}
    lineage = event["outputs"][0]["facets"]["columnLineage"]
    lineage["fields"]["id"]["inputFields"] = [
        {"namespace": "s3a://raw", "name": "orders", "field": "id"},  # the input as emitted
        {"namespace": "s3://raw", "name": "orders", "field": "id2"},  # the input, already canonical
        {"namespace": "kafka://b2:9092,b1:9092", "name": "clicks", "field": "c"},  # not among the inputs
    ]
    lineage["dataset"] = [{"namespace": "s3n://raw", "name": "orders", "field": "id",
                           "transformations": [{"type": "INDIRECT", "subtype": "FILTER"}]}]
    out, renames = normalize_event(event)
    assert (out["inputs"][0]["namespace"], out["inputs"][0]["name"]) == ("s3://raw", "orders")
    refs = out["outputs"][0]["facets"]["columnLineage"]["fields"]["id"]["inputFields"]
    assert [(r["namespace"], r["name"]) for r in refs] == [
        ("s3://raw", "orders"), ("s3://raw", "orders"), ("kafka://b1:9092", "clicks")]
    dataset_level = out["outputs"][0]["facets"]["columnLineage"]["dataset"][0]
    assert (dataset_level["namespace"], dataset_level["name"]) == ("s3://raw", "orders")
    assert dataset_level["transformations"] == [{"type": "INDIRECT", "subtype": "FILTER"}]
    originals = sorted((r.original_namespace, r.rule) for r in renames)
    assert originals == [("kafka://b2:9092,b1:9092", "kafka-bootstrap-order"), ("s3a://raw", "s3a-scheme"),
                         ("s3n://raw", "s3a-scheme")]


def test_duplicate_identities_collapse_to_one_rename() -> None:
    event = full_run_event()
    event["inputs"][0].update(namespace="kafka://b2:9092,b1:9092", name="t", facets={})
    event["outputs"][0].update(namespace="kafka://b2:9092,b1:9092", name="t")
    event["outputs"][0]["facets"] = {}
    event["inputs"].append(copy.deepcopy(event["inputs"][0]))
    out, renames = normalize_event(event)
    assert len(renames) == 1
    assert {(d["namespace"], d["name"]) for d in out["inputs"] + out["outputs"]} == {("kafka://b1:9092", "t")}


def test_alias_map_applies_after_canonical_form() -> None:
    aliases = parse_aliases("kafka://b1:9092,kafka://b2:9092=kafka://prod; postgres://db-replica:5432=postgres://db:5432")
    event = job_event()
    event["inputs"] = [{"namespace": "kafka://B2:9092,b3:9092", "name": "orders"},
                       {"namespace": "jdbc:postgresql://db-replica/shop", "name": "public.t"}]
    event["outputs"] = [{"namespace": "kafka://b1", "name": "out"}]
    out, renames = normalize_event(event, aliases)
    assert [(d["namespace"], d["name"]) for d in out["inputs"] + out["outputs"]] == [
        ("kafka://prod", "orders"), ("postgres://db:5432", "shop.public.t"), ("kafka://prod", "out")]
    assert [r.rule for r in renames] == ["kafka-bootstrap-order+host-case+alias", "jdbc-url+default-port+alias",
                                         "default-port+alias"]


def test_normalizing_twice_changes_nothing() -> None:
    aliases = parse_aliases("kafka://b1:9092=kafka://prod")
    event = full_run_event()
    event["outputs"][0].update(namespace="kafka://b1:9092,b2:9092", name="t")
    once, renames = normalize_event(event, aliases)
    assert renames
    twice, again = normalize_event(once, aliases)
    assert twice == once and again == []


def test_unchanged_event_normalizes_to_an_equal_event_without_renames() -> None:
    event = dataset_event()
    out, renames = normalize_event(event)
    assert out == event and renames == []
    out, renames = normalize_event(job_event())
    assert out == job_event() | {"inputs": out["inputs"]} and renames == []


@pytest.mark.parametrize("mangle", [
    lambda e: e.update(inputs=[None, 3, "x", {"namespace": 5, "name": None}, {}]),
    lambda e: e.update(outputs="not a list"),
    lambda e: e["inputs"][0].update(facets="nope"),
    lambda e: e["inputs"][0]["facets"].update(symlinks={"identifiers": "x"}),
    lambda e: e["inputs"][0]["facets"].update(
        symlinks={"identifiers": [None, 1, {"type": "TABLE"}, {"type": "TABLE", "namespace": "", "name": 1}]}),
    lambda e: e["inputs"][0]["facets"].update(symlinks=[1, 2]),
    lambda e: e["outputs"][0]["facets"].update(columnLineage={"fields": {"a": None, "b": {"inputFields": "x"},
                                                                         "c": {"inputFields": [None, {}]}}}),
    lambda e: e["outputs"][0]["facets"].update(columnLineage={"fields": [], "dataset": {"x": 1}}),
    lambda e: e["outputs"][0]["facets"].update(columnLineage=None),
    lambda e: e["outputs"][0].update(namespace="jdbc:postgresql://h:99999/db", name="t"),
    lambda e: e["outputs"][0].update(namespace="s3a://bad bucket!", name="t"),
    lambda e: e["outputs"][0].update(namespace="kafka://a:1,,b:x", name="t"),
    lambda e: e["outputs"][0].update(namespace="hdfs://host:0", name="t"),
    lambda e: e["outputs"][0].update(namespace="file://\x00", name="t"),
    lambda e: e["outputs"][0].update(namespace="jdbc:oracle:thin:nohost", name="t"),
    lambda e: e.update(dataset=None),
])
def test_hostile_or_odd_input_never_raises(mangle) -> None:
    event = full_run_event()
    mangle(event)
    before = copy.deepcopy(event)
    out, renames = normalize_event(event, {"s3://bucket": "s3://alias"})
    assert event == before
    assert isinstance(out, dict) and isinstance(renames, list)


def test_non_dict_event_is_returned_as_is() -> None:
    assert normalize_event("x") == ("x", [])  # type: ignore[arg-type]


def test_renames_encode_as_avro_processing_info() -> None:
    event = full_run_event()
    event["outputs"][0]["namespace"] = "s3a://bucket"
    out, renames = normalize_event(event)
    record = {
        "event": event_to_record(out),
        "processing": {"dedupeId": "0" * 64, "processedAt": 0, "renamedDatasets": [r.as_record() for r in renames]},
        "schemaChanges": [],
    }
    schema = fastavro.parse_schema(load_schema("normalized_event"))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    buffer.seek(0)
    decoded = fastavro.schemaless_reader(buffer, schema, schema)
    assert decoded["processing"]["renamedDatasets"] == [r.as_record() for r in renames]


# --- alias configuration -------------------------------------------------------------------------------------------
def test_parse_aliases() -> None:
    text = """kafka://b1:9092,kafka://b2:9092=kafka://prod; postgres://db-replica:5432=postgres://db:5432
              kafka://B3,b4:9093 , jdbc:mysql://H/x = mysql://m:3306 ;;"""
    assert parse_aliases(text) == {
        "kafka://b1:9092": "kafka://prod",
        "kafka://b2:9092": "kafka://prod",
        "postgres://db-replica:5432": "postgres://db:5432",
        "kafka://b3:9092": "mysql://m:3306",  # `B3,b4:9093` is one broker list: its canonical namespace
        "mysql://h:3306": "mysql://m:3306",
    }
    assert parse_aliases("") == {}
    assert parse_aliases("postgres://db:5432=postgres://db:5432") == {}  # no-op entries dropped
    assert parse_aliases("custom-ns=kafka://prod") == {"custom-ns": "kafka://prod"}
    assert parse_aliases("file,s3a://b=s3://archive") == {"file": "s3://archive", "s3://b": "s3://archive"}


@pytest.mark.parametrize(("text", "message"), [
    ("kafka://b1:9092", "'kafka://b1:9092'"),
    ("=kafka://prod", "'=kafka://prod'"),
    ("kafka://b1:9092=", "'kafka://b1:9092='"),
    (",kafka://b2=kafka://prod", "empty source"),
    ("kafka://b1:9092=kafka://a; kafka://B1=kafka://b", "already aliased"),
    ("kafka://b1:9092=kafka://b2:9092; kafka://b2:9092=kafka://prod", "kafka://b2:9092"),
])
def test_parse_aliases_errors_name_the_entry(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="alias") as info:
        parse_aliases(text)
    assert message in str(info.value)


def test_a_flink_kafka_topic_keeps_the_topic_as_its_name() -> None:
    # Flink's listener names a Kafka source by its topic, with the catalog table as a TABLE symlink in the same
    # namespace: the spec's Kafka name is the topic, so the catalog name stays a symlink (a SAME_AS in the graph).
    event = full_run_event()
    event["inputs"] = [{"namespace": "kafka://broker:9092", "name": "orders", "facets": {"symlinks": {
        "_producer": "p", "_schemaURL": "s", "identifiers": [
            {"namespace": "kafka://broker:9092", "name": "default_catalog.default_database.kafka_input",
             "type": "TABLE"}]}}}]
    out, renames = normalize_event(event)
    assert (out["inputs"][0]["namespace"], out["inputs"][0]["name"]) == ("kafka://broker:9092", "orders")
    assert renames == []
