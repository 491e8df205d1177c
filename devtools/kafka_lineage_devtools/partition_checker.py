"""Compare the partitions the pipeline built with a partition workload's truth, through the product's own reads.

``read_partitions`` lists every dataset's partitions with ``graph.partitions.dataset_partitions`` and
``read_ready`` asks ``graph.partitions.ready`` for every (dataset, day) — what `lineage partitions` and
`lineage ready` answer. ``check_partitions`` (pure) lists every difference: a partition missing, extra, or with
another state / version count / latest version's run, rowCount, bytes, failed assertions / upstream
partitions read / landed flag; a ``ready`` answer or its missing list
that differs.

``run_partition_workload`` (`lineage workload --partitions`): publish the workload to a pipeline of its own
(processor and graph sink as real processes), wait until both have committed everything (consumer lag 0, twice in a
row; not "until the graph equals the truth", so a wrong graph fails in seconds), then check exactly. With
``kills`` (the fault suite: ``((0.5, "processor"), …)``) the processor or the graph sink is SIGKILLed that far
into the backfill's events and restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neo4j import Driver
from neo4j.exceptions import ServiceUnavailable, TransientError

from kafka_lineage.app.stage_groups import default_groups
from kafka_lineage.graph.backfill import fetch_facts, parse_day, plan
from kafka_lineage.graph.driver import driver_for
from kafka_lineage.graph.partitions import UnknownDataset, dataset_partitions, ready
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.runtime.status import collect_status
from kafka_lineage_devtools.faults import _Component, _publish, stop_components
from kafka_lineage_devtools.partition_workload import (
    BACKFILL_FACET,
    Key,
    PartitionState,
    PartitionTruth,
    PartitionWorkload,
    ReadyAnswer,
    backfill_closure,
    generate_partitions,
)
from kafka_lineage_devtools.processes import (
    ChildExited,
    pipeline_env,
    processor_process,
    sink_process,
    sleep_watching,
    wait_until,
)

__all__ = ["Mismatch", "PartitionReport", "check_partitions", "format_partition_report", "read_partitions",
           "read_ready", "run_partition_workload"]


# --- reading the graph (the product's read functions) ---------------------------------------------------------------
# Server-side timeout of one read: planning a question's Cypher the first time takes seconds (9 s seen while the
# sink writes), far above the answer itself; the reads' own 10 s default would fail the run, not measure anything.
READ_TIMEOUT = 60.0

def read_partitions(driver: Driver, truth: PartitionTruth) -> dict[Key, PartitionState]:
    """Every partition of the workload's datasets as `lineage partitions` shows it (a dataset not in the graph yet
    has none)."""
    found: dict[Key, PartitionState] = {}
    for namespace, name in truth.datasets:
        try:
            statuses = dataset_partitions(driver, namespace, name, timeout=READ_TIMEOUT)
        except UnknownDataset:
            continue
        for status in statuses:
            latest = status.latest
            version = latest.version if latest else None
            found[(namespace, name, status.facts.key)] = PartitionState(
                status.state, status.facts.version_count, version.row_count if version else None,
                tuple(sorted(version.failed)) if version else (), status.landed, version.run_id if version else None,
                version.bytes if version else None,
                tuple(sorted((up.namespace, up.name, up.key) for _, up in status.facts.reads)))
    return found


def read_ready(driver: Driver, truth: PartitionTruth, threads: int = 8) -> dict[Key, ReadyAnswer]:
    """`lineage ready` for every (dataset, day) of the truth (an unknown dataset: not ready, nothing listed)."""

    def ask(key: Key) -> tuple[Key, ReadyAnswer]:
        try:
            ok, missing, _ = ready(driver, *key, timeout=READ_TIMEOUT)
        except UnknownDataset:
            return key, ReadyAnswer(False, (("dataset", key[0], key[1], key[2], None),))
        items = sorted(((m["role"], m["namespace"], m["name"], m["key"], m["state"]) for m in missing),
                       key=lambda item: tuple("" if v is None else str(v) for v in item))
        return key, ReadyAnswer(ok, tuple(items))

    with ThreadPoolExecutor(threads) as pool:  # the driver is thread safe; each question is one read
        return dict(pool.map(ask, sorted(truth.ready)))


# --- comparing (pure) -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Mismatch:
    kind: str  # partition missing|extra|wrong, ready wrong, plan missing|extra|order
    key: Key
    expected: Any
    found: Any


@dataclass
class PartitionReport:
    partitions: int = 0  # expected
    ready_answers: int = 0  # expected (0: not checked)
    found_partitions: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.ready_answers > 0


def check_partitions(truth: PartitionTruth, partitions: Mapping[Key, PartitionState],
                     answers: Mapping[Key, ReadyAnswer] | None) -> PartitionReport:
    """Every difference between the truth and what the graph answered (``answers`` None: partitions only)."""
    report = PartitionReport(len(truth.partitions), len(truth.ready) if answers is not None else 0,
                             len(partitions))
    for key, want in sorted(truth.partitions.items()):
        got = partitions.get(key)
        if got is None:
            report.mismatches.append(Mismatch("partition missing", key, want, None))
        elif got != want:
            report.mismatches.append(Mismatch("partition wrong", key, want, got))
    report.mismatches += [Mismatch("partition extra", key, None, got) for key, got in sorted(partitions.items())
                          if key not in truth.partitions]
    if answers is not None:
        for key, want_answer in sorted(truth.ready.items()):
            got_answer = answers.get(key)
            if got_answer != want_answer:
                report.mismatches.append(Mismatch("ready wrong", key, want_answer, got_answer))
    return report


def check_plan(result: Mapping[str, Any], expected: set[Key]) -> list[Mismatch]:
    """``lineage backfill plan``'s answer against the true closure: the partitions its items rebuild, and stages in
    a valid order (every rebuilt input of an item is rebuilt in an earlier stage)."""
    stage_of: dict[Key, int] = {}
    items = [(stage["stage"], item) for stage in result["stages"] for item in stage["items"]]
    for number, item in items:
        for out in item["rebuild"]:
            stage_of[(out["namespace"], out["name"], out.get("key") or "")] = number
    mismatches = [Mismatch("plan missing", key, "rebuilt", None) for key in sorted(expected - set(stage_of))]
    mismatches += [Mismatch("plan extra", key, None, "rebuilt") for key in sorted(set(stage_of) - expected)]
    for number, item in items:
        for used in item["inputs"]:
            key = (used["namespace"], used["name"], used.get("key") or "")
            if key in stage_of and stage_of[key] >= number:
                mismatches.append(Mismatch("plan order", key, f"before stage {number}", f"stage {stage_of[key]}"))
    return mismatches


def read_plan(driver: Driver, workload: PartitionWorkload, depth: int = 50) -> dict[str, Any]:
    """The backfill plan the product makes for the workload's backfill window (``lineage backfill plan``)."""
    fault = workload.faults["backfill"]
    namespace = next(ns for ns, name in workload.truth.datasets if name == fault["dataset"])
    start, end = parse_day(fault["from"], "--from"), parse_day(fault["to"], "--to")
    return plan(fetch_facts(driver, namespace, fault["dataset"], depth, timeout=60.0), start, end, depth)


