"""The fault campaign's checks: functions from what was read back (topics, changelogs, committed offsets, the graph)
to a list of violations. Pure: the runner (``campaign.py``) reads, these judge.

1. exactly once: every accepted event (a distinct dedupe id on the events topic) is on the normalized topic once, as
   a committed record, or in the DLQ with a reason; nothing is there twice; every published event reached the topic;
2. dedupe table: every live id of the processor's ``dedupe`` table has its output (or its dead letter);
3. offsets: each events partition's committed offset (as sampled during the run) never moved back, and every source
   record below the final committed offset is accounted for: output from it, a dead letter for it, or a duplicate
   of an event that was output;
4. runs table: no held events left, and no run record but an ended run's marker (maxRank of COMPLETE/FAIL/ABORT,
   nothing held: kept until the TTL so that a worker taking the run over marks what still comes of it late);
5. lifecycle: per run, the normalized outputs that are not marked late are in lifecycle order in topic order;
6. graph and alerts: ``checker.check`` against the workload's ground truth (one alert per true schema change);
7. lag: the processor group's committed offsets at the events topic's end, the sinks' at the normalized topic's (a
   gap holding no readable committed record — a transaction marker — counts as none).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_lineage_devtools.checker import CheckReport

__all__ = [
    "CHECKS",
    "DeadLetterRecord",
    "OutputRecord",
    "SourceRecord",
    "Violation",
    "check_dedupe_table",
    "check_exactly_once",
    "check_graph",
    "check_hanging",
    "check_lag",
    "check_lifecycle",
    "check_offsets",
    "check_runs_table",
]

EXACTLY_ONCE, DEDUPE, OFFSETS, RUNS, LIFECYCLE, GRAPH, ALERTS, LAG = (
    "1 exactly-once", "2 dedupe-table", "3 offsets", "4 runs-table", "5 lifecycle", "6 graph", "6 alerts", "7 lag")
# Not a check of the seven but what explains their failures when it fires: a partition whose read_committed
# end stays behind its end after quiescence holds a transaction the broker never finished (markers not written)
HANGING = "8 hanging-txn"
HARNESS = "run"  # the run itself failed: a component ended by itself, a start timed out
CHECKS = (EXACTLY_ONCE, DEDUPE, OFFSETS, RUNS, LIFECYCLE, GRAPH, ALERTS, LAG, HANGING, HARNESS)


@dataclass(frozen=True, slots=True)
class Violation:
    check: str  # one of CHECKS
    message: str


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """A record of the events topic; ``dedupe_id`` None: it does not decode to a valid event (the DLQ's)."""

    partition: int
    offset: int
    dedupe_id: str | None


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A committed record of the normalized topic (its processing metadata and what the lifecycle check needs)."""

    partition: int
    offset: int
    dedupe_id: str
    source_partition: int | None
    source_offset: int | None
    late: bool = False
    run_id: str | None = None
    event_type: str | None = None


@dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    partition: int
    offset: int
    source_topic: str | None
    source_partition: int | None
    source_offset: int | None
    error_class: str
    error_message: str


def _where(records: Iterable[OutputRecord]) -> str:
    """Each record's partition/offset, and the events record it came from (the same one: a redelivery; another: a
    copy the dedupe missed)."""
    return ", ".join(f"{r.partition}/{r.offset} (from events {r.source_partition}/{r.source_offset})" for r in records)


def _dead_sources(dead_letters: Iterable[DeadLetterRecord], events_topic: str) -> dict[tuple[int, int], str]:
    """(source partition, offset) of the events topic → the dead letter's reason."""
    return {(d.source_partition, d.source_offset): f"{d.error_class}: {d.error_message}" for d in dead_letters
            if d.source_topic in (None, events_topic) and d.source_partition is not None
            and d.source_offset is not None and (d.error_class or d.error_message)}


