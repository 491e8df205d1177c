"""Partitions in the processor: a partitioned name becomes its table root plus the kafkaLineage_partition facet."""

from __future__ import annotations

import copy
import uuid

import pytest

from kafka_lineage.processors.core import Incoming, ProcessorCore
from kafka_lineage.processors.normalize import NormalizeCache, normalize_event, parse_aliases
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.runtime.config import ConfigError
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import (
    FacetCache,
    event_to_record,
    partition_key,
    record_to_event,
    validate_event,
)
from kafka_lineage.schemas.partitions import FACET_KEY, parse_patterns, partition_facet, partition_keys
from kafka_lineage.schemas.wire import AvroCodec, SchemaNotFound
from tests.openlineage_samples import PRODUCER, dataset_event

RUN_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SUBSET_URL = "https://openlineage.io/spec/facets/1-0-0/BaseSubsetDatasetFacet.json#/$defs/InputSubsetInputDatasetFacet"


def _event(inputs: list[dict], outputs: list[dict]) -> dict:
    return {"eventType": "COMPLETE", "eventTime": "2025-12-25T01:00:00Z", "producer": PRODUCER, "schemaURL": RUN_URL,
            "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "etl", "name": "daily"},
            "inputs": inputs, "outputs": outputs}


def _keys(dataset: dict, facets: str) -> str | None:
    facet = (dataset.get(facets) or {}).get(FACET_KEY)
    keys = partition_keys(facet)
    return None if keys is None else f"{facet['source']}:" + "/".join(f"{k}={v}" for k, v in keys)


def _subset(*dimensions: dict) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": SUBSET_URL,
            "inputCondition": {"type": "partition", "partitions": [{"dimensions": d} for d in dimensions]}}


def test_partitioned_names_become_the_table_root_with_the_keys_as_a_facet() -> None:
    event = _event(
        [{"namespace": "s3a://Lake", "name": "events/date=2025-12-24/region=eu/part-0001.parquet",
          "facets": {"schema": {"_producer": PRODUCER, "_schemaURL": "https://x/SchemaDatasetFacet.json",
                                "fields": [{"name": "id"}]}}}],
        [{"namespace": "file", "name": "/warehouse/daily/2025/12/24/", "outputFacets": {
            "outputStatistics": {"_producer": PRODUCER, "_schemaURL": "https://x/O.json", "rowCount": 3}},
          "facets": {"columnLineage": {"_producer": PRODUCER, "_schemaURL": "https://x/C.json", "fields": {"id": {
              "inputFields": [{"namespace": "s3://lake", "name": "events/date=2025-12-24/region=eu",
                               "field": "id"}]}}}}}])
    before = copy.deepcopy(event)
    out, renames = normalize_event(event)
    assert event == before  # never modified
    (read,), (wrote,) = out["inputs"], out["outputs"]
    assert (read["namespace"], read["name"]) == ("s3://lake", "events")
    assert (wrote["namespace"], wrote["name"]) == ("file", "/warehouse/daily")
    assert _keys(read, "inputFacets") == "path:date=2025-12-24/region=eu"
    assert _keys(wrote, "outputFacets") == "path:date=2025-12-24"
    assert wrote["outputFacets"]["outputStatistics"]["rowCount"] == 3  # other facets stay, in their place
    assert list(wrote["outputFacets"]) == ["outputStatistics", FACET_KEY]
    assert read["facets"] is event["inputs"][0]["facets"]  # the table's schema stays with the table
    assert wrote["facets"]["columnLineage"]["fields"]["id"]["inputFields"] == [
        {"namespace": "s3://lake", "name": "events", "field": "id"}]  # references lose the partition only
    assert "marker" not in wrote["outputFacets"][FACET_KEY]
    assert [(r.original_name, r.name, r.rule) for r in renames] == [
        ("events/date=2025-12-24/region=eu/part-0001.parquet", "events", "s3a-scheme+host-case+partition"),
        ("/warehouse/daily/2025/12/24/", "/warehouse/daily", "partition"),
        ("events/date=2025-12-24/region=eu", "events", "partition")]
    validate_event(out)
    assert normalize_event(out) == (out, [])  # idempotent: a root has no partition segments left


