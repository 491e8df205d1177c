"""The bulk rebuild's fold on PySpark (``lineage replay --fresh --bulk --engine spark``): the topic → neo4j-admin CSV
files, in parallel, written by the executors.

Each topic partition's offset range is cut into ranges of at most ``TASK_RECORDS``, one task each, which reads its
range with confluent-kafka and runs the processor's pure core (decode, validate, normalize:
``replay.local.normalized_ranges``, as every replay does; a record's normalization needs no other record) and folds
the events into ``GraphBatch`` slices (``graph_batches``: memory bounded by the slice). Each slice's rows go into
the shuffle as one chunk per shuffle partition (``chunks``: few large records, not one per row), and each
partition merges what it receives by identity with the model's own rules (``merged_rows``, a ``RowBuilder``:
commutative, associative, idempotent, so any split and order gives the rows one process would build; a
partition's memory is its share of the distinct rows, and there are as many partitions as tasks). Rows are
placed by ``placement_text``: all rows of a run (``runs``, ``run_totals``, ``of_job``, ``read``, ``wrote``) in one
partition, a node's ``…_names`` row with its node. So each partition's writer (``write_partition``, one pass over
the merged rows) derives what the statements derive from other rows where those rows are: a run's totals (its
``read``/``wrote`` statistics, summed) and each job's latest-run candidate among its runs there; every node's and
relationship's CSV record needs only its own row otherwise (``tables.node_values``: node ids are hashes of
identities). The executors write the files, one per table and partition, each with its header; the driver gets
the files' names and counts, the schema histories, and the jobs (one row each, with the candidates: a job's runs are
in every partition), whose one file it writes (``finish_files``). The array delimiter is the first candidate unless
a list value holds it; then the files are written again with a free one (the shuffle's map side is not redone).
"""

from __future__ import annotations

