"""Events → Neo4j graph rows: exact rows, order independence, time normalization, parameterized Cypher, fingerprint."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from datetime import datetime

import pytest
from openlineage.client.event_v2 import RunState

from kafka_lineage.graph.batch import GraphBatch
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.facets import RUN_FACETS_MAX_BYTES, field_paths, run_facets_json, transformation_text
from kafka_lineage.graph.fingerprint import FINGERPRINT_QUERIES, fingerprint
from kafka_lineage.graph.keys import KEY_MAX_BYTES, state_rank, stored_key, utc_time
from kafka_lineage.graph.statements import CONSTRAINTS, STATEMENTS, of_job_rows, statements
from kafka_lineage.schemas.schema_diff import schema_fields, schema_version
from kafka_lineage_devtools.bench_events import run_pairs
from tests.openlineage_samples import dataset_event, full_run_event, job_event

RUN, PARENT, FAILED = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
                       "33333333-3333-4333-8333-333333333333")
SRC = ("postgres://db:5432", "shop.public.orders")
OUT = ("s3://bucket", "warehouse/orders")
SRC_REF = {"namespace": SRC[0], "name": SRC[1]}
SCHEMA_HASH = schema_version(schema_fields(full_run_event()["inputs"][0]))


def run_event(state: RunState, time: str, run_id: str = RUN, rows: int | None = None, size: int | None = None,
              error: bool = False, nominal: bool = False) -> dict:
    """``full_run_event`` with a fixed run/parent id, its facets trimmed to what this lifecycle stage carries."""
    event = full_run_event(state)
    event["eventTime"] = time
    event["run"]["runId"] = run_id
    facets = event["run"]["facets"]
    facets["parent"]["run"]["runId"] = PARENT
    if not error:
        del facets["errorMessage"]
    if not nominal:
        del facets["nominalTime"]
    output = event["outputs"][0]
    if rows is None:
        del output["outputFacets"]["outputStatistics"]
    else:
        output["outputFacets"]["outputStatistics"].update(rowCount=rows, size=size)
    if state is not RunState.START:  # the input side (statistics, data quality) is reported once, at START
        event["inputs"][0]["inputFacets"] = {}
    return event


def scenario() -> list[dict]:
    return [
        run_event(RunState.START, "2024-05-01T14:00:00+02:00", nominal=True),  # 12:00Z
        run_event(RunState.RUNNING, "2024-05-01T12:05:00.5Z", rows=5, size=1024),
        run_event(RunState.COMPLETE, "2024-05-01T12:10:00.123456789Z", rows=10, size=2048),
        run_event(RunState.FAIL, "2024-05-01T13:00:00Z", run_id=FAILED, error=True),
        dataset_event(),
        job_event(),
    ]


def plain(value):
    """Rows without the ``order`` bookkeeping of property groups (tested on its own below)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items() if key != "order"}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def rows(batch: GraphBatch, name: str) -> list[dict]:
    return plain(batch[name])


