"""The campaign's ledger (a long campaign over several invocations) and its progress-bounded wait."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_lineage_devtools.campaign import (
    CampaignReport,
    Injected,
    ProgressBound,
    RunReport,
    format_summary,
    ledger_entry,
    read_ledger,
)
from kafka_lineage_devtools.campaign_checks import Violation
from kafka_lineage_devtools.campaign_schedule import plan


def _report(run: int, violations: list[Violation] | None = None) -> RunReport:
    report = RunReport(13, run, plan(13, run, 45.0), events=1500, tag=f"t{run}")
    report.injected = [Injected(1.0, "kill-processor", "w0"), Injected(9.0, "restart-kafka", "kafka"),
                       Injected(12.0, "kill-processor", "w0")]
    report.violations = violations or []
    return report


def test_ledger_entries_are_read_back_for_the_same_campaign_only(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    lines = [ledger_entry(_report(0), 1500, 45.0, "abc1234"),
             ledger_entry(_report(1, [Violation("3 offsets", "partition 2 moved back")]), 1500, 45.0, "abc1234"),
             ledger_entry(_report(2), 2400, 60.0, "abc1234")]  # another run shape: another campaign
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"seed": 13, "run": 3, "ev')  # cut
    found = read_ledger(ledger, 13, 1500, 45.0)
    assert sorted(found) == [0, 1]
    assert found[0]["ok"] and not found[1]["ok"]
    assert found[1]["violations"] == {"3 offsets": 1}
    assert found[0]["faults"] == {"kill-processor": 2, "restart-kafka": 1}


def test_a_campaign_counts_recorded_runs_with_the_new_ones(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(ledger_entry(_report(0), 1500, 45.0, "abc1234")) + "\n")
    campaign = CampaignReport(13, runs=[_report(1, [Violation("7 lag", "behind")])],
                              recorded=list(read_ledger(ledger, 13, 1500, 45.0).values()))
    assert campaign.run_count == 2
    assert not campaign.ok
    assert campaign.failed_runs() == [1]
    assert campaign.faults_by_kind() == {"kill-processor": 4, "restart-kafka": 2}
    assert campaign.violations_by_check()["7 lag"] == 1
    assert format_summary(campaign).startswith("campaign seed 13: 2 runs, 1 failed (runs 1)")


def test_quiescence_waits_while_the_distance_shrinks_and_gives_up_when_it_stalls() -> None:
    bound = ProgressBound(patience=60.0, cap=1000.0, began=0.0)
    assert bound.observe(None, 30.0) is None  # not measurable yet
    assert bound.observe(500, 50.0) is None
    assert bound.observe(400, 105.0) is None  # a new low: patience starts again
    assert bound.observe(450, 160.0) is None  # no new low, but within patience
    assert bound.observe(420, 166.0) is False  # 61 s since the last low
    slow = ProgressBound(patience=60.0, cap=1000.0, began=0.0)
    assert all(slow.observe(900 - step, step * 50.0) is None for step in range(1, 19))  # slow, steady: waits
    assert slow.observe(0, 950.0) is True
    capped = ProgressBound(patience=60.0, cap=100.0, began=0.0)
    assert capped.observe(10, 50.0) is None and capped.observe(9, 101.0) is False
