"""Flink: the listener's settings, the watcher's pure core, and real listener events through the pipeline's pure
stages (validation, normalization, the graph model).

tests/data/flink/listener_*.ndjson are events the OpenLineage Flink listener 1.53.0 sent (PyFlink 2.0.1, the job in
tests/data/flink/orders_job.py: Kafka topic → Kafka topic + a partitioned filesystem table), the broker port
scrubbed to 9092: ``bounded`` (START, COMPLETE), ``streaming`` (START, RUNNING per checkpoint, ABORT on cancel),
``failing`` (a record that is not JSON: START, RUNNING, FAIL without an error message).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.processors.normalize import normalize_event
from kafka_lineage.producers.client import flink as helper
from kafka_lineage.producers.service import flink_lineage as core
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event, validate_event

DATA = Path(__file__).parents[2] / "data" / "flink"
KAFKA = "kafka://127.0.0.1:9092"
TABLE = ("", "default_catalog.default_database.orders_by_country")  # the filesystem table, as the listener names it


def listener_events(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"listener_{name}.ndjson").read_text().splitlines() if line]


# --- the helper's settings ---------------------------------------------------------------------------------------
def test_conf_sets_the_listener_the_http_transport_and_detached_tracking() -> None:
    conf = helper.openlineage_flink_conf("http://collector:5000/", job_name="orders", token="t", rest_port=8082,
                                         tracking_interval_s=5)
    assert conf[helper.LISTENERS_KEY] == "io.openlineage.flink.listener.OpenLineageJobStatusChangedListenerFactory"
    assert conf["openlineage.transport.url"] == "http://collector:5000"
    assert conf["openlineage.transport.endpoint"] == "/api/v1/lineage"
    assert conf["openlineage.transport.auth.apiKey"] == "t"
    assert conf["openlineage.job.name"] == "orders" and conf["openlineage.job.namespace"] == "flink-jobs"
    assert conf["openlineage.enableDetachedJobTracking"] == "true"
    assert conf["rest.port"] == "8082" and conf["openlineage.trackingIntervalInSeconds"] == "5"
    assert "openlineage.flink.disableCheckpointTracking" not in conf
    quiet = helper.openlineage_flink_conf("http://c:5000", checkpoint_events=False, detached_tracking=False)
    assert quiet["openlineage.flink.disableCheckpointTracking"] == "true"
    assert "openlineage.enableDetachedJobTracking" not in quiet and "rest.port" not in quiet


def test_conf_defaults_to_the_collector_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LINEAGE_COLLECTOR_PORT", "5123")
    monkeypatch.setenv("LINEAGE_COLLECTOR_TOKEN", "secret")
    conf = helper.openlineage_flink_conf()
    assert conf["openlineage.transport.url"] == "http://127.0.0.1:5123"
    assert conf["openlineage.transport.auth.apiKey"] == "secret"


def test_config_yaml_is_what_a_java_or_sql_user_copies() -> None:
    text = helper.flink_config_yaml(helper.openlineage_flink_conf("http://c:5000", job_name="j", rest_port=8081))
    assert "execution.job-status-changed-listeners: io.openlineage.flink.listener." in text
    assert 'openlineage.transport.url: "http://c:5000"' in text
    assert "openlineage.enableDetachedJobTracking: true\n" in text and "rest.port: 8081\n" in text


class FakeConfiguration:
    """PyFlink's ``Configuration`` string API (the real one needs a JVM)."""

    def __init__(self, **values: str) -> None:
        self.values = dict(values)

    def get_string(self, key: str, default: str) -> str:
        return self.values.get(key, default)

    def set_string(self, key: str, value: str) -> None:
        self.values[key] = value


def test_with_openlineage_keeps_the_jobs_own_jars_and_listeners(tmp_path: Path) -> None:
    jar = tmp_path / "openlineage-flink.jar"
    jar.write_bytes(b"")
    config = FakeConfiguration(**{"pipeline.jars": "file:///opt/own.jar", helper.LISTENERS_KEY: "com.x.Other"})
    helper.with_openlineage(config, "http://c:5000", packages=None, jars=[jar])  # type: ignore[arg-type]
    assert config.values["pipeline.jars"] == f"file:///opt/own.jar;{jar.resolve().as_uri()}"
    assert config.values[helper.LISTENERS_KEY] == f"com.x.Other;{helper.LISTENER_FACTORY}"
    helper.with_openlineage(config, "http://c:5000", packages=None, jars=[jar])  # type: ignore[arg-type]
    assert config.values[helper.LISTENERS_KEY].count(helper.LISTENER_FACTORY) == 1  # idempotent
    assert config.values["pipeline.jars"].count("openlineage-flink.jar") == 1


