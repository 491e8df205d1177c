"""Crash points (runtime/crash_points.py): parsed strictly, and a point that fires prepares, says so, and kills."""

from __future__ import annotations

import signal

import pytest

from kafka_lineage.runtime import crash_points
from kafka_lineage.runtime.crash_points import CrashPoints, parse_crash_points

KNOWN = ("outputs-sent", "before-commit")


def test_a_setting_names_known_points_with_probabilities() -> None:
    assert parse_crash_points("", KNOWN) == {}
    assert parse_crash_points("outputs-sent=0.25, before-commit", KNOWN) == {"outputs-sent": 0.25,
                                                                           "before-commit": 1.0}
    for bad, said in (("after-lunch=1", "unknown crash point"), ("before-commit=often", "not a probability"),
                      ("before-commit=2", "not between 0 and 1")):
        with pytest.raises(ValueError, match=said):
            parse_crash_points(bad, KNOWN)


def test_a_point_fires_with_its_probability_after_preparing(monkeypatch: pytest.MonkeyPatch) -> None:
    kills: list[int] = []
    monkeypatch.setattr(crash_points.os, "kill", lambda _pid, sig: kills.append(sig))
    monkeypatch.setattr(crash_points.logging, "shutdown", lambda: None)
    prepared: list[str] = []
    points = CrashPoints({"before-commit": 1.0, "outputs-sent": 0.0}, "worker")
    points.reach("outputs-sent", lambda: prepared.append("outputs-sent"))
    points.reach("state-sent")
    assert kills == [] and prepared == []
    points.reach("before-commit", lambda: prepared.append("before-commit"))
    assert kills == [signal.SIGKILL] and prepared == ["before-commit"]
