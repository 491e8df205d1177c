"""Event identity for dedupe: OpenLineage events carry no id, so the identity is a hash of the whole event."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["dedupe_id", "run_id"]

# One encoder, built once: json.dumps(**kwargs) builds a fresh JSONEncoder per call, which costs measurably here.
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=True)


def dedupe_id(event: dict[str, Any]) -> str:
    """Hex SHA-256 of the event's canonical JSON (sorted keys, compact, UTF-8).

    The whole event is hashed, not just (runId, eventType, eventTime): exact repeats (client retries, replays)
    collide, while Spark's several START/RUNNING events of one run, which differ only in their accumulating facets,
    stay distinct. Key order is irrelevant; any difference in a value, facets included, is a different event.
    """
    return hashlib.sha256(_CANONICAL.encode(event).encode("utf-8", "surrogatepass")).hexdigest()


def run_id(event: dict[str, Any]) -> str | None:
    """The event's ``run.runId``, or None for DatasetEvent / JobEvent (or a run without a usable id)."""
    run = event.get("run")
    if isinstance(run, dict):
        value = run.get("runId")
        if isinstance(value, str) and value:
            return value
    return None
