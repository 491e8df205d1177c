"""Events shaped like a production platform's, for every ``lineage bench``: light synthetic events hid an 8x slowdown.

A layered DAG of jobs (``JOBS`` by default, ``LAYERS`` layers): every job reads 2-3 tables of the layer before it (the
first layer reads landed sources) and writes one table; every dataset carries a schema facet, the output column
lineage (each output column from a column of every input), the job a SQL facet and a job type, the run a parent and a
processing-engine facet, COMPLETE the output statistics. Namespaces are written the way emitters write them, several
needing normalization (s3a, JDBC URLs, upper-case hosts). Shapes:

- ``light``: the old bench events (no facets but an 8-field schema on the output), ~1.2 KB;
- ``realistic``: 20-field schemas, ~5.7 KB (the issue's measurements);
- ``heavy``: 150-field schemas, ~33 KB (Marquez's synthetic default size).

Events come from one JSON template per (job, state) with placeholders for what varies per run, so a million
events build in seconds; the same seed gives the same events.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets"
SHAPES = {"light": 0, "realistic": 20, "heavy": 150}  # schema fields per dataset
JOBS, LAYERS = 2000, 10
SOURCE_NAMESPACES = ("s3a://raw-zone", "jdbc:postgresql://DB.prod.internal:5432/shop", "kafka://b1:9092")
TABLE_NAMESPACES = ("s3://lake", "s3a://Lake-Curated", "postgres://warehouse.prod.internal:5432")
TYPES = ("bigint", "string", "double", "timestamp", "boolean", "decimal(18,2)", "int", "date", "varchar(64)",
         "string")
_RUN, _PARENT, _TIME, _END = ("00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b",
                              "1970-01-01T00:00:00.000000+00:00", "1970-01-01T00:00:01.000000+00:00")
_ROWS, _BYTES = 987654321987, 123456789123


def _facet(facet: str, spec: str = "1-0-0", /, **content: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{FACETS}/{spec}/{facet}.json#/$defs/{facet}", **content}


def _table(job: int, jobs: int) -> tuple[str, str]:
    """The table job ``job`` writes (sources are ``-1 - n``)."""
    if job < 0:
        source = -1 - job
        return SOURCE_NAMESPACES[source % len(SOURCE_NAMESPACES)], f"public.source_{source}"
    layer = job * LAYERS // jobs
    return TABLE_NAMESPACES[job % len(TABLE_NAMESPACES)], f"layer_{layer}/table_{job}"


def _inputs(job: int, jobs: int) -> list[int]:
    """2-3 upstream jobs of the layer before (or sources), chosen by the job's own seed."""
    rng = random.Random(job)
    per_layer = max(1, jobs // LAYERS)
    layer = job * LAYERS // jobs
    count = 2 + job % 2
    if layer == 0:
        return [-1 - rng.randrange(per_layer) for _ in range(count)]
    first = (layer - 1) * jobs // LAYERS
    return sorted({first + rng.randrange(per_layer) for _ in range(count)})


def _columns(table: int, fields: int) -> list[str]:
    return [f"c{table % 97}_{i}" for i in range(fields)]


def _schema(table: int, fields: int) -> dict[str, Any]:
    return _facet("SchemaDatasetFacet", "1-1-1", fields=[
        {"name": column, "type": TYPES[i % len(TYPES)]}
        for i, column in enumerate(_columns(table, fields))])


@cache
def _template(job: int, complete: bool, shape: str, jobs: int) -> str:
    """One job's START or COMPLETE event as JSON, with placeholders for run id, parent run, times and counts."""
    fields = SHAPES[shape]
    ups = _inputs(job, jobs)
    in_tables = [_table(up, jobs) for up in ups]
    out_ns, out_name = _table(job, jobs)
    time = _END if complete else _TIME
    if shape == "light":
        out_facets: dict[str, Any] = {"schema": _facet("SchemaDatasetFacet", "1-1-1", fields=[
            {"name": f"col_{i}", "type": "string"} for i in range(8)])}
        event = {"eventType": "COMPLETE" if complete else "START", "eventTime": time, "producer": PRODUCER,
                 "schemaURL": SPEC, "run": {"runId": _RUN, "facets": {}},
                 "job": {"namespace": "bench", "name": f"bench.job_{job}", "facets": {}},
                 "inputs": [{"namespace": ns, "name": name, "facets": {}} for ns, name in in_tables],
                 "outputs": [{"namespace": out_ns, "name": out_name, "facets": out_facets}]}
        return json.dumps(event)
    lineage = {column: {"inputFields": [
        {"namespace": ns, "name": name, "field": _columns(up, fields)[i], "transformations": [
            {"type": "DIRECT", "subtype": "TRANSFORMATION" if i % 3 else "IDENTITY"}]}
        for up, (ns, name) in zip(ups, in_tables, strict=True)]}
        for i, column in enumerate(_columns(job, fields)[: max(3, fields // 8)])}
    sql = (f"INSERT INTO {out_name.replace('/', '.')} SELECT "
           + ", ".join(f"t0.{c}" for c in _columns(ups[0], min(fields, 6)))
           + f" FROM {in_tables[0][1]} t0 " + " ".join(
               f"JOIN {name} t{n} ON t0.id = t{n}.id" for n, (_, name) in enumerate(in_tables[1:], start=1)))
    outputs: dict[str, Any] = {"namespace": out_ns, "name": out_name, "facets": {
        "schema": _schema(job, fields), "columnLineage": _facet("ColumnLineageDatasetFacet", "1-2-0",
                                                                fields=lineage)}}
    if complete:
        outputs["outputFacets"] = {"outputStatistics": _facet("OutputStatisticsOutputDatasetFacet", "1-0-2",
                                                              rowCount=_ROWS, size=_BYTES)}
    event = {
        "eventType": "COMPLETE" if complete else "START", "eventTime": time, "producer": PRODUCER,
        "schemaURL": SPEC,
        "run": {"runId": _RUN, "facets": {
            "parent": _facet("ParentRunFacet", "1-1-0", run={"runId": _PARENT},
                             job={"namespace": "airflow", "name": f"dag_{job // 20}.task_{job}"}),
            "processing_engine": _facet("ProcessingEngineRunFacet", "1-1-1", version="3.5.1", name="spark",
                                        openlineageAdapterVersion="1.54.0")}},
        "job": {"namespace": "spark", "name": f"etl.job_{job}", "facets": {
            "jobType": _facet("JobTypeJobFacet", "2-0-3", processingType="BATCH", integration="SPARK",
                              jobType="JOB"),
            "sql": _facet("SQLJobFacet", "1-1-0", query=sql, dialect="spark")}},
        "inputs": [{"namespace": ns, "name": name, "facets": {"schema": _schema(up, fields)}}
                   for up, (ns, name) in zip(ups, in_tables, strict=True)],
        "outputs": [outputs]}
    return json.dumps(event)


def run_pairs(count: int, shape: str = "realistic", seed: int | None = None, jobs: int = JOBS,
              namespace: str | None = None, churn: bool = False) -> list[dict[str, Any]]:
    """``count`` events as START/COMPLETE pairs of fresh runs of the DAG's jobs (in run order: nothing is held back).

    ``namespace`` replaces the job namespace, so a bench's events never mix with another's in the graph. Without a
    ``seed`` every call makes runs of its own (a bench's later phase must not repeat its backlog's run ids).
    ``churn``: every run's output schema is one no run had before (a column named after the run added): the
    worst case for writing only what changed.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown event shape {shape!r}: one of {', '.join(SHAPES)}")
    rng = random.Random(seed)
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    events: list[dict[str, Any]] = []
    for index in range(0, count, 2):
        job = rng.randrange(jobs)
        run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        parent = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        started = base + timedelta(milliseconds=index)
        for event in _run_events(job, run, parent, started, rng, shape, jobs, namespace)[: min(2, count - index)]:
            if churn:
                for output in event["outputs"]:
                    output["facets"]["schema"]["fields"].append({"name": f"added_{run[:8]}", "type": "string"})
            events.append(event)
    return events


def dag_runs(namespace: str, shape: str = "realistic", jobs: int = JOBS, hosts: str | None = None
             ) -> list[dict[str, Any]]:
    """One START/COMPLETE run of every job of the DAG, in job order (the whole platform once; the same seed each
    call, fresh run ids): the jobs in ``namespace``; with ``hosts``, every table namespace's host prefixed with it
    (``s3://lake`` → ``s3://{hosts}.lake``), a platform of its own."""
    rng = random.Random(0)
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    events: list[dict[str, Any]] = []
    for job in range(jobs):
        run, parent = str(uuid.uuid4()), str(uuid.uuid4())
        events += _run_events(job, run, parent, base + timedelta(milliseconds=job), rng, shape, jobs, namespace)
    if hosts is None:
        return events
    text = json.dumps(events)
    for table_namespace in (*TABLE_NAMESPACES, *SOURCE_NAMESPACES):
        text = text.replace(f'"{table_namespace}"', json.dumps(table_namespace.replace("://", f"://{hosts}.", 1)))
    return json.loads(text)


def _run_events(job: int, run: str, parent: str, started: datetime, rng: random.Random, shape: str, jobs: int,
                namespace: str | None) -> list[dict[str, Any]]:
    """A run's START and COMPLETE events from the job's templates."""
    times = {_TIME: started.isoformat(timespec="microseconds"),
             _END: (started + timedelta(seconds=1)).isoformat(timespec="microseconds")}
    events = []
    for complete in (False, True):
        text = _template(job, complete, shape, jobs).replace(_RUN, run).replace(_PARENT, parent)
        for placeholder, value in times.items():
            text = text.replace(placeholder, value)
        if complete:
            text = text.replace(str(_ROWS), str(rng.randrange(10**7))).replace(str(_BYTES), str(rng.randrange(10**10)))
        event = json.loads(text)
        if namespace is not None:
            event["job"]["namespace"] = namespace
        events.append(event)
    return events


def encoded_run_pairs(encode: Callable[[dict[str, Any]], tuple[bytes, bytes]], count: int, namespace: str,
                      shape: str = "realistic", jobs: int = JOBS) -> Iterator[tuple[bytes, bytes]]:
    """``run_pairs`` as (key, value) records, fast: each (job, state) template is encoded once (``encode``: the
    publisher's, which validates) and each run's values are written into its bytes. Every value that varies has
    its placeholder's length (ids, microsecond times, 12-digit counts), so the Avro lengths stay right."""
    rng = random.Random()
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    encoded: dict[tuple[int, bool], tuple[bytes, bytes]] = {}
    run_b, parent_b, time_b, end_b = (text.encode() for text in (_RUN, _PARENT, _TIME, _END))
    rows_b, bytes_b = str(_ROWS).encode(), str(_BYTES).encode()
    for index in range(0, count, 2):
        job = rng.randrange(jobs)
        started = base + timedelta(milliseconds=index)
        values = {run_b: str(uuid.uuid4()).encode(), parent_b: str(uuid.uuid4()).encode(),
                  time_b: started.isoformat(timespec="microseconds").encode(),
                  end_b: (started + timedelta(seconds=1)).isoformat(timespec="microseconds").encode(),
                  rows_b: str(rng.randrange(10**11, 10**12)).encode(),
                  bytes_b: str(rng.randrange(10**11, 10**12)).encode()}
        for complete in (False, True)[: min(2, count - index)]:
            if (job, complete) not in encoded:
                event = json.loads(_template(job, complete, shape, jobs))
                event["job"]["namespace"] = namespace
                encoded[(job, complete)] = encode(event)
            key, value = encoded[(job, complete)]
            for placeholder, actual in values.items():
                key, value = key.replace(placeholder, actual), value.replace(placeholder, actual)
            yield key, value


def mean_bytes(events: list[dict[str, Any]]) -> float:
    """Mean JSON size of ``events`` as an emitter sends them."""
    return sum(len(json.dumps(event, separators=(",", ":"))) for event in events) / max(1, len(events))
