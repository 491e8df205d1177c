"""``lineage replay --fresh --bulk``: read the whole events topic, fold every event into ONE ``GraphBatch`` (the
sink's own merge rules, so each row is already the final node or edge), write neo4j-admin CSV files
(``tables``), stop Neo4j, ``neo4j-admin database import full --overwrite-destination``, start it, recreate the
constraints and indexes (``ensure_constraints``).

Only for a Neo4j on this machine whose installation ``LINEAGE_NEO4J_HOME`` names: ``bin/neo4j-admin`` imports,
``bin/neo4j stop|start`` stops and starts the server (Community Edition cannot stop one database). Anything else is
``BulkImportUnavailable`` before the topic is read or the graph touched.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from neo4j.exceptions import Neo4jError, ServiceUnavailable

from kafka_lineage.graph.driver import driver_for, ensure_constraints
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.bulk.spark_fold import fold_on_spark, spark_session
from kafka_lineage.replay.bulk.tables import import_tables, write_csv
from kafka_lineage.replay.local import (
    ALL_TIME,
    DEFAULT_PROCESSING,
    EventWindow,
    ReplayReport,
    normalized_ranges,
    offset_range,
    refuse_partial_history,
    wipe,
)
from kafka_lineage.runtime.config import ClientSettings

EXIT_UNAVAILABLE = 3  # `lineage replay --bulk` when the database is not local or its tools are missing
_LOCAL_HOSTS = frozenset(("localhost", "127.0.0.1", "::1"))
START_TIMEOUT_SECONDS = 300.0


class BulkImportUnavailable(RuntimeError):
    """An offline import is not possible here (remote database, no installation, missing tools)."""


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

    @classmethod
    def of(cls, clients: ClientSettings) -> Neo4jInstallation:
        host = urlsplit(clients.neo4j_uri).hostname or ""
        if host not in _LOCAL_HOSTS and not host.startswith("127."):
            raise BulkImportUnavailable(f"--bulk imports into a database on this machine; NEO4J_URI is "
                                        f"{clients.neo4j_uri} (replay without --bulk writes through Bolt)")
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


def _default_database(clients: ClientSettings) -> str:
    with driver_for(clients) as driver:
        records, _, _ = driver.execute_query("SHOW DEFAULT DATABASE YIELD name", database_="system")
    return str(records[0]["name"])


def wait_for_neo4j(clients: ClientSettings, timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Until a query answers (an installation's ``neo4j start`` returns before the server listens)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with driver_for(clients, connection_timeout=3) as driver:
                driver.execute_query("RETURN 1")
            return
        except (ServiceUnavailable, Neo4jError, OSError) as exc:
            if time.monotonic() > deadline:
                raise BulkImportFailed(f"start: Neo4j did not answer within {timeout:.0f}s: {exc}") from None
            time.sleep(0.5)


def bulk_replay(clients: ClientSettings, *, start: str | None = "earliest", end: str | None = None,
                allow_partial_history: bool = False, processing: ProcessorSettings = DEFAULT_PROCESSING,
                batch_size: int = 2000, progress: Callable[[ReplayReport, int], None] | None = None,
                work_dir: Path | None = None, spark_master: str | None = None) -> BulkReplayReport:
    """Rebuild the whole graph from the topic's ``start``..``end`` (eventTime) by an offline import (module doc).
    ``work_dir``: where the CSV files are written (a temporary directory in it, removed after); ``spark_master``:
    fold on Spark (``replay.bulk.spark_fold``) instead of in this process."""
    installation = Neo4jInstallation.of(clients)
    report = BulkReplayReport()
    started = mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        report.phases[name] = now - mark
        mark = now

    window = EventWindow.parse(start, end) if (start, end) != ("earliest", None) else ALL_TIME
    ahead = processing.max_event_time_ahead_seconds
    begins, _ = offset_range(clients, start, end, ahead)
    if not allow_partial_history:
        refuse_partial_history(clients, begins)
    database = _default_database(clients)  # also: Neo4j answers before anything is stopped
    spark = spark_session(spark_master) if spark_master else None  # started while the old graph still answers
    phase("prepare")
    try:
        # Stopped BEFORE the end offsets are taken: a graph sink still running then either wrote before the stop
        # (an event whose raw record is below the end offsets, so in the import) or fails and retries until Neo4j
        # is back (on top of the import); nothing it writes is overwritten.
        installation.run(installation.control, "stop", step="stop")
        phase("stop")
        try:
            begins, ends = offset_range(clients, start, end, ahead)
            with tempfile.TemporaryDirectory(prefix="lineage-bulk-", dir=work_dir) as directory:
                if spark is not None:
                    fold = fold_on_spark(spark, clients, begins, ends, Path(directory), processing=processing,
                                         batch_size=batch_size, window=window)
                    files, report.counts = fold.files, fold.counts
                    for name in ("records", "written", "dead_letters", "scanned", "schema_changes"):
                        setattr(report, name, getattr(fold.report, name))
                    phase("fold")
                else:
                    batch = graph_batch(_events(clients, begins, ends, batch_size, processing, window, report,
                                                progress))
                    phase("read")
                    tables = import_tables(batch)
                    del batch
                    report.counts = tables.counts()
                    phase("tables")
                    files = write_csv(tables, Path(directory))
                    del tables
                    phase("csv")
                if files.nodes:  # neo4j-admin refuses an import of nothing; an empty topic is emptied below
                    installation.run(installation.admin, "database", "import", "full", *files.admin_arguments(
                        database, Path(directory) / "import.report"), step="import")
                phase("import")
        finally:
            installation.run(installation.control, "start", step="start")  # with the old graph if anything failed
            wait_for_neo4j(clients)
            phase("start")
    finally:
        if spark is not None:
            spark.stop()
    with driver_for(clients) as driver:
        if not report.counts or not any(report.counts.values()):
            wipe(driver)  # nothing was imported: the rebuilt graph of an empty topic is an empty graph
        ensure_constraints(driver)
        # the indexes are built in the background: the rebuild is done when they are online
        driver.execute_query("CALL db.awaitIndexes(600)")
    phase("constraints")
    report.seconds = time.monotonic() - started
    return report
