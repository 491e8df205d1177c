"""``lineage emit FILE``: backfill OpenLineage events from NDJSON (one event per line) onto the events topic.

Every line is accounted for: published (acknowledged by Kafka), or reported with its line number and the reason.
Blank lines are skipped; ``.gz`` files are read compressed; ``-`` reads standard input. A file that cannot be read
to its end (a truncated or corrupt ``.gz``) still has the good lines before the damage published; the report's
``failure`` says where reading stopped.

The JSON, encoding and size rules here (``strict_json``, ``encode_or_refuse``, ``oversize``) are shared with the HTTP
collector and the Kafka bridge: all take foreign JSON onto the events topic, and all must refuse what the rest of
the pipeline cannot carry, alike.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaException

from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.runtime.kafka_io import RECORD_MAX_BYTES
from kafka_lineage.schemas.openlineage import InvalidEvent

log = logging.getLogger(__name__)
BATCH = 1000
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


@dataclass
class BackfillReport:
    published: int = 0
    problems: list[str] = field(default_factory=list)  # "line N: reason"
    failure: str | None = None  # the input could not be read to its end: where and why

    @property
    def ok(self) -> bool:
        return not self.problems and self.failure is None


def parse_lines(lines: Iterable[bytes | str]) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, event, None) per JSON line, or (line number, None, reason) when it is not JSON.

    Lines are bytes (decoded here, one at a time, so that one line that is not UTF-8 is reported by number instead
    of stopping the reader) or already decoded text."""
    for number, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:  # a byte-order mark may open the file (as the collector accepts it on a body)
                line = line.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not valid UTF-8: {exc}"
                continue
        if not line.strip():
            continue
        try:
            yield number, strict_json(line), None
        except ValueError as exc:
            yield number, None, f"not valid JSON: {exc}"


def open_source(path: str) -> IO[bytes]:
    """The input as bytes, lines split on \\n only (NDJSON), decompressed if it is a .gz file."""
    if path == "-":
        return sys.stdin.buffer
    if not Path(path).is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.endswith(".gz"):
        return gzip.open(path)
    return open(path, "rb")


def backfill(lines: Iterable[bytes | str], publisher: EventPublisher,
             progress: Callable[[int, int], None] | None = None) -> BackfillReport:
    report = BackfillReport()
    batch: list[tuple[bytes, bytes]] = []
    batch_lines: list[int] = []
    limit = message_max_bytes()
    number = 0

    def flush() -> None:
        try:
            report.published += publisher.send(batch).result()
        except (PublishError, KafkaException) as exc:
            report.problems.append(f"lines {batch_lines[0]}-{batch_lines[-1]}: not acknowledged by Kafka ({exc})")
        batch.clear()
        batch_lines.clear()
        if progress:
            progress(report.published, len(report.problems))

    try:
        for number, event, problem in parse_lines(lines):
            if problem is None:
                try:
                    outcome = encode_or_refuse(publisher.encode, event, limit)
                except PublishError as exc:  # the registry could not be asked: this line is not published
                    problem = f"not published: {exc}"
                else:
                    if isinstance(outcome, Refusal):
                        problem = (f"invalid OpenLineage event: {outcome.reason}" if outcome.kind == "invalid"
                                   else outcome.reason)  # too large, or cannot be encoded
                    else:
                        batch.append(outcome)
                        batch_lines.append(number)
            if problem is not None:
                report.problems.append(f"line {number}: {problem}")
            if len(batch) >= BATCH:
                flush()
    except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz, a read error: stop reading there
        report.failure = (f"cannot be read after line {number}" if number else "cannot be read") + f": {exc}"
    if batch:  # the good lines read before a failure are still published
        flush()
    return report


def progress_printer(stream: IO[str] = sys.stderr, every: float = 1.0) -> Callable[[int, int], None]:
    started = last = time.monotonic()

    def show(published: int, problems: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= every:
            last = now
            rate = published / max(now - started, 1e-9)
            print(f"  {published} published, {problems} problems, {rate:,.0f} events/s", file=stream, flush=True)

    return show
