"""Drift by event time, whatever the arrival order (schemas/schema_history.py, issue 34)."""

from __future__ import annotations

import itertools
import random

import pytest

from kafka_lineage.schemas.schema_history import Change, SchemaHistory


def _time(day: int, second: int = 0) -> str:
    return f"2026-11-{day:02d}T00:00:{second:02d}Z"


def _true_changes(observations: list[tuple[str, str]]) -> set[tuple[str, str, str]]:
    ordered = sorted(set(observations), key=lambda item: (item[0], item[1]))  # the same times sort by version
    return {(before[1], after[1], after[0]) for before, after in itertools.pairwise(ordered)
            if before[1] != after[1]}


def _check_revealed(changes: list[Change], true: set[tuple[str, str, str]]) -> None:
    """Every true change revealed exactly once; every other revealed change superseded."""
    revealed = [change.identity for change in changes]
    assert len(revealed) == len(set(revealed)), "a change was revealed twice"
    assert true <= set(revealed), f"never revealed: {true - set(revealed)}"
    superseded = {change.supersedes for change in changes if change.supersedes}
    assert set(revealed) - true <= superseded, f"not true, not superseded: {set(revealed) - true - superseded}"


@pytest.mark.parametrize("seed", range(300))
def test_the_alerted_changes_are_those_of_the_event_time_history_in_any_arrival_order(seed: int) -> None:
    rng = random.Random(seed)
    versions = rng.sample("ABCDE", rng.randint(2, 5))
    days = sorted(rng.sample(range(1, 29), rng.randint(2, 14)))
    observations = [(_time(day, rng.choice((0, 0, 0, 1))), rng.choice(versions)) for day in days]
    if rng.random() < 0.3:  # two producers at one instant, two versions
        observations.append((observations[0][0], rng.choice(versions)))
    arrivals = observations + rng.choices(observations, k=rng.randint(0, 4))  # duplicates
    rng.shuffle(arrivals)
    history, changes = SchemaHistory(), []
    for time, version in arrivals:
        changes += history.observe(time, version)
    _check_revealed(changes, _true_changes(observations))
    in_order = SchemaHistory()
    assert not any(change.late for time, version in sorted(set(observations))
                   for change in in_order.observe(time, version))


def test_the_reversed_runs_of_the_issue_give_the_change_marked_late() -> None:
    history = SchemaHistory()
    assert history.observe(_time(2), "amount:string") == []  # day 2's run first: a baseline
    (change,) = history.observe(_time(1), "amount:int")  # day 1's afterwards
    assert (change.previous_version, change.version, change.previous_time, change.at) == (
        "amount:int", "amount:string", _time(1), _time(2))
    assert change.late and change.supersedes is None


def test_a_late_version_between_two_known_ones_splits_their_change_and_says_so() -> None:
    history = SchemaHistory()
    history.observe(_time(1), "A")
    (known,) = history.observe(_time(3), "C")
    first, second = history.observe(_time(2), "B")
    assert (first.identity, second.identity) == (("A", "B", _time(2)), ("B", "C", _time(3)))
    assert first.supersedes == second.supersedes == known.identity
    assert history.observe(_time(2), "B") == []  # a repeat reveals nothing


def test_flapping_is_one_change_per_transition() -> None:
    history = SchemaHistory()
    found = [change.identity for day, version in ((1, "A"), (2, "B"), (3, "A"), (4, "B"))
             for change in history.observe(_time(day), version)]
    assert found == [("A", "B", _time(2)), ("B", "A", _time(3)), ("A", "B", _time(4))]


def test_the_history_is_bounded_keeping_the_versions_boundaries_first() -> None:
    history = SchemaHistory(limit=4)
    for day in range(1, 7):
        history.observe(_time(day), "A")
    history.observe(_time(7), "B")
    assert [entry[1] for entry in history.entries()] == ["A", "A", "A", "B"]
    assert history.entries()[0][0] == _time(1) and not history.truncated  # inner observations went first
    for day in range(8, 12):
        history.observe(_time(day), "B" if day % 2 else "C")
    assert len(history.entries()) == 4 and history.truncated
    oldest = history.entries()[0]
    (change,) = history.observe("2026-10-01T00:00:00Z", "Z")  # older than everything kept: still reported
    assert change.beyond_history and change.late and (change.version, change.at) == (oldest[1], oldest[0])


def test_entries_round_trip_through_a_state_table() -> None:
    history = SchemaHistory()
    for day, version in ((3, "B"), (1, "A"), (5, "C")):
        history.observe(_time(day), version)
    again = SchemaHistory(history.entries(), revealed=history.revealed(), truncated=history.truncated)
    assert again.entries() == history.entries() and again.latest() == (_time(5), "C")
    assert again.versions() == {"A", "B", "C"}
    assert again.observe(_time(4), "C")[0].supersedes == ("B", "C", _time(5))
    assert again.observe(_time(5), "C") == [] and ["B", "C", _time(5)] in again.revealed()
