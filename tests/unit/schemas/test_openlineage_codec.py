"""OpenLineage JSON -> Avro -> JSON is the identity; invalid events are rejected naming the field."""

from __future__ import annotations

import copy
import io
import json
import uuid

import fastavro
import pytest

from kafka_lineage.schemas.avro_schemas import load_schema
from kafka_lineage.schemas.openlineage import (
    InvalidEvent,
    event_to_record,
    partition_key,
    record_to_event,
    validate_event,
)
from tests.openlineage_samples import dataset_event, full_run_event, job_event

SCHEMA = fastavro.parse_schema(load_schema("openlineage_event"))


def _through_avro(event: dict) -> dict:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, SCHEMA, event_to_record(event))
    buffer.seek(0)
    return record_to_event(fastavro.schemaless_reader(buffer, SCHEMA, SCHEMA))


@pytest.mark.parametrize("make", [full_run_event, dataset_event, job_event], ids=["run", "dataset", "job"])
def test_client_events_round_trip_exactly(make) -> None:
    event = make()
    original = copy.deepcopy(event)
    assert validate_event(event) in ("RunEvent", "DatasetEvent", "JobEvent")
    assert _through_avro(event) == original
    assert json.dumps(_through_avro(event), sort_keys=True) == json.dumps(original, sort_keys=True)


def test_unknown_keys_explicit_nulls_and_odd_types_survive() -> None:
    event = full_run_event()
    event["customTopLevel"] = {"a": [1, {"b": None}]}
    event["eventType"] = None  # explicitly null, not absent
    event["run"]["x-extra"] = 1
    event["job"]["facets"] = None
    event["inputs"][0]["inputFacets"] = {}
    event["outputs"][0]["extraKey"] = "kept"
    event["outputs"][0]["facets"]["weird"] = {"value": float("1e308"), "text": "\u0000\u2603"}
    assert _through_avro(event) == event


def test_absent_and_empty_collections_stay_distinct() -> None:
    event = job_event()
    assert event["outputs"] == []
    del event["inputs"]
    del event["job"]["facets"]
    decoded = _through_avro(event)
    assert decoded["outputs"] == [] and "inputs" not in decoded
    assert decoded == event
    run = full_run_event()
    del run["run"]["facets"], run["outputs"][0]["outputFacets"]
    run["inputs"][0]["facets"] = {}
    assert _through_avro(run) == run


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e["run"].update(runId="not-a-uuid"), "run.runId"),
        (lambda e: e.pop("eventTime"), "eventTime"),
        (lambda e: e.update(eventTime="2024-05-01"), "eventTime"),
        (lambda e: e["job"].pop("name"), "job.name"),
        (lambda e: e["job"].update(namespace=5), "job.namespace"),
        (lambda e: e.update(eventType=None), "eventType"),
        (lambda e: e["run"].update(runId="{" + e["run"]["runId"] + "}"), "run.runId"),
        (lambda e: e["outputs"][0]["outputFacets"].update(outputStatistics={
            "_producer": "p", "_schemaURL": "u", "rowCount": "wrong"}),
         "outputs.0.outputFacets.outputStatistics.rowCount"),
        (lambda e: e["run"]["facets"].update(custom={"no": "producer"}), "run.facets.custom._producer"),
        (lambda e: e.update(eventType="FINISHED"), "eventType"),
        (lambda e: e["inputs"][0].update(name=7), "inputs.0.name"),
        (lambda e: e["outputs"][0]["facets"].update(schema="not an object"), "outputs.0.facets.schema"),
        (lambda e: e.pop("producer"), "producer"),
    ],
)
def test_invalid_events_name_the_field(mutate, field: str) -> None:
    event = full_run_event()
    mutate(event)
    with pytest.raises(InvalidEvent) as error:
        validate_event(event)
    assert f"{field}:" in str(error.value)


def test_not_an_event_at_all() -> None:
    with pytest.raises(InvalidEvent, match="none of run, job, dataset"):
        validate_event({"eventTime": "2024-05-01T00:00:00Z"})
    with pytest.raises(InvalidEvent, match="expected a JSON object"):
        validate_event([1, 2])


def test_run_ids_are_uuids_of_any_version() -> None:
    event = full_run_event()
    event["run"]["runId"] = str(uuid.uuid1())
    assert validate_event(event) == "RunEvent"


