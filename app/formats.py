"""Alerts and dead letters as an operator reads them on a terminal; every text from events shown escaped."""

from __future__ import annotations

from typing import Any

from kafka_lineage.runtime.terminal import shown


def format_alert(alert: dict[str, Any]) -> str:
    """An alert as an operator reads it; every text from events shown escaped (``terminal.shown``)."""
    dataset = f"{shown(alert['dataset']['namespace'])} {shown(alert['dataset']['name'])}"
    if alert.get("kind") == "sensitiveExposure" and alert.get("exposure"):
        return _format_exposure(alert, dataset)
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
    return "\n".join(lines + _owners(alert))


def _owners(alert: dict[str, Any]) -> list[str]:
    """The dataset's owners as one line, when it has any (older alerts read with none)."""
    owners = alert.get("datasetOwners") or []
    return [f"    owners: {', '.join(shown(owner) for owner in owners)}"] if owners else []


def _format_exposure(alert: dict[str, Any], dataset: str) -> str:
    exposure = alert["exposure"]
    more = " (more not listed)" if exposure["columnsTruncated"] else ""
    lines = [f"[{shown(exposure['tag'])}] {dataset} is not cleared for {shown(exposure['tag'])} and now receives it in "
             f"{len(exposure['columns'])} columns{more} (detected {shown(alert['eventTime'])})"]
    for column in exposure["columns"]:
        origin = column["origin"]
        hops = " → ".join(f"{shown(hop['name'])}.{shown(hop['field'] or '')} ({shown(hop['transformation'] or '-')}"
                          f"{', ' + ', '.join(shown(job['name']) for job in hop['jobs']) if hop['jobs'] else ''})"
                          for hop in column["path"])
        lines.append(f"    {shown(column['field']):30} from {shown(origin['namespace'])} {shown(origin['name'])}."
                     f"{shown(origin['field'])}: {hops}")
    return "\n".join(lines + _owners(alert))


def format_dead_letter(letter: dict[str, Any]) -> str:
    where = (f"{shown(letter['sourceTopic'])}[{letter['sourcePartition']}]@{letter['sourceOffset']}"
             if letter["sourceTopic"] else shown(letter["origin"] or "?"))
    size = len(letter["value"]) if letter["value"] is not None else 0
    return (f"{letter['failedAt']:%Y-%m-%d %H:%M:%S} {shown(letter['stage']):11} {shown(letter['errorClass']):20} "
            f"{where}  ({size} bytes)\n    {shown(letter['errorMessage'])}")
