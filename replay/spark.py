"""``lineage replay --engine spark``: the rebuild of ``lineage replay`` as a PySpark batch job, for topics one machine
cannot replay fast enough.

The driver computes the offset range of every partition of the events topic (for the eventTime window
``--from``/``--to``, as the local replay does; tasks keep the window's events) and makes each partition's range one
Spark task. A task reads its range with confluent-kafka, runs the same pure processing as the local replay — a fresh
``ProcessorCore``: decode the Confluent-framed Avro through the registry, validate, dedupe, reorder, normalize — and
writes with the graph sink's idempotent, order-independent statements. Processor state is per run and a run's events
share a key, hence a partition: partitions are independent, so the graph is the one the local replay builds (same
fingerprint) whichever executor runs which task. Concurrent writers can deadlock on shared nodes (a dataset two jobs
write); the driver's managed transactions retry.

Why not Spark's Kafka source (spark-sql-kafka): there is no build of it for the PySpark we pin (4.3.0) on Maven
Central, a connector of another Spark minor version is not binary compatible, and the records would only be handed
to Python anyway — reading them with the client every other component uses keeps one decode path and needs no JVM
package at all. See docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.replay.drift import ReplayDrift
from kafka_lineage.replay.local import (
    ALL_TIME,
    DEFAULT_PROCESSING,
    EventWindow,
    ReplayReport,
    prepare_replay,
    replay_ranges,
)
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.gc_tuning import tune_gc

Counts = tuple[int, int, int]  # records, written, dead letters
Part = tuple[Counts, list[Any]]  # a task's counts and its schema histories (ReplayDrift.kept)


def replay_task(clients: ClientSettings, processing: ProcessorSettings, batch_size: int,
                ranges: Iterable[tuple[int, int, int]], window: EventWindow = ALL_TIME) -> Iterator[Part]:
    """One Spark task: its partitions' ``(partition, first offset, end offset)`` ranges → the graph; yields counts
    and its schema histories."""
    ranges = list(ranges)
    report = ReplayReport()
    drift = ReplayDrift(processing.schema_history_limit)
    if ranges:
        tune_gc()  # an executor's Python worker runs the replay loop like the local engine's process
        with driver_for(clients) as driver:
            replay_ranges(clients, driver, {p: first for p, first, _ in ranges}, {p: end for p, _, end in ranges},
                          batch_size=batch_size, report=report, processing=processing, window=window, drift=drift)
    yield (report.records, report.written, report.dead_letters), drift.kept()


def replay_on_spark(clients: ClientSettings, *, start: str | None = "earliest", end: str | None = None,
                    fresh: bool = False, master: str = "local[*]", batch_size: int = 2000,
                    allow_partial_history: bool = False, processing: ProcessorSettings = DEFAULT_PROCESSING
                    ) -> ReplayReport:
    from pyspark.sql import SparkSession

    started = time.monotonic()
    begins, ends = prepare_replay(clients, start, end, fresh, allow_partial_history,
                                  processing.max_event_time_ahead_seconds)
    window = EventWindow.parse(start, end)
    report = ReplayReport()
    if ends:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local executors must import this package too
        spark = (SparkSession.builder.master(master).appName("lineage-replay")
                 .config("spark.ui.enabled", "false")
                 .getOrCreate())
        try:
            ranges = [(p, begins[p], ends[p]) for p in sorted(ends)]

            def task(partition_ranges: Iterable[tuple[int, int, int]]) -> Iterator[Part]:
                return replay_task(clients, processing, batch_size, partition_ranges, window)

            parts = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(task).collect()
        finally:
            spark.stop()
        report = ReplayReport(*(sum(column) for column in zip(*(counts for counts, _ in parts), strict=True)))
        drift = ReplayDrift(processing.schema_history_limit)
        for _, kept in parts:
            drift.absorb(kept)
        report.schema_changes = drift.findings()
    report.seconds = time.monotonic() - started
    return report
