"""The partition workload's generator and truth (issue 22), on small and full sizes, without a stack."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache

import pytest

from kafka_lineage.processors.normalize import normalize_event
from kafka_lineage.schemas.openlineage import validate_event
from kafka_lineage_devtools.partition_checker import check_partitions, check_plan, format_partition_report
from kafka_lineage_devtools.partition_workload import (
    BACKFILL_FACET,
    FAILING_ASSERTION,
    PARTITION_FACET,
    PartitionState,
    PartitionWorkload,
    ReadyAnswer,
    backfill_closure,
    generate_partitions,
)


@cache
def workload(jobs: int = 50, days: int = 30, seed: int = 22) -> PartitionWorkload:
    if days < 30:  # a small workload: a 3-day backfill from day 3
        return generate_partitions(jobs, days, seed, backfill_from=3, backfill_days=3)
    return generate_partitions(jobs, days, seed)


def small() -> PartitionWorkload:
    return workload(10, 9, 3)


def _lake(w: PartitionWorkload) -> str:
    return w.params["dataset_namespaces"][1]


def _canonical(event: dict) -> str:
    return json.dumps(event, sort_keys=True)


def test_same_seed_same_events_and_truth_another_tag_shares_nothing() -> None:
    a, b = small(), generate_partitions(10, 9, 3, backfill_from=3, backfill_days=3)
    assert [_canonical(e) for e in a.events] == [_canonical(e) for e in b.events] and a.truth == b.truth
    other = generate_partitions(10, 9, 3, tag="other", backfill_from=3, backfill_days=3)
    assert not set(a.params["dataset_namespaces"]) & set(other.params["dataset_namespaces"])
    assert other.truth.partitions.keys() != a.truth.partitions.keys()


@pytest.mark.parametrize("size", [(10, 9, 3), (50, 30, 22)])
def test_every_event_validates_and_names_one_partition_after_normalizing(size: tuple[int, int, int]) -> None:
    w = workload(*size)
    paths = facets = 0
    for event in {id(e): e for e in w.events}.values():
        validate_event(event)
        normalized, _ = normalize_event(event)
        if "dataset" in normalized:  # a marker report
            facet = normalized["dataset"]["facets"][PARTITION_FACET]
            assert facet["marker"] == "_SUCCESS" and "date=" not in normalized["dataset"]["name"]
            continue
        for place, io in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            for item in normalized[place]:
                facet = item[io][PARTITION_FACET]
                assert [k["name"] for k in facet["keys"]] == ["date"] and "/20" not in item["name"]
                assert item["namespace"] in w.params["dataset_namespaces"]  # s3a:// spellings made canonical
                paths += facet["source"] == "path"
                facets += facet["source"] == "facet"
    assert paths > 100 and facets > 100  # both ways of naming a partition
    sent = [e for e in w.events if "inputs" in e]
    assert any("s3a://" in json.dumps(e["inputs"]) for e in sent) and any("+02:00" in e["eventTime"] for e in sent)


def test_sizes_and_delivery() -> None:
    w = workload()
    assert (w.params["jobs"], w.params["days"]) == (50, 30)
    assert len(w.truth.ready) == (50 + w.params["sources"]) * 30
    assert w.params["late_completes"] > 10 and w.params["duplicates"] > 10 and w.params["before_start"] > 10
    assert len(w.events) == w.params["distinct_events"] + w.params["duplicates"]
    assert w.params["resent_after_backfill"] > 10
    first: dict[int, int] = {}  # each distinct event's first position
    for i, e in enumerate(w.events):
        first.setdefault(id(e), i)
    done = max(i for i in first.values() if BACKFILL_FACET in w.events[i].get("run", {}).get("facets", {}))
    live_after = [e for e in w.events[done + 1:] if BACKFILL_FACET not in e.get("run", {}).get("facets", {})]
    assert live_after  # old live events arrive after the backfill's newer versions
    # late: some COMPLETE is published after an event of a later day
    times = [datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).astimezone(UTC) for e in w.events]
    later = [i for i, e in enumerate(w.events) if e.get("eventType") == "COMPLETE"
             and any((times[j] - times[i]).days >= 1 for j in range(max(0, i - 50), i))]
    assert later


def test_failed_day_is_failed_and_its_downstream_never_ran() -> None:
    w = workload()
    fault, ns = w.faults["failed"], _lake(w)
    key = f"date={fault['day']}"
    failed = w.truth.partitions[(ns, fault["dataset"], key)]
    assert (failed.state, failed.versions, failed.row_count, failed.bytes) == ("FAILED", 1, None, None)
    assert failed.run_id and failed.upstream and all(up[2] == key for up in failed.upstream)
    assert fault["downstream"]
    for name in fault["downstream"]:
        assert (ns, name, key) not in w.truth.partitions
        assert w.truth.ready[(ns, name, key)] == ReadyAnswer(False, (("partition", ns, name, key, None),))
    assert w.truth.ready[(ns, fault["dataset"], key)] == ReadyAnswer(
        False, (("partition", ns, fault["dataset"], key, "FAILED"),))


def test_failing_assertion_is_named_and_readers_are_not_ready() -> None:
    w = workload()
    fault, ns = w.faults["assertion"], _lake(w)
    key = f"date={fault['day']}"
    state = w.truth.partitions[(ns, fault["dataset"], key)]
    assert state.state == "FAILED" and state.failed_assertions == (FAILING_ASSERTION,) and state.row_count
    for name in fault["readers"]:
        assert w.truth.partitions[(ns, name, key)].state == "SUCCESS"
        answer = w.truth.ready[(ns, name, key)]
        assert not answer.ready and ("upstream", ns, fault["dataset"], key, "FAILED") in answer.missing


def test_a_failing_check_fails_the_partition_it_read() -> None:
    w = workload()
    fault, ns = w.faults["check"], _lake(w)
    key = f"date={fault['day']}"
    state = w.truth.partitions[(ns, fault["dataset"], key)]
    assert state.state == "FAILED" and state.failed_assertions == () and state.row_count  # the check's, not its own
    others = [w.truth.partitions[(ns, fault["dataset"], f"date={d}")] for d in w.truth.days if d != fault["day"]]
    assert all(p.state in ("SUCCESS", "STALE") for p in others)
    checks = [e for e in w.events if e.get("job", {}).get("name") == fault["job"] and e["eventType"] == "COMPLETE"]
    assert len({e["run"]["runId"] for e in checks}) == len(w.truth.days)
    for name in fault["readers"]:
        assert ("upstream", ns, fault["dataset"], key, "FAILED") in w.truth.ready[(ns, name, key)].missing


def test_a_run_still_going_is_running_and_its_downstream_waits() -> None:
    w = workload()
    fault, ns = w.faults["in_flight"], _lake(w)
    key = f"date={fault['day']}"
    state = w.truth.partitions[(ns, fault["dataset"], key)]
    assert (state.state, state.versions, state.row_count) == ("RUNNING", 1, None)
    assert fault["downstream"] and all((ns, name, key) not in w.truth.partitions for name in fault["downstream"])
    run = [e for e in w.events if e.get("run", {}).get("runId") == state.run_id]
    assert {e["eventType"] for e in run} == {"START"}


def test_missing_marker_stays_running_and_other_days_are_success() -> None:
    w = workload()
    fault, ns = w.faults["marker"], _lake(w)
    for day in w.truth.days:
        state = w.truth.partitions.get((ns, fault["dataset"], f"date={day}"))
        if state is not None and day != fault["day"]:
            assert state.state != "RUNNING"
    key = f"date={fault['day']}"
    assert w.truth.partitions[(ns, fault["dataset"], key)].state == "RUNNING"
    for name in fault["readers"]:
        assert ("upstream", ns, fault["dataset"], key, "RUNNING") in w.truth.ready[(ns, name, key)].missing


def test_backfill_makes_new_versions_and_a_failed_backfill_task_leaves_stale_readers() -> None:
    w = workload()
    fault, ns = w.faults["backfill"], _lake(w)
    window = [d for d in w.truth.days if fault["from"] <= d <= fault["to"]]
    assert len(window) == 7
    root = [w.truth.partitions[(ns, fault["dataset"], f"date={d}")] for d in window]
    assert all(p.versions == 2 and p.state == "SUCCESS" for p in root)
    outside = w.truth.partitions[(ns, fault["dataset"], f"date={w.truth.days[0]}")]
    assert outside.versions == 1
    broken = w.faults["backfill_failed"]
    key = f"date={broken['day']}"
    failed = w.truth.partitions[(ns, broken["dataset"], key)]
    assert (failed.state, failed.versions, failed.row_count) == ("FAILED", 2, None)
    stale = [name for name in broken["readers"] if w.truth.partitions[(ns, name, key)].state == "STALE"]
    assert stale and all(w.truth.partitions[(ns, name, key)].versions == 1 for name in stale)
    versions = sum(p.versions for p in w.truth.partitions.values())
    assert versions == w.params["runs"] and w.params["retries"] > 5
    assert versions - sum(p.versions > 0 for p in w.truth.partitions.values()) == w.params["backfill_runs"] + \
        w.params["retries"]
    backfill_events = [e for e in w.events if BACKFILL_FACET in e.get("run", {}).get("facets", {})]
    assert {e["run"]["facets"][BACKFILL_FACET]["window"]["from"] for e in backfill_events} == {fault["from"]}


def test_the_backfill_closure_is_what_the_backfill_rebuilt_and_a_plan_is_checked_against_it() -> None:
    w = workload()
    fault, ns = w.faults["backfill"], _lake(w)
    closure = backfill_closure(w.truth, (ns, fault["dataset"]), fault["from"], fault["to"])
    assert {name for _ns, name, _key in closure} == set(fault["closure"]) - {fault["dataset"]}
    assert {key for _ns, _name, key in closure} == {f"date={d}" for d in w.truth.days
                                                    if fault["from"] <= d <= fault["to"]}

    def item(key: tuple[str, str, str], inputs: list[tuple[str, str, str]]) -> dict:
        return {"rebuild": [dict(zip(("namespace", "name", "key"), key, strict=True))],
                "inputs": [dict(zip(("namespace", "name", "key"), i, strict=True)) for i in inputs]}

    a, b = sorted(closure)[:2]
    good = {"stages": [{"stage": 1, "items": [item(a, [])]}, {"stage": 2, "items": [item(b, [a])]}]}
    assert check_plan(good, {a, b}) == []
    backwards = {"stages": [{"stage": 1, "items": [item(b, [a])]}, {"stage": 2, "items": [item(a, [])]}]}
    assert [m.kind for m in check_plan(backwards, {a, b})] == ["plan order"]
    assert [m.kind for m in check_plan(good, {a})] == ["plan extra"]
    assert [m.kind for m in check_plan(good, {a, b, ("x", "y", "z")})] == ["plan missing"]


def test_sources_are_landed_and_never_ready_themselves() -> None:
    w = small()
    raw = w.params["dataset_namespaces"][0]
    sources = [(ns, name) for ns, name in w.truth.datasets if ns == raw]
    assert sources
    for ns, name in sources:
        for day in w.truth.days:
            key = f"date={day}"
            assert w.truth.partitions[(ns, name, key)] == PartitionState(None, 0, None, (), True)
            assert w.truth.ready[(ns, name, key)] == ReadyAnswer(False, (("partition", ns, name, key, None),))


def test_the_checker_finds_every_kind_of_difference() -> None:
    truth = small().truth
    partitions = dict(truth.partitions)
    report = check_partitions(truth, partitions, truth.ready)
    assert report.ok and not report.mismatches and "OK" in format_partition_report(report)
    first, second = sorted(partitions)[:2]
    partitions[first] = PartitionState("RUNNING", 1, None)
    del partitions[second]
    partitions[("s3://elsewhere", "t", "date=2025-12-01")] = PartitionState("SUCCESS", 1, 5)
    answers = dict(truth.ready)
    asked = sorted(answers)[0]
    answers[asked] = ReadyAnswer(not answers[asked].ready)
    report = check_partitions(truth, partitions, answers)
    assert not report.ok
    assert sorted(m.kind for m in report.mismatches) == ["partition extra", "partition missing", "partition wrong",
                                                        "ready wrong"]
    assert "MISMATCH: 4 differences" in format_partition_report(report)
    assert not check_partitions(truth, truth.partitions, None).ok  # ready not asked: not a full check


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="backfill window"):
        generate_partitions(10, 8, backfill_from=5, backfill_days=7)
    with pytest.raises(ValueError, match="tag"):
        generate_partitions(10, 9, tag="Bad_Tag", backfill_from=3, backfill_days=3)
    with pytest.raises(ValueError, match="four days"):
        generate_partitions(10, 8, backfill_from=3, backfill_days=3)