def test_packages_must_be_maven_coordinates() -> None:
    with pytest.raises(ValueError, match="group:artifact:version"):
        helper.resolve_jars(["openlineage-flink.jar"])


# --- real listener events through validation, normalization and the graph model ------------------------------------
@pytest.mark.parametrize("name", ["bounded", "streaming", "failing"])
def test_real_listener_events_are_valid_and_survive_avro(name: str) -> None:
    for event in listener_events(name):
        assert validate_event(event) == "RunEvent"
        assert record_to_event(event_to_record(event)) == event


def test_listener_identities_are_kept_by_normalization() -> None:
    start = listener_events("bounded")[0]
    normalized, renames = normalize_event(start)
    assert renames == []
    assert [(d["namespace"], d["name"]) for d in normalized["inputs"]] == [(KAFKA, "exp_orders")]
    # a Kafka topic is named by its topic in kafka://host:port; its catalog name stays a symlink (SAME_AS)
    assert {(d["namespace"], d["name"]) for d in normalized["outputs"]} == {(KAFKA, "exp_orders_clean"), TABLE}
    table = next(d for d in normalized["outputs"] if d["namespace"] == "")
    assert table["facets"]["symlinks"]["identifiers"] == []  # the listener gives no location for the file table


def test_graph_keeps_kafka_topics_apart_from_flinks_per_job_catalog_names_and_runs_states() -> None:
    for name, states in (("bounded", ["COMPLETE"]), ("streaming", ["ABORT"]), ("failing", ["FAIL"])):
        events = [normalize_event(e)[0] for e in listener_events(name)]
        batch = graph_batch(events)
        assert [row["state"] for row in batch["runs"]] == states
        assert [(row["namespace"], row["name"]) for row in batch["jobs"]] == [("flink-jobs", f"exp-{name}")]
        # `default_catalog.default_database.orders` names another table in every job: linking it would join
        # unrelated topics; the symlinks facet keeps it as a document
        assert not batch["same_as"]
        topic = "exp_orders" if name != "failing" else "exp_bad"
        symlinks = [json.loads(r["facet"]["json"])["symlinks"] for r in batch["facets"]
                    if (r["of"], r["namespace"], r["name"], r["key"]) == ("Dataset", KAFKA, topic, "symlinks")]
        assert symlinks[0]["identifiers"][0]["name"] == "default_catalog.default_database.orders"


def test_graph_keeps_the_filesystem_table_by_its_spec_identity() -> None:
    batch = graph_batch([normalize_event(listener_events("bounded")[0])[0]])
    assert TABLE in {(row["namespace"], row["name"]) for row in batch["datasets"]}


# --- the watcher's core --------------------------------------------------------------------------------------------
def observed(*names: str) -> dict[str, core.Tracked]:
    tracked: dict[str, core.Tracked] = {}
    for name in names:
        for event in listener_events(name):
            tracked = core.observe(tracked, event)
    return tracked


def overview(jid: str, state: str, end: int = 1795598509000) -> dict[str, core.JobState]:
    return core.parse_overview({"jobs": [{"jid": jid, "name": "x", "state": state, "end-time": end}]})


def test_observe_pairs_the_flink_job_with_the_listeners_run() -> None:
    start = listener_events("streaming")[0]
    (t,) = core.observe({}, start).values()
    assert (t.flink_job_id, t.run_id, t.job_name, t.last_event) == (
        start["run"]["facets"]["flink_job"]["jobId"], start["run"]["runId"], "exp-streaming", "START")
    assert core.observe({}, {"eventType": "START", "run": {"runId": "x"}, "job": {}}) == {}  # not the listener's
    done = observed("streaming")
    assert next(iter(done.values())).last_event == "ABORT"


