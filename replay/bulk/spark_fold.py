"""The bulk rebuild's fold on PySpark (``lineage replay --fresh --bulk --engine spark``): the topic → neo4j-admin CSV
files, in parallel, written by the executors.

Each topic partition's offset range is cut into ranges of at most ``TASK_RECORDS``, one task each, which reads its
range with confluent-kafka and runs the processor's pure core (decode, validate, normalize:
``replay.local.normalized_ranges``, as every replay does; a record's normalization needs no other record) and folds
the events into ``GraphBatch`` slices (``graph_batches``: memory bounded by the slice). Their rows go into a
shuffle keyed by (row kind, identity) and are merged there by the model's own rules (``graph.batch.merge_rows``:
commutative, associative, idempotent, so any split and order gives the rows one process would build). What the
statements derive from other rows is derived by key as well: a job's latest run (its ``of_job`` rows joined with the
runs' sort keys, the largest kept), a run's totals (its ``read``/``wrote`` rows' statistics, summed), a node's whole
names behind hashed keys (its ``…_names`` row). Every node's and relationship's CSV record needs only its own row
(``tables.node_values``: node ids are hashes of identities), so each executor writes the records of its own shuffle
partition, one file per table and partition, each with its header; the driver collects only the files' names, the
row counts, the record counts and the schema histories (the driver finds the changes as every replay does).
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_lineage.graph.batch import merge_rows, row_identity
from kafka_lineage.graph.events import graph_batches
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.bulk.progress import PhaseProgress
from kafka_lineage.replay.bulk.tables import (
    ARRAY_DELIMITERS,
    NODES,
    RELATIONSHIPS,
    CsvFiles,
    TableError,
    add_totals,
    check_batch,
    csv_line,
    edge_totals,
    latest_run,
    node_header,
    node_values,
    relationship_header,
    relationship_values,
    run_sort_key,
)
from kafka_lineage.replay.drift import ReplayDrift
from kafka_lineage.replay.local import ALL_TIME, EventWindow, ReplayReport, first_offsets, normalized_ranges
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.gc_tuning import tune_gc

_REPORT = "_report"  # a task's counts travel through the shuffle under this kind
_DRIFT = "_drift"  # …and its schema histories (ReplayDrift.kept), one entry per task
_COUNTS = ("records", "written", "dead_letters", "scanned")
_NODE_SPECS = {spec.kind: spec for spec in NODES}
_REL_SPECS = {rel.kind: rel for rel in RELATIONSHIPS}
_NAMES_SUFFIX = "_names"
# Records one task reads and folds into one batch before its rows go to the shuffle: a task's memory is bounded by
# this, not by a partition's size, and a topic partition of many records is several tasks (both cores busy, and a
# progress bar that moves). Larger tasks repeat fewer rows: every run of a job in a task shares its datasets' rows.
TASK_RECORDS = 50_000

Keyed = tuple[tuple[str, Any], tuple[str, Any]]  # ((kind, identity), (kind, row)): the kind travels with the value
Record = tuple[str, str, list[Any]]  # (nodes | relationships, label or type, the CSV record's values)
Written = tuple[str, str, str, int, bool]  # (group, table, file, records, some value spans lines)


@dataclass
class SparkFold:
    files: CsvFiles
    counts: dict[str, int]  # records per label and relationship type
    report: ReplayReport


def fold_task(clients: ClientSettings, processing: ProcessorSettings, batch_size: int,
              ranges: Iterable[tuple[int, int, int]], window: EventWindow = ALL_TIME,
              slice_events: int = TASK_RECORDS) -> Iterator[Keyed]:
    """One task: its partitions' ``(partition, first offset, end offset)`` ranges → their batch's rows, keyed by
    (kind, identity), and the task's counts."""
    ranges = list(ranges)
    report = ReplayReport()
    drift = ReplayDrift(processing.schema_history_limit)
    written = dead_letters = 0
    if ranges:
        tune_gc()

        def events() -> Iterator[dict[str, Any]]:
            nonlocal written, dead_letters
            for batch_events, output in normalized_ranges(
                    clients, {p: first for p, first, _ in ranges}, {p: end for p, _, end in ranges},
                    batch_size=batch_size, report=report, processing=processing, window=window, drift=drift):
                written += len(batch_events)
                dead_letters += len(output.dead_letters)
                yield from batch_events

        for batch in graph_batches(events(), slice_events):  # merged in the shuffle, which spills to disk
            check_batch(batch)  # a kind or column the import does not map fails the job here, before any file
            for kind, rows in batch.rows.items():
                for row in rows:
                    yield (kind, row_identity(kind, row)), (kind, row)
    counts = dict(zip(_COUNTS, (report.records, written, dead_letters, report.scanned), strict=True))
    yield (_REPORT, 0), (_REPORT, counts)
    if ranges:
        yield (_DRIFT, ranges[0][:2]), (_DRIFT, drift.kept())  # one per task: never combined


