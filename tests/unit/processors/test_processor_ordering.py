"""Lifecycle ordering per run with a bounded hold-back window (pure: time is passed in)."""

from __future__ import annotations

import copy
import json
import math
import random
import uuid

import pytest
from openlineage.client.event_v2 import RunState

from kafka_lineage.processors.identity import dedupe_id, run_id
from kafka_lineage.processors.ordering import Released, RunReorderBuffer, event_instant, lifecycle_rank
from tests.openlineage_samples import dataset_event, full_run_event

RUN = "run-1"


def ev(event_type: str | None, time: str = "2024-05-01T12:00:00Z") -> dict:
    return {"eventType": event_type, "eventTime": time, "run": {"runId": RUN}}


def items(released: list[Released]) -> list:
    return [r.item for r in released]


def test_lifecycle_rank() -> None:
    assert lifecycle_rank("START") == 0
    assert lifecycle_rank("RUNNING") == lifecycle_rank("OTHER") == lifecycle_rank(None) == 1
    assert lifecycle_rank("COMPLETE") == lifecycle_rank("FAIL") == lifecycle_rank("ABORT") == 2
    assert lifecycle_rank("bogus") == lifecycle_rank(42) == 1  # type: ignore[arg-type]


def test_event_times_compare_as_instants() -> None:
    assert event_instant("2024-05-01T12:00:00.123+02:00") < event_instant("2024-05-01T11:00:00Z")
    assert event_instant("2024-05-01T10:00:00Z") == event_instant("2024-05-01T12:00:00+02:00")
    assert event_instant("2024-05-01T10:00:00") == event_instant("2024-05-01T10:00:00+00:00")  # naive = UTC
    assert event_instant("2024-05-01T10:00:00.123456789Z") == pytest.approx(event_instant("2024-05-01T10:00:00.123Z"),
                                                                            abs=1e-3)
    assert math.isinf(event_instant("yesterday"))
    assert math.isinf(event_instant(None))


def test_in_order_events_leave_immediately() -> None:
    buf = RunReorderBuffer(2.0)
    assert items(buf.add(RUN, ev("START"), "s", 0.0)) == ["s"]
    assert items(buf.add(RUN, ev("RUNNING"), "r", 0.1)) == ["r"]
    out = buf.add(RUN, ev("COMPLETE"), "c", 0.2)
    assert out == [Released(RUN, "c", False)]
    assert buf.held_count() == 0


def test_complete_before_start_is_held_until_the_start() -> None:
    buf = RunReorderBuffer(2.0)
    assert buf.add(RUN, ev("COMPLETE", "2024-05-01T12:00:09Z"), "c", 0.0) == []
    assert buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:05Z"), "r2", 0.1) == []
    assert buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:03Z"), "r1", 0.2) == []
    assert buf.held_count() == 3
    out = buf.add(RUN, ev("START", "2024-05-01T12:00:00Z"), "s", 0.3)
    assert items(out) == ["s", "r1", "r2", "c"]
    assert not any(r.late for r in out)
    assert buf.held_count() == 0


def test_event_time_order_uses_offsets() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("RUNNING", "2024-05-01T12:30:00+02:00"), "later-by-string-earlier-by-instant", 0.0)
    buf.add(RUN, ev("RUNNING", "2024-05-01T11:00:00Z"), "r", 0.0)
    out = buf.add(RUN, ev("START", "2024-05-01T10:00:00Z"), "s", 0.0)
    assert items(out) == ["s", "later-by-string-earlier-by-instant", "r"]


def test_window_expiry_releases_and_opens_the_run() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("RUNNING"), "r", 10.0)
    assert buf.next_deadline() == 12.0
    assert buf.expire(11.99) == []
    assert buf.expire(12.0) == [Released(RUN, "r", False)]
    assert buf.next_deadline() is None
    assert buf.add(RUN, ev("COMPLETE"), "c", 12.5) == [Released(RUN, "c", False)]  # open: no hold
    assert buf.add(RUN, ev("START"), "s", 13.0) == [Released(RUN, "s", True)]  # too late for the window


