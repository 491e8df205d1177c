"""Which routes an alert goes to: each route whose ``match`` it meets (an alert may go to several). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from kafka_lineage.sinks.alerts.routing.config import Match


def dataset_owners(alert: Mapping[str, Any]) -> list[str]:
    return list(alert.get("datasetOwners") or [])


def all_owners(alert: Mapping[str, Any]) -> list[str]:
    """The alert's dataset's owners, then those of every impacted job and dataset, each once."""
    found = dict.fromkeys(dataset_owners(alert))
    for node in (*(alert.get("impactedDatasets") or ()), *(alert.get("impactedJobs") or ())):
        found.update(dict.fromkeys(node.get("owners") or ()))
    return list(found)


def _any(patterns: Sequence[str], values: Iterable[str]) -> bool:
    return any(fnmatchcase(value, pattern) for value in values for pattern in patterns)


def matches(match: Match, alert: Mapping[str, Any]) -> bool:
    dataset = alert.get("dataset") or {}
    kind = alert.get("kind") or "schemaDrift"
    checks = (
        (match.kind, lambda: kind in match.kind),
        (match.severity, lambda: alert.get("severity") in match.severity),
        (match.change, lambda: any(c.get("kind") in match.change for c in alert.get("changes") or ())),
        (match.namespace, lambda: _any(match.namespace, [dataset.get("namespace", "")])),
        (match.name, lambda: _any(match.name, [dataset.get("name", "")])),
        (match.dataset_owners, lambda: _any(match.dataset_owners, dataset_owners(alert))),
        (match.owners, lambda: _any(match.owners, all_owners(alert))),
        # tags are lower-cased where they are read (graph/facets.py): a route's PII means pii
        (match.tags, lambda: _any([tag.lower() for tag in match.tags], alert.get("datasetTags") or ())),
    )
    return all(check() for criterion, check in checks if criterion)


def select(routes: Sequence[tuple[str, Match]], alert: Mapping[str, Any]) -> list[str]:
    """The names of the routes that take ``alert``, in the file's order."""
    return [name for name, match in routes if matches(match, alert)]