# --- the scenario, exactly ---------------------------------------------------------------------------------------
def test_scenario_nodes():
    events = scenario()
    batch = graph_batch(events)
    assert rows(batch, "jobs") == [
        {"namespace": "airflow", "name": "dag.task", "lastEventTime": None, "jobType": None},
        {"namespace": "dbt", "name": "model.orders", "lastEventTime": "2024-05-01T12:00:00.000000Z", "jobType": None},
        {"namespace": "spark", "name": "orders.etl", "lastEventTime": "2024-05-01T13:00:00.000000Z",
         "jobType": {"processingType": "BATCH", "integration": "SPARK", "jobType": "JOB", "eventContentMode": None}},
    ]
    runs = rows(batch, "runs")
    facets = {r["runId"]: (r.pop("startRunFacets"), r.pop("runFacets")) for r in runs}
    assert runs == [
        {"runId": RUN, "state": "COMPLETE", "rank": 2, "stateOrder": "2024-05-01T12:10:00.123456Z|COMPLETE",
         "startTime": "2024-05-01T12:00:00.000000Z", "endTime": "2024-05-01T12:10:00.123456Z",
         "lastEventTime": "2024-05-01T12:10:00.123456Z",
         "nominalTime": {"nominalStartTime": "2024-05-01T00:00:00.000000Z", "nominalEndTime": None},
         "errorMessage": None},
        {"runId": PARENT, "state": None, "rank": None, "stateOrder": None, "startTime": None, "endTime": None,
         "lastEventTime": None, "nominalTime": None, "errorMessage": None},
        {"runId": FAILED, "state": "FAIL", "rank": 2, "stateOrder": "2024-05-01T13:00:00.000000Z|FAIL",
         "startTime": None, "endTime": "2024-05-01T13:00:00.000000Z", "lastEventTime": "2024-05-01T13:00:00.000000Z",
         "nominalTime": None, "errorMessage": {"message": "boom", "programmingLanguage": "python"}},
    ]
    # a run's facets as JSON: the START event's, and the latest other event's (here COMPLETE's, not RUNNING's)
    start, latest = (json.loads(group["json"]) for group in facets[RUN])
    assert start == events[0]["run"]["facets"] and latest == events[2]["run"]["facets"]
    assert facets[PARENT] == (None, None) and facets[FAILED][0] is None
    kafka_fields = dataset_event()["dataset"]["facets"]["schema"]["fields"]
    assert rows(batch, "datasets") == [
        {"namespace": "hive://meta:9083", "name": "shop.orders", "schema": None},  # the input's TABLE symlink
        {"namespace": "kafka://broker:9092", "name": "orders", "schema": {"version": schema_version(kafka_fields)}},
        {"namespace": SRC[0], "name": SRC[1], "schema": {"version": SCHEMA_HASH}},
        {"namespace": OUT[0], "name": OUT[1], "schema": {"version": SCHEMA_HASH}},
        {"namespace": "snowflake://org-acct", "name": "db.s.t", "schema": None},
    ]
    assert [(r["namespace"], r["name"], r["field"]) for r in batch["fields"]] == [
        ("kafka://broker:9092", "orders", "id"),
        (*SRC, "address"), (*SRC, "address.city"), (*SRC, "id"), (*SRC, "order_id"),  # order_id: column lineage
        (*OUT, "address"), (*OUT, "address.city"), (*OUT, "id"),
    ]
    assert [dict(r, field=r["field"]) for r in batch["has_field"]] == list(batch["fields"])
    versions = rows(batch, "schema_versions")
    assert [(v["namespace"], v["name"], v["hash"], v["first"]["firstSeen"]) for v in versions] == [
        ("kafka://broker:9092", "orders", schema_version(kafka_fields), "2024-05-01T12:00:00.000000Z"),
        (*SRC, SCHEMA_HASH, "2024-05-01T12:00:00.000000Z"),  # the START, the earliest observation
        (*OUT, SCHEMA_HASH, "2024-05-01T12:00:00.000000Z"),
    ]
    assert json.loads(versions[1]["first"]["fields"]) == schema_fields(full_run_event()["inputs"][0])


def test_scenario_relationships():
    batch = graph_batch(scenario())
    assert rows(batch, "of_job") == [
        {"runId": RUN, "namespace": "spark", "name": "orders.etl"},
        {"runId": PARENT, "namespace": "airflow", "name": "dag.task"},
        {"runId": FAILED, "namespace": "spark", "name": "orders.etl"},
    ]
    assert rows(batch, "child_of") == [{"runId": RUN, "parentRunId": PARENT},
                                       {"runId": FAILED, "parentRunId": PARENT}]
    quality = {"columnMetrics": {"id": {"min": 1.0, "nullCount": 0, "quantiles": {}}}, "rowCount": 10}
    read = rows(batch, "read")
    assert [(r["runId"], r["stats"]) for r in read] == [(RUN, {"rowCount": 10, "bytes": None}), (FAILED, None)]
    assert json.loads(read[0]["dataQuality"]["json"]) == quality and read[1]["dataQuality"] is None
    assert rows(batch, "wrote") == [  # the COMPLETE's statistics win over the RUNNING's
        {"runId": RUN, "namespace": OUT[0], "name": OUT[1], "stats": {"rowCount": 10, "bytes": 2048}},
        {"runId": FAILED, "namespace": OUT[0], "name": OUT[1], "stats": None},
    ]
    # lineage edges keep the event times they were first and last seen at (UTC, the +02:00 START is 12:00Z)
    first, last = "2024-05-01T12:00:00.000000Z", "2024-05-01T13:00:00.000000Z"
    assert rows(batch, "input_to") == [
        {"namespace": SRC[0], "name": SRC[1], "jobNamespace": "spark", "jobName": "orders.etl", "firstSeen": first,
         "lastSeen": last},
        {"namespace": "snowflake://org-acct", "name": "db.s.t", "jobNamespace": "dbt", "jobName": "model.orders",
         "firstSeen": first, "lastSeen": first},
    ]
    assert rows(batch, "outputs") == [{"jobNamespace": "spark", "jobName": "orders.etl", "namespace": OUT[0],
                                       "name": OUT[1], "firstSeen": first, "lastSeen": last}]
    assert rows(batch, "derives_from") == [
        {"namespace": OUT[0], "name": OUT[1], "field": "id", "inputNamespace": SRC[0], "inputName": SRC[1],
         "inputField": "order_id", "lineage": {"transformation": "DIRECT/IDENTITY"}, "firstSeen": first,
         "lastSeen": last}]
    assert [r["hash"] for r in batch["has_schema"]] == [r["hash"] for r in batch["schema_versions"]]
    assert rows(batch, "run_totals") == [{"runId": RUN}]
    # the input's symlinks facet: another name of the same data, linked, not replacing the input's own identity
    assert rows(batch, "same_as") == [{"namespace": SRC[0], "name": SRC[1], "aliasNamespace": "hive://meta:9083",
                                       "aliasName": "shop.orders", "type": "TABLE", "firstSeen": first,
                                       "lastSeen": last}]


