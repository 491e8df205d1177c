"""DeadLetter records (``schemas/avro/dead_letter.avsc``): the original bytes, where they came from, and why."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def dead_letter(
    *,
    stage: str,
    error_class: str,
    error_message: str,
    key: bytes | None = None,
    value: bytes | None = None,
    headers: Iterable[tuple[str, bytes | None]] = (),
    source_topic: str | None = None,
    source_partition: int | None = None,
    source_offset: int | None = None,
    origin: str | None = None,
    failed_at_ms: int | None = None,
) -> dict[str, Any]:
    return {
        "key": key,
        "value": value,
        "headers": [{"key": name, "value": data} for name, data in headers],
        "sourceTopic": source_topic,
        "sourcePartition": source_partition,
        "sourceOffset": source_offset,
        "origin": origin,
        "stage": stage,
        "errorClass": error_class,
        "errorMessage": error_message[:10_000],  # a reason, not a second copy of a huge payload
        "failedAt": failed_at_ms if failed_at_ms is not None else int(time.time() * 1000),
    }
