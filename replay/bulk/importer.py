"""``lineage replay --fresh --bulk``: read the whole events topic, fold every event into ONE ``GraphBatch`` (the
sink's own merge rules, so each row is already the final node or edge), write neo4j-admin CSV files
(``tables``), stop Neo4j, ``neo4j-admin database import full --overwrite-destination``, start it, recreate the
constraints and indexes (``ensure_constraints``).

Only for a Neo4j on this machine whose installation ``LINEAGE_NEO4J_HOME`` names: ``bin/neo4j-admin`` imports,
``bin/neo4j stop|start`` stops and starts the server (Community Edition cannot stop one database). Anything else is
``BulkImportUnavailable`` before the topic is read or the graph touched; for a Neo4j elsewhere, ``export_bulk``
writes the files and the steps (``export``). The import carries the raw offsets it holds (``graph.coverage``):
where the live graph sink takes over.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from neo4j.exceptions import Neo4jError, ServiceUnavailable

from kafka_lineage.graph.coverage import NO_COVERAGE, Coverage
from kafka_lineage.graph.driver import driver_for, ensure_indexes_online
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.bulk import export, space
from kafka_lineage.replay.bulk.mark import (
    RebuildMark,
    RebuildRunning,
    left_by_killed_rebuild,
    remove_mark,
    write_mark,
)
from kafka_lineage.replay.bulk.progress import PhaseProgress
from kafka_lineage.replay.bulk.spark_fold import TASK_RECORDS, fold_on_spark, spark_session
from kafka_lineage.replay.bulk.tables import CsvFiles, import_tables, with_coverage, write_csv
from kafka_lineage.replay.local import (
    ALL_TIME,
    DEFAULT_PROCESSING,
    EventWindow,
    ReplayReport,
    first_offsets,
    normalized_ranges,
    offset_bounds,
    offset_range,
    refuse_partial_history,
)
from kafka_lineage.runtime.config import ClientSettings

EXIT_UNAVAILABLE = 3  # `lineage replay --bulk` when the database is not local or its tools are missing
_LOCAL_HOSTS = frozenset(("localhost", "127.0.0.1", "::1"))
START_TIMEOUT_SECONDS = 300.0


class BulkImportUnavailable(RuntimeError):
    """An offline import is not possible here (remote database, no installation, missing tools)."""


class NotEnoughDisk(BulkImportUnavailable):
    """The import files or the new store would not fit (checked before Neo4j is stopped, and before the import)."""


def check_space(needs: list[space.Need], when: str) -> None:
    problems = space.shortfalls(needs, space.free_bytes, space.device_of)
    if problems:
        raise NotEnoughDisk(f"--bulk needs more disk space than there is ({when}): {'; '.join(problems)}. Free "
                            "some, or put the import files elsewhere (--work-dir)")


class BulkImportFailed(RuntimeError):
    """A step of the import failed; the message names it and ends with the tool's own words."""