def test_facets_are_kept_per_key_latest_wins_and_deletion_is_a_later_value():
    event = full_run_event()
    output = event["outputs"][0]
    output["facets"]["documentation"] = {"_producer": "p", "_schemaURL": "s", "description": "orders, cleaned"}
    output["facets"]["ownership"] = {"_producer": "p", "_schemaURL": "s", "owners": [{"name": "team:data"}]}
    later = copy.deepcopy(event)
    later["eventTime"] = "2024-05-01T12:30:00Z"
    later["outputs"][0]["facets"]["documentation"] = {"_producer": "p", "_schemaURL": "s", "_deleted": True}
    del later["outputs"][0]["facets"]["ownership"]
    for events in ([event, later], [later, event]):
        facets = {(r["of"], r["name"], r["key"]): r["facet"]["json"] for r in graph_batch(events)["facets"]}
        assert facets[("Dataset", OUT[1], "documentation")] is None  # deleted by the later event
        assert json.loads(facets[("Dataset", OUT[1], "ownership")]) == {"ownership": output["facets"]["ownership"]}
        assert ("Dataset", OUT[1], "schema") not in facets and ("Dataset", OUT[1], "columnLineage") not in facets
        assert json.loads(facets[("Job", "orders.etl", "jobType")])["jobType"]["integration"] == "SPARK"


