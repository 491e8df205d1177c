"""The alert router's bookkeeping (``tracking.py``): what may be committed, what each route still waits for, which
ledger records stay, go and come back."""

from __future__ import annotations

from kafka_lineage.sinks.alerts.routing.ledger import Done
from kafka_lineage.sinks.alerts.routing.tracking import Entry, Tracker


def _entry(offset: int, alert_id: str, partition: int = 0) -> Entry:
    return Entry(partition, offset, b"k", b"bytes", {"alertId": alert_id})


def _done(entry: Entry, route: str, outcome: str = "delivered") -> Done:
    return Done(route, entry.alert_id, entry.partition, entry.offset, outcome, "d")


def test_a_partition_commits_up_to_its_first_alert_a_route_still_waits_for() -> None:
    tracker = Tracker()
    first, second, third = _entry(0, "a"), _entry(1, "b"), _entry(2, "c")
    assert tracker.track(first, ["slack", "hook"]) == ["slack", "hook"]
    assert tracker.track(second, ["hook"]) == ["hook"]
    assert tracker.track(third, []) == []  # matched no route: done at once
    assert tracker.commits({0: 3}, unfinished=False)[0].offset == 0
    tracker.finished("hook", [(first, _done(first, "hook")), (second, _done(second, "hook"))])
    assert tracker.commits({0: 3}, unfinished=False)[0].offset == 0  # slack still waits for the first
    tracker.finished("slack", [(first, _done(first, "slack"))])
    commit = tracker.commits({0: 5}, unfinished=False)[0]
    assert (commit.offset, commit.passed) == (5, [0, 1, 2])  # the position: past the transaction markers
    forgotten = tracker.committed_to({0: commit})
    assert sorted((d.route, d.alert_id) for d in forgotten) == [("hook", "a"), ("hook", "b"), ("slack", "a")]
    assert not tracker.pending() and tracker.recorded == {}
    assert first.value == b"" and first.alert == {"alertId": "a"}  # done everywhere: only its id is kept


def test_a_batch_not_all_entries_yet_is_not_committed_past_its_last_entry() -> None:
    tracker = Tracker()
    tracker.track(_entry(7, "a"), [])
    assert tracker.commits({0: 20}, unfinished=True)[0].offset == 8  # not the position: records 8.. are not entries
    assert tracker.commits({0: 20, 1: 4}, unfinished=True).keys() == {0}  # nothing read there: not committed


def test_an_alert_on_the_topic_twice_is_sent_once_and_its_record_stays_until_both_are_committed() -> None:
    tracker = Tracker()
    first, waiting, repeat = _entry(0, "a"), _entry(1, "b"), _entry(2, "a")
    tracker.track(first, ["slack"])
    tracker.track(waiting, ["slack"])
    assert tracker.track(repeat, ["slack"]) == []  # follows the first: not offered to the worker again
    record = _done(first, "slack")
    tracker.finished("slack", [(first, record)])
    assert "slack" not in repeat.waiting and repeat.done == [record]
    commit = tracker.commits({0: 3}, unfinished=False)[0]
    assert (commit.offset, commit.passed) == (1, [0])
    assert tracker.committed_to({0: commit}) == []  # the repeat, uncommitted, still holds the record
    assert ("slack", "a") in tracker.recorded
    tracker.finished("slack", [(waiting, _done(waiting, "slack"))])
    commit = tracker.commits({0: 3}, unfinished=False)[0]
    assert {(d.route, d.alert_id) for d in tracker.committed_to({0: commit})} == {("slack", "a"), ("slack", "b")}


def test_a_repeat_read_after_the_tombstone_puts_the_record_back_before_it_counts() -> None:
    tracker = Tracker()
    first = _entry(0, "a")
    tracker.track(first, ["slack"])
    tracker.finished("slack", [(first, _done(first, "slack"))])
    tracker.committed_to(tracker.commits({0: 1}, unfinished=False))
    repeat = _entry(5, "a")
    again = tracker.to_rerecord(["slack"], "a")
    assert [(d.route, d.alert_id) for d in again] == [("slack", "a")]  # the shell writes it back to the ledger
    tracker.rerecorded(again)
    assert tracker.track(repeat, ["slack"]) == [] and not repeat.waiting


def test_a_redriven_dead_letter_is_sent_again_by_its_route() -> None:
    tracker = Tracker()
    refused = _entry(0, "a")
    tracker.track(refused, ["slack"])
    tracker.finished("slack", [(refused, _done(refused, "slack", "deadLettered"))])
    assert tracker.track(_entry(1, "a"), ["slack"]) == []  # a plain repeat: done already
    assert tracker.track(_entry(2, "a"), ["slack"], redriven=True) == ["slack"]


def test_records_a_start_finds_passed_stay_until_the_commits_reach_that_start_s_end() -> None:
    tracker = Tracker()
    repeated = Done("slack", "a", 0, 3, "delivered", "d")  # the first of a repeat: committed past it (5)
    lone = Done("slack", "b", 0, 2, "delivered", "d")  # a tombstone lost in a crash: nothing will hold it
    other = Done("slack", "z", 1, 0, "delivered", "d")  # another member's partition
    records = {("slack", "a"): repeated, ("slack", "b"): lone, ("slack", "z"): other}
    assert tracker.loaded(records, {0: 5}, {0: 9}, held={0}) == 2
    assert ("slack", "z") not in tracker.recorded
    repeat = _entry(6, "a")
    assert tracker.track(repeat, ["slack"]) == []  # the repeat is skipped by the passed record
    forgotten = tracker.committed_to(tracker.commits({0: 7}, unfinished=False))
    assert [(d.route, d.alert_id) for d in forgotten] == [("slack", "a")]  # its repeat committed: not needed now
    assert ("slack", "b") in tracker.recorded  # 7 < 9, the start's end: a repeat of b may still be ahead
    tracker.track(_entry(8, "q"), [])
    forgotten = tracker.committed_to(tracker.commits({0: 9}, unfinished=False))
    assert [(d.route, d.alert_id) for d in forgotten] == [("slack", "b")]
    assert [d.alert_id for d in tracker.to_rerecord(["slack"], "a")] == ["a"]  # a later repeat: written back


def test_a_delivery_finishing_after_its_partition_left_and_came_back_marks_the_re_read_alert_done() -> None:
    tracker = Tracker()
    first = _entry(0, "a")
    tracker.track(first, ["slack"])
    tracker.leave({0})  # rebalance: the worker's message is still in flight
    assert first.released and not tracker.pending()
    again = _entry(0, "a")
    assert tracker.track(again, ["slack"]) == ["slack"]  # the partition came back: read again, queued again
    tracker.finished("slack", [(first, _done(first, "slack"))])  # the old delivery went through
    assert not again.waiting  # the worker will skip it: not sent twice
    assert tracker.references[("slack", "a")] == 1  # held by the live entry only, not by the released one
    forgotten = tracker.committed_to(tracker.commits({0: 1}, unfinished=False))
    assert [(d.route, d.alert_id) for d in forgotten] == [("slack", "a")]
