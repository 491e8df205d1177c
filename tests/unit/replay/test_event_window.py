"""Replay's eventTime window: which events a ``--from``/``--to`` replay writes."""

from __future__ import annotations

import pytest

from kafka_lineage.replay.local import ALL_TIME, EventWindow


def test_the_window_holds_event_times_between_its_ends_whatever_their_offset() -> None:
    window = EventWindow.parse("2024-05-01T11:00:00Z", "2024-05-01T13:00:00+00:00")
    assert window.holds({"eventTime": "2024-05-01T11:00:00Z"})  # both ends included
    assert window.holds({"eventTime": "2024-05-01T13:00:00.000Z"})
    assert window.holds({"eventTime": "2024-05-01T14:30:00+02:00"})  # 12:30 UTC
    assert not window.holds({"eventTime": "2024-05-01T10:59:59.999Z"})
    assert not window.holds({"eventTime": "2024-05-01T13:00:00.001Z"})
    assert not window.holds({"eventTime": "2024-05-01T12:30:00-02:00"})  # 14:30 UTC


def test_open_ends_and_unreadable_times() -> None:
    assert EventWindow.parse("earliest", None) == ALL_TIME and ALL_TIME.whole
    since = EventWindow.parse("2024-05-01T11:00:00", None)  # no offset: UTC
    assert since.holds({"eventTime": "2030-01-01T00:00:00Z"}) and not since.holds({"eventTime": "2024-05-01T10:00Z"})
    assert since.holds({"eventTime": "not a time"})  # replayed rather than lost (validation refuses these anyway)


def test_a_bad_bound_names_its_option() -> None:
    with pytest.raises(ValueError, match="--to"):
        EventWindow.parse(None, "yesterday")
