"""Marquez's dashboard metrics (``GET /api/v1/stats/lineage-events``) from the graph's runs: per interval, how many
runs started and how many ended complete, failed or aborted (Marquez counts its stored events of those types; a run
here counts once per kind however many events repeated it). Pure: the store gives counts per UTC hour, so a time
zone whose offset is not whole hours gets days cut at the hour."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

KINDS = {"START": "start", "COMPLETE": "complete", "FAIL": "fail", "ABORT": "abort"}


def intervals(period: str, now: datetime, zone: tzinfo) -> list[tuple[datetime, datetime]]:
    """DAY: the 24 hours up to the current one (UTC, as Marquez); WEEK: the 7 days up to today in ``zone``."""
    if period == "DAY":
        hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        return [(hour - timedelta(hours=23 - i), hour - timedelta(hours=22 - i)) for i in range(24)]
    today = now.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
    return [(today - timedelta(days=6 - i), today - timedelta(days=5 - i)) for i in range(7)]


def stored_time(moment: datetime) -> str:
    """A moment as the graph writes times (UTC, microseconds, ``Z``), for range comparisons with them."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lineage_metrics(spans: list[tuple[datetime, datetime]], hours: Mapping[str, Mapping[str, int]]
                    ) -> list[dict[str, Any]]:
    """One LineageMetric per interval: the counts of the UTC hours starting in it, summed."""
    metrics = []
    for start, end in spans:
        counts = dict.fromkeys(KINDS.values(), 0)
        hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        if hour < start:  # a zone off UTC by part of an hour: the hour straddling midnight belongs to the day before
            hour += timedelta(hours=1)
        while hour < end:
            for kind, count in hours.get(hour.strftime("%Y-%m-%dT%H"), {}).items():
                if kind in KINDS:
                    counts[KINDS[kind]] += count
            hour += timedelta(hours=1)
        metrics.append({"startInterval": start.isoformat(), "endInterval": end.isoformat(), **counts})
    return metrics