import io
import itertools
import os
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from kafka_lineage.graph.batch import ROW_IDENTITY, GraphBatch, RowBuilder
from kafka_lineage.graph.events import graph_batches
from kafka_lineage.graph.keys import may_be_stored_by_hash
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.bulk.progress import PhaseProgress
from kafka_lineage.replay.bulk.tables import (
    ARRAY_DELIMITERS,
    NODES,
    RELATIONSHIPS,
    CsvFiles,
    Row,
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

Keyed = tuple[tuple[str, Any], tuple[str, Any]]  # ((kind, identity), (kind, row)): a merged row and its key
Chunk = tuple[int, list[tuple[str, Any]]]  # (shuffle partition, [(kind, row), …]): what a task sends there
Record = tuple[str, str, list[Any]]  # (nodes | relationships, label or type, the CSV record's values)
Written = tuple[str, str, str, int, bool]  # (group, table, file, records, some value spans lines)
Out = tuple[str, Any]  # what a partition's writer tells the driver, tagged: "file", "report", "latest", …


@dataclass
class SparkFold:
    files: CsvFiles
    counts: dict[str, int]  # records per label and relationship type
    report: ReplayReport


def fold_task(clients: ClientSettings, processing: ProcessorSettings, batch_size: int,
              ranges: Iterable[tuple[int, int, int]], window: EventWindow = ALL_TIME,
              slice_events: int = TASK_RECORDS, partitions: int = 1) -> Iterator[Chunk]:
    """One task: its partitions' ``(partition, first offset, end offset)`` ranges → their batch's rows in chunks,
    one per shuffle partition (``chunks``), and the task's counts and schema histories (to partition 0)."""
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

        for batch in graph_batches(events(), slice_events):  # memory bounded by the slice
            check_batch(batch)  # a kind or column the import does not map fails the job here, before any file
            yield from chunks(batch, partitions)
    counts = dict(zip(_COUNTS, (report.records, written, dead_letters, report.scanned), strict=True))
    yield 0, [(_REPORT, counts)]
    if ranges:
        yield 0, [(_DRIFT, drift.kept())]


def chunks(batch: GraphBatch, partitions: int) -> Iterator[Chunk]:
    """A batch's rows as one chunk per shuffle partition (a checksum of the row's ``placement_text``, the same in
    every worker and run): what the shuffle moves is a few large records per task, not one per row (PySpark
    pickles, combines and places each record in Python: that was ~a third of the fold's time)."""
    spread: dict[int, list[tuple[str, Row]]] = {}
    for kind, rows in batch.rows.items():
        text = placement_text(kind)
        for row in rows:
            spread.setdefault(zlib.crc32(text(row).encode("utf-8", "surrogatepass")) % partitions, []).append(
                (kind, row))
    yield from spread.items()


def merged_rows(chunks_in: Iterable[Chunk]) -> Iterator[Keyed]:
    """A shuffle partition's chunks → its rows merged by identity (``RowBuilder``: the model's rules), each with
    its key, and every task's counts and schema histories as they came."""
    builder = RowBuilder()
    for _, chunk in chunks_in:
        for kind, row in chunk:
            if kind in (_REPORT, _DRIFT):
                yield (kind, 0), (kind, row)
            else:
                builder.add(kind, row)
    for kind, rows in builder.rows.items():
        for identity, row in rows.items():
            yield (kind, identity), (kind, row)


def task_ranges(firsts: dict[int, int], ends: dict[int, int], records: int) -> list[tuple[int, int, int]]:
    """Each partition's ``firsts``..``ends`` in ranges of at most ``records`` offsets, one task each (a record's
    normalization needs no other record, and the tasks' rows merge in any split). A partition's ranges are of equal
    size (±1), and the largest come first: Spark starts tasks in this order, so the last to end are short ones and
    the cores finish together (a 67k-record partition in 50k + 17k left one core idle for the 50k's last part)."""
    ranges = []
    for p in sorted(ends):
        size = ends[p] - firsts[p]
        if size <= 0:
            continue
        pieces = -(-size // records)
        bounds = [firsts[p] + size * piece // pieces for piece in range(pieces + 1)]
        ranges += [(p, first, end) for first, end in itertools.pairwise(bounds)]
    return sorted(ranges, key=lambda item: item[1] - item[2])  # stable: partition order among equal sizes


# A run's rows meet in one shuffle partition: its totals (its ``read``/``wrote`` rows) and its job's latest-run
# candidate (its ``of_job`` row and its sort key) are computed there. A node's ``…_names`` row meets the node.
_RUN_PLACED = frozenset(("runs", "run_totals", "of_job", "read", "wrote"))
_RUN_SPEC = _NODE_SPECS["runs"]
_JOB_SPEC = _NODE_SPECS["jobs"]
_HEADERS = {**{("nodes", spec.label): node_header(spec) for spec in NODES},
            **{("relationships", rel.type): relationship_header(rel) for rel in RELATIONSHIPS}}
_ARRAYS = {table: any(name.endswith("[]") for name in header) for table, header in _HEADERS.items()}


def placement_text(kind: str) -> Callable[[Row], str]:
    """What places a ``kind`` row in a shuffle partition, as text: the run's id, for the rows of a run; the node's
    kind and identity, for a node and its ``…_names`` row; the row's own kind and identity otherwise."""
    if kind in _RUN_PLACED:
        return itemgetter("runId")
    owner = kind[:-len(_NAMES_SUFFIX)] if kind.endswith(_NAMES_SUFFIX) else kind
    identity = itemgetter(*ROW_IDENTITY[kind])
    return lambda row: f"{owner}\x00{identity(row)!r}"


def _own_index(index: int) -> int:
    return index


def _hashed_key(spec: Any, row: Row) -> bool:
    """Whether one of a node's key values is stored by hash (``graph.keys.stored_key``): its names row exists."""
    return any(may_be_stored_by_hash(value) for key in spec.keys if isinstance(value := row[key], str))


def _delimiters_in(values: Iterable[Any]) -> set[str]:
    """The array-delimiter candidates a record's list values hold."""
    used: set[str] = set()
    for value in values:
        if isinstance(value, list):
            for element in value:
                used.update(candidate for candidate in ARRAY_DELIMITERS if candidate in element)
    return used


class _Files:
    """One CSV file per table (header first) in ``directory``, named after the Spark partition ``index``."""

    def __init__(self, directory: str, index: int | str, delimiter: str) -> None:
        self.directory, self.index, self.delimiter = Path(directory), index, delimiter
        self.files: dict[tuple[str, str], Any] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.multiline: dict[tuple[str, str], bool] = {}
        self.used: set[str] = set()  # delimiter candidates the list values hold

    def write(self, group: str, name: str, values: list[Any]) -> None:
        key = (group, name)
        out = self.files.get(key)
        if out is None:
            path = self.directory / f"{group}-{name}-{self.index}.csv"
            out = self.files[key] = path.open("w", encoding="utf-8", newline="")
            out.write(",".join(_HEADERS[key]) + "\n")
            self.counts[key], self.multiline[key] = 0, False
        if _ARRAYS[key]:
            self.used |= _delimiters_in(values)
        line = csv_line(values, self.delimiter)
        if not self.multiline[key] and ("\n" in line[:-1] or "\r" in line):
            self.multiline[key] = True
        out.write(line)
        self.counts[key] += 1

    def close(self) -> list[Written]:
        for out in self.files.values():
            out.close()
        return [(group, name, out.name, self.counts[(group, name)], self.multiline[(group, name)])
                for (group, name), out in self.files.items()]


def write_partition(index: int, items: Iterable[Keyed], directory: str, delimiter: str) -> Iterator[Out]:
    """One shuffle partition's merged rows → its CSV files; out to the driver: the files written, the counts and
    schema histories, the partition's jobs (their rows, names and latest-run candidates: a job's runs are spread
    over every partition) and the delimiter candidates its list values hold."""
    files = _Files(directory, f"{index:05d}", delimiter)
    runs: dict[str, Row] = {}
    with_totals: set[str] = set()
    totals: dict[str, dict[str, int]] = {}
    jobs_of: list[tuple[str, tuple[Any, ...]]] = []
    held: dict[tuple[str, Any], dict[str, Row]] = {}  # nodes with a hashed key and their names rows
    for (kind, identity), (_, row) in items:
        if kind == _REPORT:
            yield "report", row
        elif kind == _DRIFT:
            yield "drift", row
        elif kind == "jobs" or kind == "jobs" + _NAMES_SUFFIX:
            yield kind, (identity, row)
        elif kind == "runs":
            runs[identity] = row
        elif kind == "run_totals":
            with_totals.add(identity)
        elif kind.endswith(_NAMES_SUFFIX):
            held.setdefault((kind[:-len(_NAMES_SUFFIX)], identity), {})["names"] = row
        elif (spec := _NODE_SPECS.get(kind)) is not None:
            if _hashed_key(spec, row):
                held.setdefault((kind, identity), {})["row"] = row
            else:
                files.write("nodes", spec.label, node_values(spec, row))
        else:
            rel = _REL_SPECS[kind]
            if kind in ("read", "wrote"):
                totals[row["runId"]] = add_totals(totals.get(row["runId"], {}), edge_totals(kind, row))
            elif kind == "of_job":
                jobs_of.append((row["runId"], (row["namespace"], row["name"])))
            files.write("relationships", rel.type, relationship_values(rel, row))
    for run_id, row in runs.items():
        files.write("nodes", _RUN_SPEC.label, node_values(_RUN_SPEC, row, totals=totals.get(run_id, {})
                                                          if run_id in with_totals else None))
    latest: dict[tuple[Any, ...], tuple[str, str]] = {}
    for run_id, job in jobs_of:
        candidate = (run_sort_key(runs[run_id]) if run_id in runs else "", run_id)
        latest[job] = latest_run(latest[job], candidate) if job in latest else candidate
    yield from (("latest", item) for item in latest.items())
    for (kind, identity), parts in held.items():
        if "row" not in parts:  # (cannot happen: a names row is added with its node)
            raise TableError(f"{kind} {identity}: the whole names of a node no event made")
        spec = _NODE_SPECS[kind]
        files.write("nodes", spec.label, node_values(spec, parts["row"], parts.get("names")))
    yield from (("file", written) for written in files.close())
    yield "delimiters", files.used


def write_jobs(directory: str, delimiter: str, jobs: dict[Any, Row], names: dict[Any, Row],
               latest: dict[Any, tuple[str, str]]) -> tuple[list[Written], set[str]]:
    """The job nodes, written by the driver: each needs its latest run over every partition's candidates."""
    files = _Files(directory, "jobs", delimiter)
    for identity, row in sorted(jobs.items()):
        key_and_run = latest.get(identity)
        files.write("nodes", _JOB_SPEC.label, node_values(
            _JOB_SPEC, row, names.get(identity), (key_and_run[1], key_and_run[0]) if key_and_run else None))
    return files.close(), files.used


def finish_files(out: Iterable[Out], directory: str, delimiter: str, drift: ReplayDrift
                 ) -> tuple[CsvFiles, dict[str, int], dict[str, int]]:
    """The driver's part, from what the partitions' writers told it: the job nodes' file, every file's name, the
    records per table, the task counts summed; the schema histories into ``drift``."""
    counts = dict.fromkeys(_COUNTS, 0)
    jobs: dict[Any, Row] = {}
    names: dict[Any, Row] = {}
    latest: dict[Any, tuple[str, str]] = {}
    written: list[Written] = []
    for tag, value in out:
        if tag == "report":
            counts = {name: counts[name] + value[name] for name in _COUNTS}
        elif tag == "drift":
            drift.absorb(value)
        elif tag == "jobs":
            jobs[value[0]] = value[1]
        elif tag == "jobs" + _NAMES_SUFFIX:
            names[value[0]] = value[1]
        elif tag == "latest":
            job, candidate = value
            latest[job] = latest_run(latest[job], candidate) if job in latest else candidate
        elif tag == "file":
            written.append(value)
    job_files, job_used = write_jobs(directory, delimiter, jobs, names, latest)
    if delimiter in job_used:  # (no job property is a list today)
        raise TableError(f"a job's list value holds the array delimiter {delimiter!r}")
    written += job_files
    by_group: dict[str, list[tuple[str, Path]]] = {"nodes": [], "relationships": []}
    table_counts: dict[str, int] = {}
    for group, name, path, count, _ in sorted(written):
        by_group[group].append((name, Path(path)))
        table_counts[name] = table_counts.get(name, 0) + count
    files = CsvFiles(tuple(by_group["nodes"]), tuple(by_group["relationships"]), delimiter,
                     any(multiline for *_, multiline in written))
    return files, table_counts, counts


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

    context = spark.sparkContext
    ranges = task_ranges(first_offsets(clients, {p: begins[p] for p in ends}), ends, task_records)
    phases = phases or PhaseProgress(out=io.StringIO())

    partitions = max(len(ranges), 4 * context.defaultParallelism)

    def task(partition_ranges: Iterable[tuple[int, int, int]]) -> Iterator[Chunk]:
        return fold_task(clients, processing, batch_size, partition_ranges, window, task_records, partitions)

    shuffled = (context.parallelize(ranges, max(len(ranges), 1)).mapPartitions(task)
                .partitionBy(partitions, _own_index))
    directory.mkdir(parents=True, exist_ok=True)
    with _FoldWatch(context, ranges, phases):
        # One pass over the merged rows writes them (the shuffle's reduce side: phase "merge"); the delimiter is
        # the first candidate, and only if a list value holds it are the files written again with another (the
        # map side's shuffle files are reused: not folded twice).
        delimiter = ARRAY_DELIMITERS[0]
        out = shuffled.mapPartitionsWithIndex(lambda index, items: write_partition(
            index, merged_rows(items), str(directory), delimiter)).collect()
        used = set().union(*(value for tag, value in out if tag == "delimiters"))
        if delimiter in used:
            delimiter = next((candidate for candidate in ARRAY_DELIMITERS if candidate not in used), "")
            if not delimiter:
                raise TableError("every array delimiter candidate occurs in an array value")
            for _, (_, _, path, _, _) in (item for item in out if item[0] == "file"):
                Path(path).unlink()
            out = shuffled.mapPartitionsWithIndex(lambda index, items: write_partition(
                index, merged_rows(items), str(directory), delimiter)).collect()
    phases.begin("files")
    drift = ReplayDrift(processing.schema_history_limit)  # merged in any order: the same changes
    files, table_counts, counts = finish_files(out, str(directory), delimiter, drift)
    report = ReplayReport(records=counts["records"], written=counts["written"], dead_letters=counts["dead_letters"],
                          scanned=counts["scanned"], schema_changes=drift.findings())
    return SparkFold(files, table_counts, report)