def test_the_producers_own_facet_wins_and_is_kept_as_sent() -> None:
    own = partition_facet("date=2025-12-23", "hook", required_marker="_SUCCESS", producer=PRODUCER)
    event = _event([], [{"namespace": "s3://lake", "name": "t/date=2025-12-24", "outputFacets": {FACET_KEY: own}}])
    out, renames = normalize_event(event)
    (wrote,) = out["outputs"]
    assert wrote["name"] == "t" and wrote["outputFacets"] is event["outputs"][0]["outputFacets"]
    assert [r.rule for r in renames] == ["partition"]


def test_an_openlineage_subset_facet_naming_one_partition_is_read() -> None:
    event = _event([{"namespace": "s3://lake", "name": "dims", "inputFacets": {"subset": _subset(
                        {"business_date": "2024-10-15", "country": "PL"})}},
                    {"namespace": "s3://lake", "name": "t/date=2025-12-24", "inputFacets": {"subset": _subset(
                        {"date": "2025-12-24"}, {"date": "2025-12-23"})}}], [])
    out, _ = normalize_event(event)
    one, two = out["inputs"]
    assert _keys(one, "inputFacets") == "facet:business_date=2024-10-15/country=PL" and one["name"] == "dims"
    assert _keys(two, "inputFacets") == "path:date=2025-12-24"  # two partitions are not one: the path's
    validate_event(out)


def test_sparks_location_subset_names_the_partition_of_a_table_root() -> None:
    """As the OpenLineage Spark listener 1.53 sends a write to ``daily/date=…``: the root, and the exact location."""
    location = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/"
                "BaseSubsetDatasetFacet.json#/$defs/OutputSubsetOutputDatasetFacet",
                "outputCondition": {"type": "location", "locations": ["/w/lake/daily/date=2026-11-24"]}}
    event = _event([], [{"namespace": "file", "name": "/w/lake/daily", "outputFacets": {"subset": location}}])
    out, renames = normalize_event(event)
    (wrote,) = out["outputs"]
    assert (wrote["name"], _keys(wrote, "outputFacets"), renames) == ("/w/lake/daily", "facet:date=2026-11-24", [])
    validate_event(out)


def test_a_dataset_event_naming_a_marker_file_reports_the_marker() -> None:
    event = dataset_event()
    event["dataset"].update(namespace="hdfs://nn:8020", name="/w/t/date=2025-12-24/_SUCCESS")
    out, renames = normalize_event(event)
    facet = out["dataset"]["facets"][FACET_KEY]
    assert out["dataset"]["name"] == "/w/t"
    assert (partition_keys(facet), facet["source"], facet["marker"]) == ((("date", "2025-12-24"),), "path", "_SUCCESS")
    assert renames[0].rule == "partition"
    event["dataset"]["name"] = "/w/t/date=2025-12-24"
    assert "marker" not in normalize_event(event)[0]["dataset"]["facets"][FACET_KEY]


def test_names_without_partitions_and_switched_off_patterns_are_left_alone() -> None:
    plain = _event([{"namespace": "s3://lake", "name": "events"}], [{"namespace": "postgres://db:5432",
                                                                   "name": "shop.public.date=1"}])
    out, renames = normalize_event(plain)
    assert out == plain and renames == [] and out["inputs"] is plain["inputs"] and out["outputs"] is plain["outputs"]
    partitioned = _event([{"namespace": "s3://lake", "name": "t/date=1"}], [])
    assert normalize_event(partitioned, patterns=parse_patterns("none")) == (partitioned, [])