def test_a_job_the_listener_left_open_is_finished_after_the_grace() -> None:
    start = listener_events("bounded")[0]
    tracked = core.observe({}, start)
    jid = core.flink_job_id(start)
    tracked, events = core.step(tracked, overview(jid, "FINISHED"), now=100.0, grace=10)
    assert events == []  # the listener's own COMPLETE may still be on its way
    tracked, events = core.step(tracked, overview(jid, "FINISHED"), now=111.0, grace=10)
    (event,) = events
    assert event["eventType"] == "COMPLETE" and event["run"]["runId"] == start["run"]["runId"]
    assert event["job"] == {"namespace": "flink-jobs", "name": "exp-bounded"}
    assert event["eventTime"] == "2026-11-25T09:21:49.000Z"  # the job's end-time, not the poll's
    assert validate_event(event) == "RunEvent"
    assert core.step(tracked, overview(jid, "FINISHED"), now=200.0, grace=10)[1] == []  # once


@pytest.mark.parametrize(("state", "expected"), [("CANCELED", "ABORT"), ("FAILED", "FAIL")])
def test_cancel_and_failure_without_a_listener_event(state: str, expected: str) -> None:
    start = listener_events("streaming")[0]
    jid = core.flink_job_id(start)
    tracked = core.observe({}, start)
    error = ("java.io.IOException", "java.io.IOException: Failed to deserialize JSON\n\tat x.y")
    _, events = core.step(tracked, overview(jid, state), now=0.0, grace=0, errors={jid: error})
    assert [e["eventType"] for e in events] == [expected]
    if expected == "FAIL":
        assert events[0]["run"]["facets"]["errorMessage"]["message"] == "java.io.IOException"
        assert events[0]["run"]["facets"]["errorMessage"]["stackTrace"].startswith("java.io.IOException")
    assert validate_event(events[0]) == "RunEvent"


def test_the_listeners_fail_gets_flinks_error_and_nothing_else_is_repeated() -> None:
    tracked = observed("failing")
    (jid,) = tracked
    assert core.wants_exception(tracked, overview(jid, "FAILED")) == [jid]
    assert core.step(tracked, overview(jid, "FAILED"), now=0.0, grace=0)[1] == []  # no error known: FAIL stands
    exceptions = {"root-exception": "java.io.IOException: Failed to deserialize JSON 'this is not json'.\n\tat a.b",
                  "exceptionHistory": {"entries": [{"exceptionName": "java.io.IOException: Failed to deserialize "
                                                    "JSON 'this is not json'.",
                                                    "stacktrace": "java.io.IOException: Failed …\n\tat a.b"}]}}
    error = core.root_exception(exceptions)
    tracked, events = core.step(tracked, overview(jid, "FAILED"), now=0.0, grace=0, errors={jid: error})
    (fail,) = events
    assert fail["run"]["facets"]["errorMessage"]["message"].startswith("java.io.IOException: Failed to deserialize")
    tracked = core.observe(tracked, fail)  # the watcher's own event, read back from the topic
    assert core.wants_exception(tracked, overview(jid, "FAILED")) == []
    for name in ("bounded", "streaming"):  # runs the listener finished itself: nothing to add
        done = observed(name)
        (done_jid,) = done
        flink_state = "FINISHED" if name == "bounded" else "CANCELED"
        assert core.step(done, overview(done_jid, flink_state), now=0.0, grace=0)[1] == []


def test_the_error_message_names_the_innermost_cause() -> None:
    trace = ("org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy\n"
             "\tat org.apache.flink.runtime.executiongraph.failover.x(y.java:1)\n"
             "Caused by: java.lang.RuntimeException: One or more fetchers have encountered exception\n\tat a.b\n"
             "Caused by: java.io.IOException: Failed to deserialize JSON 'this is not json'.\n\tat c.d\n\t... 5 more")
    message, stack = core.root_exception({"exceptionHistory": {"entries": [
        {"exceptionName": "org.apache.flink.runtime.JobException", "stacktrace": trace}]}})
    assert message == ("org.apache.flink.runtime.JobException (root cause: java.io.IOException: Failed to "
                       "deserialize JSON 'this is not json'.)")
    assert stack == trace
    assert core.root_exception({"root-exception": "x" * 5000})[0] == "x" * core.MAX_ERROR_MESSAGE
    assert core.root_exception({"exceptionHistory": {"entries": []}}) is None


def test_running_and_unknown_jobs_send_nothing() -> None:
    tracked = core.observe({}, listener_events("streaming")[0])
    (jid,) = tracked
    for states in (overview(jid, "RUNNING"), overview(jid, "RESTARTING"), {}):
        assert core.step(tracked, states, now=1e9, grace=0)[1] == []
