"""Metrics facade, lag arithmetic, readiness checks and the metrics/health HTTP endpoints, without services."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kafka_lineage.runtime.metrics import (
    METRICS_CONTENT_TYPE,
    OFFSET_INVALID,
    Metrics,
    Readiness,
    aiohttp_handlers,
    consumer_lag,
    lag_from,
    serve_http,
)


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_two_facades_in_one_process_have_separate_registries() -> None:
    first, second = Metrics(), Metrics(process_metrics=False)
    first.events_in("processor", 3)
    assert sample(first, "lineage_events_in_total", stage="processor") == 3
    assert sample(second, "lineage_events_in_total", stage="processor") is None


def test_every_family_is_exposed_with_its_labels() -> None:
    metrics = Metrics(process_metrics=False)
    metrics.events_in("processor", 5)
    metrics.events_out("processor", 4)
    metrics.duplicate("processor")
    metrics.late("processor", 2)
    metrics.dead_letter("graph-sink", "rejected")
    metrics.schema_change("alert-sink")
    metrics.lag("graph-sink", "lineage.normalized", 3, 17)
    metrics.batch("graph-sink", 120)
    metrics.neo4j_transaction(0.04)
    metrics.latency("graph", 0.3)
    metrics.latency("alert", 1.5)
    metrics.emitter_queue(7)
    metrics.emitter_undelivered(2)
    metrics.seen("collector", at=1_700_000_000.5)
    metrics.set_ready(True)

    assert sample(metrics, "lineage_events_in_total", stage="processor") == 5
    assert sample(metrics, "lineage_events_out_total", stage="processor") == 4
    assert sample(metrics, "lineage_duplicates_total", stage="processor") == 1
    assert sample(metrics, "lineage_late_events_total", stage="processor") == 2
    assert sample(metrics, "lineage_dead_letters_total", stage="graph-sink", reason="rejected") == 1
    assert sample(metrics, "lineage_schema_changes_total", stage="alert-sink") == 1
    assert sample(metrics, "lineage_consumer_lag", stage="graph-sink", topic="lineage.normalized", partition="3") == 17
    assert sample(metrics, "lineage_batch_size_count", stage="graph-sink") == 1
    assert sample(metrics, "lineage_neo4j_transaction_seconds_count") == 1
    assert sample(metrics, "lineage_end_to_end_latency_seconds_count", path="graph") == 1
    assert sample(metrics, "lineage_end_to_end_latency_seconds_count", path="alert") == 1
    assert sample(metrics, "lineage_emitter_queue_depth") == 7
    assert sample(metrics, "lineage_emitter_undelivered_total") == 2
    assert sample(metrics, "lineage_last_event_timestamp_seconds", stage="collector") == 1_700_000_000.5
    assert sample(metrics, "lineage_ready") == 1

    body, content_type = metrics.exposition()
    assert content_type == METRICS_CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    families = {family.name: family.type for family in text_string_to_metric_families(body.decode())}
    assert families["lineage_end_to_end_latency_seconds"] == "histogram"
    assert families["lineage_consumer_lag"] == "gauge"
    assert families["lineage_dead_letters"] == "counter"


def test_process_metrics_are_included_by_default() -> None:
    body, _ = Metrics().exposition()
    assert b"python_info" in body


def test_histogram_buckets_fit_batches_and_latencies() -> None:
    metrics = Metrics(process_metrics=False)
    metrics.batch("processor", 1)
    metrics.batch("processor", 4999)
    assert sample(metrics, "lineage_batch_size_bucket", stage="processor", le="1.0") == 1
    assert sample(metrics, "lineage_batch_size_bucket", stage="processor", le="2500.0") == 1
    assert sample(metrics, "lineage_batch_size_bucket", stage="processor", le="5000.0") == 2

    metrics.latency("graph", 0.004)
    metrics.latency("graph", 59.0)
    metrics.latency("graph", -0.5)  # clock skew between hosts: counted as 0, not as a negative sum
    assert sample(metrics, "lineage_end_to_end_latency_seconds_bucket", path="graph", le="0.005") == 2
    assert sample(metrics, "lineage_end_to_end_latency_seconds_bucket", path="graph", le="30.0") == 2
    assert sample(metrics, "lineage_end_to_end_latency_seconds_bucket", path="graph", le="60.0") == 3
    assert sample(metrics, "lineage_end_to_end_latency_seconds_sum", path="graph") == pytest.approx(59.004)

    metrics.latency_since("alert", produced_at=100.0, now=100.25)
    assert sample(metrics, "lineage_end_to_end_latency_seconds_sum", path="alert") == pytest.approx(0.25)


def test_neo4j_timer_records_failed_transactions_too() -> None:
    metrics = Metrics(process_metrics=False)
    with metrics.neo4j_timer():
        pass
    with pytest.raises(RuntimeError), metrics.neo4j_timer():
        raise RuntimeError("transaction failed")
    assert sample(metrics, "lineage_neo4j_transaction_seconds_count") == 2


@pytest.mark.parametrize(
    ("high", "position", "low", "lag"),
    [
        (100, 40, 0, 60),
        (100, 100, 0, 0),
        (0, 0, 0, 0),
        (100, OFFSET_INVALID, 0, 100),  # no committed offset: everything from the partition's start
        (100, OFFSET_INVALID, 30, 70),  # … which retention moved to 30
        (100, OFFSET_INVALID, OFFSET_INVALID, 100),  # unknown start counts as 0
        (OFFSET_INVALID, 5, 0, 0),  # unknown end: nothing can be said
        (OFFSET_INVALID, OFFSET_INVALID, OFFSET_INVALID, 0),
        (10, 12, 0, 0),  # position past a stale cached end
    ],
)
def test_lag_from(high: int, position: int, low: int, lag: int) -> None:
    assert lag_from(high, position, low) == lag


def test_lag_from_defaults_the_start_to_zero() -> None:
    assert lag_from(50, -1) == 50


class FakeConsumer:
    """The part of confluent_kafka.Consumer that consumer_lag uses."""

    def __init__(self, watermarks: dict[int, tuple[int, int]], positions: dict[int, int],
                 committed: dict[int, int], cached: dict[int, tuple[int, int]] | None = None,
                 failing: frozenset[int] = frozenset()) -> None:
        self.watermarks, self.positions, self.committed_offsets = watermarks, positions, committed
        self.cached = cached if cached is not None else watermarks
        self.failing = failing
        self.assigned = [TopicPartition("t", p) for p in sorted(watermarks)]
        self.broker_watermark_calls: list[int] = []
        self.committed_calls: list[list[int]] = []

    def assignment(self) -> list[TopicPartition]:
        return list(self.assigned)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions.get(tp.partition, OFFSET_INVALID))
                for tp in partitions]

    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        self.committed_calls.append([tp.partition for tp in partitions])
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, OFFSET_INVALID))
                for tp in partitions]

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float = -1,
                              cached: bool = False) -> tuple[int, int]:
        if partition.partition in self.failing:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        if cached:
            return self.cached.get(partition.partition, (OFFSET_INVALID, OFFSET_INVALID))
        self.broker_watermark_calls.append(partition.partition)
        return self.watermarks[partition.partition]


def test_consumer_lag_uses_cached_watermarks_and_positions() -> None:
    consumer = FakeConsumer(watermarks={0: (0, 100), 1: (0, 50)}, positions={0: 90, 1: 50}, committed={})
    assert consumer_lag(consumer) == {("t", 0): 10, ("t", 1): 0}  # type: ignore[arg-type]
    assert consumer.broker_watermark_calls == []
    assert consumer.committed_calls == []


def test_consumer_lag_asks_only_for_what_is_not_known_locally() -> None:
    consumer = FakeConsumer(watermarks={0: (0, 100), 1: (10, 50), 2: (0, 5)}, positions={0: 90},
                            committed={1: 20}, cached={0: (OFFSET_INVALID, 100)})
    lags = consumer_lag(consumer)  # type: ignore[arg-type]
    assert lags == {("t", 0): 10, ("t", 1): 30, ("t", 2): 5}
    assert consumer.broker_watermark_calls == [1, 2]  # partition 0's end was cached
    assert consumer.committed_calls == [[1, 2]]  # positions unknown → committed offsets


def test_consumer_lag_from_committed_offsets_and_failures() -> None:
    consumer = FakeConsumer(watermarks={0: (0, 100), 1: (0, 50)}, positions={0: 99, 1: 50}, committed={0: 60, 1: 50},
                            failing=frozenset({1}))
    assert consumer_lag(consumer, committed=True) == {("t", 0): 40}  # type: ignore[arg-type]
    assert consumer_lag(consumer, [TopicPartition("t", 0)]) == {("t", 0): 1}  # type: ignore[arg-type]
    consumer.assigned = []
    assert consumer_lag(consumer) == {}  # type: ignore[arg-type]


def test_update_lag_drops_the_series_of_revoked_partitions() -> None:
    metrics = Metrics(process_metrics=False)
    consumer = FakeConsumer(watermarks={0: (0, 10), 1: (0, 20)}, positions={0: 5, 1: 5}, committed={})
    metrics.update_lag("graph-sink", consumer)  # type: ignore[arg-type]
    assert sample(metrics, "lineage_consumer_lag", stage="graph-sink", topic="t", partition="1") == 15
    consumer.assigned = [TopicPartition("t", 0)]
    assert metrics.update_lag("graph-sink", consumer) == {("t", 0): 5}  # type: ignore[arg-type]
    assert sample(metrics, "lineage_consumer_lag", stage="graph-sink", topic="t", partition="0") == 5
    assert sample(metrics, "lineage_consumer_lag", stage="graph-sink", topic="t", partition="1") is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_readiness_caches_answers_for_the_ttl() -> None:
    calls: list[str] = []
    clock = Clock()

    def kafka() -> None:
        calls.append("kafka")

    def neo4j() -> None:
        calls.append("neo4j")
        raise ConnectionError("cannot reach\nbolt://neo4j:hunter2@localhost:7687")

    readiness = Readiness({"kafka": kafka, "neo4j": neo4j}, ttl=2.0, clock=clock)
    report = readiness.evaluate()
    assert report.checks == {"kafka": "ok",
                             "neo4j": "unavailable: ConnectionError: cannot reach bolt://neo4j:***@localhost:7687"}
    assert not report.ready and report.status == 503
    assert report.body() == {"status": "not ready", "checks": report.checks}
    clock.now = 1.9
    assert readiness.evaluate() == report
    assert sorted(calls) == ["kafka", "neo4j"]
    clock.now = 2.0
    readiness.evaluate()
    assert sorted(calls) == ["kafka", "kafka", "neo4j", "neo4j"]


def test_readiness_times_out_a_hanging_check_and_never_runs_it_twice_at_once() -> None:
    release, started = threading.Event(), []
    clock = Clock()

    def hanging() -> None:
        started.append(1)
        release.wait(5)

    readiness = Readiness({"neo4j": hanging, "kafka": lambda: None}, timeout=0.05, ttl=1.0, clock=clock)
    try:
        report = readiness.evaluate()
        assert report.checks == {"neo4j": "unavailable: no answer within 0.05s", "kafka": "ok"}
        clock.now = 5.0
        assert readiness.evaluate().checks["neo4j"] == "unavailable: no answer within 0.05s"
        assert started == [1]  # still in flight: waited for, not started again
    finally:
        release.set()
    for thread in threading.enumerate():
        if thread.name == "readiness-neo4j":
            thread.join(5)
    clock.now = 10.0
    assert readiness.evaluate().ready
    assert started == [1, 1]  # the earlier run has finished: a fresh one answers


def test_readiness_without_checks_is_ready() -> None:
    report = Readiness().evaluate()
    assert report.ready and report.body() == {"status": "ready", "checks": {}}


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_http_server_answers_metrics_and_health() -> None:
    metrics = Metrics(process_metrics=False)
    metrics.dead_letter("graph-sink", "decode")
    neo4j_up = threading.Event()

    def neo4j() -> None:
        if not neo4j_up.is_set():
            raise RuntimeError("Neo4j is starting")

    readiness = Readiness({"kafka": lambda: None, "neo4j": neo4j}, ttl=0.0)
    handle = serve_http("127.0.0.1", 0, metrics, readiness)
    try:
        assert handle.port > 0 and handle.url == f"http://127.0.0.1:{handle.port}"
        status, content_type, body = get(f"{handle.url}/metrics")
        assert (status, content_type) == (200, METRICS_CONTENT_TYPE)
        assert 'lineage_dead_letters_total{reason="decode",stage="graph-sink"} 1.0' in body.decode()

        status, content_type, body = get(f"{handle.url}/health/live")
        assert (status, content_type, json.loads(body)) == (200, "application/json", {"status": "live"})

        status, _, body = get(f"{handle.url}/health/ready")
        assert status == 503
        assert json.loads(body) == {"status": "not ready",
                                    "checks": {"kafka": "ok", "neo4j": "unavailable: RuntimeError: Neo4j is starting"}}
        assert sample(metrics, "lineage_ready") == 0
        neo4j_up.set()
        status, _, body = get(f"{handle.url}/health/ready?verbose=1")
        assert (status, json.loads(body)) == (200, {"status": "ready", "checks": {"kafka": "ok", "neo4j": "ok"}})
        assert sample(metrics, "lineage_ready") == 1

        status, _, body = get(f"{handle.url}/nothing")
        assert status == 404 and "/metrics" in json.loads(body)["error"]
    finally:
        handle.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{handle.url}/health/live", timeout=2)


def test_http_server_accepts_plain_checks_and_works_as_a_context_manager() -> None:
    with serve_http("127.0.0.1", 0, Metrics(process_metrics=False), {"kafka": lambda: None}) as handle:
        status, _, body = get(f"{handle.url}/health/ready")
    assert (status, json.loads(body)["status"]) == (200, "ready")


def test_aiohttp_handlers() -> None:
    metrics = Metrics(process_metrics=False)
    metrics.events_in("collector", 2)

    def registry_down() -> None:
        raise OSError("registry unreachable")

    handlers = aiohttp_handlers(metrics, {"registry": registry_down})

    async def call() -> tuple[Any, Any]:
        return (await handlers.metrics(make_mocked_request("GET", "/metrics")),
                await handlers.ready(make_mocked_request("GET", "/health/ready")))

    metrics_response, ready_response = asyncio.run(call())
    assert metrics_response.status == 200
    assert metrics_response.headers["Content-Type"] == METRICS_CONTENT_TYPE
    assert b'lineage_events_in_total{stage="collector"} 2.0' in metrics_response.body
    assert ready_response.status == 503
    assert json.loads(ready_response.text) == {"status": "not ready",
                                               "checks": {"registry": "unavailable: OSError: registry unreachable"}}
