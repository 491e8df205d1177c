"""Alerts → the JSON body a destination takes: a view of the alerts (what a template sees), rendered by the route's
Jinja2 template (a file users can change; ``templates/<type>.json.j2`` by default) and parsed back as JSON, so a
template that writes broken JSON fails at start, on sample alerts, not at three in the morning. Pure.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache, lru_cache
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import StrictUndefined, Template, TemplateError, Undefined
from jinja2.sandbox import SandboxedEnvironment

from kafka_lineage.sinks.alerts.routing.config import DESTINATION_TYPES
from kafka_lineage.sinks.alerts.routing.rules import all_owners

# What a destination takes in one request (bytes of the rendered body): Slack truncates a message past 40,000
# characters, Teams refuses a webhook message over 28 KB; Alertmanager and webhooks get the project's own bound.
MAX_BODY_BYTES = {"slack": 40_000, "teams": 28_000, "alertmanager": 1_000_000, "webhook": 1_000_000}
LISTED_IN_DIGEST = 10  # alerts spelled out in a digest message; the rest are counted
LISTED_CHANGES = 10  # field changes spelled out per alert
LISTED_IMPACT = 5  # impacted jobs/datasets named per alert


class MessageError(ValueError):
    """A template that does not render valid JSON for these alerts, or a message larger than its destination takes."""


class TooLarge(MessageError):
    """The body is larger than the destination takes (a digest is then split; one alert alone is dead-lettered)."""

    def __init__(self, message: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.size, self.limit = size, limit


def default_templates() -> dict[str, str]:
    folder = resources.files("kafka_lineage.sinks.alerts.routing") / "templates"
    return {kind: (folder / f"{kind}.json.j2").read_text() for kind in DESTINATION_TYPES}


def clip(text: Any, limit: int) -> str:
    """``text`` in at most ``limit`` characters, an ellipsis ending what was cut."""
    text = str(text)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def slack_escape(text: Any) -> str:
    """Slack's mrkdwn control characters escaped (its documented three)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_json(value: Any) -> str:
    """JSON of ``value``; a name the template misspelt fails naming it (instead of "not JSON serializable")."""

    def refuse(item: Any) -> Any:
        if isinstance(item, Undefined):
            item._fail_with_undefined_error()
        raise TypeError(f"{type(item).__name__} is not JSON")

    if isinstance(value, Undefined):
        refuse(value)
    return json.dumps(value, ensure_ascii=False, default=refuse)


@cache
def _environment() -> SandboxedEnvironment:
    # sandboxed: a template is a user's file; strict: a misspelt name fails at start instead of rendering empty
    environment = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, trim_blocks=True,
                                       lstrip_blocks=True, keep_trailing_newline=False)
    environment.filters.update(clip=clip, slack_escape=slack_escape, tojson=to_json)
    return environment


@lru_cache(maxsize=256)
def _compiled(template: str) -> Template:
    return _environment().from_string(template)


