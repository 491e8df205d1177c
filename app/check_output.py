"""``lineage check``'s report as CI tools read it: text for people, JSON, SARIF 2.1.0 (code scanning) and GitHub
Actions workflow commands (annotations on the changed file's line)."""

from __future__ import annotations

import json
from typing import Any

from kafka_lineage.graph.check import CheckReport, DatasetCheck, Finding
from kafka_lineage.graph.column_walk import Consumer
from kafka_lineage.runtime.terminal import shown

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULES = {
    "breaking-change-with-consumers": "A breaking schema change of a column that downstream columns, datasets or "
                                      "jobs consume",
    "breaking-change": "A breaking schema change of a column nothing is known to consume",
    "compatible-change": "A compatible schema change",
    "unknown-dataset": "A proposed dataset that is not in the lineage graph",
}
SHOWN_CONSUMERS = 20  # per change, in text and annotations (JSON and SARIF carry them all)


def render(report: CheckReport, output: str) -> str:
    if output == "json":
        return json.dumps(report.as_dict(), indent=2) + "\n"
    if output == "sarif":
        return json.dumps(sarif(report), indent=2) + "\n"
    if output == "github":
        return github(report)
    return text(report)


# --- for people ----------------------------------------------------------------------------------------------------
def text(report: CheckReport) -> str:
    lines = []
    failing = sum(len(d.failing(report.unknown_readers_count)) for d in report.datasets)
    for dataset in report.datasets:
        lines += _dataset_text(dataset, report.unknown_readers_count)
    verdict = (f"FAIL: {failing} breaking change{'s' if failing != 1 else ''} with consumers" if failing
               else "PASS: no breaking change with consumers")
    return "\n".join([f"lineage check: {verdict}", *lines]) + "\n"


def _dataset_text(dataset: DatasetCheck, unknown_count: bool) -> list[str]:
    p = dataset.proposal
    where = f"{p.source}:{p.line}" if p.source and p.line else p.source
    head = f"\n{shown(p.namespace)} {shown(p.name)}  ({p.origin}{', ' + shown(where) if where else ''})"
    if dataset.status == "new":
        hint = "; closest: " + ", ".join(f"{shown(ns)} {shown(n)}" for ns, n in dataset.closest[:3]) \
            if dataset.closest else ""
        return [head, f"  not in the lineage graph: nothing consumes it yet{hint}"]
    if dataset.status == "no-schema":
        return [head, "  the graph holds no schema of it to compare with"]
    if not dataset.findings:
        return [head, "  no change"]
    lines = [head]
    for finding in dataset.findings:
        lines += _finding_text(finding, dataset, unknown_count)
    return lines


def _what(finding: Finding) -> str:
    change = finding.change
    if change.kind == "RENAMED":
        return f"RENAMED to {finding.renamed_to}"
    if change.kind == "REMOVED":
        return f"REMOVED (was {change.old_type or 'untyped'})"
    if change.kind == "ADDED":
        return f"ADDED ({change.new_type})"
    return f"{change.kind} {change.old_type} → {change.new_type}"


def _finding_text(finding: Finding, dataset: DatasetCheck, unknown_count: bool) -> list[str]:
    change, what = finding.change, _what(finding)
    failing = dataset.fails(finding, unknown_count)
    mark = "✗" if failing else "~" if finding.breaking else "✓"
    note = " (allowed)" if finding.allowed and finding.breaking else ""
    lines = [f"  {mark} {shown(change.path)} {shown(what)}: {change.severity}{note}"]
    if not finding.breaking:
        return lines
    if finding.consumers:
        lines.append(f"      {len(finding.consumers)} consumer{'s' if len(finding.consumers) != 1 else ''}"
                     f"{' (cut: more exist)' if finding.truncated else ''}; jobs: "
                     + ", ".join(f"{shown(ns)}/{shown(n)}" for ns, n in finding.jobs()[:10]))
        for consumer in finding.consumers[:SHOWN_CONSUMERS]:
            lines.append("        " + path_text(consumer, dataset.proposal.namespace, change.path))
        if len(finding.consumers) > SHOWN_CONSUMERS:
            lines.append(f"        … {len(finding.consumers) - SHOWN_CONSUMERS} more (--output json lists them)")
    elif not dataset.unknown_readers:
        lines.append("      no known consumer")
    if dataset.unknown_readers:
        readers = ", ".join(f"{shown(ns)}/{shown(n)}" for ns, n in dataset.unknown_readers[:10])
        lines.append(f"      {'' if unknown_count else '(not counted) '}read by jobs that report no column lineage "
                     f"from it (they may use the column): {readers}")
    return lines