def test_masking_dataset_level_dependencies_and_quality_assertions_are_kept():
    event = full_run_event()
    lineage = event["outputs"][0]["facets"]["columnLineage"]
    lineage["fields"]["id"]["inputFields"][0]["transformations"] = [
        {"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}]
    lineage["dataset"] = [{**SRC_REF, "field": "customer_id",
                           "transformations": [{"type": "INDIRECT", "subtype": "JOIN"}]}]
    event["inputs"][0]["inputFacets"]["dataQualityAssertions"] = {
        "_producer": "p", "_schemaURL": "s", "assertions": [{"assertion": "not_null", "success": False,
                                                             "column": "id"}]}
    batch = graph_batch([event])
    assert batch["derives_from"][0]["lineage"]["transformation"] == "DIRECT/TRANSFORMATION(masked)"
    (depends,) = batch["depends_on"]
    assert (depends["inputName"], depends["inputField"], depends["lineage"]["transformation"]) == (
        SRC[1], "customer_id", "INDIRECT/JOIN")
    assert (*SRC, "customer_id") in {(r["namespace"], r["name"], r["field"]) for r in batch["fields"]}
    assert json.loads(batch["read"][0]["assertions"]["json"]) == [
        {"assertion": "not_null", "success": False, "column": "id"}]


def test_a_symlink_to_the_dataset_itself_links_nothing_and_types_merge_order_free():
    event = full_run_event()
    identifiers = event["inputs"][0]["facets"]["symlinks"]["identifiers"]
    identifiers.append({"namespace": event["inputs"][0]["namespace"], "name": event["inputs"][0]["name"],
                        "type": "LOCATION"})
    other = copy.deepcopy(event)
    other["inputs"][0]["facets"]["symlinks"]["identifiers"][0]["type"] = "LOCATION"
    for events in ([event, other], [other, event]):
        assert [r["type"] for r in graph_batch(events)["same_as"]] == ["LOCATION"]


def test_order_keys():
    run = next(r for r in graph_batch(scenario())["runs"] if r["runId"] == RUN)
    assert run["nominalTime"]["order"].startswith("0|2024-05-01T12:00:00.000000Z|")  # rank|time|digest
    wrote = graph_batch(scenario())["wrote"][0]
    assert wrote["stats"]["order"].startswith("2|2024-05-01T12:10:00.123456Z|")
    job = graph_batch(scenario())["jobs"][2]
    assert job["jobType"]["order"].startswith("2024-05-01T13:00:00.000000Z|")  # jobs/datasets: time only


def test_dataset_event_and_job_event_alone():
    batch = graph_batch([dataset_event()])
    assert set(batch.rows) == {"datasets", "fields", "schema_versions", "has_field", "has_schema"}
    with_run = {**dataset_event(), "run": {"runId": RUN}}  # the spec lets a DatasetEvent carry a run, no job
    assert graph_batch([with_run]) == graph_batch([dataset_event()])
    batch = graph_batch([job_event()])
    assert set(batch.rows) == {"jobs", "datasets", "input_to"}
    assert rows(batch, "jobs") == [
        {"namespace": "dbt", "name": "model.orders", "lastEventTime": "2024-05-01T12:00:00.000000Z", "jobType": None}]


def test_schema_version_matches_the_processor():
    event = full_run_event()
    batch = graph_batch([event])
    for dataset in event["inputs"] + event["outputs"]:
        expected = schema_version(schema_fields(dataset))
        assert {"namespace": dataset["namespace"], "name": dataset["name"], "hash": expected} in batch["has_schema"]


# --- order independence and idempotence -------------------------------------------------------------------------
def test_repeats_do_not_change_the_batch():
    events = scenario()
    assert graph_batch(events + copy.deepcopy(events)) == graph_batch(events)


@pytest.mark.parametrize("seed", range(8))
def test_any_order_gives_the_same_batch(seed):
    events = scenario()
    shuffled = copy.deepcopy(events)
    random.Random(seed).shuffle(shuffled)
    assert graph_batch(shuffled) == graph_batch(events)


def test_complete_before_start_stays_complete():
    start = run_event(RunState.START, "2024-05-01T12:00:00Z")
    complete = run_event(RunState.COMPLETE, "2024-05-01T11:00:00Z")  # a skewed clock: terminal but earlier
    for events in ([start, complete], [complete, start]):
        run = graph_batch(events)["runs"][0]
        assert (run["state"], run["rank"], run["startTime"], run["endTime"]) == (
            "COMPLETE", 2, "2024-05-01T12:00:00.000000Z", "2024-05-01T11:00:00.000000Z")


def test_other_events_never_set_state():
    other = run_event(RunState.OTHER, "2024-05-01T12:30:00Z")
    run = graph_batch([other])["runs"][0]
    assert (run["state"], run["rank"], run["lastEventTime"]) == (None, None, "2024-05-01T12:30:00.000000Z")
    start = run_event(RunState.START, "2024-05-01T12:00:00Z")
    assert graph_batch([other, start])["runs"][0]["state"] == "START"


def test_ties_within_a_rank_break_deterministically():
    complete, abort = (run_event(RunState.COMPLETE, "2024-05-01T12:00:00Z"),
                       run_event(RunState.ABORT, "2024-05-01T12:00:00Z"))
    assert graph_batch([complete, abort]) == graph_batch([abort, complete])
    assert graph_batch([abort, complete])["runs"][0]["state"] == "COMPLETE"  # same time: larger name
    later = run_event(RunState.FAIL, "2024-05-01T12:00:01Z")
    assert graph_batch([later, complete, abort])["runs"][0]["state"] == "FAIL"  # same rank: later time


def test_schema_version_keeps_its_first_observation():
    early, late = dataset_event(), dataset_event()
    early["eventTime"], late["eventTime"] = "2024-05-01T10:00:00Z", "2024-05-02T10:00:00Z"
    late["dataset"]["facets"]["schema"]["fields"][0]["type"] = "BIGINT"  # same version, another spelling
    for events in ([early, late], [late, early]):
        (version,) = graph_batch(events)["schema_versions"]
        assert version["first"]["firstSeen"] == "2024-05-01T10:00:00.000000Z"
        assert json.loads(version["first"]["fields"])[0]["type"] == "long"


def test_current_schema_is_the_latest_by_event_time():
    old, new = dataset_event(), dataset_event()
    old["eventTime"], new["eventTime"] = "2024-05-01T10:00:00Z", "2024-05-02T10:00:00Z"
    new["dataset"]["facets"]["schema"]["fields"].append({"name": "note", "type": "string"})
    for events in ([old, new], [new, old]):
        batch = graph_batch(events)
        assert batch["datasets"][0]["schema"]["version"] == schema_version(new["dataset"]["facets"]["schema"]["fields"])
        assert len(batch["schema_versions"]) == 2 and len(batch["fields"]) == 2  # the history stays


# --- helpers ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "expected"), [
    ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.000000Z"),
    ("2024-05-01T12:00:00.123456+00:00", "2024-05-01T12:00:00.123456Z"),
    ("2024-05-01T14:00:00.5+02:00", "2024-05-01T12:00:00.500000Z"),
    ("2024-05-01T01:30:00-05:30", "2024-05-01T07:00:00.000000Z"),
    ("2024-05-01T00:30:00+01:00", "2024-04-30T23:30:00.000000Z"),  # the date moves too
    ("2024-05-01T12:00:00.123456789Z", "2024-05-01T12:00:00.123456Z"),  # nanoseconds (Java) truncated
    ("2024-05-01T12:00:00", "2024-05-01T12:00:00.000000Z"),  # no offset: UTC
    (" 2024-05-01T12:00Z ", "2024-05-01T12:00:00.000000Z"),
    ("not a time", None),
    ("", None),
    (None, None),
    (1714564800, None),
])
def test_utc_time(raw, expected):
    assert utc_time(raw) == expected


