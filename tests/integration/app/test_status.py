"""`lineage status` against the real stack: exact numbers from real topics and groups, and the truth when a service
stops (Kafka Connect, which no other stage of the pipeline needs, stopped and restarted by the stack's own code)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_lineage.app.status_text import format_status
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.status import PipelineStatus, ServiceState, collect_status, exit_code, status_json
from kafka_lineage_devtools.commands import local_stack_probe
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.stack.smoke import ensure_topic

pytestmark = pytest.mark.integration


@dataclass
class Pipeline:
    clients: ClientSettings
    groups: dict[str, str]


@pytest.fixture
def pipeline(clients: ClientSettings) -> Pipeline:
    """Topics and consumer groups of this test's own; ClientSettings read from the environment as the CLI does."""
    prefix = f"test.status.{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
           "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq"}
    settings = ClientSettings.from_env(env)
    for topic, partitions in ((settings.events_topic, 3), (settings.normalized_topic, 2), (settings.drift_topic, 2),
                              (settings.dlq_topic, 2)):
        ensure_topic(settings.kafka_bootstrap_servers, topic, partitions=partitions)
    groups = {"processor": f"{prefix}.processor", "graph-sink": f"{prefix}.graph-sink",
              "alert-sink": f"{prefix}.alert-sink"}
    return Pipeline(settings, groups)


