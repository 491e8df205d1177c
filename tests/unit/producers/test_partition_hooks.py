"""Partitions in the hooks: partitioned paths, partition= arguments, completion markers, INSERT … PARTITION (…)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from openlineage.client.serde import Serde

from kafka_lineage.producers.client.client_events import event_dict
from kafka_lineage.producers.client.hooks import (
    lineage_task,
    load_task,
    partition_specs,
    report_marker,
    sql_lineage,
    sql_task,
)
from kafka_lineage.producers.client.hooks.tasks import marker_event
from kafka_lineage.schemas.openlineage import partition_key, validate_event
from kafka_lineage.schemas.partitions import FACET_KEY, SCHEMA_URL, partition_keys
from tests.unit.ol_capture import capturing_client

HIVE = "hive://metastore:9083/default"


def _partition(dataset: dict, facets: str) -> tuple[str, ...] | None:
    facet = (dataset.get(facets) or {}).get(FACET_KEY)
    if facet is None:
        return None
    keys = partition_keys(facet)
    assert keys is not None and facet["_schemaURL"] == SCHEMA_URL
    return ("/".join(f"{k}={v}" for k, v in keys), facet["source"], facet.get("marker"), facet.get("requiredMarker"))


# --- file and load tasks -------------------------------------------------------------------------------------------
def test_load_task_reports_the_partition_loaded_and_the_partitioned_source_path() -> None:
    client, transport = capturing_client()
    with load_task("load-orders", "s3a://raw/orders/2025/12/24/orders.csv", HIVE, "mart.orders", client=client,
                   partition={"date": "2025-12-24", "region": "eu"}, required_marker="_SUCCESS") as task:
        task.set_output_statistics(row_count=42)
    start, complete = transport.events
    for event in (start, complete):
        validate_event(event)
        (read,), (wrote,) = event["inputs"], event["outputs"]
        assert (read["namespace"], read["name"]) == ("s3://raw", "orders")
        assert _partition(read, "inputFacets") == ("date=2025-12-24", "path", None, None)
        assert (wrote["namespace"], wrote["name"]) == ("hive://metastore:9083", "mart.orders")
        assert _partition(wrote, "outputFacets") == ("date=2025-12-24/region=eu", "hook", None, "_SUCCESS")
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 42


def test_partition_text_and_paths_in_file_tasks_and_several_partitions_of_one_table() -> None:
    client, transport = capturing_client()
    with lineage_task("rollup", inputs=["gs://lake/events/date=2025-12-23/"], outputs=["/data/rollup"],
                      partition="date=2025-12-24", client=client) as task:
        task.add_input("gs://lake/events/date=2025-12-24/part-0.parquet")
        task.add_input("gs://lake/events/date=2025-12-24/part-1.parquet")  # the same partition again: one entry
        task.add_input(("gs://lake", "events"), partition={"date": "2025-12-22"})
        task.add_output("/data/rollup", row_count=3)  # the partitioned output's statistics, by its table
    complete = transport.events[-1]
    validate_event(complete)
    assert [(d["name"], _partition(d, "inputFacets")[0]) for d in complete["inputs"]] == [  # type: ignore[index]
        ("events", "date=2025-12-23"), ("events", "date=2025-12-24"), ("events", "date=2025-12-22")]
    (wrote,) = complete["outputs"]
    assert _partition(wrote, "outputFacets") == ("date=2025-12-24", "hook", None, None)
    assert wrote["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_a_decorated_task_keeps_its_partitions_in_every_run_but_not_its_statistics() -> None:
    client, transport = capturing_client()

    @lineage_task("daily", outputs=["s3://lake/t/date=2025-12-24"], client=client)
    def daily() -> None:
        pass

    daily()
    daily()
    assert [_partition(e["outputs"][0], "outputFacets") for e in transport.events] == [
        ("date=2025-12-24", "path", None, None)] * 4


def test_bad_partition_arguments_raise_at_call_time() -> None:
    with pytest.raises(ValueError, match="required_marker needs a partition"):
        load_task("l", "/in.csv", HIVE, "t", required_marker="_SUCCESS")
    with pytest.raises(ValueError):
        load_task("l", "/in.csv", HIVE, "t", partition="date")
    with pytest.raises(ValueError):
        lineage_task("l", outputs=["/out"], partition={"a": None})  # type: ignore[dict-item]


# --- completion markers --------------------------------------------------------------------------------------------
def test_report_marker_from_the_marker_path() -> None:
    client, transport = capturing_client()
    report_marker("s3a://lake/mart/orders/date=2025-12-24/region=eu/_SUCCESS", client=client)
    (event,) = transport.events
    validate_event(event)
    assert "eventType" not in event and (event["dataset"]["namespace"], event["dataset"]["name"]) == (
        "s3://lake", "mart/orders")
    assert _partition(event["dataset"], "facets") == ("date=2025-12-24/region=eu", "path", "_SUCCESS", None)
    assert partition_key(event)


def test_report_marker_for_a_table_partition_and_marker_names() -> None:
    client, transport = capturing_client()
    report_marker(("hive://metastore:9083", "mart.orders"), {"date": "2025-12-24"}, marker=".DONE", client=client)
    report_marker("/data/t/2025-12-24/", client=client)
    first, second = transport.events
    assert _partition(first["dataset"], "facets") == ("date=2025-12-24", "hook", ".DONE", None)
    assert _partition(second["dataset"], "facets") == ("date=2025-12-24", "path", "_SUCCESS", None)
    with pytest.raises(ValueError, match="belongs to a partition"):
        marker_event("/data/t")


def test_a_marker_that_cannot_be_sent_never_breaks_the_job(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def emit(self, event: object) -> None:
            raise RuntimeError("broker down")

    with caplog.at_level(logging.WARNING):
        event = report_marker("/data/t/date=1/_SUCCESS", client=Broken())  # type: ignore[arg-type]
    assert event.dataset.name == "/data/t" and "broker down" in caplog.text


# --- SQL -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("sql", "expected"), [
    ("INSERT OVERWRITE TABLE mart.daily PARTITION (date='2025-12-24', region='eu') SELECT * FROM raw.o",
     [("mart.daily", "date=2025-12-24/region=eu")]),
    ("insert into `mart`.`daily` partition (`Date` = \"2025-12-24\", hour=7) select 1",
     [("`mart`.`daily`", "date=2025-12-24/hour=7")]),
    ("INSERT INTO TABLE t PARTITION (dt = DATE '2025-12-24') VALUES (1)", [("t", "dt=2025-12-24")]),
    ("INSERT OVERWRITE TABLE t PARTITION (k='it''s', j='a\\'b') SELECT 1", [("t", "k=it's/j=a'b")]),
    ("INSERT OVERWRITE TABLE t PARTITION (date) SELECT a, date FROM s", [("t", None)]),  # dynamic
    ("INSERT OVERWRITE TABLE t PARTITION (date='2025-12-24', region) SELECT 1", [("t", None)]),  # partly dynamic
    ("INSERT OVERWRITE TABLE t PARTITION (date=NULL) SELECT 1", [("t", None)]),
    ("-- INSERT INTO x PARTITION (a=1)\nSELECT 'INSERT INTO y PARTITION (b=2)' /* INSERT INTO z PARTITION (c=3) */",
     []),
    ("INSERT INTO t SELECT 1", []),
    ("INSERT INTO a PARTITION (d='1') SELECT 1; INSERT OVERWRITE TABLE b PARTITION (d='2') SELECT 2",
     [("a", "d=1"), ("b", "d=2")]),
])
def test_partition_specs(sql: str, expected: list[tuple[str, str | None]]) -> None:
    found = [(table, None if keys is None else "/".join(f"{k}={v}" for k, v in keys))
             for table, keys in partition_specs(sql)]
    assert found == expected


def test_sql_lineage_puts_a_static_partition_on_its_output_only() -> None:
    lineage = sql_lineage("INSERT OVERWRITE TABLE mart.daily PARTITION (date='2025-12-24') "
                          "SELECT id FROM raw.orders WHERE date = '2025-12-24'", "hive", HIVE)
    assert lineage.outputs == (("hive://metastore:9083", "mart.daily"),)
    assert lineage.partitions == {("hive://metastore:9083", "mart.daily"): (("date", "2025-12-24"),)}
    unqualified = sql_lineage("INSERT INTO TABLE daily PARTITION (date='1') SELECT id FROM raw.orders", "hive", HIVE)
    assert unqualified.partitions == {("hive://metastore:9083", "default.daily"): (("date", "1"),)}
    two = sql_lineage("INSERT INTO TABLE d PARTITION (k='1') SELECT id FROM s;"
                      "INSERT INTO TABLE d PARTITION (k='2') SELECT id FROM s", "hive", HIVE)
    assert two.partitions == {}  # two partitions of one table in one run: not one partition
    assert sql_lineage("INSERT INTO TABLE d SELECT id FROM s", "hive", HIVE).partitions == {}


def test_sql_task_reports_the_partition_written() -> None:
    client, transport = capturing_client()
    sql = "INSERT OVERWRITE TABLE mart.daily PARTITION (date='2025-12-24', region='eu') SELECT id FROM raw.orders"
    with sql_task(sql, dialect="spark", url=HIVE, job_name="daily", client=client):
        pass
    for event in transport.events:
        validate_event(event)
        (wrote,) = event["outputs"]
        assert _partition(wrote, "outputFacets") == ("date=2025-12-24/region=eu", "hook", None, None)
        assert _partition(event["inputs"][0], "inputFacets") is None


def test_the_kafka_transport_converts_partition_facets_and_marker_events_as_openlineage_does() -> None:
    at = datetime(2025, 12, 25, tzinfo=UTC)
    marker = marker_event("s3://lake/t/date=2025-12-24/_SUCCESS", event_time=at)
    with load_task("l", "s3://raw/o/date=2025-12-24/o.csv", HIVE, "t", partition="date=2025-12-24",
                   required_marker="_SUCCESS", client=capturing_client()[0]) as task:
        pass
    for event in (marker, *task.events):
        assert event_dict(event) == Serde.to_dict(event)
        validate_event(event_dict(event))