def test_utc_time_sorts_chronologically():
    times = ["2024-05-01T12:00:00+02:00", "2024-05-01T11:00:00Z", "2024-05-01T10:59:59.999999-00:00",
             "2024-05-01T11:00:00.000001Z", "2023-12-31T23:00:00-02:00", "2024-05-01T09:00:00.5-03:00"]
    by_string = sorted(times, key=utc_time)
    by_instant = sorted(times, key=lambda t: datetime.fromisoformat(t).timestamp())
    assert by_string == by_instant and by_string[0] == "2023-12-31T23:00:00-02:00"


@pytest.mark.parametrize(("event_type", "rank"), [
    ("START", 0), ("RUNNING", 1), ("COMPLETE", 2), ("FAIL", 2), ("ABORT", 2), ("OTHER", None), (None, None),
    ("complete", None), (2, None),
])
def test_state_rank(event_type, rank):
    assert state_rank(event_type) == rank


def test_field_paths_and_transformations():
    fields = [{"name": "a"}, {"name": "b", "fields": [{"name": "c", "fields": [{"name": "d"}]}, {"type": "x"}]},
              "junk", {"name": 3}]
    assert field_paths(fields) == ["a", "b", "b.c", "b.c.d"]
    assert field_paths(None) == []
    assert transformation_text({"transformations": [{"type": "DIRECT", "subtype": "IDENTITY"},
                                                    {"type": "INDIRECT", "subtype": "FILTER"}, {"type": "X"},
                                                    {"subtype": "orphan"}]}) == "DIRECT/IDENTITY,INDIRECT/FILTER,X"
    assert transformation_text({}) == transformation_text({"transformations": "junk"}) == ""


def test_old_field_level_transformation_type_is_the_fallback():
    event = full_run_event()
    spec = event["outputs"][0]["facets"]["columnLineage"]["fields"]["id"]
    del spec["inputFields"][0]["transformations"]
    spec["transformationType"] = "IDENTITY"
    assert graph_batch([event])["derives_from"][0]["lineage"]["transformation"] == "IDENTITY"
    spec.pop("transformationType")
    assert graph_batch([event])["derives_from"][0]["lineage"]["transformation"] == ""


def test_run_facets_past_the_limit_leave_out_the_largest():
    facets = {"small": {"a": 1}, "plan": {"text": "x" * RUN_FACETS_MAX_BYTES}, "mid": {"text": "é" * 20_000}}
    assert json.loads(run_facets_json({"small": {"a": 1}})) == {"small": {"a": 1}}
    kept = json.loads(text := run_facets_json(facets))
    assert len(text.encode()) <= RUN_FACETS_MAX_BYTES
    assert kept["small"] == {"a": 1} and kept["mid"] == facets["mid"] and "plan" not in kept
    assert kept["_omitted"] == {"plan": len(json.dumps(facets["plan"], separators=(",", ":")))}


def test_malformed_facets_are_skipped():
    event = full_run_event()
    event["inputs"][0]["facets"]["schema"] = {"fields": "nope"}
    event["inputs"][0]["inputFacets"]["inputStatistics"] = {"rowCount": True, "size": "big"}
    event["outputs"][0]["facets"]["columnLineage"] = {"fields": {"id": {"inputFields": [{"namespace": "x"}, 7]}}}
    event["outputs"].append({"namespace": "s3://bucket"})  # no name: no node (MERGE cannot key on null)
    event["run"]["facets"]["parent"] = {"run": "junk"}
    event["inputs"][0]["facets"]["symlinks"] = {"identifiers": [None, {"namespace": "x"}, "y"]}
    batch = graph_batch([event, "not an event"])
    assert not batch["derives_from"] and not batch["child_of"] and not batch["same_as"]
    assert batch["read"][0]["stats"] is None
    assert [(d["namespace"], d["name"]) for d in batch["datasets"]] == [SRC, OUT]


def test_every_relationship_end_has_a_node_row():
    batch = graph_batch(scenario())
    jobs = {(r["namespace"], r["name"]) for r in batch["jobs"]}
    runs = {r["runId"] for r in batch["runs"]}
    datasets = {(r["namespace"], r["name"]) for r in batch["datasets"]}
    fields = {(r["namespace"], r["name"], r["field"]) for r in batch["fields"]}
    versions = {(r["namespace"], r["name"], r["hash"]) for r in batch["schema_versions"]}
    for r in batch["of_job"]:
        assert r["runId"] in runs and (r["namespace"], r["name"]) in jobs
    for r in batch["child_of"]:
        assert {r["runId"], r["parentRunId"]} <= runs
    for r in batch["read"] + batch["wrote"]:
        assert r["runId"] in runs and (r["namespace"], r["name"]) in datasets
    for r in batch["input_to"] + batch["outputs"]:
        assert (r["jobNamespace"], r["jobName"]) in jobs and (r["namespace"], r["name"]) in datasets
    for r in batch["has_field"]:
        assert (r["namespace"], r["name"]) in datasets and (r["namespace"], r["name"], r["field"]) in fields
    for r in batch["derives_from"]:
        ends = {(r["namespace"], r["name"], r["field"]), (r["inputNamespace"], r["inputName"], r["inputField"])}
        assert ends <= fields
    for r in batch["has_schema"]:
        assert (r["namespace"], r["name"]) in datasets and (r["namespace"], r["name"], r["hash"]) in versions
    for r in batch["same_as"]:
        assert {(r["namespace"], r["name"]), (r["aliasNamespace"], r["aliasName"])} <= datasets
    assert {r["runId"] for r in batch["run_totals"]} <= runs