def test_partition_key_follows_the_root_job() -> None:
    event = full_run_event()
    assert partition_key(event) == "run:airflow/dag"  # parent facet's root
    del event["run"]["facets"]["parent"]["root"]
    assert partition_key(event) == "run:airflow/dag.task"  # parent
    del event["run"]["facets"]["parent"]
    assert partition_key(event) == "run:spark/orders.etl"  # the job itself
    assert partition_key(dataset_event()) == "dataset:kafka://broker:9092/orders"
    assert partition_key(job_event()) == "job:dbt/model.orders"


REPRODUCER = ('{"eventTime":"2024-05-01T12:00:00Z","producer":"p","schemaURL":"s","run":{"runId":'
              '"e3e70682-c209-4cac-929f-6fbed82c07cd","facets":{"parent":{"root":1}}},"job":{"namespace":"n","name":"j"}}')
PARENT_RUN = {"runId": "0190b2c4-6c4e-7a3e-8f2a-1b2c3d4e5f60"}
PARENT_JOB = {"namespace": "airflow", "name": "dag.task"}


def _with_parent(parent: object) -> dict:
    event = json.loads(REPRODUCER)
    event["run"]["facets"]["parent"] = parent
    return event


@pytest.mark.parametrize(("parent", "fields"), [
    ({"root": 1}, ["run.facets.parent.run", "run.facets.parent.job", "run.facets.parent.root"]),
    ({"run": PARENT_RUN, "job": PARENT_JOB, "root": 1}, ["run.facets.parent.root"]),
    ({"run": PARENT_RUN, "job": PARENT_JOB, "root": {"run": PARENT_RUN}}, ["run.facets.parent.root.job"]),
    ({"run": PARENT_RUN, "job": PARENT_JOB, "root": {"run": PARENT_RUN, "job": {"namespace": "a", "name": 5}}},
     ["run.facets.parent.root.job.name"]),
    ({"run": PARENT_RUN, "job": PARENT_JOB, "root": {"run": {"runId": "x"}, "job": PARENT_JOB}},
     ["run.facets.parent.root.run.runId"]),
    ({"run": "x", "job": 5}, ["run.facets.parent.run", "run.facets.parent.job"]),
    ({"run": PARENT_RUN, "job": {"namespace": 7, "name": "j"}}, ["run.facets.parent.job.namespace"]),
    (None, ["run.facets.parent"]),
    ([], ["run.facets.parent"]),
])
def test_a_malformed_parent_facet_is_refused_naming_the_field(parent: object, fields: list[str]) -> None:
    event = _with_parent(parent)
    with pytest.raises(InvalidEvent) as caught:
        validate_event(event)
    for field in fields:
        assert f"{field}:" in str(caught.value), str(caught.value)
    assert partition_key(event) in ("run:n/j", "run:airflow/dag.task")  # total all the same: what is usable


def test_a_complete_parent_facet_is_valid_and_keys_by_the_root() -> None:
    root = {"run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "airflow", "name": "dag"}}
    event = _with_parent({"_producer": "p", "_schemaURL": "u", "run": PARENT_RUN, "job": PARENT_JOB, "root": root,
                          "custom": {"kept": True}})
    assert validate_event(event) == "RunEvent"
    assert partition_key(event) == "run:airflow/dag"
    assert _through_avro(event) == event
    del event["run"]["facets"]["parent"]["root"]
    assert validate_event(event) == "RunEvent" and partition_key(event) == "run:airflow/dag.task"


GARBAGE = [None, 1, "x", [], [1], {}, {"run": 1}, {"run": {"facets": 1}}, {"run": {"facets": {"parent": 1}}},
           {"run": {"facets": {"parent": {"root": 1}}}}, {"run": {"facets": {"parent": {"root": {"job": 1}}}}},
           {"run": {"facets": {"parent": {"job": {"namespace": 1, "name": ["x"]}}}}}, {"run": None, "job": "j"},
           {"dataset": 1}, {"dataset": {"namespace": 1}}, {"job": [1]}, {"job": {"namespace": None}},
           json.loads(REPRODUCER)]


@pytest.mark.parametrize("value", GARBAGE, ids=range(len(GARBAGE)))
def test_partition_key_is_total(value: object) -> None:
    key = partition_key(value)  # type: ignore[arg-type]
    assert isinstance(key, str) and key