def _text(value: Any) -> str:
    if isinstance(value, PartitionState | ReadyAnswer):
        value = {name: getattr(value, name) for name in value.__slots__}
    return json.dumps(value, default=str, separators=(", ", ": "))


def format_partition_report(report: PartitionReport, limit: int = 30) -> str:
    if report.ok:
        head = (f"OK: {report.partitions} partitions (state, versions, latest run, rows, bytes, assertions, upstream) "
                f"and {report.ready_answers} ready answers equal the truth")
    else:
        head = (f"MISMATCH: {len(report.mismatches)} differences over {report.partitions} partitions "
                f"({report.found_partitions} found) and {report.ready_answers} ready answers")
    lines = [head]
    for m in report.mismatches[:limit]:
        lines.append(f"  {m.kind}: {' '.join(m.key)}  expected {_text(m.expected)}  found {_text(m.found)}")
    if len(report.mismatches) > limit:
        lines.append(f"  … {len(report.mismatches) - limit} more")
    return "\n".join(lines)


def check_graph(driver: Driver, truth: PartitionTruth) -> PartitionReport:
    """Partitions first; the ready answers (a question per (dataset, day)) only once the partitions are exact."""
    partitions = read_partitions(driver, truth)
    report = check_partitions(truth, partitions, None)
    if report.mismatches:
        return report
    return check_partitions(truth, partitions, read_ready(driver, truth))


# --- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class PartitionRunReport:
    events: int
    summary: dict[str, Any]
    faults: list[str] = field(default_factory=list)
    publish_seconds: float = 0.0
    caught_up_seconds: float = 0.0
    converge_seconds: float = 0.0
    check: PartitionReport | None = None

    @property
    def ok(self) -> bool:
        return self.check is not None and self.check.ok


GRACE_SECONDS = 15.0


def _into_backfill(events: list[dict[str, Any]], share: float) -> int:
    """The index in publishing order ``share`` of the way through the backfill's events."""
    marks = [i for i, event in enumerate(events) if BACKFILL_FACET in event.get("run", {}).get("facets", {})]
    return marks[min(len(marks) - 1, int(len(marks) * share))] if marks else int(len(events) * share)