def task_ranges(firsts: dict[int, int], ends: dict[int, int], records: int) -> list[tuple[int, int, int]]:
    """Each partition's ``firsts``..``ends`` in ranges of at most ``records`` offsets, one task each (a record's
    normalization needs no other record, and the tasks' rows merge in any split)."""
    return [(p, first, min(first + records, ends[p])) for p in sorted(ends)
            for first in range(firsts[p], ends[p], records)]


def _combine(first: tuple[str, Any], second: tuple[str, Any]) -> tuple[str, Any]:
    kind = first[0]
    if kind == _REPORT:
        return kind, {name: first[1][name] + second[1][name] for name in _COUNTS}
    return kind, merge_rows(kind, first[1], second[1])


def _node_part(item: Keyed) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """A node row or its ``…_names`` row, keyed by the node's (kind, identity)."""
    (kind, identity), (_, row) = item
    if kind.endswith(_NAMES_SUFFIX):
        return (kind[:-len(_NAMES_SUFFIX)], identity), ("names", row)
    return (kind, identity), ("row", row)


def _node_record(item: tuple[tuple[str, Any], Iterable[tuple[str, Any]]]) -> list[Record]:
    (kind, _), parts = item
    found = dict(parts)
    if "row" not in found:  # derived facts of a node no event made (cannot happen: every end is added with its node)
        raise TableError(f"{kind}: a node with derived values but no row of its own: {found}")
    spec = _NODE_SPECS[kind]
    latest = found.get("latest")  # (sort key, runId)
    values = node_values(spec, found["row"], found.get("names"), (latest[1], latest[0]) if latest else None,
                         found.get("totals"))
    return [("nodes", spec.label, values)]


def _relationship_record(item: Keyed) -> Record:
    (kind, _), (_, row) = item
    rel = _REL_SPECS[kind]
    return "relationships", rel.type, relationship_values(rel, row)


def _delimiters_in(record: Record) -> set[str]:
    """The array-delimiter candidates a record's list values hold."""
    used: set[str] = set()
    for value in record[2]:
        if isinstance(value, list):
            for element in value:
                used.update(candidate for candidate in ARRAY_DELIMITERS if candidate in element)
    return used


def _writer(directory: str, delimiter: str) -> Callable[[int, Iterator[Record]], Iterator[Written]]:
    """A Spark partition's records → one CSV file per table (header first) in ``directory``."""
    headers = {**{("nodes", spec.label): node_header(spec) for spec in NODES},
               **{("relationships", rel.type): relationship_header(rel) for rel in RELATIONSHIPS}}

    def write(index: int, records: Iterator[Record]) -> Iterator[Written]:
        files: dict[tuple[str, str], Any] = {}
        counts: dict[tuple[str, str], int] = {}
        multiline: dict[tuple[str, str], bool] = {}
        try:
            for group, name, values in records:
                key = (group, name)
                out = files.get(key)
                if out is None:
                    path = Path(directory) / f"{group}-{name}-{index:05d}.csv"
                    out = files[key] = path.open("w", encoding="utf-8", newline="")
                    out.write(",".join(headers[key]) + "\n")
                    counts[key], multiline[key] = 0, False
                line = csv_line(values, delimiter)
                if not multiline[key] and ("\n" in line[:-1] or "\r" in line):
                    multiline[key] = True
                out.write(line)
                counts[key] += 1
        finally:
            for out in files.values():
                out.close()
        for (group, name), out in files.items():
            yield group, name, out.name, counts[(group, name)], multiline[(group, name)]

    return write


def spark_session(master: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local executors must import this package too
    return (SparkSession.builder.master(master).appName("lineage-bulk-rebuild")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")  # the rebuild shows its own, per phase
            .getOrCreate())


class _FoldWatch:
    """Shows the fold's progress from the driver: Spark's status tracker counts the finished tasks of the stage
    that reads and folds (one task per range; a task's records are counted when it ends), and the merge phase
    begins when that stage is done (the shuffle's reduce side)."""

    GROUP = "lineage-bulk-fold"

    def __init__(self, context: Any, ranges: list[tuple[int, int, int]], phases: PhaseProgress) -> None:
        self.context, self.phases = context, phases
        self.sizes = [end - first for _, first, end in ranges]
        self.stop, self.merging = threading.Event(), False
        self.thread = threading.Thread(target=self._watch, name="bulk-fold-watch", daemon=True)

    def __enter__(self) -> _FoldWatch:
        self.context.setJobGroup(self.GROUP, "lineage bulk rebuild: fold")
        self.phases.begin("fold", sum(self.sizes))
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join()
        if not self.merging:  # done between two looks (a small topic): the fold's time holds the merge's
            self.phases.update(sum(self.sizes))
            self.phases.begin("merge")

    def _watch(self) -> None:
        tracker = self.context.statusTracker()
        while not self.stop.wait(1.0) and not self.merging:
            stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup(self.GROUP)
                      for stage in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else ())]
            folding = [stage for stage in stages if stage is not None and stage.numTasks == len(self.sizes)]
            if not folding:
                continue
            done = min(folding, key=lambda stage: stage.stageId).numCompletedTasks  # (then the shuffle's reduce)
            self.phases.update(sum(sorted(self.sizes)[:done]))  # (which tasks ended is not known: the smallest)
            if done == len(self.sizes):
                self.phases.begin("merge")
                self.merging = True


