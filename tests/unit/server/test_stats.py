"""Marquez's lineage-event stats: intervals and hour counts folded into them."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from kafka_lineage.server.stats import intervals, lineage_metrics, stored_time


def test_a_day_is_the_24_utc_hours_up_to_the_current_one() -> None:
    spans = intervals("DAY", datetime(2026, 3, 1, 10, 42, tzinfo=UTC), UTC)
    assert len(spans) == 24
    assert spans[0][0] == datetime(2026, 2, 28, 11, tzinfo=UTC) and spans[-1][1] == datetime(2026, 3, 1, 11, tzinfo=UTC)
    assert stored_time(spans[0][0]) == "2026-02-28T11:00:00.000000Z"


def test_a_week_is_seven_local_days_and_each_sums_its_utc_hours() -> None:
    zone = ZoneInfo("Europe/Berlin")  # UTC+1 in March
    spans = intervals("WEEK", datetime(2026, 3, 1, 23, 30, tzinfo=UTC), zone)  # 00:30 on March 2nd in Berlin
    assert [s.date().isoformat() for s, _ in spans] == [f"2026-02-{d}" for d in (24, 25, 26, 27, 28)] + \
        ["2026-03-01", "2026-03-02"]
    hours = {"2026-03-01T22": {"START": 2, "COMPLETE": 1}, "2026-03-01T23": {"FAIL": 1},  # Berlin: 23:00, 00:00
             "2026-02-23T23": {"START": 9}}  # Berlin: Feb 24th 00:00, the first day's first hour
    metrics = lineage_metrics(spans, hours)
    assert metrics[-2] | {"startInterval": None, "endInterval": None} == {
        "startInterval": None, "endInterval": None, "start": 2, "complete": 1, "fail": 0, "abort": 0}
    assert metrics[-1]["fail"] == 1 and metrics[0]["start"] == 9
    assert metrics[-1]["startInterval"] == "2026-03-02T00:00:00+01:00"


def test_a_zone_off_by_half_an_hour_counts_every_utc_hour_once() -> None:
    spans = intervals("WEEK", datetime(2026, 3, 1, 12, tzinfo=UTC), ZoneInfo("Asia/Kolkata"))  # UTC+5:30
    hours = {f"2026-{m:02d}-{d:02d}T{h:02d}": {"START": 1} for m, d in ((2, 22), (2, 23), (2, 24), (2, 25), (2, 26),
                                                                        (2, 27), (2, 28), (3, 1)) for h in range(24)}
    starts = [metric["start"] for metric in lineage_metrics(spans, hours)]
    assert starts[:6] == [24] * 6  # every local day: 24 hours, none counted twice
    assert sum(starts) == len({h for h in hours if spans[0][0] <= datetime.fromisoformat(f"{h}:00+00:00")
                               < spans[-1][1]})