def test_configured_patterns_and_aliases_compose() -> None:
    aliases = parse_aliases("s3a://lake=lake-prod")
    event = _event([{"namespace": "s3a://lake", "name": "t/20251224"}], [])
    out, renames = normalize_event(event, aliases, parse_patterns(r"hive; <day:\d{8}>"))
    (read,) = out["inputs"]
    assert (read["namespace"], read["name"], _keys(read, "inputFacets")) == ("lake-prod", "t", "path:day=20251224")
    assert renames[0].rule == "s3a-scheme+alias+partition"
    assert normalize_event(event, aliases)[0]["inputs"][0]["name"] == "t/20251224"  # not a default pattern


def test_normalize_cache_equals_normalize_event_for_partitions() -> None:
    facets = FacetCache(admit_after=0)
    subset = facets.parse('{"_producer": "p", "_schemaURL": "u", "inputCondition": {"type": "partition", '
                          '"partitions": [{"dimensions": {"d": "1"}}]}}')
    own = partition_facet("date=9", "hook")
    events = [
        _event([{"namespace": "s3://lake", "name": "t/date=1"}], [{"namespace": "s3://lake", "name": "u/2025/12/24"}]),
        _event([{"namespace": "s3://lake", "name": "t/date=2", "inputFacets": {"subset": subset}}], []),
        _event([{"namespace": "s3://lake", "name": "t/date=2", "inputFacets": {"subset": dict(subset)}}], []),
        _event([], [{"namespace": "s3://lake", "name": "t/date=1", "outputFacets": {FACET_KEY: own}}]),
        _event([], [{"namespace": "s3://lake", "name": "t/date=1", "outputFacets": {"x": own}}]),
    ]
    cache = NormalizeCache(facets)
    for _ in range(2):
        for event in events:
            assert cache.normalize(event) == normalize_event(event)
    first, again = cache.normalize(events[0])[0], cache.normalize(events[0])[0]
    assert first["inputs"][0]["inputFacets"][FACET_KEY] is again["inputs"][0]["inputFacets"][FACET_KEY]


def _fetch(schema_id: int) -> str:
    if schema_id != 1:
        raise SchemaNotFound(schema_id)
    return schema_text("openlineage_event")


def test_the_processor_publishes_the_root_and_the_facet_and_records_the_rename() -> None:
    codec = AvroCodec("openlineage_event", _fetch)
    event = {**_event([], [{"namespace": "gs://lake", "name": "t/region=eu/2025-12-24/07"}]), "eventType": "START"}
    incoming = [Incoming(partition_key(event).encode(), codec.encode(event_to_record(event), 1), 0, 0,
                         1_800_000_000_000, "events")]
    out = ProcessorCore(codec, {}, {}).process(incoming, now=1.0)
    (_, record), = out.normalized
    (wrote,) = record_to_event(record["event"])["outputs"]
    assert (wrote["name"], _keys(wrote, "outputFacets")) == ("t", "path:region=eu/date=2025-12-24/hour=07")
    (rename,) = record["processing"]["renamedDatasets"]
    assert (rename["originalName"], rename["name"], rename["rule"]) == ("t/region=eu/2025-12-24/07", "t", "partition")
    off = ProcessorCore(codec, {}, {}, partition_patterns=parse_patterns("none")).process(incoming, now=1.0)
    (_, record), = off.normalized
    assert record_to_event(record["event"])["outputs"][0]["name"] == "t/region=eu/2025-12-24/07"


def test_the_setting() -> None:
    assert ProcessorSettings.from_env({}).partition_patterns == "default"
    assert ProcessorSettings.from_env({"LINEAGE_PARTITION_PATTERNS": "none"}).partition_patterns == "none"
    with pytest.raises(ConfigError, match="LINEAGE_PARTITION_PATTERNS"):
        ProcessorSettings.from_env({"LINEAGE_PARTITION_PATTERNS": "<date:(x)>"})
