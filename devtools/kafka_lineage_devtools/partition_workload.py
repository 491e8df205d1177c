"""A ground-truth workload of daily partitions (issue 22): the events a scheduler's tasks emit over a month, and the
partition states and ``ready`` answers they must yield. Pure and seeded: the same arguments give the same events.

``generate_partitions(jobs, days, seed)`` models a lake:

- ``sources`` raw tables (``s3://pw-<tag>-raw``, ``raw/srcNN``) landed once a day by a process that sends no
  lineage, only a completion-marker DatasetEvent (``_SUCCESS`` named by a Hive path, by date directories, or in an
  explicit ``kafkaLineage_partition`` facet);
- ``jobs`` daily jobs in a layered DAG (``s3://pw-<tag>-lake``, ``warehouse/tNN``): a job of layer L reads the same
  day's partition of 1-3 tables (one of layer L-1, the others of any earlier layer or a source) and writes its own
  table's day partition. Every run sends START then COMPLETE (output statistics with rowCount, a schema facet, for
  a third of the jobs passing data-quality assertions) or FAIL. A dataset is named either by its partitioned path
  (``warehouse/t07/date=2025-12-03``: the processor turns it into the table root plus the facet) or by its root with
  an explicit ``kafkaLineage_partition`` facet, chosen per reference;
- a scheduler: a layer runs in its own hour of the day (every upstream run has ended before a downstream one
  starts), a task whose input partition failed or was never written is skipped for that day (upstream_failed), and
  a share of the runs (``retry_rate``) fail within minutes and are retried at once (the partition's first version
  FAILED, the retry's SUCCESS).

Faults inside the data (``PartitionWorkload.faults`` names where each landed):

- ``failed``: one run FAILs; its partition is FAILED and its downstream closure skips that day (no partition);
- ``assertion``: one run COMPLETEs with a failing assertion (FAILED, the assertion named); its readers run anyway
  (their partitions are SUCCESS but not ready);
- ``in_flight``: one run of the last day is still going when the workload ends (START only): RUNNING, and its
  downstream closure has not started that day;
- ``check``: a data-quality task reads one table's partition every day and reports assertions on its input; one
  day an assertion fails, which makes that partition FAILED (a check of the version it read); readers run anyway;
- ``marker``: one table requires ``_SUCCESS`` (``requiredMarker`` on every facet naming it); its marker comes with
  the COMPLETE's output facet or as a DatasetEvent after it, except on one day (RUNNING; readers run, not ready);
- ``backfill``: after the month, an upstream fix re-runs days 10-16 (``backfill_from``..) of one upstream table and
  its whole downstream closure, stage by stage (runs with the ``kafkaLineage_backfill`` run facet and a nominal
  time in the window): new versions. One backfill run of a closure job with readers FAILs (``backfill_failed``),
  so its readers are not re-run that day and their old versions become STALE;
- delivery: some COMPLETEs are published days late (after later days' events), some events twice (right after,
  or days later; a share of the live events once more after the backfill), and every event moves by up to
  ``shuffle_window`` positions (some COMPLETEs and FAILs go before their START, markers before the COMPLETE they
  follow).

The truth (``PartitionTruth``) is computed from the runs the model made, by the rules of issue 22 as written here,
independently of the product's code: per partition its state (SUCCESS, FAILED, RUNNING, STALE; None for a landed
source partition), version count, the latest version's run, rowCount, bytes and failed assertion names, the
partitions that run read, whether it is landed;
and the ``ready`` answer (and what is missing) for every (dataset, day), including days without a partition.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from kafka_lineage.processors.normalize import canonical_identity
from kafka_lineage_devtools.workload import _TAG, PRODUCER, RUN_EVENT_SCHEMA, _facet

__all__ = [
    "BACKFILL_FACET",
    "MARKER",
    "PartitionState",
    "PartitionTruth",
    "PartitionWorkload",
    "ReadyAnswer",
    "backfill_closure",
    "generate_partitions",
]

DATASET_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
PARTITION_FACET = "kafkaLineage_partition"
PARTITION_SCHEMA_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/"
                        "PartitionDatasetFacet.json#/$defs/PartitionDatasetFacet")
BACKFILL_FACET = "kafkaLineage_backfill"  # the run facet a backfill run sends (window, planId)
BACKFILL_SCHEMA_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/"
                       "BackfillRunFacet.json#/$defs/BackfillRunFacet")
MARKER = "_SUCCESS"
FAILING_ASSERTION = "row_count_between"
FAILING_CHECK = "freshness"
_PASSING = ({"assertion": "not_null", "column": "id", "success": True},
            {"assertion": "unique", "column": "id", "success": True})
_MINUTE = timedelta(minutes=1)
_PLUS2 = timezone(timedelta(hours=2))

Key = tuple[str, str, str]  # (namespace, name, partition key text)


# --- the truth's shape -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionState:
    """What `lineage partitions` must show for one partition."""

    state: str | None  # SUCCESS, FAILED, RUNNING, STALE; None: no run wrote it
    versions: int
    row_count: int | None  # of the latest version
    failed_assertions: tuple[str, ...] = ()  # of the latest version, sorted
    landed: bool = False  # no run wrote it, its marker was reported
    run_id: str | None = None  # the latest version's writing run
    bytes: int | None = None  # of the latest version
    upstream: tuple[Key, ...] = ()  # the partitions the latest version's run read, sorted


@dataclass(frozen=True, slots=True)
class ReadyAnswer:
    """What `lineage ready` must answer: ready, and what is missing as sorted (role, namespace, name, key, state)."""

    ready: bool
    missing: tuple[tuple[str, str, str, str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionTruth:
    datasets: tuple[tuple[str, str], ...]  # every dataset of the workload (sources first), canonical
    days: tuple[str, ...]  # 2025-12-01, …
    partitions: Mapping[Key, PartitionState]  # every partition that exists
    ready: Mapping[Key, ReadyAnswer]  # every (dataset, day)

    def counts(self) -> dict[str, int]:
        states: dict[str, int] = defaultdict(int)
        for p in self.partitions.values():
            states[p.state or ("landed" if p.landed else "none")] += 1
        return {"partitions": len(self.partitions), **dict(sorted(states.items())),
                "ready": sum(a.ready for a in self.ready.values()), "not_ready": sum(not a.ready for a in
                                                                                  self.ready.values())}


@dataclass(frozen=True, slots=True)
class PartitionWorkload:
    events: list[dict[str, Any]]  # in publishing order (copies share objects)
    truth: PartitionTruth
    faults: Mapping[str, Any]  # where each fault landed (dataset names, days)
    params: Mapping[str, Any]

    def summary(self) -> dict[str, Any]:
        return {**self.params, "events": len(self.events), "faults": dict(self.faults),
                "expected": self.truth.counts()}


# --- the model -------------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Table:
    index: int
    identity: tuple[str, str]
    source: bool
    fields: list[dict[str, Any]]
    naming: str  # path, facet or mixed (per reference); sources: hive, dirs or facet
    required_marker: str | None = None
    readers: list[_Job] = field(default_factory=list)


@dataclass(eq=False)
class _Job:
    index: int
    name: str
    layer: int
    inputs: list[_Table]
    output: _Table
    checks: bool  # reports data-quality assertions on what it writes


@dataclass(eq=False)
class _Run:
    run_id: str
    job: _Job
    day: str
    start: datetime
    end: datetime
    outcome: str  # COMPLETE, FAIL, or START (still running when the workload ends)
    row_count: int | None
    size: int | None
    failed: tuple[str, ...]
    marker: bool  # its completion marker was reported (output facet or a DatasetEvent before the next version)
    backfill: bool


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Builder:
    def __init__(self, seed: int, tag: str, jobs: int, days: int, start: date, sources: int,
                 backfill_from: int, backfill_days: int, retry_rate: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.ids = random.Random(f"{seed}/{tag}/partitions")
        self.spelling = random.Random(f"{seed}/spelling")  # spellings draw apart: the model stays the same
        self.tag = tag
        self.job_ns = f"pw-{tag}.airflow"
        self.lake_ns = canonical_identity(f"s3://pw-{tag}-lake", "warehouse")[0]
        self.raw_ns = canonical_identity(f"s3://pw-{tag}-raw", "raw")[0]
        self.days = [(start + timedelta(days=d)).isoformat() for d in range(days)]
        self.window = self.days[backfill_from - 1:backfill_from - 1 + backfill_days]
        if len(self.window) != backfill_days:
            raise ValueError(f"the backfill window (day {backfill_from}, {backfill_days} days) is not inside "
                             f"the {days} days")
        self.tables: list[_Table] = []
        self.jobs: list[_Job] = []
        self.runs: dict[tuple[int, str], list[_Run]] = defaultdict(list)  # (table, day) → writing runs
        self.reads: dict[str, list[tuple[int, str]]] = {}  # run id → the partitions it read
        self.landed: set[tuple[int, str]] = set()
        # (table, day) → (start, failed assertion names) of the runs that checked it
        self.checks: dict[tuple[int, str], list[tuple[datetime, tuple[str, ...]]]] = defaultdict(list)
        self.timeline: list[tuple[datetime, int, dict[str, Any], str]] = []  # (time, seq, event, kind)
        self.faults: dict[str, Any] = {}
        self.retry_rate, self.retries = retry_rate, 0
        self.plan(jobs, sources)

    def new_id(self) -> str:
        return str(uuid.UUID(int=self.ids.getrandbits(128), version=4))

    def stamp(self, moment: datetime) -> str:
        """An eventTime: UTC, or for some producers the same instant at +02:00 (order must follow the instant)."""
        if self.spelling.random() < 0.1:
            return moment.astimezone(_PLUS2).isoformat(timespec="milliseconds")
        return _utc(moment)

    def spelled(self, namespace: str) -> str:
        """A storage namespace as some integrations write it (``s3a://``): the processor makes it canonical."""
        return namespace.replace("s3://", "s3a://", 1) if self.spelling.random() < 0.2 else namespace

    def fields(self, prefix: str) -> list[dict[str, Any]]:
        return [{"name": "id", "type": "bigint"}, {"name": "day", "type": "date"},
                *({"name": f"{prefix}_{n}", "type": self.rng.choice(("string", "double", "bigint"))}
                  for n in range(self.rng.randint(2, 5)))]

    def plan(self, jobs: int, sources: int) -> None:
        rng = self.rng
        for n in range(sources):
            self.tables.append(_Table(n, canonical_identity(self.raw_ns, f"raw/src{n:02d}")[:2], True,
                                      self.fields(f"s{n}"), ("hive", "dirs", "facet")[n % 3]))
        layers = max(2, min(6, round(jobs ** 0.45)))
        per_layer = [jobs // layers + (1 if n < jobs % layers else 0) for n in range(layers)]
        by_layer: list[list[_Table]] = [self.tables[:sources]]
        for layer, count in enumerate(per_layer, start=1):
            made = []
            for _ in range(count):
                index = len(self.jobs)
                table = _Table(len(self.tables), canonical_identity(self.lake_ns, f"warehouse/t{index:02d}")[:2],
                               False, self.fields(f"c{index}"), rng.choice(("path", "facet", "mixed")))
                self.tables.append(table)
                previous = by_layer[layer - 1]
                earlier = [t for level in by_layer[:layer] for t in level]
                inputs = [previous[int(rng.random() * len(previous))]]
                for _ in range(rng.choice((0, 1, 1, 2))):
                    other = earlier[int(rng.random() * len(earlier))]
                    if other not in inputs:
                        inputs.append(other)
                job = _Job(index, f"daily.l{layer}.t{index:02d}", layer, inputs, table, rng.random() < 0.35)
                for up in inputs:
                    up.readers.append(job)
                self.jobs.append(job)
                made.append(table)
            by_layer.append(made)
        self.choose_faults()

    def closure(self, job: _Job) -> list[_Job]:
        """The job and every job downstream of it, in layer order (a valid run order)."""
        seen, todo = {job.index: job}, [job]
        while todo:
            for reader in todo.pop().output.readers:
                if reader.index not in seen:
                    seen[reader.index] = reader
                    todo.append(reader)
        return sorted(seen.values(), key=lambda j: (j.layer, j.index))

    def choose_faults(self) -> None:
        rng, jobs = self.rng, self.jobs
        outside = [d for d in self.days[1:-1] if d not in self.window]  # a fault's day: not repaired by the backfill
        with_readers = [j for j in jobs if j.output.readers]
        # the backfill's upstream table: a low-layer table with the largest downstream closure
        low = [j for j in jobs if j.layer <= 2 and j.output.readers] or with_readers or jobs
        root = max(low, key=lambda j: (len(self.closure(j)), -j.index))
        self.backfill = self.closure(root)
        inner = [j for j in self.backfill[1:] if j.output.readers]
        self.backfill_failed = (inner[int(rng.random() * len(inner))], rng.choice(self.window)) if inner else None
        taken = {root.index} | ({self.backfill_failed[0].index} if self.backfill_failed else set())
        picks = [j for j in with_readers if j.index not in taken]
        rng.shuffle(picks)
        failed, assertion, marker, checked, hung = (picks + with_readers * 5)[:5]
        # different days: a failed day's skipped downstream never hides another fault
        fail_day, assertion_day, marker_day, check_day = rng.sample(outside, 4)
        self.failed, self.assertion, self.marker_missing = (failed, fail_day), (assertion, assertion_day), (
            marker, marker_day)
        # a data-quality task checks one table every day (assertions on what it reads); it fails one day
        self.checked, self.check_failed = checked, (checked, check_day)
        # a run of the last day still going when the workload ends (hung): RUNNING, its downstream waiting
        self.in_flight = (hung, self.days[-1])
        self.fault_days = {self.failed, self.assertion, self.marker_missing, self.check_failed, self.in_flight}
        marker.output.required_marker = MARKER
        marker.output.naming = "facet"  # the rule travels in the facet: every reference carries it
        assertion.checks = True
        name = self.name

        def readers(job: _Job) -> list[str]:
            return sorted({name(r.output) for r in job.output.readers})

        self.faults = {
            "failed": {"dataset": name(failed.output), "day": self.failed[1],
                       "downstream": [name(j.output) for j in self.closure(failed)[1:]]},
            "assertion": {"dataset": name(assertion.output), "day": self.assertion[1],
                          "assertion": FAILING_ASSERTION, "readers": readers(assertion)},
            "marker": {"dataset": name(marker.output), "day": self.marker_missing[1], "requiredMarker": MARKER,
                       "readers": readers(marker)},
            "backfill": {"dataset": name(root.output), "from": self.window[0], "to": self.window[-1],
                         "closure": [name(j.output) for j in self.backfill]},
            "in_flight": {"dataset": name(hung.output), "day": self.days[-1],
                          "downstream": [name(j.output) for j in self.closure(hung)[1:]]},
            "check": {"dataset": name(checked.output), "day": check_day, "job": f"check.{name(checked.output)}",
                      "assertion": FAILING_CHECK, "readers": readers(checked)},
            "backfill_failed": ({"dataset": name(self.backfill_failed[0].output), "day": self.backfill_failed[1],
                                 "readers": readers(self.backfill_failed[0])} if self.backfill_failed else None),
        }

    @staticmethod
    def name(table: _Table) -> str:
        return table.identity[1]

    # --- events
    def add(self, moment: datetime, event: dict[str, Any], kind: str) -> None:
        self.timeline.append((moment, len(self.timeline), event, kind))

    def partition_facet(self, table: _Table, day: str, marker: bool = False) -> dict[str, Any]:
        facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": PARTITION_SCHEMA_URL,
                                 "keys": [{"name": "date", "value": day}], "source": "facet"}
        if marker:
            facet["marker"] = MARKER
        if table.required_marker:
            facet["requiredMarker"] = table.required_marker
        return facet

    def reference(self, table: _Table, day: str, io_key: str, io_facets: dict[str, Any],
                  marker: bool = False) -> dict[str, Any]:
        """A dataset of an event naming one partition: by its partitioned path, or its root and the facet."""
        ns, root = table.identity
        naming = table.naming if table.naming != "mixed" else self.rng.choice(("path", "facet"))
        if naming in ("path", "hive") and not marker:
            item: dict[str, Any] = {"namespace": self.spelled(ns), "name": f"{root}/date={day}"}
        elif naming == "dirs" and not marker:
            item = {"namespace": self.spelled(ns), "name": f"{root}/{day.replace('-', '/')}"}
        else:
            item = {"namespace": ns, "name": root}
            io_facets = {PARTITION_FACET: self.partition_facet(table, day, marker), **io_facets}
        if io_facets:
            item[io_key] = io_facets
        return item

    def land(self, table: _Table, day: str, moment: datetime) -> None:
        """A source partition's completion marker (its loader sends no lineage)."""
        ns, root = table.identity
        if table.naming == "hive":
            dataset: dict[str, Any] = {"namespace": self.spelled(ns), "name": f"{root}/date={day}/{MARKER}"}
        elif table.naming == "dirs":
            dataset = {"namespace": ns, "name": f"{root}/{day.replace('-', '/')}/{MARKER}"}
        else:
            dataset = {"namespace": ns, "name": root,
                       "facets": {PARTITION_FACET: self.partition_facet(table, day, marker=True)}}
        self.add(moment, {"eventTime": self.stamp(moment), "producer": PRODUCER, "schemaURL": DATASET_EVENT_SCHEMA,
                          "dataset": dataset}, "marker")
        self.landed.add((table.index, day))

    def marker_event(self, table: _Table, day: str, moment: datetime) -> None:
        """A written partition's marker, reported apart from its run (by the file hook or the committer)."""
        ns, root = table.identity
        dataset = {"namespace": ns, "name": root,
                   "facets": {PARTITION_FACET: self.partition_facet(table, day, marker=True)}}
        self.add(moment, {"eventTime": self.stamp(moment), "producer": PRODUCER, "schemaURL": DATASET_EVENT_SCHEMA,
                          "dataset": dataset}, "marker")

    def run(self, job: _Job, day: str, start: datetime, backfill: bool, attempt_fails: bool = False,
            short: bool = False) -> _Run:
        """One run of the job for the day: its events and its record (the scheduler decided it runs).
        ``attempt_fails``: a first attempt that fails (a retry follows); ``short``: it, or its retry, takes minutes."""
        rng = self.rng
        run_id = self.new_id()
        end = start + timedelta(seconds=60 + int(rng.random() * (200 if backfill or short else 1200)))
        fail = ((job, day) == self.failed and not backfill) or ((job, day) == self.backfill_failed and backfill) \
            or attempt_fails
        failing = (job, day) == self.assertion and not backfill
        out = job.output
        facets: dict[str, Any] = {"nominalTime": _facet("NominalTimeRunFacet", "1-0-1",
                                                        nominalStartTime=f"{day}T00:00:00Z",
                                                        nominalEndTime=f"{_next_day(day)}T00:00:00Z")}
        if backfill:
            facets[BACKFILL_FACET] = {"_producer": PRODUCER, "_schemaURL": BACKFILL_SCHEMA_URL,
                                      "window": {"from": self.window[0], "to": self.window[-1]},
                                      "planId": f"bf-{self.tag}-{self.name(self.backfill[0].output)}"}
        job_obj = {"namespace": self.job_ns, "name": job.name}
        schema = {"schema": _facet("SchemaDatasetFacet", "1-1-1", fields=out.fields)}

        def inputs(complete: bool) -> list[dict[str, Any]]:
            items = []
            for table in job.inputs:
                io: dict[str, Any] = {}
                if complete:
                    io["inputStatistics"] = _facet("InputStatisticsInputDatasetFacet", "1-0-0",
                                                   rowCount=1 + int(rng.random() * 10**6))
                item = self.reference(table, day, "inputFacets", io)
                if table.source:
                    item["facets"] = {"schema": _facet("SchemaDatasetFacet", "1-1-1", fields=table.fields)}
                items.append(item)
            return items

        def output(io: dict[str, Any], marker: bool = False) -> list[dict[str, Any]]:
            item = self.reference(out, day, "outputFacets", io, marker)
            item["facets"] = schema
            return [item]

        self.add(start, {"eventType": "START", "eventTime": self.stamp(start), "producer": PRODUCER,
                         "schemaURL": RUN_EVENT_SCHEMA, "run": {"runId": run_id, "facets": facets}, "job": job_obj,
                         "inputs": inputs(False), "outputs": output({})}, "start")
        row_count = size = None
        failed: tuple[str, ...] = ()
        marker = False
        outcome = "FAIL" if fail else "COMPLETE"
        if (job, day) == self.in_flight and not backfill:
            outcome, end = "START", start  # no end yet: a STALE check would use its start
        elif fail:
            error = _facet("ErrorMessageRunFacet", "1-0-1", message=f"{job.name} failed for {day}",
                           programmingLanguage="python")
            self.add(end, {"eventType": "FAIL", "eventTime": self.stamp(end), "producer": PRODUCER,
                           "schemaURL": RUN_EVENT_SCHEMA, "run": {"runId": run_id, "facets": {**facets,
                                                                                             "errorMessage": error}},
                           "job": job_obj, "inputs": inputs(False), "outputs": output({})}, "fail")
        else:
            row_count = 1 + int(rng.random() * 10**7)
            size = row_count * (40 + int(rng.random() * 80))
            io: dict[str, Any] = {"outputStatistics": _facet("OutputStatisticsOutputDatasetFacet", "1-0-2",
                                                             rowCount=row_count, size=size)}
            if job.checks:
                assertions = list(_PASSING)
                if failing:
                    assertions.append({"assertion": FAILING_ASSERTION, "success": False})
                    failed = (FAILING_ASSERTION,)
                io["dataQualityAssertions"] = _facet("DataQualityAssertionsDatasetFacet", "1-0-1",
                                                     assertions=assertions)
            with_marker = False
            if out.required_marker and (job, day) != self.marker_missing:
                marker = True
                with_marker = rng.random() < 0.5  # on the output, else a marker event after the COMPLETE
                if not with_marker:
                    self.marker_event(out, day, end + timedelta(seconds=20))
            self.add(end, {"eventType": "COMPLETE", "eventTime": self.stamp(end), "producer": PRODUCER,
                           "schemaURL": RUN_EVENT_SCHEMA, "run": {"runId": run_id, "facets": facets},
                           "job": job_obj, "inputs": inputs(True), "outputs": output(io, with_marker)}, "complete")
        record = _Run(run_id, job, day, start, end, outcome, row_count, size, failed, marker, backfill)
        self.runs[(out.index, day)].append(record)
        self.reads[run_id] = [(t.index, day) for t in job.inputs]
        return record

    def check(self, table: _Table, day: str, start: datetime) -> None:
        """A data-quality task's run: it reads the partition and reports assertions about it (on its input)."""
        run_id, end = self.new_id(), start + timedelta(seconds=30 + int(self.rng.random() * 200))
        failing = (self.checked, day) == self.check_failed
        assertions = [{"assertion": "not_null", "column": "id", "success": True}]
        if failing:
            assertions.append({"assertion": FAILING_CHECK, "success": False})
        job = {"namespace": self.job_ns, "name": f"check.{self.name(table)}"}
        facets = {"nominalTime": _facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=f"{day}T00:00:00Z")}
        for event_type, moment, io in (("START", start, {}), ("COMPLETE", end, {"dataQualityAssertions": _facet(
                "DataQualityAssertionsDatasetFacet", "1-0-1", assertions=assertions)})):
            self.add(moment, {"eventType": event_type, "eventTime": self.stamp(moment), "producer": PRODUCER,
                              "schemaURL": RUN_EVENT_SCHEMA, "run": {"runId": run_id, "facets": facets}, "job": job,
                              "inputs": [self.reference(table, day, "inputFacets", io)], "outputs": []},
                     event_type.lower())
        self.checks[(table.index, day)].append((start, (FAILING_CHECK,) if failing else ()))

    def usable(self, table: _Table, day: str) -> bool:
        """The scheduler's view of an input partition: landed, or its latest run completed."""
        if table.source:
            return (table.index, day) in self.landed
        runs = self.runs.get((table.index, day))
        return bool(runs) and runs[-1].outcome == "COMPLETE"

    def emit(self) -> None:
        rng = self.rng
        for day in self.days:
            midnight = datetime.fromisoformat(f"{day}T00:00:00+00:00")
            for table in self.tables:
                if table.source:
                    self.land(table, day, midnight + timedelta(seconds=60 + int(rng.random() * 2700)))
            for job in self.jobs:  # layer by layer: layer L runs in hour L of the day, after its upstream ended
                if all(self.usable(t, day) for t in job.inputs):
                    start = midnight + timedelta(hours=job.layer, seconds=int(rng.random() * 1200))
                    retry = rng.random() < self.retry_rate and (job, day) not in self.fault_days
                    if retry:  # the first attempt fails within minutes, the scheduler's retry succeeds: 2 versions
                        attempt = self.run(job, day, start, backfill=False, attempt_fails=True, short=True)
                        start = attempt.end + timedelta(minutes=2)
                        self.retries += 1
                    record = self.run(job, day, start, backfill=False, short=retry)
                    if job is self.checked and record.outcome == "COMPLETE":
                        self.check(job.output, day, midnight + timedelta(hours=job.layer, minutes=45,
                                                                         seconds=int(rng.random() * 300)))
        # the backfill, after an upstream fix: stage by stage (a stage per layer), the days of the window in each
        fixed = datetime.fromisoformat(f"{_next_day(self.days[-1])}T00:00:00+00:00") + timedelta(days=1, hours=8)
        layers = sorted({j.layer for j in self.backfill})
        closure = {j.output.index for j in self.backfill}
        repaired: set[tuple[int, str]] = set()  # (table, day) the backfill rewrote successfully
        for job in self.backfill:
            stage = layers.index(job.layer)
            for k, day in enumerate(self.window):
                # a task downstream of a failed backfill task is skipped (upstream_failed), transitively
                if all((t.index, day) in repaired if t.index in closure else self.usable(t, day)
                       for t in job.inputs):
                    start = fixed + timedelta(hours=stage, minutes=5 * k, seconds=int(rng.random() * 60))
                    if self.run(job, day, start, backfill=True).outcome == "COMPLETE":
                        repaired.add((job.output.index, day))

    # --- the truth (issue 22's rules, written out here)
    def truth(self) -> PartitionTruth:
        states: dict[tuple[int, str], PartitionState] = {}

        def latest(index: int, day: str) -> _Run | None:
            runs = self.runs.get((index, day))
            return max(runs, key=lambda r: (r.start, r.run_id)) if runs else None

        def state_of(index: int, day: str) -> PartitionState | None:
            if (index, day) in states:
                return states[(index, day)]
            runs = self.runs.get((index, day))
            if not runs:
                found = PartitionState(None, 0, None, (), True) if (index, day) in self.landed else None
            else:
                last = latest(index, day)
                assert last is not None
                table = self.tables[index]
                # a check counts for the version that was the latest when the check started
                checked = any(failed and at >= last.start for at, failed in self.checks.get((index, day), ()))
                if last.outcome == "FAIL" or last.failed or checked:
                    state = "FAILED"
                elif last.outcome == "START":
                    state = "RUNNING"  # started, not ended
                elif table.required_marker and not last.marker:
                    state = "RUNNING"  # complete, waiting for its marker
                else:
                    state = "SUCCESS"
                    # STALE: an upstream partition it read got a version (another run) that ended after the read
                    for up in self.reads[last.run_id]:
                        if any(r.end > last.start for r in self.runs.get(up, ()) if r.run_id != last.run_id):
                            state = "STALE"
                upstream = tuple(sorted((*self.tables[i].identity, f"date={d}") for i, d in self.reads[last.run_id]))
                found = PartitionState(state, len(runs), last.row_count, tuple(sorted(last.failed)), False,
                                       last.run_id, last.size, upstream)
            if found is not None:
                states[(index, day)] = found
            return found

        partitions: dict[Key, PartitionState] = {}
        ready: dict[Key, ReadyAnswer] = {}
        for table in self.tables:
            ns, name = table.identity
            for day in self.days:
                key = f"date={day}"
                own = state_of(table.index, day)
                if own is None:
                    ready[(ns, name, key)] = ReadyAnswer(False, (("partition", ns, name, key, None),))
                    continue
                partitions[(ns, name, key)] = own
                missing = []
                if own.state != "SUCCESS":
                    missing.append(("partition", ns, name, key, own.state))
                last = latest(table.index, day)
                for up_index, up_day in self.reads[last.run_id] if last else ():
                    up = state_of(up_index, up_day)
                    if up is None or (up.state != "SUCCESS" and not up.landed):
                        up_ns, up_name = self.tables[up_index].identity
                        missing.append(("upstream", up_ns, up_name, f"date={up_day}", up.state if up else None))
                ready[(ns, name, key)] = ReadyAnswer(not missing, tuple(sorted(missing, key=_order)))
        return PartitionTruth(tuple(t.identity for t in self.tables), tuple(self.days), partitions, ready)


