"""Facets as the graph keeps them: job and dataset facets as bounded JSON documents, run facets as bounded
JSON, and the values read from facets (statistics, assertion results, schema field paths, column-lineage
transformations). Pure; lenient about shapes (a malformed facet gives nothing, never an error).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_lineage.graph.batch import Row, RowBuilder
from kafka_lineage.graph.keys import NO_TIME_MAX, canonical_json, value_digest
from kafka_lineage.schemas.partitions import FACET_KEY as PARTITION_FACET


def as_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    # bool is an int in Python; a JSON true is not a row count
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# A run's facets are kept as JSON (the START event's, and the latest other event's) up to this size; past it the
# largest facets are left out, and ``_omitted`` names them with their sizes (a Spark plan can be megabytes).
RUN_FACETS_MAX_BYTES = 65_536


def run_facets_json(facets: Mapping[str, Any]) -> str:
    """``facets`` as canonical JSON of at most ``RUN_FACETS_MAX_BYTES`` UTF-8 bytes (largest facets left out)."""
    text = canonical_json(facets)
    if len(text) <= RUN_FACETS_MAX_BYTES // 4 or len(text.encode("utf-8", "surrogatepass")) <= RUN_FACETS_MAX_BYTES:
        return text
    sizes = {name: len(canonical_json(value).encode("utf-8", "surrogatepass")) for name, value in facets.items()}
    kept, omitted = dict(facets), {}
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        del kept[name]
        omitted[name] = sizes[name]
        text = canonical_json({**kept, "_omitted": omitted})
        if len(text.encode("utf-8", "surrogatepass")) <= RUN_FACETS_MAX_BYTES:
            break
    return text


# Facets the graph models itself rather than keeping as documents: a dataset's schema (SchemaVersion nodes) and
# column lineage (DERIVES_FROM/DEPENDS_ON edges), a run's (the run's JSON slots).
_MODELLED_FACETS = frozenset(("schema", "columnLineage", PARTITION_FACET))


def add_facet_documents(b: RowBuilder, of: str, namespace: str, name: str, facets: Mapping[str, Any],
                        time: str | None) -> None:
    """A ``facets`` row per facet of a job or dataset: the facet's JSON (``{key: facet}``, ``run_facets_json``
    bounded), latest eventTime wins; a facet sent with ``"_deleted": true`` is stored as deleted (null JSON), so an
    earlier value no longer shows and a later one shows again."""
    for key, facet in facets.items():
        if not isinstance(key, str) or key in _MODELLED_FACETS:
            continue
        done = b.documents.get((id(facet), key))
        if done is None or done[0] is not facet:
            deleted = isinstance(facet, dict) and facet.get("_deleted") is True
            text = None if deleted else run_facets_json({key: facet})
            # digested as property_group digests its values
            done = b.documents[(id(facet), key)] = (facet, text, value_digest({"json": text}))
        b.add("facets", {"of": of, "namespace": namespace, "name": name, "key": b.key(key),
                         "facet": {"order": f"{time or NO_TIME_MAX}|{done[2]}", "json": done[1]}})


def field_paths(fields: Any, prefix: str = "") -> list[str]:
    """Dotted names of schema facet fields, nested ones included: ``address``, ``address.city``."""
    paths: list[str] = []
    for item in as_list(fields):
        name = as_text(as_dict(item).get("name"))
        if name is None:
            continue
        paths.append(prefix + name)
        paths.extend(field_paths(item.get("fields"), prefix + name + "."))
    return paths


def transformation_text(entry: Any) -> str:
    """Column-lineage transformations compactly: ``DIRECT/IDENTITY,INDIRECT/FILTER``, with ``(masked)`` after one
    whose ``masking`` flag is set (``DIRECT/HASH(masked)``); "" when none are given.

    ``entry`` is an ``inputFields`` item; the facet's older field-level ``transformationType`` is the fallback.
    """
    parts = []
    for item in as_list(as_dict(entry).get("transformations")):
        kind, subtype = as_text(as_dict(item).get("type")), as_text(as_dict(item).get("subtype"))
        if kind:
            masked = "(masked)" if as_dict(item).get("masking") is True else ""
            parts.append((f"{kind}/{subtype}" if subtype else kind) + masked)
    return ",".join(parts)


def statistics(facet: Any) -> Row | None:
    facet = as_dict(facet)
    rows, size = as_int(facet.get("rowCount")), as_int(facet.get("size"))
    return None if rows is None and size is None else {"rowCount": rows, "bytes": size}


def facet_content(facet: Any) -> dict[str, Any]:
    """A facet without its ``_producer``/``_schemaURL``/``_deleted`` bookkeeping keys."""
    return {key: value for key, value in as_dict(facet).items() if not key.startswith("_")}


def assertion_results(facet: Any) -> tuple[list[str], list[str]]:
    """(failed, passed) assertion names of a ``dataQualityAssertions`` facet: ``assertion`` or
    ``assertion(column)``; an item without a boolean ``success`` decides nothing."""
    failed, passed = set(), set()
    for item in as_list(as_dict(facet).get("assertions")):
        name, column = as_text(as_dict(item).get("assertion")), as_text(as_dict(item).get("column"))
        success = as_dict(item).get("success")
        if name is not None and isinstance(success, bool):
            (passed if success else failed).add(f"{name}({column})" if column else name)
    return sorted(failed), sorted(passed)


# Who owns a job or dataset and how it is tagged, as alerts carry them for routing (a Slack channel per team): the
# names of an ``ownership`` facet's owners (``{"owners": [{"name": "team:payments", "type": "MAINTAINER"}]}``, a job's
# or a dataset's) and a dataset's own tags (not its columns'). Bounded, since every alert repeats them per node: a
# router needs a node's few teams, not a facet listing hundreds (20 owners of 256 characters on each of the default
# 200 impacted nodes add ~1 MB at most, well under the 8 MB record limit); a name longer than 256
# characters (a tag's key set through the API is at most that, schemas/tags.py) is left out, not cut: a cut name
# would route as another owner.
MAX_OWNERS = 20  # owners per node
MAX_TAGS = 50  # dataset-level tags of the alert's dataset
MAX_LABEL_CHARS = 256  # one owner's or tag's name
OWNERSHIP_FACET = "ownership"
TAG_FACETS = ("tags", "kafkaLineage_tags")  # producers' own, then those set through the API (schemas/tags.py)


def _bounded_unique(names: Iterable[str], limit: int) -> list[str]:
    """``names`` stripped, empty and over-long ones left out, each once (first place kept), at most ``limit``."""
    kept: dict[str, None] = {}
    for name in names:
        name = name.strip()
        if name and len(name) <= MAX_LABEL_CHARS:
            kept[name] = None
            if len(kept) >= limit:
                break
    return list(kept)


def facet_owners(facet: Any) -> list[str]:
    """The owner names of an ``ownership`` facet (deduplicated, in order, at most ``MAX_OWNERS``); a deleted or
    malformed facet, or malformed items, give nothing."""
    facet = as_dict(facet)
    if facet.get("_deleted") is True:
        return []
    return _bounded_unique((name for item in as_list(facet.get("owners"))
                            if (name := as_text(as_dict(item).get("name"))) is not None), MAX_OWNERS)


def tag_name(item: Any) -> str | None:
    """A dataset-level tag item's name, lower-cased: ``key``, or ``key:value`` when the value says more than the key
    (not empty, not ``true`` as the API's default, not the key again); None for a column's tag or a malformed item."""
    item = as_dict(item)
    key, value, field = item.get("key"), item.get("value"), item.get("field")
    if not isinstance(key, str) or not key.strip() or (field is not None and field != ""):
        return None
    key = key.strip().lower()
    value = value.strip().lower() if isinstance(value, str) else ""
    return f"{key}:{value}" if value and value not in ("true", key) else key


def facets_tags(facets: Iterable[Any]) -> list[str]:
    """The dataset-level tag names of tags facets (each ``{"tags": [...]}``), in order, each once, at most
    ``MAX_TAGS``; deleted and malformed facets give nothing."""
    names = (name for facet in facets if as_dict(facet).get("_deleted") is not True
             for item in as_list(as_dict(facet).get("tags")) if (name := tag_name(item)) is not None)
    return _bounded_unique(names, MAX_TAGS)


def document_facet(text: str | None, key: str) -> Any:
    """The facet ``key`` of a stored facet document (``{key: facet}``, ``add_facet_documents``); None for a deleted
    facet (null JSON), one stored only as its size (``_omitted``: over the document bound) or unreadable JSON."""
    try:
        document = json.loads(text) if text else None
    except ValueError:
        return None
    return document.get(key) if isinstance(document, dict) else None