def test_expire_takes_everything_that_sorts_before_a_due_event() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("COMPLETE"), "c", 0.0)
    buf.add(RUN, ev("RUNNING"), "r", 1.0)  # not due itself, but it must go before the due COMPLETE
    assert items(buf.expire(2.0)) == ["r", "c"]


def test_expire_leaves_later_sorting_events_held_for_their_own_window() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("RUNNING"), "r", 0.0)
    buf.add(RUN, ev("COMPLETE"), "c", 1.0)
    assert items(buf.expire(2.0)) == ["r"]
    # the run is open now: a RUNNING that sorts before the held COMPLETE goes at once, the COMPLETE keeps waiting
    assert items(buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:01Z"), "r2", 2.5)) == ["r2"]
    assert buf.held_count() == 1
    assert items(buf.expire(3.0)) == ["c"]


def test_open_run_event_releases_held_events_that_sort_before_it() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:01Z"), "r1", 0.0)
    buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:03Z"), "r3", 1.0)
    assert items(buf.expire(2.0)) == ["r1"]
    assert items(buf.add(RUN, ev("COMPLETE", "2024-05-01T12:00:04Z"), "c", 2.1)) == ["r3", "c"]


def test_late_marking() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("START"), "s", 0.0)
    buf.add(RUN, ev("COMPLETE"), "c", 0.1)
    assert buf.add(RUN, ev("RUNNING"), "r", 0.2) == [Released(RUN, "r", True)]
    assert buf.add(RUN, ev("START"), "s2", 0.3) == [Released(RUN, "s2", True)]
    assert buf.add(RUN, ev("FAIL"), "f", 0.4) == [Released(RUN, "f", False)]  # same rank: not late


def test_events_without_run_pass_straight_through() -> None:
    buf = RunReorderBuffer(2.0)
    assert buf.add(None, dataset_event(), "d", 0.0) == [Released(None, "d", False)]
    assert buf.state_size() == 0


def test_zero_window_never_holds() -> None:
    buf = RunReorderBuffer(0.0)
    assert items(buf.add(RUN, ev("COMPLETE"), "c", 0.0)) == ["c"]
    assert buf.add(RUN, ev("START"), "s", 0.0) == [Released(RUN, "s", True)]


def test_runs_are_independent() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add("a", ev("COMPLETE"), "a-c", 0.0)
    assert items(buf.add("b", ev("START"), "b-s", 0.1)) == ["b-s"]
    assert items(buf.add("b", ev("COMPLETE"), "b-c", 0.2)) == ["b-c"]
    assert items(buf.add("a", ev("START"), "a-s", 0.3)) == ["a-s", "a-c"]


def test_retention_drops_idle_runs_only() -> None:
    buf = RunReorderBuffer(2.0, retention_seconds=60.0)
    buf.add("a", ev("START"), 1, 0.0)
    buf.add("b", ev("START"), 2, 30.0)
    buf.add("a", ev("RUNNING"), 3, 40.0)  # activity keeps a alive
    assert buf.state_size() == 2
    assert buf.expire(89.0) == [] and buf.state_size() == 2
    buf.expire(90.0)
    assert buf.state_size() == 1 and buf.snapshot_run("b") is None
    buf.expire(100.0)
    assert buf.state_size() == 0
    # a dropped run starts over: its next non-START is held again
    assert buf.add("a", ev("COMPLETE"), 4, 200.0) == []


def test_retention_never_drops_held_events() -> None:
    buf = RunReorderBuffer(5.0, retention_seconds=5.0)
    buf.add(RUN, ev("COMPLETE"), "c", 0.0)
    assert items(buf.expire(5.0)) == ["c"]  # released first, then the idle run is dropped
    assert buf.state_size() == 0


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        RunReorderBuffer(-1)
    with pytest.raises(ValueError):
        RunReorderBuffer(10, retention_seconds=5)
    with pytest.raises(ValueError):
        RunReorderBuffer(float("nan"))


