"""Pure parts of `lineage status`: lag arithmetic, verdict rules, exit codes, the table and the JSON."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from kafka_lineage.app.stage_groups import default_groups
from kafka_lineage.app.status_text import format_lag, format_status
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.status import (
    STAGE_TOPICS,
    HangingTransaction,
    PartitionLag,
    PipelineStatus,
    ServiceState,
    StageStatus,
    TopicCount,
    collect_status,
    count_since,
    exit_code,
    hanging_transactions,
    partition_lags,
    stage_topic,
    status_json,
)
from kafka_lineage_devtools.commands import local_stack_probe
from kafka_lineage_devtools.stack.config import StackSettings

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
UP = tuple(ServiceState(name, "up", pid=100 + i) for i, name in enumerate(("kafka", "neo4j", "registry", "connect")))


def _stage(stage: str = "processor", *, lags: tuple[PartitionLag, ...] = (PartitionLag(0, 0, 10, 10),),
           members: int | None = 1, **extra: object) -> StageStatus:
    fields: dict = {"members": members, "group_state": "stable", "last_event_ms": int((NOW - 90) * 1000), **extra}
    return StageStatus(stage, f"g-{stage}", f"t-{stage}", lags, **fields)


def _status(services: tuple[ServiceState, ...] = UP, stages: tuple[StageStatus, ...] | None = None,
            dlq: int | None = 0, alerts: int | None = 0, **extra: object) -> PipelineStatus:
    return PipelineStatus(
        checked_at=NOW, kafka_bootstrap="127.0.0.1:9092", services=services,
        stages=(_stage("processor"), _stage("graph-sink")) if stages is None else stages,
        dead_letters=TopicCount("t.dlq", dlq), alerts_last_hour=TopicCount("t.drift", alerts), **extra)


# --- lag arithmetic -----------------------------------------------------------------------------------------------
def test_lag_is_end_minus_committed() -> None:
    assert PartitionLag(0, 0, 10, 7).lag == 3
    assert PartitionLag(0, 0, 10, 10).lag == 0
    assert PartitionLag(0, 4, 10, 12).lag == 0  # never negative


def test_without_a_commit_the_whole_partition_counts() -> None:
    assert PartitionLag(0, 0, 10, None).lag == 10
    assert PartitionLag(0, 4, 10, None).lag == 6  # what retention left is what there is to read


def test_partition_rows_treat_offset_invalid_as_no_commit() -> None:
    rows = partition_lags(low={0: 0, 1: 2, 2: 0}, end={0: 5, 1: 7, 2: 0}, committed={0: 3, 1: -1001})
    assert rows == (PartitionLag(0, 0, 5, 3), PartitionLag(1, 2, 7, None), PartitionLag(2, 0, 0, None))
    stage = _stage(lags=rows)
    assert [r.lag for r in rows] == [2, 5, 0] and stage.lag == 7
    assert stage.uncommitted_partitions == (1, 2) and not stage.no_commits
    assert format_lag(stage) == "7 [p0:2 p1:5 p2:0] (no commits on p1,p2)"


def test_a_group_that_never_committed_says_so() -> None:
    stage = _stage(lags=partition_lags({0: 0, 1: 0}, {0: 3, 1: 4}, {}))
    assert stage.no_commits and stage.lag == 7
    assert format_lag(stage) == "7 [p0:3 p1:4] (no commits)"


def test_unavailable_lag_is_none_not_zero() -> None:
    stage = _stage(lags=(), lag_error="Kafka unreachable")
    assert stage.lag is None and not stage.no_commits
    assert format_lag(stage) == "unavailable: Kafka unreachable"


def test_records_since_a_time() -> None:
    # partition 0: 3 of 10 are recent; partition 1: none that recent (-1); partition 2: all 4
    assert count_since({0: 10, 1: 5, 2: 4}, {0: 7, 1: -1, 2: 0}) == 7
    assert count_since({0: 0}, {0: -1}) == 0


# --- the stage -> topic mapping ----------------------------------------------------------------------------------
def test_stage_topics_follow_what_each_stage_consumes() -> None:
    clients = ClientSettings("k:9092", "http://r", "bolt://n:7687", "neo4j", "", "http://c", events_topic="e",
                             normalized_topic="n", drift_topic="d", dlq_topic="q")
    assert {stage: stage_topic(stage, clients) for stage in STAGE_TOPICS} == {
        "processor": "e", "graph-sink": "n", "alert-sink": "n", "alert-router": "d"}
    with pytest.raises(ValueError, match="unknown stage 'spark'"):
        stage_topic("spark", clients)


def test_default_groups_come_from_the_stage_settings() -> None:
    assert default_groups({}) == {"processor": "lineage-processor", "graph-sink": "lineage-graph-sink",
                                  "alert-sink": "lineage-alert-sink"}
    assert default_groups({"LINEAGE_SINK_GROUP": "mine"})["graph-sink"] == "mine"
    # the alert router is a stage only where it is configured
    assert default_groups({"LINEAGE_ALERT_ROUTES": "routes.yaml"})["alert-router"] == "lineage-alert-router"


# --- verdict rules -----------------------------------------------------------------------------------------------
def test_all_well_is_healthy() -> None:
    status = _status()
    assert status.verdict == "healthy" and status.reasons == () and exit_code(status) == 0


def test_a_service_down_degrades_with_its_reason() -> None:
    services = (*UP[:3], ServiceState("connect", "down", "not started"))
    status = _status(services=services)
    assert status.verdict == "degraded" and exit_code(status) == 1
    assert status.reasons == ("service connect is down: not started",)


def test_lag_above_the_threshold_degrades_at_the_threshold_not() -> None:
    at = _stage(lags=(PartitionLag(0, 0, 100, 0),))
    assert _status(stages=(at,), lag_threshold=100).healthy
    status = _status(stages=(at,), lag_threshold=99)
    assert status.reasons == ("processor: lag 100 on t-processor above the threshold of 99",)


def test_a_stage_without_members_degrades() -> None:
    status = _status(stages=(_stage(members=0),))
    assert status.reasons == ("processor: no active member in group g-processor",)


def test_dead_letters_degrade_drift_alerts_do_not() -> None:
    assert _status(alerts=12).healthy
    assert _status(dlq=3).reasons == ("dead letters present: 3 in t.dlq",)


def test_unavailable_rows_degrade() -> None:
    stage = _stage(lags=(), lag_error="x", members=None, members_error="y")
    status = _status(stages=(stage,))
    assert status.reasons == ("processor: lag unavailable: x", "processor: members unavailable: y")
    assert exit_code(status) == 1


def test_kafka_unreachable_exits_2() -> None:
    stage = _stage(lags=(), lag_error="Kafka unreachable", members=None, members_error="Kafka unreachable")
    status = _status(stages=(stage,), dlq=None, alerts=None, kafka_error="_TRANSPORT: refused")
    assert status.verdict == "degraded" and exit_code(status) == 2
    assert status.reasons == ("Kafka 127.0.0.1:9092 unreachable: _TRANSPORT: refused",)  # said once, not per row


# --- showing -----------------------------------------------------------------------------------------------------
def test_the_table() -> None:
    stages = (_stage("processor", lags=(PartitionLag(0, 0, 5, 2), PartitionLag(1, 0, 3, None))),
              _stage("graph-sink", members=0))
    text = format_status(_status(services=(*UP[:3], ServiceState("connect", "dead", "process 7 is gone")),
                                 stages=stages, dlq=2, alerts=1))
    lines = text.splitlines()
    assert lines[0] == "pipeline status at 2027-01-15T08:00:00Z (Kafka 127.0.0.1:9092)"
    assert lines[2].split() == ["SERVICE", "STATE", "DETAIL"]
    assert lines[6].split() == ["connect", "dead", "process", "7", "is", "gone"]
    assert lines[8].split() == ["STAGE", "GROUP", "TOPIC", "MEMBERS", "LAG", "LAST", "EVENT"]
    assert lines[9].split() == ["processor", "g-processor", "t-processor", "1", "(stable)", "6", "[p0:3", "p1:3]",
                                "(no", "commits", "on", "p1)", "2027-01-15T07:58:30Z", "(1m", "ago)"]
    assert lines[10].startswith("graph-sink  g-graph-sink")
    assert "dead letters (t.dlq): 2; last: no records" in lines
    assert "drift alerts in the last hour (t.drift): 1; last: no records" in lines
    assert lines[-4:] == ["verdict: degraded", "  - service connect is dead: process 7 is gone",
                          "  - graph-sink: no active member in group g-graph-sink",
                          "  - dead letters present: 2 in t.dlq"]
    # the columns line up: every stage row starts its GROUP column where the header does
    assert {line.index("g-") for line in lines[9:11]} == {lines[8].index("GROUP")}


def test_the_table_when_kafka_is_unreachable() -> None:
    stage = _stage(lags=(), lag_error="Kafka unreachable", members=None, members_error="Kafka unreachable",
                   last_event_ms=None, last_event_error="Kafka unreachable")
    status = _status(stages=(stage,), kafka_error="boom")
    status = PipelineStatus(**{**status.__dict__, "dead_letters": TopicCount("t.dlq", error="Kafka unreachable"),
                               "alerts_last_hour": TopicCount("t.drift", error="Kafka unreachable")})
    text = format_status(status)
    assert text.count("unavailable: Kafka unreachable") == 5  # members, lag, last event, DLQ, alerts
    assert "dead letters (t.dlq): unavailable: Kafka unreachable" in text.splitlines()


def test_the_json_is_plain_and_complete() -> None:
    stages = (_stage("processor", lags=(PartitionLag(0, 1, 5, None),)),)
    data = status_json(_status(stages=stages, dlq=2, alerts=1))
    assert json.loads(json.dumps(data)) == data
    assert data["verdict"] == "degraded" and data["exit_code"] == 1
    assert data["reasons"] == ["dead letters present: 2 in t.dlq"]
    assert data["services"][0] == {"name": "kafka", "state": "up", "up": True, "detail": "", "pid": 100}
    assert data["stages"][0] == {
        "stage": "processor", "group": "g-processor", "topic": "t-processor", "members": 1,
        "group_state": "stable", "members_error": None, "lag": 4, "no_commits": True, "lag_error": None,
        "partitions": [{"partition": 0, "low": 1, "end": 5, "committed": None, "lag": 4}],
        "last_event": "2027-01-15T07:58:30Z", "last_event_ms": int((NOW - 90) * 1000), "last_event_error": None}
    assert data["dead_letters"]["count"] == 2 and data["dead_letters"]["error"] is None
    assert data["drift_alerts_last_hour"]["count"] == 1
    assert data["drift_alerts_last_hour"]["since"] == "2027-01-15T07:00:00Z"


# --- nothing to talk to ------------------------------------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_running_is_reported_not_raised(tmp_path: Path) -> None:
    """No stack in the state dir and no broker on the port: every row says why, within the probe timeout."""
    env = {"LINEAGE_STATE_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{_closed_port()}",
           "LINEAGE_CONFIG": str(tmp_path / "none.yaml")}
    (tmp_path / "none.yaml").write_text("{}\n")
    started = time.monotonic()
    probe = local_stack_probe(StackSettings.from_env(env))
    status = collect_status(probe, ClientSettings.from_env(env), default_groups(env), timeout=1.0)
    assert time.monotonic() - started < 5
    assert {(s.name, s.state, s.detail) for s in status.services} == {
        (name, "down", "not started") for name in ("kafka", "neo4j", "registry", "connect")}
    assert status.kafka_error and exit_code(status) == 2
    assert all(s.lag is None and s.lag_error == "Kafka unreachable" for s in status.stages)
    assert status.dead_letters.count is None and status.alerts_last_hour.count is None


# --- hanging transactions -----------------------------------------------------------------------------------------
def test_a_transaction_open_past_the_bound_hangs_a_younger_one_or_none_does_not() -> None:
    stable = {("n", 0): 5, ("n", 1): 7, ("n", 2): 9, ("d", 0): 3}
    ends = {("n", 0): 9, ("n", 1): 8, ("n", 2): 9, ("d", 0): 4}
    opened = {("n", 0): int((NOW - 121) * 1000), ("n", 1): int((NOW - 119) * 1000), ("d", 0): int((NOW - 3600) * 1000)}
    assert hanging_transactions(stable, ends, opened, NOW, 120) == (
        HangingTransaction("d", 0, 3, 4, int((NOW - 3600) * 1000)),
        HangingTransaction("n", 0, 5, 9, int((NOW - 121) * 1000)))
    assert hanging_transactions(stable, ends, {}, NOW, 120) == ()  # first records not read: not known to hang


def test_a_hanging_transaction_degrades_with_where_readers_stop() -> None:
    status = _status(hanging=(HangingTransaction("t.normalized", 1, 40, 52, int((NOW - 600) * 1000)),))
    assert status.reasons == (
        "t.normalized[1]: a transaction open since 2027-01-15T07:50:00Z was never ended (its markers were lost): "
        "read_committed readers stop at offset 40, 12 records before the end; see README, \"Hanging transactions\"",)
    assert _status(hanging_error="boom").reasons == ("open transactions not checked: boom",)