def render(template: str, context: Mapping[str, Any]) -> Any:
    """The template's output for ``context``, parsed as JSON. MessageError says what went wrong."""
    try:
        text = _compiled(template).render(**context)
    except TemplateError as exc:
        raise MessageError(f"the template failed: {exc}") from None
    except (TypeError, ValueError, LookupError, ArithmeticError) as exc:  # a filter given what it cannot take
        raise MessageError(f"the template failed: {type(exc).__name__}: {exc}") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise MessageError(f"the template's output is not JSON ({exc}); it begins {text[:200]!r}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def body_bytes(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def plain(value: Any) -> Any:
    """An Avro-decoded alert as JSON would hold it (times as ISO strings, bytes as text)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def lineage_link(ui_url: str, kind: str, namespace: str, name: str, direction: str = "down") -> str:
    """The web UI's lineage view centred on a node (``#/lineage?node=…``), downstream by default: the impact."""
    node = f"{kind}:{namespace}:{name}"
    return f"{ui_url}/#/lineage?{urlencode({'node': node, 'depth': 3, 'dir': direction}, quote_via=quote)}"


def _change_line(change: Mapping[str, Any]) -> str:
    kind = str(change.get("kind", "OTHER")).replace("_", " ").lower()
    types = ""
    if change.get("oldType") or change.get("newType"):
        types = f" ({change.get('oldType') or '∅'} → {change.get('newType') or '∅'})"
    return f"{change.get('path', '')}: {kind}{types}"


def alert_view(alert: Mapping[str, Any], ui_url: str) -> dict[str, Any]:
    """The alert as a template sees it: every field of the record, plus ready-made words and links."""
    view = plain(alert)
    dataset, job = view.get("dataset") or {}, view.get("job") or {}
    ref = f"{dataset.get('namespace', '')}/{dataset.get('name', '')}"
    exposure = view.get("exposure") or None
    if view.get("kind") == "sensitiveExposure" and exposure:
        title = f"Sensitive tag {exposure.get('tag')} reaches {len(exposure.get('columns') or [])} columns of {ref}"
        lines = [f"{c.get('field')} ← {c['origin']['name']}.{c['origin']['field']}"
                 for c in (exposure.get("columns") or [])[:LISTED_CHANGES]]
        more = max(0, len(exposure.get("columns") or []) - LISTED_CHANGES)
    else:
        changes = view.get("changes") or []
        title = f"{view.get('severity', 'UNKNOWN')} schema change on {ref}"
        lines = [_change_line(change) for change in changes[:LISTED_CHANGES]]
        more = max(0, len(changes) - LISTED_CHANGES)
    jobs, datasets = view.get("impactedJobs") or [], view.get("impactedDatasets") or []
    columns = view.get("impactedColumns") or []
    impact = f"{len(jobs)} jobs, {len(datasets)} datasets, {len(columns)} columns downstream"
    if view.get("impactTruncated"):
        impact += " (more not listed)"
    if not view.get("impactComplete", True):
        impact += " (the graph may miss recent lineage)"
    view.update(
        title=title, ref=ref, changeLines=lines, moreChanges=more, impact=impact,
        impactedNames=[f"{n['namespace']}/{n['name']}" for n in (datasets + jobs)[:LISTED_IMPACT]],
        owners=all_owners(view),
        link=lineage_link(ui_url, "dataset", dataset.get("namespace", ""), dataset.get("name", "")),
        jobLink=lineage_link(ui_url, "job", job.get("namespace", ""), job.get("name", ""), "both")
        if job.get("name") else "",
    )
    return view


def context(views: Sequence[dict[str, Any]], *, route: str, delivery_id: str, ui_url: str) -> dict[str, Any]:
    """What a route's template renders: ``alert`` (the first), ``alerts``, ``digest`` (more than one), ``summary``;
    ``views`` are the alerts' ``alert_view``s."""
    severities = Counter(view.get("severity", "UNKNOWN") for view in views)
    jobs = Counter(view["job"]["name"] for view in views if (view.get("job") or {}).get("name"))
    datasets = {view["ref"] for view in views}
    headline = ", ".join(f"{count} {severity}" for severity, count in severities.most_common())
    if jobs:
        headline += " by " + ", ".join(name for name, _count in jobs.most_common(3)) + (
            f" and {len(jobs) - 3} more jobs" if len(jobs) > 3 else "")
    summary = {
        "count": len(views), "severities": dict(severities), "datasets": len(datasets), "jobs": dict(jobs),
        "headline": headline, "listed": views[:LISTED_IN_DIGEST], "unlisted": max(0, len(views) - LISTED_IN_DIGEST),
        "title": f"{len(views)} lineage alerts on {len(datasets)} datasets" if len(views) > 1 else views[0]["title"],
        "breaking": severities.get("BREAKING", 0),
    }
    return {"alert": views[0], "alerts": list(views), "digest": len(views) > 1, "summary": summary, "route": route,
            "deliveryId": delivery_id, "uiUrl": ui_url, "homeLink": f"{ui_url}/#/"}


def build(template: str, kind: str, views: Sequence[dict[str, Any]], *, route: str, delivery_id: str,
          ui_url: str) -> bytes:
    """The request body for the alerts' ``views`` (one alert, or a digest of several). MessageError if the template
    fails or the body is larger than the destination takes."""
    body = body_bytes(render(template, context(views, route=route, delivery_id=delivery_id, ui_url=ui_url)))
    if len(body) > MAX_BODY_BYTES[kind]:
        raise TooLarge(f"the message is {len(body)} bytes; a {kind} destination takes at most "
                       f"{MAX_BODY_BYTES[kind]}", len(body), MAX_BODY_BYTES[kind])
    return body


def delivery_id(route: str, alert_ids: Sequence[str]) -> str:
    """The same for the same alerts on the same route, whenever sent: a receiver's deduplication key."""
    return hashlib.sha256("\x1f".join((route, *sorted(alert_ids))).encode()).hexdigest()[:32]


def split_build(template: str, kind: str, alerts: Sequence[Mapping[str, Any]], *, route: str, ui_url: str
                ) -> list[tuple[list[Mapping[str, Any]], str, bytes]]:
    """Messages for ``alerts``: one if its body fits the destination, else the alerts halved until each part fits
    (a digest of wide alerts to Teams). Each part: its alerts, its delivery id, its body. TooLarge for one alert
    alone; MessageError if the template fails."""
    parts: list[tuple[list[Mapping[str, Any]], str, bytes]] = []
    try:
        views = [alert_view(alert, ui_url) for alert in alerts]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a record of a shape no alert sink writes
        raise MessageError(f"an alert that cannot be shown ({type(exc).__name__}: {exc})") from None
    pending = [list(zip(alerts, views, strict=True))]
    while pending:
        group = pending.pop(0)
        identity = delivery_id(route, [str(alert.get("alertId", "")) for alert, _view in group])
        try:
            body = build(template, kind, [view for _alert, view in group], route=route, delivery_id=identity,
                         ui_url=ui_url)
        except TooLarge as exc:
            if len(group) == 1:
                raise
            # into as many parts as the size says (and a fifth more), not halves: each try renders the whole group
            count = min(len(group), math.ceil(exc.size / exc.limit * 1.2))
            step = math.ceil(len(group) / count)
            pending[:0] = [group[start:start + step] for start in range(0, len(group), step)]
            continue
        parts.append(([alert for alert, _view in group], identity, body))
    return parts


def sample_alert(index: int = 0, *, exposure: bool = False) -> dict[str, Any]:
    """An alert with every list at its longest listed length (``exposure``: a sensitive exposure's): what templates
    are tried on at start."""
    alert = {
        "alertId": f"sample-{index}", "changeId": f"change-{index}", "kind": "schemaDrift", "severity": "BREAKING",
        "dataset": {"namespace": "postgres://db.example:5432", "name": f"public.orders_{index}"},
        "job": {"namespace": "airflow", "name": "migrations.orders"}, "runId": "0190d6a0-0000-7000-8000-000000000000",
        "previousVersion": "a" * 64, "newVersion": "b" * 64, "previousSchema": "[]", "newSchema": "[]",
        "changes": [{"path": f"column_{i}" * 4, "kind": "TYPE_CHANGED", "oldType": "varchar(255)",
                     "newType": "integer", "severity": "BREAKING"} for i in range(LISTED_CHANGES + 2)],
        "eventTime": "2026-01-01T00:00:00Z", "detectedAt": datetime(2026, 1, 1, tzinfo=UTC), "impactDepth": 5,
        "impactedJobs": [{"namespace": "spark", "name": f"reporting.job_{i}" * 3, "depth": 1, "owners": ["team:bi"]}
                         for i in range(LISTED_IMPACT)],
        "impactedDatasets": [{"namespace": "s3://lake", "name": f"reports/orders_{i}" * 3, "depth": 2,
                              "owners": ["team:bi"]} for i in range(LISTED_IMPACT)],
        "impactedColumns": [], "impactTruncated": True, "impactComplete": True, "changedAt": None, "late": False,
        "supersedes": None, "beyondHistory": False, "exposure": None, "datasetOwners": ["team:payments"],
        "datasetTags": ["pii"],
    }
    if exposure:
        origin = {"namespace": "postgres://db.example:5432", "name": "public.users", "field": "email"}
        alert.update(kind="sensitiveExposure", severity="UNKNOWN", changes=[], previousVersion="", newVersion="",
                     exposure={"tag": "pii", "columnsTruncated": True, "columns": [
                         {"field": f"email_{i}", "origin": origin, "path": []} for i in range(LISTED_CHANGES + 2)]})
    return alert
