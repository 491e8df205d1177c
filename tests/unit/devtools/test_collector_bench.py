"""The collector bench's pure parts: request bodies, percentiles and CPU accounting."""

from __future__ import annotations

import json
import math
import os

from kafka_lineage_devtools.bench_collector import batches, cpu_seconds, percentile


def test_one_event_per_request_is_a_bare_object_and_batches_are_arrays() -> None:
    events = [{"n": n} for n in range(5)]
    assert [json.loads(body) for body in batches(events, 1)] == events
    assert [json.loads(body) for body in batches(events, 2)] == [events[0:2], events[2:4], events[4:5]]


def test_percentile_by_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([7.0], 0.99) == 7.0
    assert math.isnan(percentile([], 0.5))


def test_cpu_seconds_of_a_process_grows_with_its_work() -> None:
    before = cpu_seconds(os.getpid())
    deadline = before + 0.05
    while cpu_seconds(os.getpid()) < deadline:  # spin: this process's own CPU time must show it
        sum(range(10_000))
    assert cpu_seconds(os.getpid()) >= deadline
