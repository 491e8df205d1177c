"""``python -m kafka_lineage_devtools.bench_core``: µs per event of ``ProcessorCore.process`` plus the shell's Avro
encode.

No Kafka, no registry: events are built with openlineage-python (as emitters do), framed as the publisher frames
them (``event_to_record`` + Avro with schema id 1) and fed to the core in batches of 500; writer schemas come from
an in-memory fetcher. Each round uses fresh runs (new run ids, times and row counts; the same 100 jobs and their
datasets, as in a real stream), so caches keyed by content only help as much as they would in production. The cores
live across rounds, as a worker does; the first round warms them up and is not counted. Per-step figures time each
step on its own over the same events; ``other`` is what ``process`` spends beyond them (state, reorder buffer,
records). ``--shape light|realistic|heavy`` streams ``bench_events``' platform-shaped events instead (a layered
DAG of 2,000 jobs; every round fresh runs). ``--digest`` prints a hash of every output byte and state write (of the
first round, from fresh cores), to check that a change keeps the output identical. Figures are CPU time (the
process's, not the wall clock's) and the best round: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde

from kafka_lineage.processors.core import Incoming, Output, ProcessorCore
from kafka_lineage.processors.identity import dedupe_id
from kafka_lineage.processors.normalize import normalize_event
from kafka_lineage.runtime.gc_tuning import tune_gc
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import event_to_record, partition_key, record_to_event, validate_event
from kafka_lineage.schemas.wire import AvroCodec, SchemaNotFound
from kafka_lineage_devtools.bench_events import SHAPES, run_pairs

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark"
SCHEMA_IDS = {1: "openlineage_event", 2: "normalized_event", 3: "dead_letter"}
BATCH = 500
# Namespaces as emitters write them: several need normalization (s3a, JDBC URLs, broker lists, upper-case hosts).
INPUT_NAMESPACES = ("s3a://raw-zone", "jdbc:postgresql://DB.prod.internal:5432/shop?sslmode=require",
                    "postgres://db.prod.internal:5432", "kafka://b2:9092,b1:9092", "s3://lake")
OUTPUT_NAMESPACES = ("s3://lake", "s3a://Lake-Curated", "jdbc:postgresql://warehouse:5432/mart")
TYPES = ("bigint", "string", "double", "timestamp", "boolean", "decimal(18,2)", "int", "date", "varchar(64)", "string")


def _fetch(schema_id: int) -> str:
    if schema_id not in SCHEMA_IDS:
        raise SchemaNotFound(schema_id)
    return schema_text(SCHEMA_IDS[schema_id])


def _schema(table: int) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=f"col_{table}_{i}", type=TYPES[i], description=f"column {i}")
        for i in range(10)])


def _lineage(inputs: list[tuple[str, str]]) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields={
        f"out_{i}": column_lineage_dataset.Fields(inputFields=[
            column_lineage_dataset.InputField(namespace=ns, name=name, field=f"col_{i}", transformations=[
                column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")])
            for ns, name in inputs])
        for i in range(4)})


# Placeholders in the per-job templates, replaced per run (serializing with openlineage-python for every event would
# make building the stream take longer than measuring it).
_RUN, _TIME, _ROWS, _BYTES = "00000000-0000-4000-8000-000000000000", "1970-01-01T00:00:00+00:00", 987654321, 123456789


@cache
def _template(job: int, state: RunState) -> str:
    """The event of one job's run as openlineage-python serializes it, with placeholders for what varies."""
    ins = [(INPUT_NAMESPACES[(job + n) % len(INPUT_NAMESPACES)], f"public.src_{job}_{n}") for n in range(2)]
    out = (OUTPUT_NAMESPACES[job % len(OUTPUT_NAMESPACES)], f"mart/t_{job}")
    statistics = {"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=_ROWS, size=_BYTES)}
    return Serde.to_json(RunEvent(
        eventType=state, eventTime=_TIME, producer=PRODUCER,
        run=Run(runId=_RUN, facets={
            "parent": parent_run.ParentRunFacet(run=parent_run.Run(runId=_RUN),
                                                job=parent_run.Job(namespace="airflow", name=f"dag_{job}")),
            "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
                version="3.5.1", name="spark", openlineageAdapterVersion="1.54.0")}),
        job=Job(namespace="spark", name=f"etl.job_{job}", facets={
            "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType="JOB"),
            "sql": sql_job.SQLJobFacet(query=f"INSERT INTO t_{job} SELECT * FROM src_{job}_0 JOIN src_{job}_1 "
                                             "USING (id)")}),
        inputs=[InputDataset(namespace=ns, name=name, facets={"schema": _schema(job * 2 + n)})
                for n, (ns, name) in enumerate(ins)],
        outputs=[OutputDataset(namespace=out[0], name=out[1],
                               facets={"schema": _schema(1000 + job), "columnLineage": _lineage(ins)},
                               outputFacets=statistics if state == RunState.COMPLETE else None)],
    ))


