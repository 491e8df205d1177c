"""A replay's schema changes (replay/drift.py): the processor's event-time rule, in any read order and any split."""

from __future__ import annotations

import random

import pytest

from kafka_lineage.replay.drift import ReplayDrift
from kafka_lineage.schemas.schema_diff import schema_version
from kafka_lineage.schemas.schema_history import SchemaHistory
from tests.unit.schemas.test_schema_history import _time, _true_changes

TYPES = {"A": "int", "B": "string", "C": "bigint", "D": "boolean"}


def _event(time: str, version: str, dataset: str = "orders") -> dict:
    fields = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": TYPES[version]}]
    return {"eventTime": time, "outputs": [{"namespace": "s3://lake", "name": dataset,
                                            "facets": {"schema": {"fields": fields}}}]}


def _found(drift: ReplayDrift) -> set[tuple[str, str, str, str]]:
    names = {schema_version(_event("", letter)["outputs"][0]["facets"]["schema"]["fields"]): letter
             for letter in TYPES}  # version hash → letter, for readable comparisons
    return {(f.name, names[f.previous_version], names[f.new_version], f.event_time) for f in drift.findings()}


@pytest.mark.parametrize("seed", range(100))
def test_a_replay_finds_the_changes_of_the_event_time_history_in_any_order_and_any_split(seed: int) -> None:
    rng = random.Random(seed)
    observations = {dataset: [(_time(day), rng.choice("ABCD")) for day in sorted(rng.sample(range(1, 29), 8))]
                    for dataset in ("orders", "users")}
    events = [_event(time, version, dataset) for dataset, seen in observations.items() for time, version in seen]
    events += rng.choices(events, k=5)  # duplicates
    rng.shuffle(events)
    true = {(dataset, before, after, at) for dataset, seen in observations.items()
            for before, after, at in _true_changes(seen)}

    whole = ReplayDrift()
    whole.observe(events)
    assert _found(whole) == true
    # split over tasks (Spark), each with its own histories, merged at the driver: the same
    cut = rng.randint(0, len(events))
    parts = [ReplayDrift(), ReplayDrift()]
    parts[0].observe(events[:cut])
    parts[1].observe(events[cut:])
    merged = ReplayDrift()
    for part in parts:
        merged.absorb(part.kept())
    assert _found(merged) == true


def test_the_replay_s_changes_are_the_live_alerts_less_the_superseded_ones() -> None:
    arrivals = [(_time(1), "A"), (_time(5), "C"), (_time(3), "B"), (_time(2), "A")]
    live, alerts = SchemaHistory(), []
    for time, version in arrivals:
        alerts += live.observe(time, version)
    superseded = {alert.supersedes for alert in alerts if alert.supersedes}
    current = {(a.previous_version, a.version, a.at) for a in alerts if a.identity not in superseded}
    drift = ReplayDrift()
    drift.observe(_event(time, version) for time, version in arrivals)
    assert {(before, after, at) for _name, before, after, at in _found(drift)} == current == {
        ("A", "B", _time(3)), ("B", "C", _time(5))}
    first, _ = drift.findings()
    assert first.severity == "BREAKING" and [c.path for c in first.changes] == ["amount"]
