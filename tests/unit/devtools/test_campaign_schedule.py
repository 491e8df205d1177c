"""The fault campaign's scheduler: deterministic per (seed, run), faults on non-overlapping lanes, valid targets."""

from __future__ import annotations

import pytest

from kafka_lineage_devtools.campaign_schedule import (
    CRASH_POINTS,
    FAULT_KINDS,
    GROUP_SESSION_SECONDS,
    crash_point_fired,
    format_schedule,
    plan,
)

SCHEDULES = [plan(seed, run, 60.0) for seed in range(20) for run in range(5)]


def test_the_same_seed_and_run_give_the_same_schedule_and_others_differ() -> None:
    assert plan(7, 3, 60.0) == plan(7, 3, 60.0)
    assert plan(7, 3, 60.0) != plan(7, 4, 60.0)
    assert plan(7, 3, 60.0) != plan(8, 3, 60.0)


def test_faults_are_in_time_order_within_the_publishing_and_of_known_kinds() -> None:
    for schedule in SCHEDULES:
        instants = [fault.at for fault in schedule.faults]
        assert instants == sorted(instants)
        assert all(fault.kind in FAULT_KINDS for fault in schedule.faults)
        # an episode starts in the first 85% of the publishing (a second worker's kill, pause, removal follow it)
        starts = [f.at for f in schedule.faults if f.kind not in ("remove-worker", "pause-processor",
                                                                  "kill-processor")]
        assert all(0.05 * 60 <= at <= 0.85 * 60 for at in starts), format_schedule(schedule)
        assert all(f.at >= 0.05 * 60 for f in schedule.faults)


def test_over_a_campaign_every_kind_is_drawn_and_crash_points_are_armed() -> None:
    kinds = {fault.kind for schedule in SCHEDULES for fault in schedule.faults}
    assert kinds == set(FAULT_KINDS)
    armed = [f.crash_points for s in SCHEDULES for f in s.faults if f.crash_points] + [
        s.first_crash_points for s in SCHEDULES if s.first_crash_points]
    assert armed
    for spec in armed:
        for item in spec.split(","):
            point, probability = item.split("=")
            assert point in CRASH_POINTS and 0 < float(probability) <= 0.02


def test_processor_faults_name_a_worker_alive_at_that_instant() -> None:
    for schedule in SCHEDULES:
        alive = {"w0"}
        for fault in schedule.faults:
            if fault.kind == "add-worker":
                assert fault.target not in alive
                alive.add(fault.target)
            elif fault.kind in ("kill-processor", "pause-processor", "remove-worker"):
                assert fault.target in alive, format_schedule(schedule)
                if fault.kind == "remove-worker":
                    alive.remove(fault.target)
        assert alive, "a run always keeps a worker"


def test_a_pause_outlasts_the_group_session_and_ends_before_its_worker_is_touched_again() -> None:
    pauses = 0
    for schedule in SCHEDULES:
        for index, fault in enumerate(schedule.faults):
            if fault.kind != "pause-processor":
                continue
            pauses += 1
            assert fault.seconds > GROUP_SESSION_SECONDS
            later = [f for f in schedule.faults[index + 1:] if f.target == fault.target]
            assert all(f.at >= fault.at + fault.seconds for f in later), format_schedule(schedule)
    assert pauses


def test_no_graph_sink_restart_while_neo4j_is_down_and_one_broker_restart_at_a_time() -> None:
    for schedule in SCHEDULES:
        outages = [(f.at, f.at + f.seconds) for f in schedule.faults if f.kind == "stop-neo4j"]
        for fault in schedule.faults:
            if fault.kind == "kill-graph-sink":
                assert not any(begun <= fault.at <= ended for begun, ended in outages), format_schedule(schedule)
        assert sum(f.kind == "restart-kafka" for f in schedule.faults) <= 1


def test_a_second_worker_is_always_removed_again() -> None:
    for schedule in SCHEDULES:
        counts = schedule.counts()
        assert counts.get("add-worker", 0) == counts.get("remove-worker", 0)


def test_the_text_names_seed_run_and_every_fault() -> None:
    schedule = next(s for s in SCHEDULES if len(s.faults) >= 4)
    text = format_schedule(schedule)
    assert text.startswith(f"seed {schedule.seed} run {schedule.run}: ")
    assert len(text.splitlines()) == 1 + len(schedule.faults)


def test_a_duration_must_be_positive() -> None:
    with pytest.raises(ValueError):
        plan(1, 0, 0.0)


@pytest.mark.parametrize(("code", "output", "expected"), [
    (-9, "x\n[2025] processor: crash point before-commit: killing this worker\n", "before-commit"),
    (-9, "crash point outputs-sent: killing this worker (pid 12)", "outputs-sent"),
    (-9, "killed by the harness, no line", None),
    (70, "crash point before-commit: killing this worker", None),  # it said so, but died otherwise
    (None, "crash point before-commit: killing this worker", None),
])
def test_a_self_kill_at_a_crash_point_is_recognised_by_its_line_and_sigkill(code, output, expected) -> None:
    assert crash_point_fired(code, output) == expected
