"""The fault campaign (`lineage faults campaign`): three seeded runs of random faults, each checked for exactly-once
output, forward-only offsets, empty state, lifecycle order, the exact graph and zero lag."""

from __future__ import annotations

import pytest

from kafka_lineage_devtools.campaign import format_run, format_summary, run_campaign
from kafka_lineage_devtools.stack.config import StackSettings

pytestmark = [pytest.mark.integration, pytest.mark.campaign]

# Seed 13's first three runs draw every kind of fault (kills, a pause past the group session, a second worker,
# a broker restart, a Neo4j outage) and arm crash points on five worker starts.
SEED, RUNS, EVENTS, PUBLISH_SECONDS = 13, 3, 1500, 45.0


def test_seeded_fault_runs_show_no_violation(stack_settings: StackSettings, tmp_path) -> None:
    # quiescence bounded by progress (two minutes without any): a stalled pipeline fails its run, a slow machine
    # only makes it slower
    campaign = run_campaign(stack_settings, seed=SEED, runs=RUNS, events=EVENTS, publish_seconds=PUBLISH_SECONDS,
                            keep_going=True, workdir=tmp_path)
    assert len(campaign.runs) == RUNS
    injected = campaign.faults_by_kind()
    assert len({"kill-processor", "pause-processor", "add-worker", "restart-kafka", "stop-neo4j",
                "kill-graph-sink", "kill-alert-sink"} & set(injected)) >= 5, injected
    failed = "\n\n".join(format_run(run, EVENTS, PUBLISH_SECONDS) for run in campaign.runs if not run.ok)
    assert campaign.ok, f"{format_summary(campaign)}\n\n{failed}"
