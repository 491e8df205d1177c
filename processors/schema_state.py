"""The per-dataset schema state of drift detection, as table entries of bounded size.

The state of a dataset is its last schema: a *head* entry under ``namespace/name`` with the schema's version hash and
eventTime, plus the fields drift detection compares (name, type, nullability, nested fields — descriptions and other
keys are not drift and are not kept). A schema whose fields fit ``CHUNK_CHARS`` of JSON is kept in the head; a wider
one (tables with thousands of columns) is split into chunk entries keyed by the dataset, the version and the chunk
number, written before the head and in the same changelog partition, so a reader that sees the head has seen its
chunks. Every entry is thus at most about ``CHUNK_CHARS`` characters, well under a changelog record's limit, however
wide the table (its field count is bounded at validation).

Heads written before this layout (``{"fields": [...], "eventTime": ...}``) are still read.

With the event-time history (``schemas/schema_history``), the head keeps the dataset's history
(``history``: [eventTime, version] oldest first, ``revealed``, ``truncated``) and the newest version and time, and
every version in the history has its fields in a *version entry* of its own (``version_entries``: inline, or
chunked as above), written before the head and deleted after it once the version leaves the history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kafka_lineage.schemas.schema_diff import schema_version

CHUNK_CHARS = 256 * 1024
_KEPT = ("name", "type", "nullable")
_encode = json.JSONEncoder(separators=(",", ":")).encode  # ASCII, like the table's serializer writes


def drift_fields(fields: list[Any]) -> list[Any]:
    """The parts of schema facet fields that drift detection compares (nested fields included)."""
    out = []
    for field in fields:
        if not isinstance(field, dict):
            continue
        kept = {key: field[key] for key in _KEPT if key in field}
        nested = field.get("fields")
        if isinstance(nested, list) and nested:
            kept["fields"] = drift_fields(nested)
        out.append(kept)
    return out


def chunk_key(key: str, version: str, index: int) -> str:
    return f"{key}\x1f{version}\x1f{index}"


def schema_entries(key: str, fields: list[Any], event_time: str | None, version: str) -> dict[str, Any]:
    """The table entries that store ``fields`` as the dataset's schema: chunks first, the head last."""
    kept = drift_fields(fields)
    head: dict[str, Any] = {"version": version, "eventTime": event_time}
    sizes = [len(_encode(field)) + 1 for field in kept]
    if sum(sizes) <= CHUNK_CHARS:
        head["fields"] = kept
        return {key: head}
    entries: dict[str, Any] = {}
    chunk: list[Any] = []
    chars = 0
    for field, size in zip(kept, sizes, strict=True):
        if chunk and chars + size > CHUNK_CHARS:
            entries[chunk_key(key, version, len(entries))] = chunk
            chunk, chars = [], 0
        chunk.append(field)
        chars += size
    entries[chunk_key(key, version, len(entries))] = chunk
    head["chunks"] = len(entries)
    entries[key] = head
    return entries


def head_version(head: dict[str, Any]) -> str:
    """The version of a stored head (a head of the earlier layout is hashed)."""
    version = head.get("version")
    return version if isinstance(version, str) else schema_version(head.get("fields") or [])


def stored_fields(table: Mapping[str, Any], key: str, head: dict[str, Any]) -> list[Any] | None:
    """The fields a head stands for, or None if one of its chunks is missing."""
    if "chunks" not in head:
        return head.get("fields") or []
    fields: list[Any] = []
    for index in range(int(head["chunks"])):
        chunk = table.get(chunk_key(key, head["version"], index))
        if not isinstance(chunk, list):
            return None
        fields += chunk
    return fields


def replaced_chunks(key: str, head: dict[str, Any] | None) -> list[str]:
    """The chunk keys of a head that is being replaced (to be deleted after the new head)."""
    if not head or "chunks" not in head:
        return []
    return [chunk_key(key, head["version"], index) for index in range(int(head["chunks"]))]


def version_key(key: str, version: str) -> str:
    return f"{key}\x1f{version}"


def version_entries(key: str, fields: list[Any], version: str) -> dict[str, Any]:
    """The entries that keep one version's fields: chunks first (wide schemas), the version entry last."""
    entries = schema_entries(key, fields, None, version)
    head = entries.pop(key)
    entries[version_key(key, version)] = {"fields": head["fields"]} if "fields" in head else {"chunks": head["chunks"]}
    return entries


def version_fields(table: Mapping[str, Any], key: str, version: str) -> list[Any] | None:
    """A version's fields from its version entry, or None if the entry or one of its chunks is missing."""
    entry = table.get(version_key(key, version))
    if not isinstance(entry, dict):
        return None
    return stored_fields(table, key, {**entry, "version": version})


def version_deletions(key: str, version: str, entry: Any) -> list[str]:
    """The keys that go when a version leaves the history: its chunks, then its version entry."""
    chunks = [chunk_key(key, version, index) for index in range(int(entry.get("chunks", 0)))] \
        if isinstance(entry, dict) else []
    return [*chunks, version_key(key, version)]
