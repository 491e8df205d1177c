"""Where a sensitive tag reaches: classification tags (``pii`` by default) followed downstream along column lineage.

Tags come from OpenLineage's ``tags`` dataset facet (``{"tags": [{"key", "value", "source", "field"}]}``: with
``field`` a column's, without the whole dataset's), kept by the graph as the dataset's facet document (latest wins).
A tag matches a wanted name by its key (``pii``), its value (``classification: pii``) or ``key:value``.

Propagation is computed when asked, never copied: from each tagged column (every column of a tagged dataset) the
walk follows ``DERIVES_FROM`` hops that carry values — DIRECT ones, and hops whose producer named no
transformation (dbt-ol names none: carrying is the safe reading) — and an aggregation unless told to stop there.
A hop whose transformation has ``masking: true`` stops the tag and is reported (``masked``, with the hop); INDIRECT
hops (filters, joins, sorting) carry no values and are not followed. ``as_of`` follows the edges known then (tags
are the current ones: the graph keeps a dataset's latest tags facet). A dataset is *cleared* for a tag when it
carries ``TAG-cleared`` (or ``cleared: TAG``); a derived column in a dataset not cleared is what an operator must
look at.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from neo4j import READ_ACCESS, Driver, Query

from kafka_lineage.graph.column_walk import Consumer, Hop, Start, walk_columns
from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.queries import DEFAULT_TIMEOUT, _checked_depth
from kafka_lineage.schemas.tags import TAGS_FACET

DEFAULT_TAGS = ("pii",)
DEFAULT_DEPTH = 10  # column-lineage hops followed from a tagged column
MAX_TAGGED_DATASETS = 10_000
MAX_ORIGIN_COLUMNS = 20_000
MAX_REACHED_PER_ORIGIN = 1000

_TAG_FACETS = ["tags", TAGS_FACET]  # producers' own, and those set through the API or imported (schemas/tags.py)
_TAGGED = ("MATCH (f:Facet {of: 'Dataset'}) WHERE f.key IN $keys AND f.json IS NOT NULL "
           "OPTIONAL MATCH (d:Dataset {namespace: f.namespace, name: f.name}) "
           "RETURN coalesce(d.fullNamespace, f.namespace), coalesce(d.fullName, f.name), f.json LIMIT $limit")
_TAGS_OF = ("UNWIND $datasets AS ds UNWIND $keys AS key "
            "MATCH (f:Facet {of: 'Dataset', key: key, namespace: ds[0], name: ds[1]}) "
            "WHERE f.json IS NOT NULL RETURN ds[0], ds[1], f.json")
_COLUMNS_OF = ("UNWIND $datasets AS ds MATCH (c:Field {namespace: ds[0], name: ds[1]}) "
               "RETURN ds[0], ds[1], coalesce(c.fullField, c.field) LIMIT $limit")


@dataclass(frozen=True)
class TaggedColumn:
    """A column a tag reaches: ``origin`` (tagged there), ``derived`` (its values come from a tagged column) or
    ``masked`` (derived through a masking hop: the tag stops here). ``path``: from the origin column."""

    namespace: str
    name: str
    field: str
    tag: str
    status: str
    origin: tuple[str, str, str]
    path: tuple[Hop, ...] = ()
    cleared: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "field": self.field, "tag": self.tag,
                "status": self.status, "cleared": self.cleared, "depth": len(self.path),
                "origin": {"namespace": self.origin[0], "name": self.origin[1], "field": self.origin[2]},
                "path": [hop.as_dict() for hop in self.path],
                "maskedBy": self.path[-1].as_dict() if self.status == "masked" else None}


def tag_names(tag: Any) -> set[str]:
    """What a ``tags`` facet item answers to, lower-cased: its key, its value, ``key:value``."""
    if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
        return set()
    key = tag["key"].strip().lower()
    value = tag.get("value").strip().lower() if isinstance(tag.get("value"), str) else ""
    return {key, value, f"{key}:{value}"} - {""} if value else {key} - {""}


def facet_tags(facet_json: str | None) -> list[dict[str, Any]]:
    """The tag items of a stored tags facet document (``{"tags": {"tags": [...]}}``, ``{"kafkaLineage_tags": …}``)."""
    try:
        document = json.loads(facet_json) if facet_json else {}
    except ValueError:
        return []
    facet = next(iter(document.values()), None) if isinstance(document, dict) and len(document) == 1 else None
    items = facet.get("tags") if isinstance(facet, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def cleared_for(tags: Iterable[dict[str, Any]], tag: str) -> bool:
    """A dataset tag ``TAG-cleared`` (or ``cleared: TAG``) clears the dataset for ``tag``."""
    return any(f"{tag}-cleared" in names or f"cleared:{tag}" in names
               for names in (tag_names(item) for item in tags if not item.get("field")))


def carries(hop: Hop, stop_at_aggregation: bool = False) -> bool:
    """Whether a hop carries values on (DIRECT, or no transformation named), not masked; an aggregation unless
    ``stop_at_aggregation``."""
    if hop.masked:
        return False
    kinds = [part.split("/", 1) for part in hop.transformation.split(",") if part]
    if not kinds:
        return True
    direct = [kind for kind in kinds if kind[0].upper() == "DIRECT"]
    if not direct:
        return False
    return not (stop_at_aggregation and all(len(k) > 1 and k[1].upper().startswith("AGGREGATION") for k in direct))


def sensitive_columns(driver: Driver, tags: Iterable[str] = DEFAULT_TAGS, *, depth: int = DEFAULT_DEPTH,
                      stop_at_aggregation: bool = False, as_of: str | None = None,
                      timeout: float | None = DEFAULT_TIMEOUT) -> tuple[list[TaggedColumn], bool]:
    """Every column a wanted tag reaches (origins first, then nearest first) and whether the answer was cut."""
    wanted = {tag.strip().lower() for tag in tags if tag.strip()}
    depth = _checked_depth(depth)
    deadline = None if timeout is None else time.monotonic() + timeout
    with driver.session(default_access_mode=READ_ACCESS) as session:
        tagged = [tuple(row) for row in session.run(Query(_TAGGED, timeout=timeout), limit=MAX_TAGGED_DATASETS,
                                                    keys=_TAG_FACETS).values()]
    cut = len(tagged) >= MAX_TAGGED_DATASETS
    origins: list[tuple[str, str, str, str]] = []  # (namespace, name, field, tag)
    whole: list[tuple[str, str, str]] = []  # datasets tagged as a whole: (namespace, name, tag)
    for namespace, name, facet_json in tagged:
        for item in facet_tags(facet_json):
            for tag in sorted(tag_names(item) & wanted):
                if isinstance(item.get("field"), str) and item["field"]:
                    origins.append((namespace, name, item["field"], tag))
                else:
                    whole.append((namespace, name, tag))
    if whole:
        with driver.session(default_access_mode=READ_ACCESS) as session:
            columns = session.run(Query(_COLUMNS_OF, timeout=timeout), limit=MAX_ORIGIN_COLUMNS + 1, datasets=[
                [stored_key(ns), stored_key(nm)] for ns, nm, _tag in whole]).values()
        cut = cut or len(columns) > MAX_ORIGIN_COLUMNS
        tags_of = {}
        for ns, nm, tag in whole:
            tags_of.setdefault((stored_key(ns), stored_key(nm)), []).append((ns, nm, tag))
        for key_ns, key_nm, column in columns[:MAX_ORIGIN_COLUMNS]:
            for ns, nm, tag in tags_of.get((key_ns, key_nm), []):
                origins.append((ns, nm, column, tag))
    origins = sorted(set(origins))
    starts = [Start(ns, nm, column, str(index)) for index, (ns, nm, column, _tag) in enumerate(origins)]
    reached, walk_cut = walk_columns(driver, starts, depth, MAX_REACHED_PER_ORIGIN, deadline,
                                     follow=lambda hop: carries(hop, stop_at_aggregation), dependents=False,
                                     as_of=as_of) if starts else ({}, set())
    out = [TaggedColumn(ns, nm, column, tag, "origin", (ns, nm, column)) for ns, nm, column, tag in origins]
    for index, (ns, nm, column, tag) in enumerate(origins):
        for consumer in reached.get(str(index), []):
            status = _status(consumer, stop_at_aggregation)
            if status is not None:
                end = consumer.end
                out.append(TaggedColumn(end.namespace, end.name, end.field or "", tag, status, (ns, nm, column),
                                        consumer.path))
    return _with_clearance(driver, out, timeout), cut or bool(walk_cut)


def _status(consumer: Consumer, stop_at_aggregation: bool) -> str | None:
    """``derived`` when every hop carries, ``masked`` when the last one masks (the walk stops there); None for a
    column reached through a hop that carries no values (INDIRECT), which the tag does not reach."""
    *before, last = consumer.path
    if not all(carries(hop, stop_at_aggregation) for hop in before):
        return None
    if last.masked:
        return "masked"
    return "derived" if carries(last, stop_at_aggregation) else None


def _with_clearance(driver: Driver, columns: list[TaggedColumn], timeout: float | None) -> list[TaggedColumn]:
    datasets = sorted({(c.namespace, c.name) for c in columns})
    if not datasets:
        return columns
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = session.run(Query(_TAGS_OF, timeout=timeout), keys=_TAG_FACETS, datasets=[
            [stored_key(ns), stored_key(nm)] for ns, nm in datasets]).values()
    tags_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for ns, nm, text in rows:
        tags_of.setdefault((ns, nm), []).extend(facet_tags(text))
    return [TaggedColumn(c.namespace, c.name, c.field, c.tag, c.status, c.origin, c.path,
                         cleared_for(tags_of.get((stored_key(c.namespace), stored_key(c.name)), []), c.tag))
            for c in columns]


def dataset_tags(driver: Driver, namespace: str, name: str, timeout: float | None = DEFAULT_TIMEOUT
                 ) -> dict[str, list[dict[str, Any]]]:
    """A dataset's tags by facet: ``tags`` (its producers') and ``kafkaLineage_tags`` (set through the API)."""
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = session.run(Query("UNWIND $keys AS key MATCH (f:Facet {of: 'Dataset', key: key, namespace: $namespace, "
                                 "name: $name}) RETURN key, f.json", timeout=timeout), keys=_TAG_FACETS,
                           namespace=stored_key(namespace), name=stored_key(name)).values()
    found = {key: facet_tags(text) for key, text in rows}
    return {key: found.get(key, []) for key in _TAG_FACETS}
