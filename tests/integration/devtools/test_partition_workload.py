"""The partition ground-truth workload (issue 22) on the real stack: 50 daily jobs over 30 days through the
processor and the graph sink as real processes; every partition and every (dataset, day) ready answer exact. In the
fault suite (`make faults`) the same with the processor, then the graph sink, SIGKILLed during the backfill."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.partition_checker import format_partition_report, run_partition_workload

pytestmark = pytest.mark.integration


def test_the_partition_workload_is_exact_through_the_real_pipeline(clients: ClientSettings, tmp_path: Path) -> None:
    report = run_partition_workload(clients, jobs=50, days=30, workdir=tmp_path, timeout=600)
    assert report.check is not None, f"the graph was never read; components' logs: {tmp_path}"
    assert report.ok, f"{format_partition_report(report.check)}\ncomponents' logs: {tmp_path}"
    expected = report.summary["expected"]
    assert report.check.partitions == expected["partitions"] and report.check.ready_answers == 50 * 30 + 8 * 30
    assert expected["FAILED"] >= 4 and expected["RUNNING"] == 2 and expected["STALE"] >= 1
    assert report.summary["late_completes"] > 0 and report.summary["duplicates"] > 0


@pytest.mark.fault
def test_the_partition_workload_survives_sigkills_mid_backfill(clients: ClientSettings, tmp_path: Path) -> None:
    report = run_partition_workload(clients, seed=23, workdir=tmp_path, timeout=600,
                                    kills=((0.5, "processor"), (0.75, "graph sink")))
    assert report.faults == ["SIGKILL processor 50% into the backfill, restart",
                             "SIGKILL graph sink 75% into the backfill, restart"]
    assert report.check is not None, f"the graph was never read; components' logs: {tmp_path}"
    assert report.ok, f"{format_partition_report(report.check)}\ncomponents' logs: {tmp_path}"
