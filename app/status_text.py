"""`lineage status` on a terminal: the pipeline's status (``runtime.status``) as aligned text."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_lineage.runtime.status import PipelineStatus, StageStatus, iso_time
from kafka_lineage.runtime.terminal import shown


def _age(seconds: float) -> str:
    ahead = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            amount = f"{int(seconds // size)}{unit}"
            break
    else:
        amount = f"{int(seconds)}s"
    return f"{amount} ahead of now" if ahead else f"{amount} ago"


def format_last_event(last_event_ms: int | None, error: str, now: float) -> str:
    if error:
        return f"unavailable: {error}"
    if last_event_ms is None:
        return "no records"
    return f"{iso_time(last_event_ms / 1000)} ({_age(now - last_event_ms / 1000)})"


def format_lag(stage: StageStatus) -> str:
    if stage.lag_error:
        return f"unavailable: {stage.lag_error}"
    per_partition = " ".join(f"p{p.partition}:{p.lag}" for p in stage.partitions)
    text = f"{stage.lag} [{per_partition}]"
    if stage.no_commits:
        return f"{text} (no commits)"
    if stage.uncommitted_partitions:
        return f"{text} (no commits on {','.join(f'p{p}' for p in stage.uncommitted_partitions)})"
    return text


def format_members(stage: StageStatus) -> str:
    if stage.members_error:
        return f"unavailable: {stage.members_error}"
    state = "no such group" if stage.group_state == "dead" else stage.group_state
    return f"{stage.members} ({state})" if state else str(stage.members)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
            for row in [header, *rows]]


def format_status(status: PipelineStatus) -> str:
    now = status.checked_at
    lines = [f"pipeline status at {iso_time(now)} (Kafka {status.kafka_bootstrap})", ""]
    if status.services:  # a probe of the services is installed (the development tools' local stack)
        lines += _table(["SERVICE", "STATE", "DETAIL"], [[s.name, s.state, s.detail] for s in status.services])
        lines.append("")
    lines += _table(["STAGE", "GROUP", "TOPIC", "MEMBERS", "LAG", "LAST EVENT"],
                    [[s.stage, s.group, s.topic, format_members(s), format_lag(s),
                      format_last_event(s.last_event_ms, s.last_event_error, now)] for s in status.stages])
    lines.append("")
    dlq, alerts = status.dead_letters, status.alerts_last_hour
    dlq_count = f"unavailable: {dlq.error}" if dlq.error else str(dlq.count)
    alert_count = f"unavailable: {alerts.error}" if alerts.error else str(alerts.count)
    for label, row, count in (("dead letters", dlq, dlq_count),
                              ("drift alerts in the last hour", alerts, alert_count)):
        last = "" if row.error else f"; last: {format_last_event(row.last_event_ms, row.last_event_error, now)}"
        lines.append(f"{label} ({row.topic}): {count}{last}")
    lines.append("")
    lines.append(f"verdict: {status.verdict}")
    lines += [f"  - {reason}" for reason in status.reasons]
    return "\n".join(shown(line) for line in lines)  # details quote servers' and records' own words
