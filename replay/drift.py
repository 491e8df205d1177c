"""The schema changes a replay finds: the processor's rule, by event time whatever order it reads in.

A replay reads the topic once, in partition order, with no state of the processor's; so each output dataset's schema
observations go into a ``SchemaHistory`` bounded as the processor's (``LINEAGE_SCHEMA_HISTORY``), and at the end the
changes of each history are diffed field by field (``drift_between``, the processor's). Within the bound they are
the live alerts' changes less those a later observation split (``supersedes``): the alert topic's current story.
Pure: fed normalized events, asked for findings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_lineage.schemas.openlineage import FacetCache
from kafka_lineage.schemas.schema_diff import DriftFinding, drift_between, written_schemas
from kafka_lineage.schemas.schema_history import DEFAULT_HISTORY_LIMIT, SchemaHistory


class ReplayDrift:
    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.limit = limit
        self.histories: dict[tuple[str, str], SchemaHistory] = {}
        self.fields: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}  # dataset → version → its fields

    def observe(self, events: Iterable[dict[str, Any]], facets: FacetCache | None = None) -> None:
        """Each schema the events write; ``facets``: the replay core's cache, so a version is computed once per
        facet object, as the processor does."""
        for event in events:
            event_time = event.get("eventTime")
            for dataset, fields, version in written_schemas(event, facets):
                self._observe((str(dataset.get("namespace")), str(dataset.get("name"))),
                              event_time if isinstance(event_time, str) else "", version, fields)

    def kept(self) -> list[tuple[str, str, list[list[str]], dict[str, list[dict[str, Any]]]]]:
        """(namespace, name, history entries, version → fields) per dataset: what ``absorb`` takes (a Spark task's
        part, merged at the driver: the histories of all parts are one history, whatever the split)."""
        return [(namespace, name, history.entries(), self.fields[(namespace, name)])
                for (namespace, name), history in self.histories.items()]

    def absorb(self, kept: Iterable[tuple[str, str, list[list[str]], dict[str, list[dict[str, Any]]]]]) -> None:
        for namespace, name, entries, fields in kept:
            for time, version in entries:
                self._observe((namespace, name), time, version, fields[version])

    def _observe(self, key: tuple[str, str], time: str, version: str, fields: list[dict[str, Any]]) -> None:
        history = self.histories.setdefault(key, SchemaHistory(limit=self.limit))
        history.observe(time, version)
        versions = self.fields.setdefault(key, {})
        versions.setdefault(version, fields)
        if len(versions) > len(history.versions()):  # a version gone from the history needs no fields
            kept = history.versions()
            for gone in [v for v in versions if v not in kept]:
                del versions[gone]

    def findings(self) -> list[DriftFinding]:
        """Each dataset's changes, oldest first; datasets in name order."""
        found = []
        for (namespace, name), history in sorted(self.histories.items()):
            versions = self.fields[(namespace, name)]
            for change in history.changes():
                found.append(drift_between(versions.get(change.previous_version), versions[change.version],
                                           change.previous_version, change.version, change.previous_time, change.at,
                                           namespace, name))
        return found