def check_exactly_once(sources: Sequence[SourceRecord], outputs: Sequence[OutputRecord],
                       dead_letters: Sequence[DeadLetterRecord], events_topic: str,
                       published: Iterable[str] = ()) -> list[Violation]:
    """Check 1. ``published``: the dedupe ids of the events the publisher had acknowledged (the workload's)."""
    violations = []
    by_id: dict[str, list[OutputRecord]] = defaultdict(list)
    for record in outputs:
        by_id[record.dedupe_id].append(record)
    dead = _dead_sources(dead_letters, events_topic)
    accepted: dict[str, list[SourceRecord]] = defaultdict(list)
    for source in sources:
        if source.dedupe_id is None:
            if (source.partition, source.offset) not in dead:
                violations.append(Violation(EXACTLY_ONCE, f"events {source.partition}/{source.offset} does not decode "
                                                          "and has no dead letter"))
        else:
            accepted[source.dedupe_id].append(source)
    on_topic = set(accepted)
    for identity in dict.fromkeys(published):
        if identity not in on_topic:
            violations.append(Violation(EXACTLY_ONCE, f"published event {identity[:16]} is not on the events topic"))
    for identity, copies in accepted.items():
        found = by_id.get(identity, [])
        if not found:
            if not any((copy.partition, copy.offset) in dead for copy in copies):
                where = ", ".join(f"{copy.partition}/{copy.offset}" for copy in copies)
                violations.append(Violation(EXACTLY_ONCE, f"event {identity[:16]} (events {where}) has no normalized "
                                                          "record and no dead letter"))
        elif len(found) > 1:
            violations.append(Violation(EXACTLY_ONCE, f"event {identity[:16]} is on the normalized topic "
                                                      f"{len(found)} times: {_where(found)}"))
    for identity, found in by_id.items():
        if identity not in accepted:
            violations.append(Violation(EXACTLY_ONCE, f"normalized {_where(found)} has dedupe id {identity[:16]}, "
                                                      "of no event on the events topic"))
    return violations


def check_dedupe_table(live_ids: Iterable[str], outputs: Sequence[OutputRecord], sources: Sequence[SourceRecord],
                       dead_letters: Sequence[DeadLetterRecord], events_topic: str) -> list[Violation]:
    """Check 2: a live dedupe id without an output (nor a dead letter of its source) marks an event as done that
    never left: lost for good."""
    output_ids = {record.dedupe_id for record in outputs}
    dead = _dead_sources(dead_letters, events_topic)
    dead_ids = {source.dedupe_id for source in sources if (source.partition, source.offset) in dead}
    return [Violation(DEDUPE, f"dedupe id {identity[:16]} is live in the dedupe table but has no normalized record")
            for identity in live_ids if identity not in output_ids and identity not in dead_ids]


def check_offsets(samples: Sequence[tuple[float, int, int]], final_committed: Mapping[int, int],
                  sources: Sequence[SourceRecord], outputs: Sequence[OutputRecord],
                  dead_letters: Sequence[DeadLetterRecord], events_topic: str) -> list[Violation]:
    """Check 3. ``samples``: (seconds into the run, partition, committed offset) in sampling order;
    ``final_committed``: partition → the group's committed offset at the end."""
    violations = []
    last: dict[int, tuple[float, int]] = {}  # each partition's previous sample: one violation per step back
    for instant, partition, offset in samples:
        before = last.get(partition)
        if before is not None and offset < before[1]:
            violations.append(Violation(OFFSETS, f"events partition {partition}: committed offset went back from "
                                                 f"{before[1]} ({before[0]:.1f}s) to {offset} ({instant:.1f}s)"))
        last[partition] = (instant, offset)
    for partition, offset in sorted(final_committed.items()):
        before = last.get(partition)
        if before is not None and offset < before[1]:
            violations.append(Violation(OFFSETS, f"events partition {partition}: final committed offset {offset} is "
                                                 f"below {before[1]}, committed at {before[0]:.1f}s"))
    from_source = {(record.source_partition, record.source_offset) for record in outputs}
    output_ids = {record.dedupe_id for record in outputs}
    dead = _dead_sources(dead_letters, events_topic)
    for source in sources:
        if source.offset >= final_committed.get(source.partition, 0):
            continue
        key = (source.partition, source.offset)
        if key in from_source or key in dead or (source.dedupe_id is not None and source.dedupe_id in output_ids):
            continue
        violations.append(Violation(OFFSETS, f"events {source.partition}/{source.offset} is below the committed "
                                             f"offset {final_committed[source.partition]} but accounted for nowhere "
                                             f"(dedupe id {str(source.dedupe_id)[:16]})"))
    return violations