def fold_on_spark(spark: Any, clients: ClientSettings, begins: dict[int, int], ends: dict[int, int],
                  directory: Path, *, processing: ProcessorSettings, batch_size: int = 2000,
                  window: EventWindow = ALL_TIME, phases: PhaseProgress | None = None,
                  task_records: int = TASK_RECORDS) -> SparkFold:
    """The import's CSV files for the topic's ``begins``..``ends`` under ``directory`` (module doc), read and folded
    in tasks of at most ``task_records``; ``phases``: where the fold, merge and files phases show their progress."""
    from pyspark import StorageLevel

    context = spark.sparkContext
    ranges = task_ranges(first_offsets(clients, {p: begins[p] for p in ends}), ends, task_records)
    phases = phases or PhaseProgress(out=io.StringIO())

    def task(partition_ranges: Iterable[tuple[int, int, int]]) -> Iterator[Keyed]:
        return fold_task(clients, processing, batch_size, partition_ranges, window, task_records)

    merged = (context.parallelize(ranges, max(len(ranges), 1)).mapPartitions(task)
              .reduceByKey(_combine).persist(StorageLevel.MEMORY_AND_DISK))
    try:
        with _FoldWatch(context, ranges, phases):
            totals_row = merged.filter(lambda item: item[0][0] == _REPORT).values().collect()
        counts = totals_row[0][1] if totals_row else dict.fromkeys(_COUNTS, 0)
        drift = ReplayDrift(processing.schema_history_limit)  # merged in any order: the same changes
        for _, kept in merged.filter(lambda item: item[0][0] == _DRIFT).values().collect():
            drift.absorb(kept)
        run_keys = merged.filter(lambda item: item[0][0] == "runs").map(
            lambda item: (item[0][1], run_sort_key(item[1][1])))
        latest = (merged.filter(lambda item: item[0][0] == "of_job")
                  .map(lambda item: (item[1][1]["runId"], (item[1][1]["namespace"], item[1][1]["name"])))
                  .leftOuterJoin(run_keys)
                  .map(lambda pair: (("jobs", pair[1][0]), ("latest", (pair[1][1] or "", pair[0]))))
                  .reduceByKey(lambda a, b: ("latest", latest_run(a[1], b[1]))))
        totals = (merged.filter(lambda item: item[0][0] in ("read", "wrote"))
                  .map(lambda item: (("runs", item[1][1]["runId"]), ("totals", edge_totals(*item[1]))))
                  .reduceByKey(lambda a, b: ("totals", add_totals(a[1], b[1]))))
        nodes = (merged.filter(lambda item: item[0][0] in _NODE_SPECS or item[0][0].endswith(_NAMES_SUFFIX))
                 .map(_node_part).union(latest).union(totals).groupByKey().flatMap(_node_record))
        relationships = merged.filter(lambda item: item[0][0] in _REL_SPECS).map(_relationship_record)
        records = nodes.union(relationships).persist(StorageLevel.MEMORY_AND_DISK)
        phases.begin("files")
        try:
            used = set(records.flatMap(_delimiters_in).distinct().collect())
            delimiter = next((candidate for candidate in ARRAY_DELIMITERS if candidate not in used), None)
            if delimiter is None:
                raise TableError("every array delimiter candidate occurs in an array value")
            directory.mkdir(parents=True, exist_ok=True)
            written = records.mapPartitionsWithIndex(_writer(str(directory), delimiter)).collect()
        finally:
            records.unpersist()
    finally:
        merged.unpersist()
    by_group: dict[str, list[tuple[str, Path]]] = {"nodes": [], "relationships": []}
    table_counts: dict[str, int] = {}
    for group, name, path, count, _ in sorted(written):
        by_group[group].append((name, Path(path)))
        table_counts[name] = table_counts.get(name, 0) + count
    files = CsvFiles(tuple(by_group["nodes"]), tuple(by_group["relationships"]), delimiter,
                     any(multiline for *_, multiline in written))
    report = ReplayReport(records=counts["records"], written=counts["written"], dead_letters=counts["dead_letters"],
                          scanned=counts["scanned"], schema_changes=drift.findings())
    return SparkFold(files, table_counts, report)
