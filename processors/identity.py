"""Event identity for dedupe: OpenLineage events carry no id, so the identity is a hash of the whole event."""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring
from typing import Any

from kafka_lineage.schemas.openlineage import FacetCache

__all__ = ["canonical_json", "dedupe_id", "run_id"]

# One encoder, built once: json.dumps(**kwargs) builds a fresh JSONEncoder per call, which costs measurably here.
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=True)
_encode = _CANONICAL.encode
_NESTED = frozenset({"run", "job", "dataset", "inputs", "outputs"})  # where the event's facet maps are
_FACET_MAPS = frozenset({"facets", "inputFacets", "outputFacets"})


def dedupe_id(event: dict[str, Any], facets: FacetCache | None = None) -> str:
    """Hex SHA-256 of the event's canonical JSON (sorted keys, compact, UTF-8).

    The whole event is hashed, not just (runId, eventType, eventTime): exact repeats (client retries, replays)
    collide, while Spark's several START/RUNNING events of one run, which differ only in their accumulating facets,
    stay distinct. Key order is irrelevant; any difference in a value, facets included, is a different event.
    ``facets``: the cache the event was decoded with (same result, each distinct facet encoded once).
    """
    return hashlib.sha256(canonical_json(event, facets).encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(value: Any, facets: FacetCache | None = None) -> str:
    """``value`` as JSON with sorted keys, compact; with ``facets``, the cached objects' parts come from the cache.

    Assembled the way the encoder assembles it (``{`` sorted ``"key":value`` pairs ``}``), so the text is the same
    character for character: the walk only decides which parts come from the cache instead of the encoder.
    """
    if facets is None:
        return _encode(value)

    def canonical(item: Any) -> str:
        if type(item) is list:
            return "[" + ",".join([canonical(element) for element in item]) + "]"
        if type(item) is dict:  # a job or dataset of the cache: its text is computed once
            return facets.derived(item, "canonical", walk)
        return _encode(item)

    def walk(obj: dict[Any, Any]) -> str:
        try:
            keys = sorted(obj)
        except TypeError:
            return _encode(obj)  # the encoder's own error
        parts = []
        for key in keys:
            if type(key) is not str:
                return _encode(obj)  # the encoder's own rules for other keys
            item = obj[key]
            if type(item) is str:
                text = encode_basestring(item)
            elif key in _FACET_MAPS and type(item) is dict:
                text = facets.derived(item, "canonical", facet_map)
            elif key in _NESTED:
                text = canonical(item)
            else:
                text = _encode(item)
            parts.append(encode_basestring(key) + ":" + text)
        return "{" + ",".join(parts) + "}"

    def facet_map(obj: dict[Any, Any]) -> str:
        """``{name: facet}``: each facet's text from the cache (computed by the encoder once per facet)."""
        try:
            names = sorted(obj)
        except TypeError:
            return _encode(obj)
        parts = []
        for name in names:
            if type(name) is not str:
                return _encode(obj)
            parts.append(encode_basestring(name) + ":" + facets.canonical(obj[name]))
        return "{" + ",".join(parts) + "}"

    return canonical(value)


def run_id(event: dict[str, Any]) -> str | None:
    """The event's ``run.runId``, or None for DatasetEvent / JobEvent (or a run without a usable id). A DatasetEvent
    may carry a run (the spec allows it) but has no lifecycle: it is not held back for one."""
    if "dataset" in event and "job" not in event:
        return None
    run = event.get("run")
    if isinstance(run, dict):
        value = run.get("runId")
        if isinstance(value, str) and value:
            return value
    return None
