"""Who owns what an alert names, and how its dataset is tagged: what a router sends it by (a channel per team).

Pure. An alert carries the owner names of its dataset (``datasetOwners``) and of each impacted job and dataset
(``owners``), from OpenLineage's ``ownership`` facet of the job or dataset, and its dataset's own tags
(``datasetTags``, from the ``tags`` and ``kafkaLineage_tags`` facets). Each comes from the newest facet known: for the
changed dataset the event's own facet when it carries one, unless the graph holds one from a later event (a late
change's event is older than what the graph knows); otherwise, and for every impacted node, the graph's (``Facet``
documents, latest eventTime wins, read with the impact: ``graph.queries.node_facets``). Owners and tags are the
current ones even for a late change's impact read as of its time: an alert goes to whoever owns the data now. The
bounds are ``graph.facets``'s (``MAX_OWNERS``, ``MAX_TAGS``, ``MAX_LABEL_CHARS``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_lineage.graph.facets import (
    OWNERSHIP_FACET,
    TAG_FACETS,
    as_dict,
    document_facet,
    facet_owners,
    facets_tags,
)
from kafka_lineage.graph.keys import utc_time
from kafka_lineage.graph.queries import FacetKey, Reached

# ``Reached.kind`` → the label a node's facet documents are stored under (``Facet.of``)
LABELS = {"job": "Job", "dataset": "Dataset"}
NodeKey = tuple[str, str, str]  # (kind "job" or "dataset", namespace, name)


@dataclass(frozen=True)
class Ownership:
    """What an alert says of owners and tags: its dataset's owners and tags, and each impacted node's owners."""

    dataset_owners: list[str] = field(default_factory=list)
    dataset_tags: list[str] = field(default_factory=list)
    owners: Mapping[NodeKey, list[str]] = field(default_factory=dict)

    def of(self, kind: str, namespace: str, name: str) -> list[str]:
        return list(self.owners.get((kind, namespace, name), []))


def facet_requests(namespace: str, name: str, impacted: Iterable[Reached]
                   ) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """The facet documents an alert reads (``graph.queries.node_facets``'s ``nodes``): its dataset's ownership and
    tags facets, each listed impacted node's ownership facet."""
    requests = [("Dataset", namespace, name, (OWNERSHIP_FACET, *TAG_FACETS))]
    requests += [(LABELS[r.kind], r.namespace, r.name, (OWNERSHIP_FACET,)) for r in impacted if r.kind in LABELS]
    return requests


def event_dataset_facets(event: Mapping[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The facets the event carries for the dataset (an output's, a dataset event's, else an input's); {} if none."""
    candidates = [*(event.get("outputs") or ()), event.get("dataset"), *(event.get("inputs") or ())]
    for dataset in candidates:
        dataset = as_dict(dataset)
        if dataset.get("namespace") == namespace and dataset.get("name") == name:
            return as_dict(dataset.get("facets"))
    return {}


def _newest(found: Mapping[FacetKey, tuple[str | None, str]], label: str, namespace: str, name: str, key: str,
            carried: Mapping[str, Any], event_time: str | None) -> Any:
    """Facet ``key`` of a node: the event's (``carried``) unless the graph's came with a later event."""
    stored = found.get((label, namespace, name, key))
    if key in carried and (stored is None or event_time is None or stored[1] <= event_time):
        return carried[key]
    return document_facet(stored[0], key) if stored is not None else None


def dataset_ownership(found: Mapping[FacetKey, tuple[str | None, str]], namespace: str, name: str,
                      event: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(owners, tags) of a dataset: from ``event``'s facets for it when newer, else the graph's documents."""
    carried = event_dataset_facets(event, namespace, name) if event is not None else {}
    event_time = utc_time(event.get("eventTime")) if event is not None else None
    owners = facet_owners(_newest(found, "Dataset", namespace, name, OWNERSHIP_FACET, carried, event_time))
    tags = facets_tags(_newest(found, "Dataset", namespace, name, key, carried, event_time) for key in TAG_FACETS)
    return owners, tags


def alert_ownership(found: Mapping[FacetKey, tuple[str | None, str]] | None, namespace: str, name: str,
                    event: Mapping[str, Any], impacted: Iterable[Reached]) -> Ownership:
    """A schema-drift alert's ownership; ``found`` None (the graph did not answer): the event's facets only."""
    found = found or {}
    owners, tags = dataset_ownership(found, namespace, name, event)
    return Ownership(owners, tags, {
        (r.kind, r.namespace, r.name): facet_owners(document_facet(stored[0], OWNERSHIP_FACET))
        for r in impacted if r.kind in LABELS
        and (stored := found.get((LABELS[r.kind], r.namespace, r.name, OWNERSHIP_FACET))) is not None})
