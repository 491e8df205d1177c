"""Tags people and tools set on datasets and columns (the API, dbt's column tags), recorded as OpenLineage events.

A ``kafkaLineage_tags`` dataset facet holds a dataset's whole list of such tags, items shaped as OpenLineage's own
``tags`` facet's (``key``, ``value``, ``source``, ``field`` for a column's). It is a facet of its own so that a
producer's ``tags`` facet (latest wins) and the tags set here never overwrite each other; readers take both. Each
change is a DatasetEvent carrying the new whole list on the events topic: the graph is rebuilt with it by a replay,
and its history is the topic's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kafka_lineage.schemas.limits import MAX_FIELD_PATH_CHARS, MAX_NAME_CHARS

TAGS_FACET = "kafkaLineage_tags"
SCHEMA_URL = "https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/TagsDatasetFacet.json"
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/0.1.0/schemas/tags.py"
DATASET_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
MAX_TAGS = 1000  # per dataset, columns' included
MAX_KEY_CHARS, MAX_VALUE_CHARS = 256, 1024


class BadTag(ValueError):
    """A tag that cannot be recorded; the message says why."""


def checked_tag(item: Any, source: str = "USER") -> dict[str, str]:
    """A tag item as recorded: ``key`` (1-256 characters), ``value`` (default "true"), ``source``, ``field``."""
    if not isinstance(item, dict):
        raise BadTag(f"a tag is an object with a key, got {str(item)[:100]!r}")
    key, value, field = item.get("key"), item.get("value", "true"), item.get("field")
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        raise BadTag(f"a tag's key is text of 1-{MAX_KEY_CHARS} characters, got {str(key)[:100]!r}")
    if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
        raise BadTag(f"a tag's value is text of at most {MAX_VALUE_CHARS} characters, got {str(value)[:100]!r}")
    if field is not None and (not isinstance(field, str) or not field or len(field) > MAX_FIELD_PATH_CHARS):
        raise BadTag(f"a tag's field is a column name of 1-{MAX_FIELD_PATH_CHARS} characters, got "
                     f"{str(field)[:100]!r}")
    tag = {"key": key.strip(), "value": value, "source": str(item.get("source") or source)[:MAX_KEY_CHARS]}
    return {**tag, "field": field} if field else tag


def merged(current: Iterable[dict[str, Any]], added: Iterable[dict[str, Any]] = (),
           removed: Iterable[tuple[str, str | None]] = ()) -> list[dict[str, str]]:
    """``current`` with ``added`` in (a tag of the same key and field replaced) and ``removed`` (key, field) out."""
    tags = {(tag["key"], tag.get("field")): tag for tag in current}
    for tag in added:
        tags[(tag["key"], tag.get("field"))] = tag
    for key in removed:
        tags.pop(key, None)
    if len(tags) > MAX_TAGS:
        raise BadTag(f"a dataset holds at most {MAX_TAGS} tags")
    return sorted(tags.values(), key=lambda tag: (tag.get("field") or "", tag["key"]))


def tags_event(namespace: str, name: str, tags: Sequence[dict[str, str]], event_time: str,
               producer: str = PRODUCER) -> dict[str, Any]:
    """The DatasetEvent recording ``tags`` as the dataset's whole list of tags set here."""
    if not namespace or not name or len(namespace) > MAX_NAME_CHARS or len(name) > MAX_NAME_CHARS:
        raise BadTag("a dataset needs a namespace and a name")
    facet = {"_producer": producer, "_schemaURL": SCHEMA_URL, "tags": list(tags)}
    return {"eventTime": event_time, "producer": producer, "schemaURL": DATASET_EVENT_SCHEMA,
            "dataset": {"namespace": namespace, "name": name, "facets": {TAGS_FACET: facet}}}