def check_runs_table(live_runs: Mapping[str, Any]) -> list[Violation]:
    """Check 4: ``live_runs``: each runs-table key whose last changelog value is not a tombstone → that value. Held
    events must all have left; what may stay (until the retention, by design) is a run's position marker: an ended
    run's, or that of a run its window opened without a START (``started`` false), whose START must come out late."""
    violations = []
    for key, value in sorted(live_runs.items()):
        held, marker = 0, False
        if isinstance(value, Mapping) and isinstance(value.get("order"), Mapping):
            order = value["order"]
            held = len(order.get("held") or ())
            rank = order.get("maxRank")
            marker = rank == _RANK["COMPLETE"] or (rank == _RANK["RUNNING"] and order.get("started") is False)
        if held or not marker:
            violations.append(Violation(RUNS, f"run {key} still has a runs-table record ({held} held events)"))
    return violations


_RANK = {"START": 0, "RUNNING": 1, "OTHER": 1, "COMPLETE": 2, "FAIL": 2, "ABORT": 2}


def _rank(record: OutputRecord) -> int:
    return _RANK.get(record.event_type or "OTHER", 1)


def check_lifecycle(outputs: Sequence[OutputRecord]) -> list[Violation]:
    """Check 5: per run, its non-late outputs (each dedupe id's first copy) never step back in the lifecycle
    START < RUNNING/OTHER < COMPLETE/FAIL/ABORT, in topic order (a run's records share a key: one partition)."""
    runs: dict[str, list[OutputRecord]] = defaultdict(list)
    seen: set[str] = set()
    for record in sorted(outputs, key=lambda r: (r.partition, r.offset)):
        if record.dedupe_id in seen:
            continue  # a copy: check 1's
        seen.add(record.dedupe_id)
        if record.run_id is not None and not record.late:
            runs[record.run_id].append(record)
    violations = []
    for run_id, records in runs.items():
        highest: OutputRecord | None = None  # the furthest the run has come
        for record in records:
            if highest is not None and _rank(record) < _rank(highest):
                violations.append(Violation(LIFECYCLE, f"run {run_id}: {record.event_type} at "
                                                       f"{record.partition}/{record.offset} (not late) after "
                                                       f"{highest.event_type} at {highest.partition}/{highest.offset}"))
            else:
                highest = record
    return violations


def check_graph(report: CheckReport, examples: int = 3) -> list[Violation]:
    """Check 6: each kind of the graph (and the alerts) that differs from the truth, with a few examples."""
    violations = []
    for kind, kind_report in report.kinds.items():
        if kind_report.ok:
            continue
        counts = kind_report.counts()
        shown = [*kind_report.missing[:examples], *kind_report.extra[:examples],
                 *(found for _expected, found in kind_report.wrong[:examples]),
                 *(row for row, _times in kind_report.duplicates[:examples])]
        violations.append(Violation(
            ALERTS if kind == "alerts" else GRAPH,
            f"{kind}: {counts['missing']} missing, {counts['extra']} extra, {counts['wrong']} wrong, "
            f"{counts['duplicates']} duplicated of {counts['expected']}; e.g. {shown[:examples]}"))
    return violations


def check_lag(group: str, topic: str, committed: Mapping[int, int | None], ends: Mapping[int, int],
              unread: Mapping[int, int]) -> list[Violation]:
    """Check 7 for one group on one topic: ``committed``/``ends`` per partition; ``unread``: per partition behind
    its end, the committed data records read from the committed offset (0: only transaction markers)."""
    violations = []
    for partition, end in sorted(ends.items()):
        offset = committed.get(partition)
        if offset is not None and offset >= end:
            continue
        records = unread.get(partition, 0)
        if records:
            violations.append(Violation(LAG, f"{group} on {topic}[{partition}]: committed "
                                             f"{'nothing' if offset is None else offset}, end {end}: "
                                             f"{records} committed records not consumed"))
    return violations


def count_by_check(violations: Iterable[Violation]) -> Counter[str]:
    return Counter(violation.check for violation in violations)


def check_hanging(topic: str, readable_ends: Mapping[int, int], ends: Mapping[int, int]) -> list[Violation]:
    """Check 8: each partition's end for read_committed readers (its last stable offset) equals its end once the
    pipeline is quiet; one behind it holds an open transaction that will never end (seen after a single broker's
    restart: the broker skipped the commit markers of partitions it had no leader for while shutting down), and
    every record after it is invisible to the pipeline."""
    return [Violation(HANGING, f"{topic}[{partition}]: read_committed readers stop at {readable_ends[partition]}, "
                               f"{end - readable_ends[partition]} records before its end {end} (a transaction "
                               "whose markers were never written)")
            for partition, end in sorted(ends.items()) if readable_ends.get(partition, end) < end]
