"""File/load task hooks: START/COMPLETE/FAIL/ABORT around a block or a decorated function, shared run builders."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.facet_v2 import parent_run

from kafka_lineage.producers.client.hooks import current_run, lineage_task, load_task, sql_task
from kafka_lineage.producers.client.hooks.runs import PRODUCER, DatasetState, TaskRun, default_job_namespace, run_event
from kafka_lineage.schemas.openlineage import partition_key, validate_event
from tests.unit.ol_capture import capturing_client


def _datasets(event: dict, side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def test_context_manager_emits_start_and_complete_with_path_datasets() -> None:
    client, transport = capturing_client()
    with lineage_task("copy-orders", inputs=["s3a://raw/orders.csv"], outputs=["/data/clean/orders.parquet"],
                      job_namespace="etl", client=client) as task:
        task.add_output("gs://exports/orders.csv", row_count=7, size=1024)
        task.add_input(("kafka://broker:9092", "orders"))
    start, complete = transport.events
    assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    assert start["run"]["runId"] == complete["run"]["runId"] == task.run_id
    assert _datasets(start, "inputs") == [("s3://raw", "orders.csv")]
    assert _datasets(complete, "inputs") == [("s3://raw", "orders.csv"), ("kafka://broker:9092", "orders")]
    assert _datasets(complete, "outputs") == [("file", "/data/clean/orders.parquet"), ("gs://exports", "orders.csv")]
    stats = complete["outputs"][1]["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"]) == (7, 1024)
    assert complete["job"]["facets"]["jobType"]["integration"] == "PYTHON"
    for event in transport.events:
        validate_event(event)
        assert partition_key(event) == "run:etl/copy-orders"


def test_failure_emits_fail_with_stack_trace_and_reraises() -> None:
    client, transport = capturing_client()

    def explode() -> None:
        raise ValueError("bad row 17")

    with pytest.raises(ValueError, match="bad row 17"), lineage_task("copy", inputs=["/in.csv"], client=client):
        explode()
    start, fail = transport.events
    assert fail["eventType"] == "FAIL" and fail["run"]["runId"] == start["run"]["runId"]
    error = fail["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: bad row 17"
    assert "explode" in error["stackTrace"] and error["stackTrace"].rstrip().endswith("ValueError: bad row 17")
    assert _datasets(fail, "inputs") == [("file", "/in.csv")]


def test_keyboard_interrupt_is_an_abort() -> None:
    client, transport = capturing_client()
    with pytest.raises(KeyboardInterrupt), lineage_task("copy", client=client):
        raise KeyboardInterrupt
    assert [e["eventType"] for e in transport.events] == ["START", "ABORT"]


def test_decorator_is_one_run_per_call_and_reaches_its_run() -> None:
    client, transport = capturing_client()

    @lineage_task("export", inputs=["/data/in.csv"], client=client)
    def export(n: int) -> int:
        run = current_run()
        assert run is not None
        run.add_output(f"/data/out-{n}.csv", row_count=n)
        return n * 2

    assert export.__name__ == "export"
    assert export(1) == 2 and export(2) == 4
    assert [e["eventType"] for e in transport.events] == ["START", "COMPLETE"] * 2
    first, second = transport.events[1], transport.events[3]
    assert first["run"]["runId"] != second["run"]["runId"]
    assert _datasets(first, "outputs") == [("file", "/data/out-1.csv")]
    assert _datasets(second, "outputs") == [("file", "/data/out-2.csv")]  # no leak between calls
    assert current_run() is None


def test_decorated_failure_reraises() -> None:
    client, transport = capturing_client()

    @lineage_task("export", client=client)
    def export() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        export()
    assert [e["eventType"] for e in transport.events] == ["START", "FAIL"]


def test_load_task_file_into_table_with_row_count() -> None:
    client, transport = capturing_client()
    with load_task("load-orders", "/data/orders.csv", "jdbc:postgresql://DB:5432/shop?password=pw",
                   "staging.orders", client=client) as task:
        task.set_output_statistics(row_count=1000)
    start, complete = transport.events
    assert _datasets(start, "inputs") == [("file", "/data/orders.csv")]
    assert _datasets(start, "outputs") == [("postgres://db:5432", "shop.staging.orders")]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 1000
    assert complete["job"]["facets"]["jobType"]["jobType"] == "LOAD"
    assert "pw" not in str(transport.events)


def test_load_task_row_count_up_front_and_default_schema() -> None:
    client, transport = capturing_client()
    with load_task("load", "s3://b/k.csv", "jdbc:mysql://h/shop", "orders", row_count=5, client=client):
        pass
    assert _datasets(transport.events[0], "outputs") == [("mysql://h:3306", "shop.orders")]
    assert transport.events[1]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 5


def test_statistics_need_a_named_output_when_ambiguous() -> None:
    client, _ = capturing_client()
    with lineage_task("t", outputs=["/a", "/b"], client=client) as task:
        with pytest.raises(ValueError, match="2 outputs"):
            task.set_output_statistics(row_count=1)
        task.set_output_statistics(row_count=1, output="/b")
    assert [d.io_facets.get("outputStatistics") is not None for d in task.outputs] == [False, True]


def test_bad_dataset_arguments_raise_at_call_time() -> None:
    with pytest.raises(ValueError, match="unsupported path scheme"):
        lineage_task("t", inputs=["http://example.com/x.csv"])
    with pytest.raises(ValueError, match="namespace, name"):
        lineage_task("t", inputs=[("only-namespace",)])
    with pytest.raises(ValueError, match="job_name"):
        lineage_task(" ")


def test_a_run_is_single_use() -> None:
    client, _ = capturing_client()
    task = lineage_task("t", client=client)
    with task:
        pass
    with pytest.raises(RuntimeError, match="already started"), task:
        pass


def test_parent_facet_and_kafka_key_follow_the_root_job() -> None:
    client, transport = capturing_client()
    with (
        lineage_task("pipeline", job_namespace="etl", client=client) as outer,
        load_task("load", "/in.csv", "jdbc:postgresql://h/db", "t", parent=outer, client=client) as middle,
        sql_task("INSERT INTO t2 SELECT * FROM t", dialect="postgres", url="jdbc:postgresql://h/db",
                 job_name="transform", parent=middle, client=client),
    ):
        pass
    by_job = {e["job"]["name"]: e for e in transport.events if e["eventType"] == "COMPLETE"}
    assert "parent" not in by_job["pipeline"]["run"]["facets"]
    load_parent = by_job["load"]["run"]["facets"]["parent"]
    assert load_parent["run"]["runId"] == outer.run_id and load_parent["job"]["name"] == "pipeline"
    transform_parent = by_job["transform"]["run"]["facets"]["parent"]
    assert transform_parent["run"]["runId"] == middle.run_id and transform_parent["job"]["name"] == "load"
    assert transform_parent["root"]["run"]["runId"] == outer.run_id
    root_job = transform_parent["root"]["job"]
    assert (root_job["namespace"], root_job["name"]) == ("etl", "pipeline")
    assert {partition_key(e) for e in transport.events} == {"run:etl/pipeline"}


def test_parent_given_as_an_openlineage_facet() -> None:
    client, transport = capturing_client()
    facet = parent_run.ParentRunFacet(run=parent_run.Run(runId="01a2c3d4-0000-7000-8000-000000000001"),
                                      job=parent_run.Job(namespace="airflow", name="dag.task"))
    with lineage_task("child", client=client, parent=facet):
        pass
    assert partition_key(transport.events[0]) == "run:airflow/dag.task"


class _BrokenClient:
    def emit(self, event: object) -> None:
        raise ConnectionError("collector down")


def test_emit_errors_never_break_the_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), lineage_task("t", client=_BrokenClient()) as task:  # type: ignore[arg-type]
        result = "work done"
    assert result == "work done" and len(task.events) == 2
    assert "collector down" in caplog.text


def test_default_job_namespace() -> None:
    assert default_job_namespace({}) == "default"
    assert default_job_namespace({"OPENLINEAGE_NAMESPACE": "prod"}) == "prod"
    assert default_job_namespace({"OPENLINEAGE_NAMESPACE": ""}) == "default"


def test_run_event_builder_is_pure() -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    kwargs = {"run_id": "01a2c3d4-0000-7000-8000-000000000001", "job_namespace": "ns", "job_name": "j",
              "inputs": [DatasetState("file", "/a")], "outputs": [DatasetState("s3://b", "k")], "event_time": when}
    first, second = run_event(RunState.START, **kwargs), run_event(RunState.START, **kwargs)
    assert first == second
    assert first.eventTime == "2024-05-01T12:00:00+00:00" and first.producer == PRODUCER
    assert isinstance(lineage_task("x"), TaskRun)