def path_text(consumer: Consumer, namespace: str, column: str) -> str:
    """``email → [stg_orders: DIRECT/IDENTITY] shop.stg.orders.email → …``; namespaces shown where they differ."""
    parts = [shown(column)]
    for hop in consumer.path:
        jobs = ",".join(shown(name) for _ns, name in hop.jobs) or "?"
        how = f": {hop.transformation}" if hop.transformation else ""
        node = f"{shown(hop.name)}.{shown(hop.field)}" if hop.field is not None else f"{shown(hop.name)} (dataset)"
        if hop.namespace != namespace:
            node = f"{shown(hop.namespace)} {node}"
        parts.append(f"[{jobs}{how}] {node}")
    return " → ".join(parts)


# --- SARIF ---------------------------------------------------------------------------------------------------------
def _rule(finding: Finding, dataset: DatasetCheck, unknown_count: bool) -> tuple[str, str]:
    if dataset.fails(finding, unknown_count):
        return "breaking-change-with-consumers", "error"
    if finding.breaking:
        return "breaking-change", "warning" if not finding.allowed else "note"
    return "compatible-change", "note"


def _message(finding: Finding, dataset: DatasetCheck) -> str:
    change, p = finding.change, dataset.proposal
    consumers = "; ".join(path_text(c, p.namespace, change.path) for c in finding.consumers[:SHOWN_CONSUMERS])
    more = f" (+{len(finding.consumers) - SHOWN_CONSUMERS} more)" if len(finding.consumers) > SHOWN_CONSUMERS else ""
    text = f"{p.name}.{change.path}: {_what(finding)}, {change.severity}"
    if finding.allowed and finding.breaking:
        text += ", allowed"
    if consumers:
        text += f". Consumers: {consumers}{more}"
    if finding.breaking and dataset.unknown_readers:
        text += ". Read without column lineage by: " + ", ".join(f"{ns}/{n}" for ns, n in dataset.unknown_readers[:10])
    return text


def sarif(report: CheckReport) -> dict[str, Any]:
    results = []
    for dataset in report.datasets:
        p = dataset.proposal
        location: dict[str, Any] = {"logicalLocations": [{"fullyQualifiedName": f"{p.namespace}/{p.name}",
                                                          "kind": "table"}]}
        if p.source:
            location["physicalLocation"] = {"artifactLocation": {"uri": p.source},
                                            **({"region": {"startLine": p.line}} if p.line else {})}
        if dataset.status == "new":
            results.append({"ruleId": "unknown-dataset", "level": "note", "locations": [location],
                            "message": {"text": f"{p.namespace} {p.name} is not in the lineage graph"}})
        for finding in dataset.findings:
            rule, level = _rule(finding, dataset, report.unknown_readers_count)
            at = location
            if p.source and finding.line:  # the statement that makes this change
                at = {**location, "physicalLocation": {"artifactLocation": {"uri": p.source},
                                                       "region": {"startLine": finding.line}}}
            results.append({"ruleId": rule, "level": level, "locations": [at],
                            "message": {"text": _message(finding, dataset)},
                            "properties": finding.as_dict()})
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "lineage check", "informationUri": "https://openlineage.io",
                            "rules": [{"id": rule, "shortDescription": {"text": text}}
                                      for rule, text in RULES.items()]}},
        "results": results,
        "properties": {"verdict": report.verdict},
    }]}


# --- GitHub Actions ------------------------------------------------------------------------------------------------
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(report: CheckReport) -> str:
    """One workflow command per change (``::error``/``::warning``/``::notice``) on the proposal's file and line,
    then a summary line."""
    lines = []
    for dataset in report.datasets:
        p = dataset.proposal
        for finding in dataset.findings:
            line = finding.line or p.line
            place = ",".join(filter(None, [f"file={_escape_property(p.source)}" if p.source else "",
                                           f"line={line}" if p.source and line else ""]))
            _rule_id, level = _rule(finding, dataset, report.unknown_readers_count)
            command = {"error": "error", "warning": "warning"}.get(level, "notice")
            title = f"{finding.change.severity} schema change: {p.name}.{finding.change.path}"
            properties = ",".join(filter(None, [place, f"title={_escape_property(title)}"]))
            lines.append(f"::{command} {properties}::{_escape_data(_message(finding, dataset))}")
    lines.append(f"lineage check: {report.verdict}")
    return "\n".join(lines) + "\n"