def _order(item: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if value is None else str(value) for value in item)


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _deliver(timeline: list[tuple[datetime, int, dict[str, Any], str]], rng: random.Random, late_rate: float,
             duplicate_rate: float, shuffle_window: int, resend_rate: float, end_of_live: datetime
             ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Publishing order: by event time, but some COMPLETEs days late, some events twice (right after, or days
    later, as a restarted emitter re-sends), and every event moved by up to ``shuffle_window`` positions (a run's
    COMPLETE may come before its START, a marker before the COMPLETE it follows)."""
    entries: list[tuple[datetime, int, dict[str, Any]]] = []
    late = duplicates = 0
    for moment, seq, event, kind in timeline:
        sent = moment
        if kind == "complete" and moment < end_of_live and rng.random() < late_rate:
            sent = moment + timedelta(days=2 + rng.random() * 3)  # after later days' events
            late += 1
        entries.append((sent, seq, event))
        if rng.random() < duplicate_rate:
            again = sent + (_MINUTE if rng.random() < 0.6 else timedelta(days=1 + rng.random() * 4))
            entries.append((again, seq, event))
            duplicates += 1
    # a restarted emitter re-sends old live events after the backfill: they must not undo its newer versions
    last = max(moment for moment, _, _, _ in timeline)
    resent = [(last + timedelta(hours=1, seconds=n), seq, event) for n, (moment, seq, event, _) in enumerate(timeline)
              if moment < end_of_live and rng.random() < resend_rate]
    entries += resent
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    if shuffle_window > 0:
        keys = [i + rng.random() * shuffle_window for i in range(len(entries))]
        entries = [entry for _, entry in sorted(zip(keys, entries, strict=True), key=lambda pair: pair[0])]
    events = [event for _, _, event in entries]
    started: set[str] = set()
    early = 0  # events sent before their run's START
    for event in events:
        run_id = event.get("run", {}).get("runId")
        if event.get("eventType") == "START":
            started.add(run_id)
        elif run_id is not None and run_id not in started:
            early += 1
    return events, {"late_completes": late, "duplicates": duplicates + len(resent), "resent_after_backfill":
                    len(resent), "before_start": early}


def backfill_closure(truth: PartitionTruth, dataset: tuple[str, str], first: str, last: str) -> set[Key]:
    """The partitions a backfill of ``dataset``'s days ``first``..``last`` must rebuild: every partition whose
    latest version's run read one of those, or one of those it derives from, transitively (the dataset's own
    partitions not included)."""
    affected = {key for key in truth.partitions if key[:2] == dataset and first <= key[2].removeprefix("date=") <= last}
    roots = set(affected)
    grew = True
    while grew:
        grew = False
        for key, state in truth.partitions.items():
            if key not in affected and any(up in affected for up in state.upstream):
                affected.add(key)
                grew = True
    return affected - roots


def generate_partitions(jobs: int = 50, days: int = 30, seed: int = 22, *, tag: str | None = None,
                        start: str = "2025-12-01", sources: int | None = None, backfill_from: int = 10,
                        backfill_days: int = 7, late_rate: float = 0.04, duplicate_rate: float = 0.04,
                        shuffle_window: int = 24, resend_rate: float = 0.01,
                        retry_rate: float = 0.01) -> PartitionWorkload:
    """``jobs`` daily jobs over ``days`` days from ``start`` (the module doc), with their truth.

    ``tag`` (default ``p{seed}``) goes into every namespace and seeds the run ids: workloads with different tags
    share nothing in the graph. ``sources``: raw tables (default jobs/6, at least 2). The backfill re-runs days
    ``backfill_from``..``backfill_from + backfill_days - 1`` (1-based)."""
    if jobs < 4 or days < 4:
        raise ValueError("a partition workload needs at least 4 jobs and 4 days (a day for each fault)")
    if backfill_days < 1 or backfill_from < 2 or backfill_from + backfill_days - 1 > days - 1:
        raise ValueError("the backfill window must leave a day before and after it")
    if days - 2 - backfill_days < 4:
        raise ValueError("the faults need four days outside the backfill window (neither the first nor the last)")
    tag = f"p{seed}" if tag is None else tag
    if not _TAG.fullmatch(tag):
        raise ValueError(f"tag must be 1-24 lower-case letters, digits or inner hyphens: {tag!r}")
    builder = _Builder(seed, tag, jobs, days, date.fromisoformat(start), sources or max(2, jobs // 6),
                       backfill_from, backfill_days, retry_rate)
    builder.emit()
    truth = builder.truth()
    end_of_live = datetime.fromisoformat(f"{_next_day(builder.days[-1])}T00:00:00+00:00")
    events, stats = _deliver(builder.timeline, random.Random(f"delivery/{seed}"), late_rate, duplicate_rate,
                             shuffle_window, resend_rate, end_of_live)
    params = {"seed": seed, "tag": tag, "jobs": jobs, "days": days, "sources": len(builder.tables) - jobs,
              "runs": sum(len(r) for r in builder.runs.values()),
              "backfill_runs": sum(r.backfill for runs in builder.runs.values() for r in runs),
              "retries": builder.retries,
              "distinct_events": len(builder.timeline), **stats,
              "job_namespace": builder.job_ns, "dataset_namespaces": [builder.raw_ns, builder.lake_ns]}
    return PartitionWorkload(events, truth, builder.faults, params)