@dataclass(frozen=True)
class Neo4jInstallation:
    home: Path

    @property
    def admin(self) -> Path:
        return self.home / "bin" / "neo4j-admin"

    @property
    def control(self) -> Path:
        return self.home / "bin" / "neo4j"

    @property
    def data(self) -> Path:
        """Where the server keeps its stores (``server.directories.data`` of its conf; relative: to the home)."""
        conf = self.home / "conf" / "neo4j.conf"
        lines = conf.read_text(encoding="utf-8", errors="replace").splitlines() if conf.is_file() else []
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "server.directories.data" and value.strip():
                return self.home / value.strip()  # (an absolute value stays itself)
        return self.home / "data"

    @classmethod
    def of(cls, clients: ClientSettings) -> Neo4jInstallation:
        host = urlsplit(clients.neo4j_uri).hostname or ""
        if host not in _LOCAL_HOSTS and not host.startswith("127."):
            raise BulkImportUnavailable(f"--bulk imports into a database on this machine; NEO4J_URI is "
                                        f"{clients.neo4j_uri} (replay without --bulk writes through Bolt; --bulk "
                                        "--export DIR writes the import files and the steps for that server)")
        if not clients.neo4j_home:
            raise BulkImportUnavailable("--bulk needs LINEAGE_NEO4J_HOME: the home of the Neo4j installation "
                                        f"serving {clients.neo4j_uri} (with bin/neo4j-admin and bin/neo4j)")
        installation = cls(Path(clients.neo4j_home))
        for tool in (installation.admin, installation.control):
            if not tool.is_file():
                raise BulkImportUnavailable(f"--bulk: {tool} not found (LINEAGE_NEO4J_HOME={clients.neo4j_home} "
                                            "should be a Neo4j home with bin/neo4j-admin and bin/neo4j)")
        return installation

    def run(self, tool: Path, *arguments: str, step: str) -> str:
        result = subprocess.run([str(tool), *arguments], stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if result.returncode != 0:
            words = (result.stderr.strip() or result.stdout.strip())[-1500:]
            raise BulkImportFailed(f"{step}: {tool.name} exited {result.returncode}: {words}")
        return result.stdout


@dataclass
class BulkReplayReport(ReplayReport):
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: read, tables, csv, stop, import, …
    counts: dict[str, int] = field(default_factory=dict)  # rows imported per label and relationship type
    files_bytes: int = 0  # the import files' size
    resumed_after: str | None = None  # the phase a killed rebuild of this store died in, if one had
    store_bytes: int = 0  # the imported database's store
    coverage: Coverage = NO_COVERAGE  # the raw offsets the import holds: where the live graph sink takes over


def _events(clients: ClientSettings, begins: dict[int, int], ends: dict[int, int], batch_size: int,
            processing: ProcessorSettings, window: EventWindow, report: ReplayReport,
            progress: Callable[[ReplayReport, int], None] | None) -> Iterator[dict[str, Any]]:
    """The topic's events in ``window``, decoded and normalized as the live replay does; counts into ``report``."""
    with contextlib.closing(normalized_ranges(clients, begins, ends, batch_size=batch_size, report=report,
                                              processing=processing, progress=progress, window=window)) as batches:
        for events, output in batches:
            report.written += len(events)
            report.dead_letters += len(output.dead_letters)
            yield from events


def _record_count(clients: ClientSettings, begins: dict[int, int], ends: dict[int, int]) -> int:
    """Records between the first offsets (``OFFSET_BEGINNING`` resolved) and the end offsets."""
    return sum(ends[p] - first for p, first in first_offsets(clients, begins).items() if p in ends)


def _fold(clients: ClientSettings, spark: Any, begins: dict[int, int], ends: dict[int, int], directory: Path,
          report: BulkReplayReport, *, processing: ProcessorSettings, batch_size: int, window: EventWindow,
          phases: PhaseProgress, task_records: int | None) -> CsvFiles:
    """The import files of ``begins``..``ends`` and of ``report.coverage`` under ``directory``, folded on Spark
    (``spark``) or in this process; the counts into ``report``."""
    if spark is not None:
        fold = fold_on_spark(spark, clients, begins, ends, directory, processing=processing, batch_size=batch_size,
                             window=window, phases=phases, task_records=task_records or TASK_RECORDS)
        files, report.counts = fold.files, fold.counts
        for name in ("records", "written", "dead_letters", "scanned", "schema_changes"):
            setattr(report, name, getattr(fold.report, name))
    else:
        phases.begin("read", _record_count(clients, begins, ends))
        batch = graph_batch(_events(clients, begins, ends, batch_size, processing, window, report,
                                    lambda done, _total: phases.update(done.records)))
        phases.begin("tables")
        tables = import_tables(batch)
        del batch
        report.counts = tables.counts()
        phases.begin("files")
        files = write_csv(tables, directory)
        del tables
    files = with_coverage(files, report.coverage, directory)
    phases.end()
    report.files_bytes = space.files_size(directory)
    return files


def _default_database(clients: ClientSettings) -> str:
    with driver_for(clients) as driver:
        records, _, _ = driver.execute_query("SHOW DEFAULT DATABASE YIELD name", database_="system")
    return str(records[0]["name"])


def _unanswered(clients: ClientSettings) -> Exception | None:
    """Why Neo4j does not answer a query now, or None when it does."""
    try:
        with driver_for(clients, connection_timeout=3) as driver:
            driver.execute_query("RETURN 1")
        return None
    except (ServiceUnavailable, Neo4jError, OSError) as exc:
        return exc


def wait_for_neo4j(clients: ClientSettings, timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Until a query answers (an installation's ``neo4j start`` returns before the server listens)."""
    deadline = time.monotonic() + timeout
    while (problem := _unanswered(clients)) is not None:
        if time.monotonic() > deadline:
            raise BulkImportFailed(f"start: Neo4j did not answer within {timeout:.0f}s: {problem}")
        time.sleep(0.5)


def bulk_replay(clients: ClientSettings, *, start: str | None = "earliest", end: str | None = None,
                allow_partial_history: bool = False, processing: ProcessorSettings = DEFAULT_PROCESSING,
                batch_size: int = 2000, phases: PhaseProgress | None = None, work_dir: Path | None = None,
                spark_master: str | None = None, task_records: int | None = None) -> BulkReplayReport:
    """Rebuild the whole graph from the topic's ``start``..``end`` (eventTime) by an offline import (module doc).
    ``phases``: where each phase's progress is shown (none: not shown); ``work_dir``: where the CSV files are
    written (a temporary directory in it, removed after); ``spark_master``: fold on Spark
    (``replay.bulk.spark_fold``, ``task_records`` a task) instead of in this process."""
    installation = Neo4jInstallation.of(clients)
    report = BulkReplayReport()
    started = time.monotonic()
    if phases is None:
        phases = PhaseProgress(out=io.StringIO())
    phases.begin("prepare")
    window = EventWindow.parse(start, end) if (start, end) != ("earliest", None) else ALL_TIME
    ahead = processing.max_event_time_ahead_seconds
    begins, ends = offset_range(clients, start, end, ahead)
    if not allow_partial_history:
        refuse_partial_history(clients, begins)
    records = _record_count(clients, begins, ends)
    work = Path(work_dir) if work_dir is not None else Path(tempfile.gettempdir())
    check_space(space.needs_before_fold(records, work, installation.data),
                f"at most, for the {records:,} records to read; nothing was stopped")
    store = installation.data
    try:
        killed = left_by_killed_rebuild(store)
    except RebuildRunning as exc:
        raise BulkImportUnavailable(str(exc)) from None
    if killed is not None:  # Neo4j may still be stopped: the name it had
        database, report.resumed_after = killed.database, killed.phase
    else:
        database = _default_database(clients)  # also: Neo4j answers before anything is stopped
    mark = RebuildMark(os.getpid(), database, "stop")
    spark = spark_session(spark_master) if spark_master else None  # started while the old graph still answers
    try:
        # Stopped BEFORE the end offsets are taken: a graph sink still running then either wrote before the stop
        # (an event whose raw record is below the end offsets, so in the import) or fails and retries until Neo4j
        # is back (on top of the import); nothing it writes is overwritten.
        phases.begin("stop")
        write_mark(store, mark)
        installation.run(installation.control, "stop", step="stop")
        try:
            # the hand-over: the live graph sink leaves out every record below these ends (``graph.coverage``)
            begins, ends, topic_ends = offset_bounds(clients, start, end, ahead)
            report.coverage = Coverage(uuid.uuid4().hex, clients.events_topic, topic_ends)
            with tempfile.TemporaryDirectory(prefix="lineage-bulk-", dir=work_dir) as directory:
                write_mark(store, mark := mark.at("fold", directory))
                files = _fold(clients, spark, begins, ends, Path(directory), report, processing=processing,
                              batch_size=batch_size, window=window, phases=phases, task_records=task_records)
                check_space(space.needs_after_fold(report.files_bytes, installation.data),
                            "for the import files written; the old graph is started again")
                phases.begin("import")
                write_mark(store, mark := mark.at("import"))
                installation.run(installation.admin, "database", "import", "full", *files.admin_arguments(
                    database, Path(directory) / "import.report"), step="import")
                report.store_bytes = space.files_size(installation.data / "databases" / database)
        finally:
            phases.begin("start")  # with the old graph if anything failed
            write_mark(store, mark.at("start"))
            installation.run(installation.control, "start", step="start")
            wait_for_neo4j(clients)
            remove_mark(store)
    finally:
        if spark is not None:
            spark.stop()
    phases.begin("indexes")
    with driver_for(clients) as driver:
        ensure_indexes_online(driver)  # the rebuild is done when they are online
    phases.end()
    report.phases = dict(phases.seconds)
    report.seconds = time.monotonic() - started
    return report


def export_bulk(clients: ClientSettings, directory: Path, *, start: str | None = "earliest", end: str | None = None,
                allow_partial_history: bool = False, processing: ProcessorSettings = DEFAULT_PROCESSING,
                batch_size: int = 2000, phases: PhaseProgress | None = None, spark_master: str | None = None,
                task_records: int | None = None) -> BulkReplayReport:
    """A rebuild for a Neo4j elsewhere (``replay.bulk.export``): the import files, ``import.sh`` and ``IMPORT.md``
    under ``directory`` (new or empty). Neo4j must be stopped already: the offsets are taken now, and a graph sink
    that could still write would write past them into a graph the import replaces."""
    report = BulkReplayReport()
    started = time.monotonic()
    phases = phases or PhaseProgress(out=io.StringIO())
    phases.begin("prepare")
    if directory.exists() and any(directory.iterdir()):
        raise BulkImportUnavailable(f"--export {directory}: not empty (the import replaces what its files say)")
    if _unanswered(clients) is None:
        raise BulkImportUnavailable(f"--export: Neo4j at {clients.neo4j_uri} still answers; stop it first (a "
                                    "graph sink running meanwhile would write past the offsets the export takes, "
                                    "into the graph the import replaces), then export, import and start it")
    window = EventWindow.parse(start, end) if (start, end) != ("earliest", None) else ALL_TIME
    ahead = processing.max_event_time_ahead_seconds
    begins, ends, topic_ends = offset_bounds(clients, start, end, ahead)
    if not allow_partial_history:
        refuse_partial_history(clients, begins)
    records = _record_count(clients, begins, ends)
    check_space(space.needs_before_fold(records, directory, directory)[:1], f"at most, for the {records:,} records")
    report.coverage = Coverage(uuid.uuid4().hex, clients.events_topic, topic_ends)
    spark = spark_session(spark_master) if spark_master else None
    try:
        files = _fold(clients, spark, begins, ends, directory / "files", report, processing=processing,
                      batch_size=batch_size, window=window, phases=phases, task_records=task_records)
    finally:
        if spark is not None:
            spark.stop()
    (directory / export.SCRIPT).write_text(export.import_script(export.relative(files, directory), report.coverage),
                                           encoding="utf-8")
    (directory / export.STEPS).write_text(export.import_steps(directory, report.files_bytes, report.coverage),
                                          encoding="utf-8")
    report.phases = dict(phases.seconds)
    report.seconds = time.monotonic() - started
    return report
