"""Partitions: the kafkaLineage_partition facet, its JSON Schema, and keys from paths and OpenLineage facets."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

import kafka_lineage.schemas as schemas_package
from kafka_lineage.schemas import spec
from kafka_lineage.schemas.openlineage import validate_event
from kafka_lineage.schemas.partitions import (
    FACET_KEY,
    SCHEMA_URL,
    PathPartition,
    as_keys,
    parse_key_text,
    parse_patterns,
    partition_facet,
    partition_key_text,
    partition_keys,
    split_partition,
    subset_keys,
)

SCHEMA_FILE = Path(schemas_package.__file__).parent / "facets" / "PartitionDatasetFacet.json"
# What the facet extends: OpenLineage 2-0-2's DatasetFacet (BaseFacet + _deleted), offline.
OPENLINEAGE_BASE = {"$defs": {
    "BaseFacet": {"type": "object", "properties": {"_producer": {"type": "string", "format": "uri"},
                                                   "_schemaURL": {"type": "string", "format": "uri"}},
                  "required": ["_producer", "_schemaURL"], "additionalProperties": True},
    "DatasetFacet": {"allOf": [{"$ref": "#/$defs/BaseFacet"}, {"type": "object", "properties": {
        "_deleted": {"type": "boolean"}}}]}}}


@pytest.fixture(scope="module")
def facet_validator() -> jsonschema_rs.Validator:
    document = json.loads(SCHEMA_FILE.read_text())
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert f"{document['$id']}#/$defs/PartitionDatasetFacet" == SCHEMA_URL

    def retrieve(uri: str) -> dict:
        assert uri == "https://openlineage.io/spec/2-0-2/OpenLineage.json"
        return OPENLINEAGE_BASE

    return jsonschema_rs.validator_for({**document, "$ref": "#/$defs/PartitionDatasetFacet"}, retriever=retrieve)


# --- the facet -------------------------------------------------------------------------------------------------
def test_facet_round_trip_and_text() -> None:
    facet = partition_facet({"date": "2025-12-24", "region": "eu"}, "hook", marker="_SUCCESS",
                            required_marker="_SUCCESS")
    assert facet["_schemaURL"] == SCHEMA_URL and facet["_producer"].startswith("https://")
    assert facet["keys"] == [{"name": "date", "value": "2025-12-24"}, {"name": "region", "value": "eu"}]
    assert (facet["source"], facet["marker"], facet["requiredMarker"]) == ("hook", "_SUCCESS", "_SUCCESS")
    keys = partition_keys(facet)
    assert keys == (("date", "2025-12-24"), ("region", "eu"))
    assert partition_key_text(keys) == "date=2025-12-24/region=eu"
    assert parse_key_text("date=2025-12-24/region=eu") == keys == as_keys([("date", "2025-12-24"), ("region", "eu")])
    assert as_keys({"year": 2025}) == (("year", "2025"),)
    assert "marker" not in partition_facet("date=1", "path")


@pytest.mark.parametrize("keys", [{}, "date", "date=", "=x", "a=1/a=2", {"a": None}, {"a": True}, {"a/b": "1"},
                                  {f"k{i}": "v" for i in range(33)}, {"k": "v" * 1025}, {"k" * 129: "v"}])
def test_invalid_keys_are_refused(keys: object) -> None:
    with pytest.raises(ValueError):
        partition_facet(keys, "hook")  # type: ignore[arg-type]


def test_invalid_source_or_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="source"):
        partition_facet("date=1", "guess")
    with pytest.raises(ValueError, match="marker"):
        partition_facet("date=1", "hook", marker="a/_SUCCESS")


@pytest.mark.parametrize("facet", [None, {}, {"keys": []}, {"keys": "date=1"}, {"keys": [{"name": "a"}]},
                                   {"keys": [{"name": "a", "value": 1}]},
                                   {"keys": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]}])
def test_reading_keys_of_a_malformed_facet_gives_none(facet: object) -> None:
    assert partition_keys(facet) is None


def test_the_schema_file_accepts_built_facets_and_refuses_bad_ones(facet_validator: jsonschema_rs.Validator) -> None:
    good = partition_facet("date=2025-12-24/region=eu", "path", marker="_SUCCESS", required_marker=".DONE")
    assert facet_validator.is_valid(good)
    for bad in ({k: v for k, v in good.items() if k != "_producer"}, {**good, "keys": []},
                {**good, "source": "guess"}, {**good, "keys": [{"name": "a=b", "value": "1"}]},
                {**good, "keys": [{"name": "a", "value": "x" * 1025}]}, {**good, "marker": ""},
                {**good, "keys": [{"name": f"k{i}", "value": "v"} for i in range(33)]}):
        assert not facet_validator.is_valid(bad), bad


def test_the_schema_file_ships_as_package_data() -> None:
    text = Path(__file__).parents[3].joinpath("pyproject.toml").read_text()
    assert '"kafka_lineage.schemas.facets",' in text and '"kafka_lineage.schemas.facets" = ["*.json"]' in text
    assert SCHEMA_FILE.is_file()


def test_the_validator_accepts_the_facet_in_every_place_it_goes() -> None:
    facet = partition_facet("date=2025-12-24", "hook", marker="_SUCCESS")
    assert spec.facet_name(facet["_schemaURL"]) not in spec._FACETS  # a custom facet: base rules (ARCHITECTURE 51)
    event = {"eventType": "COMPLETE", "eventTime": "2025-12-25T00:00:00Z", "producer": "https://p",
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": "0190e1b4-3c2a-7c4e-8a55-4b5d1f0e9a21"}, "job": {"namespace": "j", "name": "j"},
             "inputs": [{"namespace": "s3://lake", "name": "a", "inputFacets": {FACET_KEY: facet}}],
             "outputs": [{"namespace": "s3://lake", "name": "b", "outputFacets": {FACET_KEY: facet}}]}
    validate_event(event)
    validate_event({"eventTime": "2025-12-25T00:00:00Z", "producer": "https://p",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                    "dataset": {"namespace": "s3://lake", "name": "b", "facets": {FACET_KEY: facet}}})
    with pytest.raises(ValueError):
        validate_event({**event, "inputs": [{"namespace": "s3://lake", "name": "a", "inputFacets": {
            FACET_KEY: {k: v for k, v in facet.items() if k != "_schemaURL"}}}]})


# --- keys from facets --------------------------------------------------------------------------------------------
def test_subset_facet_with_one_partition_names_it() -> None:
    one = {"inputCondition": {"type": "partition", "partitions": [
        {"identifier": "2024-10-15-PL", "dimensions": {"business_date": "2024-10-15", "country": "PL"}}]}}
    assert subset_keys(one) == (("business_date", "2024-10-15"), ("country", "PL"))
    assert subset_keys({"outputCondition": {"type": "partition", "partitions": [{"dimensions": {"y": 2024}}]}}) \
        == (("y", "2024"),)
    two = {"inputCondition": {"type": "partition", "partitions": [{"dimensions": {"d": "1"}},
                                                                  {"dimensions": {"d": "2"}}]}}
    location = {"inputCondition": {"type": "location", "locations": ["s3://b/t/d=1"]}}
    compare = {"inputCondition": {"type": "compare", "left": {"type": "field", "field": "d"},
                                  "right": {"type": "literal", "value": "1"}, "comparison": "EQUAL"}}
    nulls = {"inputCondition": {"type": "partition", "partitions": [{"dimensions": {"d": None}}]}}
    for facet in (two, location, compare, nulls, {}, None, {"inputCondition": {"type": "partition"}}):
        assert subset_keys(facet) is None


def test_subset_facet_with_one_location_under_the_dataset_names_its_partition() -> None:
    """The Spark integration (1.53) names a write to ``table/date=…`` by the table root and the exact location."""
    spark = {"outputCondition": {"type": "location", "locations": ["/w/lake/daily/date=2026-11-24"]}}
    assert subset_keys(spark, "file", "/w/lake/daily") == (("date", "2026-11-24"),)
    s3 = {"inputCondition": {"type": "location", "locations": ["s3://b/t/date=2026-11-24/region=eu/"]}}
    assert subset_keys(s3, "s3://b", "t") == (("date", "2026-11-24"), ("region", "eu"))
    assert subset_keys(s3, "s3://b", "t", parse_patterns("none")) is None  # path derivation off
    for namespace, name in (("file", "/w/lake"), ("file", "/w/lake/daily/date=2026-11-24"), ("file", "/other"),
                            ("kafka://k:9092", "/w/lake/daily")):
        assert subset_keys(spark, namespace, name) is None, name  # not one partition directly under the dataset
    two = {"outputCondition": {"type": "location", "locations": ["/w/t/date=1", "/w/t/date=2"]}}
    assert subset_keys(two, "file", "/w/t") is None
    short = {"outputCondition": {"type": "location", "locations": ["s3://bucket/t/date=1"]}}
    assert subset_keys(short, "s3://bucket", "t") == (("date", "1"),)  # `t` the segment, not the t of `bucket`


# --- keys from paths ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("namespace", "name", "root", "text", "file"), [
    ("s3://lake", "events/date=2025-12-24/region=eu", "events", "date=2025-12-24/region=eu", None),
    ("s3://lake", "events/date=2025-12-24/region=eu/", "events", "date=2025-12-24/region=eu", None),
    ("s3://lake", "events/date=2025-12-24/part-0001.parquet", "events", "date=2025-12-24", "part-0001.parquet"),
    ("gs://b", "w/db/t/year=2025/month=12", "w/db/t", "year=2025/month=12", None),
    ("file", "/data/t/2025-12-24", "/data/t", "date=2025-12-24", None),
    ("file", "/data/t/2025/12/24", "/data/t", "date=2025-12-24", None),
    ("file", "/data/t/2025/12/24/07", "/data/t", "date=2025-12-24/hour=07", None),
    ("file", "/data/t/2025-12-24/23/x.csv", "/data/t", "date=2025-12-24/hour=23", "x.csv"),
    ("file://host:22", "/data/t/region=eu/2025-12-24", "/data/t", "region=eu/date=2025-12-24", None),
    ("hdfs://nn:8020", "/w/t/dt=20251224/_SUCCESS", "/w/t", "dt=20251224", "_SUCCESS"),
    ("abfss://c@acct.dfs.core.windows.net", "t/date=2025-12-24", "t", "date=2025-12-24", None),
    ("wasbs://c@acct.dfs.core.windows.net", "t/k=v", "t", "k=v", None),
    ("s3a://Lake", "t/k=v", "t", "k=v", None),
])
def test_partition_paths(namespace: str, name: str, root: str, text: str, file: str | None) -> None:
    found = split_partition(namespace, name)
    assert found is not None
    assert (found.root, partition_key_text(found.keys), found.file) == (root, text, file)


def test_marker_file_is_recognised() -> None:
    assert split_partition("s3://lake", "t/date=2025-12-24/_SUCCESS").marker == "_SUCCESS"  # type: ignore[union-attr]
    assert split_partition("s3://lake", "t/date=2025-12-24/.DONE").marker == ".DONE"  # type: ignore[union-attr]
    assert split_partition("s3://lake", "t/date=2025-12-24/p.parquet").marker is None  # type: ignore[union-attr]


@pytest.mark.parametrize(("namespace", "name"), [
    ("s3://lake", "events"),  # no partition segments: unchanged
    ("s3://lake", "date=2025-12-24"),  # only partition segments: left alone, never an empty root
    ("file", "/date=2025-12-24/region=eu"),
    ("s3://lake", "events/date=2025-12-24/sub"),  # `sub` is no partition and no file: nothing stripped
    ("file", "/data/t/x.csv"),  # a file with no partition before it
    ("file", "/data/2025-13-01"),  # no month 13
    ("file", "/data/t/2025/12/32"),
    ("s3://lake", "t/k="),  # empty value
    ("s3://lake", "t/1k=v"),  # not a column name
    ("postgres://db:5432", "shop.public.date=1"),  # not a storage namespace
    ("kafka://b:9092", "topic/date=2025-12-24"),
    ("s3://lake", "a//date=1"),
])
def test_names_that_are_not_partitions_are_left_alone(namespace: str, name: str) -> None:
    assert split_partition(namespace, name) is None


def test_a_repeated_key_is_ambiguous_and_strips_nothing() -> None:
    # a root never ends in a partition segment, so splitting a root again finds nothing (normalizing is idempotent)
    assert split_partition("s3://lake", "t/date=1/x/date=2") == PathPartition("t/date=1/x", (("date", "2"),))
    assert split_partition("s3://lake", "t/date=1/date=2") is None
    assert split_partition("s3://lake", "t/" + "/".join(f"k{i}=v" for i in range(33))) is None


def test_configured_patterns() -> None:
    compact = parse_patterns(r"hive; <date:\d{8}>")
    assert split_partition("s3://b", "t/20251224/k=v", compact) == PathPartition("t", (("date", "20251224"),
                                                                                        ("k", "v")))
    assert split_partition("file", "/d/t/2025-12-24", compact) is None  # `date` is not among them
    template = parse_patterns(r"region-<region:[a-z]{2}>/dt_<day:\d{4}-\d{2}-\d{2}>")
    assert split_partition("s3://b", "t/region-eu/dt_2025-12-24", template) == PathPartition(
        "t", (("region", "eu"), ("day", "2025-12-24")))
    assert split_partition("s3://b", "t/region-eur/dt_2025-12-24", template) is None
    assert parse_patterns("").entries == parse_patterns("default").entries == parse_patterns(None).entries \
        == ("hive", "date")
    assert parse_patterns("hive;date") != parse_patterns("hive;date")  # by identity: parse once, hash for free
    assert parse_patterns("hive").entries == ("hive",)
    off = parse_patterns(" None ")
    assert not off and split_partition("s3://b", "t/date=1", off) is None


@pytest.mark.parametrize("text", ["none; hive", "<a:(x)>", "<a", "nothing", "<a>/<a>", "a//<b>", "<a:[>"])
def test_bad_patterns_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_patterns(text)
