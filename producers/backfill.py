"""``lineage emit FILE``: backfill OpenLineage events from NDJSON (one event per line) onto the events topic.

Every line is accounted for: published (acknowledged by Kafka), or reported with its line number and the reason.
Blank lines are skipped; ``.gz`` files are read compressed; ``-`` reads standard input.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kafka_lineage.producers.publisher import EventPublisher, PublishError
from kafka_lineage.schemas.openlineage import InvalidEvent

BATCH = 1000


@dataclass
class BackfillReport:
    published: int = 0
    problems: list[str] = field(default_factory=list)  # "line N: reason"

    @property
    def ok(self) -> bool:
        return not self.problems


def parse_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, event, None) per JSON line, or (line number, None, reason) when it is not JSON."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield number, None, f"not valid JSON: {exc}"


def open_source(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    if not Path(path).is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8")
    return open(path, encoding="utf-8")


def backfill(lines: Iterable[str], publisher: EventPublisher,
             progress: Callable[[int, int], None] | None = None) -> BackfillReport:
    report = BackfillReport()
    batch: list[tuple[bytes, bytes]] = []
    batch_lines: list[int] = []

    def flush() -> None:
        try:
            report.published += publisher.send(batch).result()
        except PublishError as exc:
            report.problems.append(f"lines {batch_lines[0]}-{batch_lines[-1]}: not acknowledged by Kafka ({exc})")
        batch.clear()
        batch_lines.clear()
        if progress:
            progress(report.published, len(report.problems))

    for number, event, problem in parse_lines(lines):
        if problem is None:
            try:
                batch.append(publisher.encode(event))
                batch_lines.append(number)
            except InvalidEvent as exc:
                problem = f"invalid OpenLineage event: {exc}"
        if problem is not None:
            report.problems.append(f"line {number}: {problem}")
        if len(batch) >= BATCH:
            flush()
    if batch:
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