# --- Cypher -------------------------------------------------------------------------------------------------------
HOSTILE = "x'\"`}) DETACH DELETE n //\\"


def hostile_events() -> list[dict]:
    event = full_run_event()
    event["run"]["runId"] = HOSTILE + "run"
    event["run"]["facets"]["parent"]["run"]["runId"] = HOSTILE + "parent"
    event["run"]["facets"]["errorMessage"]["message"] = HOSTILE + "error"
    event["job"].update(namespace=HOSTILE + "jobns", name=HOSTILE + "job")
    event["job"]["facets"]["jobType"]["jobType"] = HOSTILE + "type"
    event["inputs"][0].update(namespace=HOSTILE + "inns", name=HOSTILE + "in")
    event["inputs"][0]["facets"]["schema"]["fields"][0]["name"] = HOSTILE + "field"
    lineage = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    lineage[HOSTILE + "outfield"] = lineage.pop("id")
    lineage[HOSTILE + "outfield"]["inputFields"][0]["transformations"][0]["type"] = HOSTILE + "transform"
    event["outputs"][0]["name"] = HOSTILE + "out"
    dataset = dataset_event()
    dataset["dataset"]["name"] = HOSTILE + "dataset"
    return [event, dataset]


def test_statements_are_parameterized():
    pairs = statements(graph_batch(hostile_events()))
    params = json.dumps([p for _, p in pairs])
    for query, parameters in pairs:
        assert HOSTILE not in query and "DETACH" not in query
        assert query.startswith("UNWIND $rows AS row\n")
        assert set(re.findall(r"\$(\w+)", query)) == {"rows"} and set(parameters) == {"rows"}
    for suffix in ("run", "parent", "error", "jobns", "job", "type", "inns", "in", "field", "outfield", "transform",
                   "out", "dataset"):
        assert json.dumps(HOSTILE + suffix)[1:-1] in params  # every hostile value travels as a parameter


def test_statement_texts_are_constants():
    for name, query in STATEMENTS.items():
        assert "UNWIND $rows AS row" in query and ("MERGE" in query or name == "run_totals" or name.endswith("_names"))
    assert {q for q, _ in statements(graph_batch(scenario()))} <= set(STATEMENTS.values())


def _statement_name(query: str) -> str:
    return next(n for n, q in STATEMENTS.items() if q == query)


def test_statements_order_nodes_first_and_skip_empty():
    pairs = statements(graph_batch(scenario()))
    names = [_statement_name(query) for query, _ in pairs]
    assert names == ["jobs", "runs", "datasets", "fields", "facets", "schema_versions", "of_job", "child_of", "read",
                     "wrote", "input_to", "outputs", "has_field", "derives_from", "same_as", "has_schema", "run_totals"]
    node_kinds = {"jobs", "runs", "datasets", "fields", "facets", "schema_versions"}
    last_node = max(i for i, n in enumerate(names) if n in node_kinds)
    assert all(n not in node_kinds for n in names[last_node + 1:])
    assert [_statement_name(query) for query, _ in statements(graph_batch([job_event()]))] == [
        "jobs", "datasets", "input_to"]
    assert statements(graph_batch([])) == []


def test_of_job_rows_name_each_jobs_runs_of_the_batch():
    rows = [{"runId": "r1", "namespace": "ns", "name": "a"}, {"runId": "r2", "namespace": "ns", "name": "b"},
            {"runId": "r3", "namespace": "ns", "name": "a"}]
    assert of_job_rows(rows) == [{"namespace": "ns", "name": "a", "runIds": ["r1", "r3"]},
                                 {"namespace": "ns", "name": "b", "runIds": ["r2"]}]


def test_a_writer_without_schema_field_rows_sends_the_same_statements():
    hashed = full_run_event()  # a schema field, a dataset and a namespace stored by hash (their whole values kept)
    output = hashed["outputs"][0]
    output["namespace"], output["name"] = "s3://" + "n" * 5000, "t" * 5000
    output["facets"]["schema"]["fields"].append({"name": "f" * 5000, "type": "string"})
    for events in (scenario(), run_pairs(60, "realistic", seed=3), [hashed]):
        assert statements(graph_batch(copy.deepcopy(events), schema_field_rows=False)) == statements(
            graph_batch(copy.deepcopy(events)))
        assert len(graph_batch(events, schema_field_rows=False)["fields"]) < len(graph_batch(events)["fields"])


