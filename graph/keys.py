"""How the graph keys its nodes and compares values. Pure.

Node keys (``stored_key``): a namespace, name or field over ``KEY_MAX_BYTES`` is stored by a hash, so Neo4j's
uniqueness indexes take it. Times (``utc_time``): every eventTime is normalized to UTC
``YYYY-MM-DDTHH:MM:SS.ffffffZ``, which sorts chronologically, so times are compared as strings. Run states
(``state_rank``) only move forward. Values stored or hashed are written as canonical JSON (``canonical_json``).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from kafka_lineage.schemas.openlineage import lifecycle_rank

# --- times and ranks -----------------------------------------------------------------------------------------------
NO_TIME_MAX = ""  # a missing time never wins a "latest" comparison …
NO_TIME_MIN = "~"  # … nor an "earliest" one ("~" sorts after every digit)
_STATEFUL = frozenset(("START", "RUNNING", "COMPLETE", "FAIL", "ABORT"))
TERMINAL = frozenset(("COMPLETE", "FAIL", "ABORT"))


def utc_time(value: Any) -> str | None:
    """An ISO-8601 time as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (sortable as a string); None if unusable.

    Offsets and ``Z`` are honoured, no offset means UTC (as ``processors.ordering`` reads it), digits beyond
    microseconds are truncated.
    """
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00-01:00 and the like
            return None
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def state_rank(event_type: Any) -> int | None:
    """START=0, RUNNING=1, COMPLETE/FAIL/ABORT=2 (``lifecycle_rank``); None for OTHER or no type: no state change."""
    return lifecycle_rank(event_type) if event_type in _STATEFUL else None


# --- node keys ------------------------------------------------------------------------------------------------------
# Neo4j's range indexes (behind the uniqueness constraints) refuse keys over ~8 KB for the whole composite key, and a
# Field is keyed by three strings: a namespace, name or field over KEY_MAX_BYTES is stored by a hash instead.
KEY_MAX_BYTES = 2048
_KEY_PREFIX_CHARS = 256  # the start of the value is kept in the key, readable in Neo4j Browser
_KEY_MARK = "#sha256:"
_HASHED_KEY = re.compile(r"#sha256:[0-9a-f]{64}\Z")


def may_be_stored_by_hash(value: str) -> bool:
    """False for every value ``stored_key`` keeps as it is (True for every stored hash, and for a few values that
    merely read like one)."""
    return _KEY_MARK in value


def stored_key(value: str) -> str:
    """What a node stores in a key property (``namespace``, ``name``, ``field``) for ``value``: the value itself, or
    for a value over ``KEY_MAX_BYTES`` UTF-8 bytes (or one that reads like such a key, so no name can take another's
    node) its first 256 characters + ``#sha256:`` + the SHA-256 of the whole value. The whole value is then kept in
    ``fullNamespace``/``fullName``/``fullField`` (not indexed). Look a node up by ``stored_key(name)``; show
    ``coalesce(n.fullName, n.name)``. Ordinary values are their own key: the graph and its fingerprint do not change.
    """
    if len(value) <= KEY_MAX_BYTES // 4 and _KEY_MARK not in value:  # at most 4 bytes a character: short enough
        return value
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= KEY_MAX_BYTES and not _HASHED_KEY.search(value):
        return value
    return f"{value[:_KEY_PREFIX_CHARS]}{_KEY_MARK}{hashlib.sha256(data).hexdigest()}"


# --- small pure helpers --------------------------------------------------------------------------------------------
# one encoder: json.dumps with these options makes one per call
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Canonical JSON (sorted keys) for values stored or hashed by this module."""
    return _CANONICAL.encode(value)


def value_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]
