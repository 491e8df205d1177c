"""The scaling bench's pure parts: the summary of alternated rounds, and pinning a process tree to CPUs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafka_lineage_devtools import bench_scaling, cpu_budget


def _run(layout: str, cpus: int, events_per_s: float, **cpu: float) -> dict:
    return {"layout": layout, "cpus": cpus, "processors": 1, "sinks": 1, "partitions": 6,
            "events_per_s": events_per_s, "cpu_us_per_event": cpu}


def test_summary_takes_the_median_rate_the_mean_cpu_and_ratios_to_one_core() -> None:
    runs = [_run("1 core", 1, 300, neo4j=700, sink=600), _run("2 cores", 2, 500, neo4j=700, sink=700),
            _run("1 core", 1, 340, neo4j=900, sink=600), _run("2 cores", 2, 600, neo4j=900, sink=500),
            _run("1 core", 1, 320, neo4j=800, sink=600)]
    layouts = bench_scaling.summarize(runs)
    one, two = layouts["1 core"], layouts["2 cores"]
    assert one["events_per_s"] == 320 and one["rounds"] == [300, 340, 320]
    assert one["cpu_us_per_event"] == {"neo4j": 800, "sink": 600} and one["cpu_total_us_per_event"] == 1400
    assert two["events_per_s"] == 550 and two["speedup_over_1_core"] == pytest.approx(550 / 320)
    assert two["cpu_per_event_over_1_core"] == pytest.approx(1400 / 1400)
    # 550 events/s at 1,400 µs each is 0.77 s of CPU per second on 2 cores
    assert two["share_of_cpu_ceiling"] == pytest.approx(550 * 1400 / 2e6)
    text = bench_scaling.format_scaling({"scaling": {"events": 10, "rounds": 3, "shape": "realistic",
                                                     "layouts": layouts}})
    assert "1.72x" in text and "neo4j" in text.splitlines()[6]


def test_pinning_a_process_tree_moves_its_children_and_threads_and_can_be_undone() -> None:
    everything = os.sched_getaffinity(0)
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                              "print(p.pid, flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        assert grandchild in cpu_budget.process_tree(child.pid)
        one = {min(everything)}
        cpu_budget.pin([child.pid], one)
        assert os.sched_getaffinity(child.pid) == one and os.sched_getaffinity(grandchild) == one
        cpu_budget.pin([child.pid], everything)
        assert os.sched_getaffinity(grandchild) == everything
        cpu_budget.pin([2**22 + 12345], one)  # no such process: nothing to do, no error
    finally:
        child.kill()
        child.wait()