def build_events(count: int, seed: int) -> list[dict[str, Any]]:
    """START/COMPLETE pairs of 100 jobs reading 2 datasets and writing 1 (row counts on COMPLETE); ~5% exact repeats,
    10% of the runs COMPLETE first, 1% invalid."""
    rng = random.Random(seed)
    base = datetime(2024, 5, 1, tzinfo=UTC) + timedelta(days=seed)
    events: list[dict[str, Any]] = []
    while len(events) < count:
        job = rng.randrange(100)
        run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        started = base + timedelta(seconds=len(events))
        pair = []
        for state, at in ((RunState.START, started), (RunState.COMPLETE, started + timedelta(seconds=30))):
            text = _template(job, state).replace(_RUN, run).replace(_TIME, at.isoformat())
            text = text.replace(str(_ROWS), str(rng.randrange(10**6))).replace(str(_BYTES), str(rng.randrange(10**9)))
            pair.append(json.loads(text))
        if rng.random() < 0.1:
            pair.reverse()  # COMPLETE before START: held back by the reorder buffer
        if rng.random() < 0.01:
            pair[0]["run"]["runId"] = "not-a-uuid"  # a dead letter now and then
        events += pair
        if rng.random() < 0.1:
            events.append(pair[rng.randrange(2)])  # an exact repeat (client retry)
    return events[:count]


def platform_events(count: int, seed: int, shape: str) -> list[dict[str, Any]]:
    """``bench_events.run_pairs`` events with 5% exact repeats (client retries), as in ``build_events``. Their times
    (from the clock) are moved to a fixed day, so that a seed gives the same bytes on every run (``--digest``)."""
    rng = random.Random(seed)
    base = datetime(2024, 5, 1, tzinfo=UTC) + timedelta(days=seed)
    events: list[dict[str, Any]] = []
    first: datetime | None = None
    for event in run_pairs(count, shape, seed=seed):
        at = datetime.fromisoformat(event["eventTime"])
        first = first or at
        event["eventTime"] = (base + (at - first)).isoformat(timespec="microseconds")
        events.append(event)
        if rng.random() < 0.05:
            events.append(event)
    return events[:count]


def frame(codec: AvroCodec, events: list[dict[str, Any]]) -> list[Incoming]:
    """What the publisher puts on the events topic: (partition key, framed Avro of ``event_to_record``)."""
    produced = 1_800_000_000_000  # 2027: after every event's time (a record more than an hour older is dead-lettered)
    return [Incoming(partition_key(e).encode(), codec.encode(event_to_record(e), 1), i % 6, i, produced + i,
                     "openlineage.events") for i, e in enumerate(events)]


# CPU time of this process, not wall time: the machines are shared, and another process's load stretches wall time
# by several times while the CPU a step spends stays put.
_clock = time.process_time


class Pipeline:
    """Long-lived processor cores, as in a worker that runs for days: their caches and state carry over rounds.

    One core runs the whole (process + encode) with the cyclic GC off, one with it on, and one times each step on
    its own; each sees every event once.
    """

    def __init__(self, codecs: dict[str, AvroCodec]) -> None:
        self.codecs = codecs
        self.cores = [ProcessorCore(codecs["openlineage_event"], {}, {}) for _ in range(3)]
        self.batches = 0

    def round(self, incoming: list[Incoming], digest: Any | None = None) -> dict[str, float]:
        """One pass over the stream, batch by batch: seconds per step.

        The cyclic GC is off while timing the whole and the steps (collected between batches): its full
        collections come at unpredictable points and would swamp the figures; the last figure has it on.
        """
        core, gc_core, steps_core = self.cores
        result: dict[str, float] = {}
        process_s = encode_s = with_gc_s = 0.0
        for start in range(0, len(incoming), BATCH):
            batch = incoming[start:start + BATCH]
            now = 1_714_521_600.0 + self.batches
            self.batches += 1
            gc.collect()
            gc.disable()
            started = _clock()
            out = core.process(batch, now)
            middle = _clock()
            encoded = self._encode(out)
            encode_s += _clock() - middle
            process_s += middle - started
            self._persist(core, out)
            if digest is not None:
                digest.update(repr((sorted(out.run_writes.items()), sorted(out.dedupe_writes.items()),
                                    out.schema_writes, out.duplicates, out.late, out.drift_findings,
                                    [k for k, _ in out.normalized])).encode())
                for payload in encoded:
                    digest.update(payload)
            for name, seconds in _steps(batch, steps_core).items():
                result[name] = result.get(name, 0.0) + seconds
            gc.enable()
            started = _clock()
            out = gc_core.process(batch, now)
            self._encode(out)
            with_gc_s += _clock() - started
            self._persist(gc_core, out)
        result["other (state, reorder, records)"] = process_s - sum(result.values())
        result["process (total)"] = process_s
        result["avro encode outputs"] = encode_s
        result["TOTAL process + encode"] = process_s + encode_s
        result["TOTAL with cyclic GC on (tune_gc)"] = with_gc_s
        return result

    def _encode(self, out: Output) -> list[bytes]:
        """What the shell produces: NormalizedEvents and DeadLetters in the wire format."""
        encoded = [self.codecs["normalized_event"].encode(record, 2) for _, record in out.normalized]
        return encoded + [self.codecs["dead_letter"].encode(dict(record, failedAt=0), 3)
                          for _, record in out.dead_letters]

    @staticmethod
    def _persist(core: ProcessorCore, out: Output) -> None:
        """What the shell writes to the changelog tables once the outputs are delivered."""
        writes = [*((core.dedupe, key, value) for key, (_, value) in out.dedupe_writes.items()),
                  *((core.runs, key, value) for key, (_, value) in out.run_writes.items()),
                  *((core.schemas, key, value) for _, key, value in out.schema_writes)]
        for table, key, value in writes:
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        core.written(out)


