"""Alerts and dead letters as an operator reads them on a terminal; every text from events shown escaped."""

from __future__ import annotations

from typing import Any

from kafka_lineage.runtime.terminal import shown


def format_alert(alert: dict[str, Any]) -> str:
    """An alert as an operator reads it; every text from events shown escaped (``terminal.shown``)."""
    dataset = f"{shown(alert['dataset']['namespace'])} {shown(alert['dataset']['name'])}"
    lines = [f"[{shown(alert['severity'])}] {dataset} changed by job {shown(alert['job']['namespace'])} "
             f"{shown(alert['job']['name'])} (run {shown(alert['runId'])}) at {shown(alert['eventTime'])}"]
    for change in alert["changes"]:
        kinds = f"{shown(change['oldType'] or '-')} → {shown(change['newType'] or '-')}"
        lines.append(f"    {shown(change['kind']):20} {shown(change['path']):30} {kinds:30} "
                     f"{shown(change['severity'])}")
    jobs = ", ".join(f"{shown(j['namespace'])} {shown(j['name'])} (depth {j['depth']})"
                     for j in alert["impactedJobs"]) or "none"
    datasets = ", ".join(f"{shown(d['namespace'])} {shown(d['name'])}" for d in alert["impactedDatasets"]) or "none"
    more = " (more not listed)" if alert["impactTruncated"] else ""
    lines.append(f"    impacted jobs: {jobs}{more}")
    lines.append(f"    impacted datasets: {datasets}")
    return "\n".join(lines)


def format_dead_letter(letter: dict[str, Any]) -> str:
    where = (f"{shown(letter['sourceTopic'])}[{letter['sourcePartition']}]@{letter['sourceOffset']}"
             if letter["sourceTopic"] else shown(letter["origin"] or "?"))
    size = len(letter["value"]) if letter["value"] is not None else 0
    return (f"{letter['failedAt']:%Y-%m-%d %H:%M:%S} {shown(letter['stage']):11} {shown(letter['errorClass']):20} "
            f"{where}  ({size} bytes)\n    {shown(letter['errorMessage'])}")