def test_statements_leave_the_batch_as_it_was():
    batch = graph_batch(scenario())
    before = copy.deepcopy(batch)
    statements(batch)
    assert batch == before


def test_run_state_moves_forward_in_cypher():
    runs = STATEMENTS["runs"]
    assert "coalesce(r.stateRank, -1) AS oldRank" in runs and "row.rank > oldRank" in runs
    assert "r.state = CASE WHEN advance THEN row.state ELSE r.state END" in runs
    assert "row.startTime < r.startTime" in runs and "row.endTime > r.endTime" in runs


def test_constraints():
    assert len(CONSTRAINTS) == len(set(CONSTRAINTS))
    assert all("IF NOT EXISTS" in c and "NODE KEY" not in c for c in CONSTRAINTS)
    unique = [c for c in CONSTRAINTS if "IS UNIQUE" in c]
    for label in ("(j:Job) REQUIRE (j.namespace, j.name)", "(r:Run) REQUIRE r.runId",
                  "(d:Dataset) REQUIRE (d.namespace, d.name)", "(f:Field) REQUIRE (f.namespace, f.name, f.field)",
                  "(s:SchemaVersion) REQUIRE (s.namespace, s.name, s.hash)"):
        assert any(label in c for c in unique), label


# --- fingerprint --------------------------------------------------------------------------------------------------
def sample_rows() -> dict[str, list]:
    return {
        "Run": [{"runId": RUN, "state": "COMPLETE"}, {"runId": PARENT, "state": None}],
        "Job": [{"namespace": "spark", "name": "orders.etl"}, {"namespace": "airflow", "name": "dag.task"}],
        "WROTE": [{"runId": RUN, "namespace": OUT[0], "name": OUT[1], "rowCount": 10, "bytes": 2048}],
    }


def test_fingerprint_is_stable_under_row_and_key_order():
    rows_ = sample_rows()
    shuffled = {name: [dict(reversed(list(row.items()))) for row in reversed(value)]
                for name, value in reversed(list(rows_.items()))}
    assert fingerprint(rows_) == fingerprint(shuffled)
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint(rows_))


def test_fingerprint_sees_every_difference():
    base = fingerprint(sample_rows())
    changed = sample_rows()
    changed["Run"][0]["state"] = "FAIL"
    assert fingerprint(changed) != base
    moved = sample_rows()
    moved["Dataset"] = moved.pop("Job")  # same rows under another label
    assert fingerprint(moved) != base
    assert fingerprint({**sample_rows(), "Field": []}) == base  # a missing query is no rows
    assert fingerprint({}) == fingerprint({name: [] for name in FINGERPRINT_QUERIES})
    doubled = sample_rows()
    doubled["Job"].append(dict(doubled["Job"][0]))
    assert fingerprint(doubled) != base


def test_fingerprint_accepts_value_lists_and_rejects_unknown_queries():
    assert fingerprint({"Job": [["spark", "a"], ["airflow", "b"]]}) == fingerprint({"Job": [("airflow", "b"),
                                                                                         ("spark", "a")]})
    with pytest.raises(ValueError, match="NOPE"):
        fingerprint({"NOPE": []})


def test_fingerprint_queries_cover_the_model():
    labels = {"Job", "Run", "Dataset", "Field", "SchemaVersion"}
    types = {"OF_JOB", "CHILD_OF", "READ", "WROTE", "INPUT_TO", "OUTPUTS", "HAS_FIELD", "DERIVES_FROM", "HAS_SCHEMA",
             "SAME_AS", "DEPENDS_ON"}
    assert set(FINGERPRINT_QUERIES) == labels | types
    for name, query in FINGERPRINT_QUERIES.items():
        assert query.startswith("MATCH ") and "$" not in query
        assert (f":{name})" in query) if name in labels else (f":{name}]" in query)


# --- keys of very long names (issue 16 item 6) ------------------------------------------------------------------
def _named(namespace: str, name: str, field: str) -> dict:
    """A COMPLETE run of job ``name`` writing dataset ``name`` with schema field ``field`` deriving from itself."""
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T12:00:00Z", "producer": "p", "schemaURL": "u",
            "run": {"runId": RUN}, "job": {"namespace": namespace, "name": name},
            "outputs": [{"namespace": namespace, "name": name, "facets": {
                "schema": {"fields": [{"name": field, "type": "int"}]},
                "columnLineage": {"fields": {field: {"inputFields": [
                    {"namespace": namespace, "name": name, "field": field}]}}}}}]}


