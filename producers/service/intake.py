"""The intake rules for foreign OpenLineage JSON: what the HTTP collector, the Kafka bridge and ``lineage emit`` take
onto the events topic, alike. Strict JSON (no NaN or Infinity, no overflowing numbers, bounded nesting), and each
event encoded or refused with a reason (``invalid``, ``unencodable``, ``too_large`` for Kafka's record limit)
before anything of its request or file is produced.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_lineage.producers.client.publisher import PublishError
from kafka_lineage.runtime.kafka_io import RECORD_MAX_BYTES
from kafka_lineage.schemas.openlineage import InvalidEvent

log = logging.getLogger(__name__)
# librdkafka refuses (MSG_SIZE_TOO_LARGE, raised synchronously by produce) a record whose key + value + v2 record
# framing (at most 36 bytes) exceeds the producer's message.max.bytes (kafka_io.RECORD_MAX_BYTES).
RECORD_FRAMING_BYTES = 64


class NotJSON(ValueError):
    """Text that Python's json module would accept but that is not JSON the pipeline can carry."""


def _refuse_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 → inf: republished, it would be written as the non-JSON literal Infinity
        raise NotJSON(f"number {text} is too large for a 64-bit float")
    return value


# ``strict_json``'s rules as a decoder, for reading a large array element by element (``raw_decode``).
STRICT_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def strict_json(data: str | bytes) -> Any:
    """``json.loads`` without Python's extensions: NaN, Infinity and -Infinity (and numbers that overflow to
    infinity) are refused, since the facet JSON text they would be republished as is unreadable to strict readers
    (Jackson, JSON.parse); nesting deeper than the interpreter's recursion limit is refused instead of raising
    RecursionError. Every refusal is a ValueError (JSONDecodeError or NotJSON)."""
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise NotJSON("JSON nested too deeply") from None


def message_max_bytes() -> int:
    """The largest record the events producer takes (librdkafka's message.max.bytes)."""
    return RECORD_MAX_BYTES


def oversize(record: tuple[bytes, bytes], limit: int) -> str | None:
    """Why Kafka would refuse ``record`` (key, value) for its size, or None. Checked before anything of a request or
    batch is produced: librdkafka raises on such a record in the middle of producing the others."""
    size = len(record[0]) + len(record[1]) + RECORD_FRAMING_BYTES
    if size <= limit:
        return None
    return f"event is {size:,} bytes as a Kafka record, above the limit of {limit:,} bytes per record"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one foreign event cannot go onto the events topic: ``kind`` is ``invalid`` (not an OpenLineage event we
    accept), ``unencodable`` (a failure of ours on it: a retry would fail alike) or ``too_large``."""

    kind: str
    reason: str


def encode_or_refuse(encode: Callable[[Any], tuple[bytes, bytes]], event: Any, limit: int
                     ) -> tuple[bytes, bytes] | Refusal:
    """The event's record (key, value), or why it cannot be one. PublishError (the registry cannot be asked)
    propagates: nothing is decided about the event then, and each caller says how to retry."""
    try:
        record = encode(event)
    except InvalidEvent as exc:
        return Refusal("invalid", str(exc))
    except RecursionError:  # parsed, but nested too deeply to validate or encode
        return Refusal("invalid", "event: nested too deeply")
    except PublishError:
        raise
    except Exception as exc:  # a failure of ours on this one event: reported with it, the others go on
        log.exception("an event could not be encoded")
        return Refusal("unencodable", f"cannot be encoded ({type(exc).__name__}: {str(exc)[:200]})")
    reason = oversize(record, limit)
    return record if reason is None else Refusal("too_large", reason)