def run_partition_workload(base: ClientSettings, *, jobs: int = 50, days: int = 30, seed: int = 22,
                           rate: float = 2000.0, timeout: float = 300.0,
                           kills: Sequence[tuple[float, str]] = (),
                           workdir: Path = Path(".lineage/partition-workload"),
                           say: Callable[[str], None] = print) -> PartitionRunReport:
    tag = f"p{seed}-{uuid.uuid4().hex[:6]}"
    workload: PartitionWorkload = generate_partitions(jobs, days, seed, tag=tag)
    prefix = f"lineage.partitions.{tag}"
    env = pipeline_env(prefix, 6, workdir / prefix)
    clients = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(clients, 6)
    summary = workload.summary()
    report = PartitionRunReport(len(workload.events), summary)
    say(f"partition workload {tag}: {len(workload.events)} events, {summary['runs']} runs "
        f"({summary['backfill_runs']} backfill), {summary['late_completes']} late COMPLETEs, "
        f"{summary['duplicates']} duplicates, {summary['before_start']} sent before their START; "
        f"expecting {summary['expected']}")
    components = {name: _Component(name, lambda start=start: start(env)) for name, start in
                  (("processor", processor_process), ("graph sink", sink_process))}
    watched = list(components.values())
    stop = threading.Event()
    try:
        for component in components.values():
            component.start()
        started = time.monotonic()
        # publish up to each kill point; there the component dies without committing, then restarts
        cuts = [(_into_backfill(workload.events, share), share, name) for share, name in sorted(kills)]
        done = 0
        for cut, share, name in [*cuts, (len(workload.events), 1.0, "")]:
            _publish(clients, workload.events[done:cut], rate, stop)
            done = cut
            if name:
                sleep_watching(0.5, watched)  # in the middle of its work: offsets and tables not yet committed
                text = f"SIGKILL {name} {share:.0%} into the backfill, restart"
                say(f"  {time.monotonic() - started:6.1f}s  {text}")
                report.faults.append(text)
                components[name].kill_and_restart()
        report.publish_seconds = time.monotonic() - started
        say(f"  {report.publish_seconds:6.1f}s  all {len(workload.events)} events acknowledged by Kafka")
        groups = default_groups({**os.environ, **env})
        quiet: list[bool] = []

        def caught_up() -> bool:
            # processor and sink have committed everything, twice in a row (a poll apart: the processor's reorder
            # window and the sink's batch), independently of what the graph holds
            status = collect_status(None, clients, {stage: groups[stage] for stage in ("processor", "graph-sink")})
            quiet.append(all(stage.lag == 0 and not stage.no_commits for stage in status.stages))
            if len(quiet) % 10 == 0:  # every half minute: where it waits
                say(f"  {time.monotonic() - started:6.1f}s  waiting: " + ", ".join(
                    f"{stage.stage} lag {stage.lag}{' (no commits)' if stage.no_commits else ''}"
                    f"{f' [{stage.lag_error}]' if stage.lag_error else ''}" for stage in status.stages))
            return len(quiet) > 1 and quiet[-1] and quiet[-2]

        with contextlib.suppress(TimeoutError):  # not caught up: the check below shows what is missing
            wait_until(caught_up, timeout, watch=watched, interval=3, what="processor and sink caught up")
        report.caught_up_seconds = time.monotonic() - started
        say(f"  {report.caught_up_seconds:6.1f}s  processor and graph sink caught up")
        with driver_for(clients) as driver:

            def exact() -> bool:
                try:
                    report.check = check_graph(driver, workload.truth)
                    if report.check.ok:  # the graph is exact: the backfill plan must be the true closure
                        fault = workload.faults["backfill"]
                        dataset = next(d for d in workload.truth.datasets if d[1] == fault["dataset"])
                        report.check.mismatches += check_plan(read_plan(driver, workload), backfill_closure(
                            workload.truth, dataset, fault["from"], fault["to"]))
                except (TransientError, ServiceUnavailable) as exc:  # the sink's writes in the way: ask again
                    say(f"  read failed ({exc.__class__.__name__}), asking again")
                    return False
                if not report.check.ok:
                    say(f"  {time.monotonic() - started:6.1f}s  not exact yet: {len(report.check.mismatches)} "
                        "differences")
                return report.check.ok

            # caught up, the graph must be exact: a short grace for the last transaction, not a wait for the truth
            with contextlib.suppress(TimeoutError):
                wait_until(exact, GRACE_SECONDS, watch=watched, interval=3)
        report.converge_seconds = time.monotonic() - started
    except ChildExited as exc:
        exc.add_note(f"every component's whole output: {workdir.resolve()}")
        raise
    finally:
        stop.set()
        ended = stop_components(components, workdir)
    if ended:
        raise ended[0]
    return report