def test_snapshot_restore_continues_a_held_run() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("COMPLETE", "2024-05-01T12:00:09Z"), {"offset": 7}, 0.0)
    buf.add(RUN, ev("RUNNING", "2024-05-01T12:00:05Z"), {"offset": 6}, 0.5)
    snapshot = json.loads(json.dumps(buf.snapshot_run(RUN)))  # what a changelog table would store
    restarted = RunReorderBuffer(2.0)
    restarted.restore_run(RUN, snapshot)
    assert restarted.state_size() == 1 and restarted.held_count() == 2
    out = restarted.add(RUN, ev("START", "2024-05-01T12:00:00Z"), {"offset": 8}, 1.0)
    assert items(out) == [{"offset": 8}, {"offset": 6}, {"offset": 7}]


def test_restored_held_events_still_expire() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("RUNNING"), "r", 100.0)
    restarted = RunReorderBuffer(2.0)
    restarted.restore_run(RUN, buf.snapshot_run(RUN))
    assert restarted.expire(101.0) == []
    assert items(restarted.expire(102.0)) == ["r"]


def test_snapshot_restore_keeps_an_open_run_open_and_late_marking() -> None:
    buf = RunReorderBuffer(2.0)
    buf.add(RUN, ev("START"), "s", 0.0)
    buf.add(RUN, ev("COMPLETE"), "c", 1.0)
    restarted = RunReorderBuffer(2.0)
    restarted.restore_run(RUN, buf.snapshot_run(RUN))
    assert restarted.add(RUN, ev("RUNNING"), "r", 2.0) == [Released(RUN, "r", True)]


def test_restore_keeps_retention_order() -> None:
    buf = RunReorderBuffer(1.0, retention_seconds=10.0)
    buf.add("old", ev("START"), 1, 0.0)
    buf.add("new", ev("START"), 2, 5.0)
    restarted = RunReorderBuffer(1.0, retention_seconds=10.0)
    for run in ("new", "old"):  # restore order differs from activity order
        restarted.restore_run(run, buf.snapshot_run(run))
    restarted.expire(10.0)
    assert restarted.snapshot_run("old") is None and restarted.snapshot_run("new") is not None


def test_snapshot_of_unknown_run_and_restore_none() -> None:
    buf = RunReorderBuffer(2.0)
    assert buf.snapshot_run("nope") is None
    buf.add(RUN, ev("START"), "s", 0.0)
    buf.restore_run(RUN, None)
    assert buf.state_size() == 0


def test_drain_changed_reports_touched_and_dropped_runs() -> None:
    buf = RunReorderBuffer(1.0, retention_seconds=10.0)
    buf.add("a", ev("START"), 1, 0.0)
    buf.add("b", ev("COMPLETE"), 2, 0.0)
    assert buf.drain_changed() == {"a", "b"}
    assert buf.drain_changed() == set()
    buf.expire(1.0)
    assert buf.drain_changed() == {"b"}
    buf.expire(10.0)
    assert buf.drain_changed() == {"a", "b"}
    assert buf.state_size() == 0


# --- identity + buffer, as the processor chains them ----------------------------------------------------------------
def _run_events(run: str, base_second: int, types: list[str]) -> list[dict]:
    """A Spark-like run: events of one runId whose facets accumulate from one event to the next."""
    template = full_run_event(RunState.START)
    events = []
    for i, event_type in enumerate(types):
        event = copy.deepcopy(template)
        event["run"]["runId"] = run
        event["eventType"] = event_type
        event["eventTime"] = f"2024-05-01T12:00:{base_second + i:02d}.000+00:00"
        event["run"]["facets"]["step"] = {"_producer": "p", "_schemaURL": "s", "n": i}  # accumulating facets
        events.append(event)
    return events


def _process(stream: list[dict], window: float = 2.0, step: float = 0.01) -> list[Released[dict]]:
    """Dedupe by identity, then reorder: the processor's chain, with arrivals ``step`` seconds apart."""
    seen: set[str] = set()
    buf: RunReorderBuffer[dict] = RunReorderBuffer(window)
    out: list[Released[dict]] = []
    for i, event in enumerate(stream):
        key = dedupe_id(event)
        if key in seen:
            continue
        seen.add(key)
        out.extend(buf.add(run_id(event), event, event, step * i))
    out.extend(buf.expire(1e9))
    assert buf.held_count() == 0
    return out