def test_ordinary_names_are_their_own_keys():
    for value in ("orders", "n" * KEY_MAX_BYTES, "é" * (KEY_MAX_BYTES // 2), "\U0001f4c8" * (KEY_MAX_BYTES // 4),
                  "a#sha256:" + "0" * 63, "#sha256:xyz"):
        assert stored_key(value) is value
    batch = graph_batch([_named("ns", "n" * KEY_MAX_BYTES, "f" * KEY_MAX_BYTES)])
    assert not any(name.endswith("_names") for name in batch.rows)
    assert batch["jobs"][0]["name"] == "n" * KEY_MAX_BYTES


def test_a_long_name_is_keyed_by_its_hash_and_kept_whole():
    long_name, long_ns, long_field = "n" * 10_000, "s3://" + "b" * 3000, "\U0001f4c8" * 1000  # 4,000 bytes
    key = stored_key(long_name)
    assert key == "n" * 256 + "#sha256:" + hashlib.sha256(long_name.encode()).hexdigest()
    assert stored_key(long_name + "x") != key and len(key.encode()) <= KEY_MAX_BYTES
    batch = graph_batch([_named(long_ns, long_name, long_field)])
    ns_key, field_key = stored_key(long_ns), stored_key(long_field)
    assert [(r["namespace"], r["name"]) for r in batch["jobs"]] == [(ns_key, key)]
    assert batch["jobs_names"] == ({"namespace": ns_key, "name": key, "fullNamespace": long_ns, "fullName": long_name},)
    assert batch["datasets_names"] == batch["jobs_names"]
    assert batch["fields_names"] == ({"namespace": ns_key, "name": key, "field": field_key, "fullNamespace": long_ns,
                                      "fullName": long_name, "fullField": long_field},)
    assert [r["namespace"] for r in batch["schema_versions_names"]] == [ns_key]
    assert batch["derives_from"][0]["field"] == batch["derives_from"][0]["inputField"] == field_key
    assert all(len(str(value).encode()) <= KEY_MAX_BYTES for kind in ("jobs", "datasets", "fields", "derives_from")
               for row in batch[kind] for column, value in row.items() if column in ("namespace", "name", "field"))
    order = list(STATEMENTS)  # after their nodes, before any relationship
    assert all(order.index("schema_versions") < order.index(n) < order.index("of_job") for n in order if "_names" in n)


def test_a_name_that_reads_like_a_hashed_key_cannot_take_its_node():
    long_name = "n" * 10_000
    forged = stored_key(long_name)  # sent as a name of its own
    assert stored_key(forged) != forged
    batch = graph_batch([_named("ns", forged, "f"), _named("ns", long_name, "f") | {"run": {"runId": PARENT}}])
    assert len(batch["jobs"]) == 2 and {r["fullName"] for r in batch["jobs_names"]} == {forged, long_name}


def test_a_facet_object_shared_by_events_and_keys_is_stored_as_each_key_says():
    # the sink's FacetCache hands every event the same object for the same facet text, under whatever key
    shared = {"_producer": "p", "_schemaURL": "s", "description": "same"}
    first, later = full_run_event(), full_run_event()
    later["eventTime"] = "2024-05-01T13:00:00Z"
    for event in (first, later):
        event["outputs"][0]["facets"].update(documentation=shared, custom=shared)
    rows = {(r["key"], r["facet"]["order"][:19]): json.loads(r["facet"]["json"])
            for r in graph_batch([first, later])["facets"]
            if r["of"] == "Dataset" and r["name"] == OUT[1] and r["key"] in ("documentation", "custom")}
    assert rows == {("documentation", "2024-05-01T13:00:00"): {"documentation": shared},
                    ("custom", "2024-05-01T13:00:00"): {"custom": shared}}
    copies = [copy.deepcopy(first), copy.deepcopy(later)]  # the same rows from unshared objects
    assert graph_batch(copies)["facets"] == graph_batch([first, later])["facets"]


def test_schema_fields_go_with_their_version_and_every_field_is_still_sent():
    batch = graph_batch(scenario())
    by_name = {_statement_name(query): params["rows"] for query, params in statements(batch)}
    with_versions = {(row["namespace"], row["name"], path)
                     for row in by_name["schema_versions"] for path in row["paths"]}
    alone = {(row["namespace"], row["name"], row["field"]) for row in by_name["fields"]}
    edges = {(row["namespace"], row["name"], row["field"]) for row in by_name["has_field"]}
    every = {(row["namespace"], row["name"], row["field"]) for row in batch["fields"]}
    assert with_versions and not with_versions & alone and with_versions | alone == every
    assert edges == alone  # HAS_FIELD of a schema's field is written with the version
    assert {(r["namespace"], r["name"], r["field"]) for r in batch["has_field"]} == every  # the rows keep them all
    # a batch built by hand (no schema paths) sends every field row itself
    plain = statements(GraphBatch(batch.rows))
    assert [len(params["rows"]) for query, params in plain if query != STATEMENTS["of_job"]] == [
        len(batch[name]) for name in STATEMENTS if batch[name] and name != "of_job"]
