"""The fault suite (`make faults`): 100k ground-truth events through the pipeline while it is broken; then exact."""

from __future__ import annotations

import pytest

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.checker import format_report
from kafka_lineage_devtools.faults import run_faults
from kafka_lineage_devtools.stack.config import StackSettings

pytestmark = [pytest.mark.integration, pytest.mark.fault]


def test_a_broken_pipeline_still_builds_the_exact_graph(stack_settings: StackSettings, clients: ClientSettings,
                                                        tmp_path) -> None:
    report = run_faults(stack_settings, clients, workdir=tmp_path)
    assert report.events >= 90_000
    assert len(report.faults) == 6
    assert report.check is not None
    assert report.ok, f"{format_report(report.check)}\ncomponents' logs: {tmp_path}"