def _produce(bootstrap: str, topic: str, records: list[tuple[int, int]]) -> None:
    """(partition, timestamp in ms) per record, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, (partition, timestamp_ms) in enumerate(records):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=partition, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture
def live_member(pipeline: Pipeline) -> Iterator[Consumer]:
    """An active member of the alert sink's group, with partitions assigned, for as long as the test runs."""
    clients = pipeline.clients
    consumer = Consumer({"bootstrap.servers": clients.kafka_bootstrap_servers,
                         "group.id": pipeline.groups["alert-sink"], "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    consumer.subscribe([clients.normalized_topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the member never got its partitions"
        consumer.poll(0.2)
    yield consumer
    consumer.close()


def _service(status: PipelineStatus, name: str) -> ServiceState:
    return next(row for row in status.services if row.name == name)


def test_lag_dead_letters_alerts_and_last_events_are_exact(stack_settings: StackSettings, pipeline: Pipeline,
                                                           live_member: Consumer) -> None:
    clients, groups = pipeline.clients, pipeline.groups
    bootstrap = clients.kafka_bootstrap_servers
    now = time.time()
    now_ms = int(now * 1000)
    # events: partition 0 holds 5 records (the newest of the topic), 1 holds 3, 2 none
    _produce(bootstrap, clients.events_topic,
             [(0, now_ms - 20_000 + i * 1000) for i in range(5)] + [(1, now_ms - 30_000 + i * 1000) for i in range(3)])
    # normalized: 4 + 2 records
    _produce(bootstrap, clients.normalized_topic,
             [(0, now_ms - 9_000 + i) for i in range(4)] + [(1, now_ms - 8_000 + i) for i in range(2)])
    # dead letters: 2 + 1
    _produce(bootstrap, clients.dlq_topic, [(0, now_ms - 7_000), (0, now_ms - 6_000), (1, now_ms - 6_500)])
    # drift alerts: 3 in the last hour (now-3500 s, now-60 s, now-1 s), 2 older (now-7200 s, now-3601 s)
    _produce(bootstrap, clients.drift_topic,
             [(0, now_ms - 7_200_000), (0, now_ms - 3_500_000), (0, now_ms - 60_000),
              (1, now_ms - 3_601_000), (1, now_ms - 1_000)])
    # processor: partition 0 committed at 2 of 5, partitions 1 and 2 never committed
    _commit(bootstrap, groups["processor"], [TopicPartition(clients.events_topic, 0, 2)])
    # graph sink: no commits at all; alert sink (one live member): 4 of 4 and 1 of 2
    live_member.commit(offsets=[TopicPartition(clients.normalized_topic, 0, 4),
                                TopicPartition(clients.normalized_topic, 1, 1)], asynchronous=False)

    started = time.monotonic()
    status = collect_status(local_stack_probe(stack_settings), clients, groups, now=now, lag_threshold=5)
    elapsed = time.monotonic() - started
    print(f"\ncollect_status took {elapsed:.2f}s\n{format_status(status)}", file=sys.stderr)
    assert elapsed < 10

    assert not status.kafka_error and _service(status, "kafka").up
    stages = {stage.stage: stage for stage in status.stages}
    processor, graph, alert = stages["processor"], stages["graph-sink"], stages["alert-sink"]

    assert (processor.group, processor.topic) == (groups["processor"], clients.events_topic)
    assert [(p.partition, p.low, p.end, p.committed, p.lag) for p in processor.partitions] == [
        (0, 0, 5, 2, 3), (1, 0, 3, None, 3), (2, 0, 0, None, 0)]
    assert processor.lag == 6 and processor.uncommitted_partitions == (1, 2) and not processor.no_commits
    assert (processor.members, processor.group_state) == (0, "empty")
    assert processor.last_event_ms == now_ms - 16_000  # the newest record of any partition

    assert (graph.group, graph.topic) == (groups["graph-sink"], clients.normalized_topic)
    assert graph.lag == 6 and graph.no_commits  # nothing committed: the whole topic is lag
    assert (graph.members, graph.group_state) == (0, "dead")  # the group does not exist
    assert graph.last_event_ms == now_ms - 8_000 + 1

    assert (alert.group, alert.topic) == (groups["alert-sink"], clients.normalized_topic)
    assert [(p.partition, p.committed, p.lag) for p in alert.partitions] == [(0, 4, 0), (1, 1, 1)]
    assert alert.lag == 1 and (alert.members, alert.group_state) == (1, "stable")

    assert (status.dead_letters.topic, status.dead_letters.count) == (clients.dlq_topic, 3)
    assert status.dead_letters.last_event_ms == now_ms - 6_000
    assert (status.alerts_last_hour.topic, status.alerts_last_hour.count) == (clients.drift_topic, 3)
    assert status.alerts_last_hour.last_event_ms == now_ms - 1_000

    kafka_reasons = [r for r in status.reasons if not r.startswith("service ")]  # services: not this test's business
    assert kafka_reasons == [
        f"processor: lag 6 on {clients.events_topic} above the threshold of 5",
        f"processor: no active member in group {groups['processor']}",
        f"graph-sink: lag 6 on {clients.normalized_topic} above the threshold of 5",
        f"graph-sink: no active member in group {groups['graph-sink']}",
        f"dead letters present: 3 in {clients.dlq_topic}",
    ]
    assert status.verdict == "degraded" and exit_code(status) == 1

    text = format_status(status)
    processor_line = next(line for line in text.splitlines() if line.startswith("processor "))
    assert "0 (empty)" in processor_line and "6 [p0:3 p1:3 p2:0] (no commits on p1,p2)" in processor_line
    graph_line = next(line for line in text.splitlines() if line.startswith("graph-sink "))
    assert "0 (no such group)" in graph_line and "6 [p0:4 p1:2] (no commits)" in graph_line
    assert f"dead letters ({clients.dlq_topic}): 3; last: " in text
    assert f"drift alerts in the last hour ({clients.drift_topic}): 3; last: " in text

    data = json.loads(json.dumps(status_json(status)))
    assert [s["lag"] for s in data["stages"]] == [6, 6, 1]
    assert data["dead_letters"]["count"] == 3 and data["drift_alerts_last_hour"]["count"] == 3


def test_status_is_truthful_when_a_service_stops(stack_settings: StackSettings, pipeline: Pipeline) -> None:
    """Kafka Connect stopped through the stack's own per-service ``down`` shows as down and degrades the verdict,
    Kafka's rows stay real; restarted with the stack's own ``up``, it shows as up again. Always restarted."""
    stack = Stack(stack_settings, report=lambda line: print(line, file=sys.stderr))
    if stack.running_pid("connect") is None:  # a previous test left it stopped or dead: start from a known state
        stack.up(["connect"])
    before = collect_status(local_stack_probe(stack_settings), pipeline.clients, pipeline.groups)
    assert _service(before, "connect").up
    stopped_pid = stack.running_pid("connect")

    try:
        assert stack.down(["connect"]) == ["connect"]
        started = time.monotonic()
        during = collect_status(local_stack_probe(stack_settings), pipeline.clients, pipeline.groups)
        elapsed = time.monotonic() - started
        print(f"\ncollect_status with connect stopped took {elapsed:.2f}s\n{format_status(during)}", file=sys.stderr)
        assert elapsed < 10
        connect = _service(during, "connect")
        assert (connect.state, connect.up, connect.detail) == ("down", False, "not started")
        assert during.verdict == "degraded" and exit_code(during) == 1
        assert "service connect is down: not started" in during.reasons
        assert re.search(r"^connect\s+down\s+not started$", format_status(during), re.MULTILINE)
        # Kafka itself is fine: its rows are real numbers, not "unavailable"
        assert _service(during, "kafka").up and not during.kafka_error
        assert all(stage.lag == 0 and not stage.lag_error for stage in during.stages)
        assert during.dead_letters.count == 0 and during.alerts_last_hour.count == 0
        assert status_json(during)["services"][-1] == {"name": "connect", "state": "down", "up": False,
                                                       "detail": "not started", "pid": None}
    finally:
        stack.up(["connect"])

    after = collect_status(local_stack_probe(stack_settings), pipeline.clients, pipeline.groups)
    print(f"\nafter the restart:\n{format_status(after)}", file=sys.stderr)
    connect = _service(after, "connect")
    assert connect.up and connect.pid not in (None, stopped_pid)
    assert not any(reason.startswith("service connect") for reason in after.reasons)


def test_a_transaction_open_for_an_hour_shows_as_hanging_until_it_ends(pipeline: Pipeline) -> None:
    """The first record of an open transaction on the normalized topic stamped an hour ago: no transaction of the
    pipeline lives that long, so its markers were lost; aborted, the partition is readable to its end again."""
    clients = pipeline.clients
    producer = Producer({"bootstrap.servers": clients.kafka_bootstrap_servers,
                         "transactional.id": f"test.status.{uuid.uuid4().hex[:8]}", "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer.produce(clients.normalized_topic, b"v", b"k", partition=1, timestamp=hour_ago)
    assert producer.flush(30) == 0
    try:
        status = collect_status(None, clients, pipeline.groups)
        assert not status.hanging_error
        assert [(h.topic, h.partition, h.end - h.stable_end, h.opened_ms) for h in status.hanging] == [
            (clients.normalized_topic, 1, 1, hour_ago)]
        assert any(reason.startswith(f"{clients.normalized_topic}[1]: a transaction open since ")
                   for reason in status.reasons)
    finally:
        producer.abort_transaction(30)
    after = collect_status(None, clients, pipeline.groups)
    assert after.hanging == () and not after.hanging_error
    assert status_json(after)["hanging_transactions"] == []