def _shuffled_stream(rng: random.Random, types: list[str]) -> tuple[dict[str, list[dict]], list[dict]]:
    runs = {str(uuid.UUID(int=rng.getrandbits(128))): [] for _ in range(4)}
    stream = []
    for n, run in enumerate(runs):
        runs[run] = _run_events(run, 10 * n, types)
        for event in runs[run]:
            stream.append(event)
            if rng.random() < 0.5:
                stream.append(json.loads(json.dumps(event)))  # an exact repeat (client retry, replay)
    rng.shuffle(stream)
    return runs, stream


def _key(event: dict) -> tuple[int, float]:
    return lifecycle_rank(event["eventType"]), event_instant(event["eventTime"])


def _check_lifecycle(released: list[Released[dict]]) -> None:
    """Per run: late exactly when a later stage already went out; what is not late is in lifecycle order."""
    highest = -1
    for r in released:
        rank = lifecycle_rank(r.item["eventType"])
        assert r.late == (rank < highest)
        highest = max(highest, rank)
    ranks = [lifecycle_rank(r.item["eventType"]) for r in released if not r.late]
    assert ranks == sorted(ranks)


@pytest.mark.parametrize("seed", range(8))
def test_shuffled_duplicated_runs_come_out_deduped_and_in_lifecycle_order(seed: int) -> None:
    rng = random.Random(seed)
    runs, stream = _shuffled_stream(rng, ["START", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"])
    # the usual disorder: a run's START is delayed (slow partition, retry) behind its other events
    for events in runs.values():
        start_copies = [e for e in stream if e["run"]["runId"] == events[0]["run"]["runId"]
                        and e["eventType"] == "START"]
        for copy_ in start_copies:
            stream.remove(copy_)
        last = max(i for i, e in enumerate(stream) if e["run"]["runId"] == events[0]["run"]["runId"])
        stream[last + 1:last + 1] = start_copies
    out = _process(stream)
    assert not any(r.late for r in out)
    assert len(out) == 20  # every duplicate dropped, every distinct event kept
    for run in runs:
        got = [r.item for r in out if r.run_id == run]
        assert [e["run"]["facets"]["step"]["n"] for e in got] == [0, 1, 2, 3, 4]  # rank, then eventTime


@pytest.mark.parametrize("seed", range(8))
def test_any_shuffle_delivers_each_event_once_in_lifecycle_order_or_marked_late(seed: int) -> None:
    runs, stream = _shuffled_stream(random.Random(seed), ["START", "RUNNING", "RUNNING", "COMPLETE"])
    out = _process(stream)
    assert len(out) == 16
    for run in runs:
        _check_lifecycle([r for r in out if r.run_id == run])


@pytest.mark.parametrize("seed", range(8))
def test_spark_duplicate_starts_are_kept_and_only_a_start_behind_later_stages_is_late(seed: int) -> None:
    runs, stream = _shuffled_stream(random.Random(seed), ["START", "START", "RUNNING", "RUNNING", "COMPLETE"])
    out = _process(stream)
    assert len(out) == 20  # both STARTs of each run survive dedupe: their facets differ
    for run in runs:
        released = [r for r in out if r.run_id == run]
        _check_lifecycle(released)
        assert released[0].item["eventType"] == "START" and not released[0].late


def test_shuffle_beyond_the_window_still_delivers_everything_once() -> None:
    rng = random.Random(99)
    runs, stream = _shuffled_stream(rng, ["START", "RUNNING", "COMPLETE"])
    out = _process(stream, window=0.05, step=0.04)  # some events wait longer than the window: they go anyway
    expected = sorted(dedupe_id(e) for events in runs.values() for e in events)
    assert sorted(dedupe_id(r.item) for r in out) == expected
    for run in runs:
        _check_lifecycle([r for r in out if r.run_id == run])


def test_state_stays_bounded_over_many_runs() -> None:
    buf = RunReorderBuffer(1.0, retention_seconds=10.0)
    for i in range(1000):
        run = f"run-{i}"
        buf.add(run, ev("START"), i, float(i))
        buf.add(run, ev("COMPLETE"), i, float(i))
        buf.expire(float(i))
    assert buf.state_size() <= 11