def _steps(batch: list[Incoming], core: ProcessorCore) -> dict[str, float]:
    """Each step of ``process`` timed on its own, event by event (the access pattern of ``process`` itself)."""
    names = ("avro decode", "facet JSON parse (record_to_event)", "validate", "dedupe id", "normalize",
             "schema drift", "event_to_record")
    spent = [0.0] * len(names)
    codec, facets = core.codec, getattr(core, "facets", None)  # no cache before the optimization
    cached = {"facets": facets} if facets is not None else {}
    normalizer = getattr(core, "_normalizer", None)
    normalize = normalizer.normalize if normalizer is not None else lambda e: normalize_event(e, core.aliases)
    clock = _clock
    for incoming in batch:
        t0 = clock()
        record = codec.decode(incoming.value)
        t1 = clock()
        event = record_to_event(record, **cached)
        t2 = clock()
        ok = _valid(event, facets)
        t3 = clock()
        spent[0] += t1 - t0
        spent[1] += t2 - t1
        spent[2] += t3 - t2
        if not ok:
            continue
        t3 = clock()
        dedupe_id(event, **cached)
        t4 = clock()
        normalized = normalize(event)[0]
        t5 = clock()
        staged = Output()
        core._drift(normalized, staged)
        t6 = clock()
        Pipeline._persist(core, staged)
        event_to_record(normalized, **cached)
        t7 = clock()
        for i, seconds in enumerate((t4 - t3, t5 - t4, t6 - t5, t7 - t6), start=3):
            spent[i] += seconds
    return dict(zip(names, spent, strict=True))


def _valid(event: dict[str, Any], facets: Any = None) -> bool:
    try:
        validate_event(event, facets)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="events per round (batches of 500)")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (best of); one warm-up round first")
    parser.add_argument("--shape", choices=("spark", *SHAPES), default="spark",
                        help="spark: 100 jobs built with openlineage-python (the default); else bench_events' shape")
    parser.add_argument("--digest", action="store_true", help="print a hash of all outputs (byte-identity check)")
    args = parser.parse_args(argv)
    logging.getLogger("kafka_lineage.processors.core").setLevel(logging.ERROR)  # the dead letters' warnings
    codecs = {name: AvroCodec(name, _fetch) for name in SCHEMA_IDS.values()}
    build = build_events if args.shape == "spark" else lambda n, seed: platform_events(n, seed, args.shape)
    streams = [frame(codecs["openlineage_event"], build(args.events, seed)) for seed in range(args.rounds + 1)]
    digest = hashlib.sha256() if args.digest else None
    pipeline = Pipeline(codecs)
    # The inputs stay out of the GC's way (frozen: a full collection then costs what the pipeline keeps alive), and
    # the GC line runs with the thresholds the worker sets: CPython's defaults (700) cost ~110 µs/event here (realistic
    # shape), which the worker never pays; with ``tune_gc``'s a 5,000-event round sees about no collection, and a
    # long stream ~20 µs/event of young collections (what the caches and the state keep).
    tune_gc()
    rounds = [pipeline.round(stream, digest if seed == 0 else None) for seed, stream in enumerate(streams)]
    rounds = rounds[1:]  # the first round warms the caches up
    print(f"{args.shape} events, {args.events} per round, batches of {BATCH}, best of {args.rounds} rounds: µs/event")
    for name in rounds[0]:
        best = min(r[name] for r in rounds)
        print(f"  {name:<38} {best / args.events * 1e6:8.1f}")
    if digest is not None:
        print(f"output digest: {digest.hexdigest()}")


if __name__ == "__main__":
    main()
