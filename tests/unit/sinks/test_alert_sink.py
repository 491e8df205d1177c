"""The alert sink's pure parts: alert identity, column-impact rows, the bounded wait for the graph sink."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime

import fastavro
import pytest

from kafka_lineage.graph.queries import Reached, ReachedField
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.sink import (
    Stopped,
    alert_id,
    build_alert,
    caught_up,
    change_id,
    changed_fields,
    column_rows,
    wait_until,
)

CHANGE = {"namespace": "s3://lake", "name": "orders", "previousVersion": "a" * 64, "newVersion": "b" * 64,
          "previousSchema": '[{"name":"id","type":"bigint"}]', "newSchema": '[{"name":"id","type":"string"}]',
          "previousEventTime": "2024-05-01T12:00:00Z", "severity": "BREAKING",
          "changes": [{"path": "id", "kind": "TYPE_CHANGED", "oldType": "bigint", "newType": "string",
                       "severity": "BREAKING"}]}


def _event(run: str, time: str) -> dict:
    return {"eventTime": time, "run": {"runId": run}, "job": {"namespace": "jobs", "name": "ingest"}}


def test_the_same_change_from_different_sources_gets_different_alert_ids_and_one_change_id() -> None:
    first = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    later_run = _event("22222222-2222-2222-2222-222222222222", "2024-05-01T12:00:01Z")
    later_time = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T13:00:01Z")
    ids = {alert_id(CHANGE, e) for e in (first, later_run, later_time)}
    assert len(ids) == 3
    other_dataset = {**CHANGE, "name": "customers"}
    assert alert_id(other_dataset, first) not in ids
    reverse = {**CHANGE, "previousVersion": CHANGE["newVersion"], "newVersion": CHANGE["previousVersion"]}
    assert alert_id(reverse, first) not in ids
    # one change id for every recurrence of A→B; B→A is another change
    assert change_id(CHANGE) == change_id({**CHANGE, "changes": []}) != change_id(reverse)


def test_the_same_source_redelivered_gets_the_same_alert_id() -> None:
    event = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    redelivered = {**_event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z"), "producer": "x"}
    assert alert_id(dict(CHANGE), event) == alert_id(dict(CHANGE), redelivered)
    alert = build_alert(CHANGE, event, [], 5, 10, datetime.now(UTC))
    assert alert["alertId"] == alert_id(CHANGE, event) and alert["changeId"] == change_id(CHANGE)


def test_changed_fields_are_the_paths_and_their_parents() -> None:
    change = {**CHANGE, "changes": [{"path": "address.geo.lat"}, {"path": "id"}, {"path": "address.zip"},
                                    {"path": ""}]}
    assert changed_fields(change) == ["address", "address.geo", "address.geo.lat", "address.zip", "id"]
    assert changed_fields({**CHANGE, "changes": []}) == []


def test_column_rows_keep_each_column_once_at_its_smallest_depth_nearest_first() -> None:
    found = [ReachedField(2, "s3://lake", "mart", "total"), ReachedField(1, "s3://lake", "clean", "id"),
             ReachedField(1, "s3://lake", "mart", "total"), ReachedField(3, "pg://db:5432", "r.t", "id")]
    assert column_rows(found) == [
        {"namespace": "s3://lake", "name": "clean", "field": "id", "depth": 1},
        {"namespace": "s3://lake", "name": "mart", "field": "total", "depth": 1},
        {"namespace": "pg://db:5432", "name": "r.t", "field": "id", "depth": 3},
    ]


def test_an_alert_lists_columns_limited_and_says_whether_impact_was_complete() -> None:
    event = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    columns = [ReachedField(1, "s3://lake", f"t{i}", "id") for i in range(4)]
    jobs = [Reached(1, "job", "jobs", "clean"), Reached(1, "dataset", "s3://lake", "t0")]
    alert = build_alert(CHANGE, event, jobs, 5, 3, datetime.now(UTC), columns=columns, complete=False)
    assert [c["name"] for c in alert["impactedColumns"]] == ["t0", "t1", "t2"]
    assert alert["impactTruncated"] and not alert["impactComplete"]
    assert alert["impactedJobs"] == [{"namespace": "jobs", "name": "clean", "depth": 1, "owners": []}]
    complete = build_alert(CHANGE, event, jobs, 5, 10, datetime.now(UTC), columns=columns)
    assert complete["impactComplete"] and not complete["impactTruncated"] and len(complete["impactedColumns"]) == 4
    # the record is valid SchemaDriftAlert Avro, new fields included
    codec = AvroCodec("schema_drift_alert", lambda _: schema_text("schema_drift_alert"))
    decoded = codec.decode(codec.encode(alert, 1))
    assert decoded["impactedColumns"] == alert["impactedColumns"] and decoded["impactComplete"] is False


def test_an_alert_of_an_older_writer_schema_reads_with_the_new_fields_defaults() -> None:
    current = json.loads(schema_text("schema_drift_alert"))
    later = ("changeId", "impactComplete", "impactedColumns", "datasetOwners", "datasetTags")
    old = json.loads(json.dumps(current))
    old["fields"] = [f for f in old["fields"] if f["name"] not in later]
    for listed in ("impactedJobs", "impactedDatasets"):  # their items without owners, as before
        items = next(f for f in old["fields"] if f["name"] == listed)["type"]["items"]
        items["fields"] = [f for f in items["fields"] if f["name"] != "owners"]
    event = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    record = build_alert(CHANGE, event, [Reached(1, "job", "jobs", "clean"), Reached(1, "dataset", "s3://lake", "t")],
                         5, 10, datetime.now(UTC))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(old), record)
    buffer.seek(0)
    read = fastavro.schemaless_reader(buffer, fastavro.parse_schema(old), fastavro.parse_schema(current))
    assert read["impactComplete"] is True and read["impactedColumns"] == [] and read["changeId"] == ""
    assert read["datasetOwners"] == [] and read["datasetTags"] == []
    assert read["impactedJobs"] == [{"namespace": "jobs", "name": "clean", "depth": 1, "owners": []}]
    assert read["impactedDatasets"][0]["owners"] == []
    # and the codec that reads the alert topic resolves an old writer's records to the current schema the same way
    codec = AvroCodec("schema_drift_alert", lambda _: json.dumps(old))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(old), record)
    decoded = codec.decode(b"\x00\x00\x00\x00\x07" + buffer.getvalue())
    assert decoded["datasetOwners"] == [] and decoded["impactedJobs"][0]["owners"] == []


def test_caught_up_needs_every_partition_at_its_end_offset() -> None:
    assert caught_up({0: 10, 1: 0, 2: 5}, {0: 10, 2: 7})  # partition 1 is empty: nothing to wait for
    assert not caught_up({0: 10, 1: 3}, {0: 10})  # never committed on partition 1
    assert not caught_up({0: 10, 1: 3}, {0: 10, 1: -1001})  # "no offset" from Kafka
    assert not caught_up({0: 10}, {0: 9})
    assert caught_up({}, {})


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _FakeStop(threading.Event):
    """A stop event whose waits advance a fake clock instead of sleeping."""

    def __init__(self, clock: _Clock, stop_at: float | None = None) -> None:
        super().__init__()
        self.clock, self.stop_at, self.waits = clock, stop_at, []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        self.clock.now += timeout or 0
        if self.stop_at is not None and self.clock.now >= self.stop_at:
            self.set()
        return self.is_set()


def test_wait_until_returns_when_the_condition_holds() -> None:
    clock = _Clock()
    stop = _FakeStop(clock)
    answers = iter([False, False, True])
    assert wait_until(lambda: next(answers), 30, stop, interval=0.25, clock=clock)
    assert clock.now == pytest.approx(0.5)


def test_wait_until_gives_up_at_its_bound() -> None:
    clock = _Clock()
    stop = _FakeStop(clock)
    calls = []
    assert not wait_until(lambda: calls.append(clock.now) or False, 2.0, stop, interval=0.3, clock=clock)
    assert clock.now == pytest.approx(2.0) and max(stop.waits) <= 0.3 + 1e-9
    assert calls[-1] == pytest.approx(2.0)  # the condition is asked once more at the deadline


def test_wait_until_leaves_at_once_when_stopped() -> None:
    clock = _Clock()
    stop = _FakeStop(clock, stop_at=1.0)
    with pytest.raises(Stopped):
        wait_until(lambda: False, 30, stop, interval=0.25, clock=clock)
    assert clock.now == pytest.approx(1.0)
    already = threading.Event()
    already.set()
    with pytest.raises(Stopped):
        wait_until(lambda: True, 30, already)  # a stop wins over a condition that would hold


def test_each_sink_process_gets_a_transactional_id_of_its_own_named_after_its_group() -> None:
    from kafka_lineage.sinks.alerts.sink import transactional_id

    first, second = transactional_id("lineage-alert-sink"), transactional_id("lineage-alert-sink")
    assert first.startswith("lineage-alert-sink.") and second.startswith("lineage-alert-sink.")
    assert first != second


def test_the_alert_sink_s_crash_points_are_read_from_its_setting_and_unknown_ones_refused() -> None:
    from kafka_lineage.runtime.config import ConfigError
    from kafka_lineage.sinks.alerts.settings import AlertSettings

    assert AlertSettings.from_env({}).crash_points == ""
    assert AlertSettings.from_env({"LINEAGE_ALERT_CRASH_POINTS": "before-commit=1.0"}).crash_points \
        == "before-commit=1.0"
    with pytest.raises(ConfigError, match="LINEAGE_ALERT_CRASH_POINTS"):
        AlertSettings.from_env({"LINEAGE_ALERT_CRASH_POINTS": "outputs-sent=1"})


def test_a_batch_out_of_time_is_given_up_and_waits_are_cut_to_what_is_left(monkeypatch) -> None:
    from kafka_lineage.sinks.alerts import sink

    now = [100.0]
    monkeypatch.setattr(sink.time, "monotonic", lambda: now[0])
    alerts = object.__new__(sink.AlertSink)  # only the batch clock is used here
    alerts._deadline = 130.0
    assert alerts._budget(60.0) == 30.0
    assert alerts._budget(5.0) == 5.0
    now[0] = 130.0
    with pytest.raises(sink.BatchExpired):
        alerts._budget(5.0)
    assert sink.BATCH_SECONDS * 1000 < sink.MAX_POLL_INTERVAL_MS


class _Producer:
    """A transactional producer whose ``send_offsets`` may hang until released (a broker that never answers)."""

    def __init__(self, hang: bool) -> None:
        self.hang, self.release = hang, threading.Event()
        self.calls: list[str] = []

    def begin(self) -> None:
        self.calls.append("begin")

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        self.calls.append(f"produce {topic}")

    def send_offsets(self, offsets: dict, membership: bytes) -> None:
        self.calls.append("send_offsets")
        if self.hang:
            self.release.wait(30)

    def flush(self) -> None:
        self.calls.append("flush")

    def commit(self) -> None:
        self.calls.append("commit")


def _publishing_sink(monkeypatch, producers: list[_Producer]):
    from types import SimpleNamespace

    from kafka_lineage.runtime.crash_points import CrashPoints
    from kafka_lineage.runtime.metrics import Metrics
    from kafka_lineage.runtime.transactions import group_metadata
    from kafka_lineage.sinks.alerts import sink

    alerts = object.__new__(sink.AlertSink)  # the publish path only: no Kafka, no Neo4j
    alerts.stop = threading.Event()
    alerts.settings = SimpleNamespace(group_id="alerts")
    alerts.clients = SimpleNamespace(drift_topic="drift")
    membership = group_metadata("alerts", 3, "member-1")
    alerts.member = SimpleNamespace(consumer=SimpleNamespace(consumer_group_metadata=lambda: membership))
    alerts.crash = CrashPoints({}, "sink")
    alerts.metrics = Metrics(process_metrics=False)
    alerts.transactional_id, alerts.published, alerts.replaced = "alerts.abc", 0, 0
    alerts.producer = producers.pop(0)
    alerts.new_producer = lambda: producers.pop(0)
    seeded = []
    alerts._seed_recent = lambda: seeded.append(True)
    return alerts, seeded


def test_a_publish_that_hangs_is_abandoned_and_its_producer_replaced_by_one_with_the_same_id(monkeypatch) -> None:
    from kafka_lineage.runtime.transactions import TransactionAborted
    from kafka_lineage.sinks.alerts import sink

    monkeypatch.setattr(sink, "PUBLISH_SECONDS", 0.3)
    stuck, fresh = _Producer(hang=True), _Producer(hang=False)
    alerts, seeded = _publishing_sink(monkeypatch, [stuck, fresh])
    with pytest.raises(TransactionAborted, match="replaced"):
        alerts._publish([(b"k", b"v")], {("normalized", 0): 10})
    assert alerts.producer is fresh and alerts.replaced == 1 and alerts.published == 0
    assert seeded == [True]  # alert ids read again once the stuck transaction is settled
    stuck.release.set()  # its call returns at last: it must not commit what was given up
    for thread in threading.enumerate():
        if thread.name.startswith("bounded-"):
            thread.join(5)
    assert stuck.calls == ["begin", "produce drift", "send_offsets"]
    alerts._publish([(b"k", b"v")], {("normalized", 0): 10})  # the batch read again goes through the new one
    assert fresh.calls == ["begin", "produce drift", "send_offsets", "commit"] and alerts.published == 1


def test_a_stop_does_not_cut_a_publish_short(monkeypatch) -> None:
    alerts, _ = _publishing_sink(monkeypatch, [producer := _Producer(hang=True)])
    threading.Timer(0.2, alerts.stop.set).start()
    threading.Timer(0.5, producer.release.set).start()
    alerts._publish([(b"k", b"v")], {("normalized", 0): 10})
    assert producer.calls[-1] == "commit" and alerts.published == 1


def test_a_publish_whose_call_timed_out_past_its_retries_replaces_the_producer_a_fenced_one_stops(monkeypatch) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from kafka_lineage.runtime.transactions import TransactionAborted, TransactionFatal

    def failing(code: int) -> _Producer:
        producer = _Producer(hang=False)

        def send_offsets(offsets: dict, membership: bytes) -> None:
            raise TransactionFatal("transaction alerts.abc: timed out") from KafkaException(KafkaError(code))

        producer.send_offsets = send_offsets  # type: ignore[method-assign]
        return producer

    fresh = _Producer(hang=False)
    alerts, seeded = _publishing_sink(monkeypatch, [failing(KafkaError._TIMED_OUT), fresh])
    with pytest.raises(TransactionAborted, match="replaced"):
        alerts._publish([(b"k", b"v")], {("normalized", 0): 10})
    assert alerts.producer is fresh and alerts.replaced == 1 and seeded == [True]
    alerts, _ = _publishing_sink(monkeypatch, [failing(KafkaError._FENCED), _Producer(hang=False)])
    with pytest.raises(TransactionFatal):  # another process has the id: this one stops
        alerts._publish([(b"k", b"v")], {("normalized", 0): 10})
    assert alerts.replaced == 0


def test_an_alert_carries_its_dataset_s_owners_and_tags_and_each_impacted_node_s_owners() -> None:
    from kafka_lineage.sinks.alerts.ownership import Ownership

    event = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    impacted = [Reached(1, "job", "jobs", "clean"), Reached(1, "dataset", "s3://lake", "clean"),
                Reached(2, "job", "jobs", "mart")]
    ownership = Ownership(["team:payments", "user:ann"], ["pii", "tier:gold"], {
        ("job", "jobs", "clean"): ["team:etl"], ("dataset", "s3://lake", "clean"): ["team:analytics"],
        ("dataset", "jobs", "clean"): ["not this one: a job's names, a dataset's kind"]})
    alert = build_alert(CHANGE, event, impacted, 5, 10, datetime.now(UTC), ownership=ownership)
    assert alert["datasetOwners"] == ["team:payments", "user:ann"] and alert["datasetTags"] == ["pii", "tier:gold"]
    assert alert["impactedJobs"] == [{"namespace": "jobs", "name": "clean", "depth": 1, "owners": ["team:etl"]},
                                     {"namespace": "jobs", "name": "mart", "depth": 2, "owners": []}]
    assert alert["impactedDatasets"] == [{"namespace": "s3://lake", "name": "clean", "depth": 1,
                                          "owners": ["team:analytics"]}]
    codec = AvroCodec("schema_drift_alert", lambda _: schema_text("schema_drift_alert"))
    decoded = codec.decode(codec.encode(alert, 1))
    assert decoded["datasetOwners"] == alert["datasetOwners"] and decoded["datasetTags"] == alert["datasetTags"]
    assert decoded["impactedJobs"] == alert["impactedJobs"]
    # without ownership: every list empty, and the lists are the alert's own (a router may change them)
    bare = build_alert(CHANGE, event, impacted, 5, 10, datetime.now(UTC))
    assert bare["datasetOwners"] == [] and bare["datasetTags"] == []
    assert all(j["owners"] == [] for j in bare["impactedJobs"] + bare["impactedDatasets"])
    alert["impactedJobs"][0]["owners"].append("x")
    assert ownership.owners[("job", "jobs", "clean")] == ["team:etl"]


def test_an_alert_with_owners_reads_as_one_line_more_for_an_operator() -> None:
    from kafka_lineage.app.formats import format_alert
    from kafka_lineage.sinks.alerts.ownership import Ownership

    event = _event("11111111-1111-1111-1111-111111111111", "2024-05-01T12:00:01Z")
    bare = format_alert(build_alert(CHANGE, event, [], 5, 10, datetime.now(UTC)))
    owned = format_alert(build_alert(CHANGE, event, [], 5, 10, datetime.now(UTC),
                                     ownership=Ownership(["team:payments", "team:\x1b[31mred"])))
    assert owned.splitlines()[:-1] == bare.splitlines()
    assert owned.splitlines()[-1] == "    owners: team:payments, team:\\x1b[31mred"
