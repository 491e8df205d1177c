"""``lineage emit FILE``: send OpenLineage events from NDJSON (one event per line) onto the events topic.

Every line is accounted for: published (acknowledged by Kafka), or reported with its line number and the reason.
Blank lines are skipped; ``.gz`` files are read compressed; ``-`` reads standard input. A file that cannot be read
to its end (a truncated or corrupt ``.gz``) still has the good lines before the damage published; the report's
``failure`` says where reading stopped. Each event passes the intake rules (``intake``) the collector applies.
"""

from __future__ import annotations

import gzip
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaException

from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.producers.service.intake import Refusal, encode_or_refuse, message_max_bytes, strict_json

BATCH = 1000


@dataclass
class EmitReport:
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


def emit_lines(lines: Iterable[bytes | str], publisher: EventPublisher,
             progress: Callable[[int, int], None] | None = None) -> EmitReport:
    report = EmitReport()
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
