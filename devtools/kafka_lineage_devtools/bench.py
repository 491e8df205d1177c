"""``lineage bench …``: throughput and latency figures measured side by side in one run, written as JSON.

The machines are shared and noisy, so every figure that has a comparison is reported as a ratio measured in the
same run (ours vs the stock openlineage-python transport) rather than as an absolute target check.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import schema_dataset
from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

from kafka_lineage.graph import partitions as partition_reads
from kafka_lineage.graph.driver import driver_for, ensure_constraints
from kafka_lineage.graph.queries import field_lineage, impact, traverse, upstream
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.local import replay
from kafka_lineage.replay.spark import replay_on_spark
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, end_offsets, prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools import bench_events, cpu_budget
from kafka_lineage_devtools.bench_setup import bench_topic
from kafka_lineage_devtools.processes import (
    ANY_FREE_PORT,
    TAIL_LINES,
    ChildProcess,
    alert_sink_process,
    check_children,
    collector_process,
    pipeline_env,
    processor_process,
    server_process,
    sink_process,
    sleep_watching,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.stack.smoke import ensure_topic

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/devtools/kafka_lineage_devtools/bench.py"
BENCH_CLIENT = "bench client (JSON, HTTP)"
EVENT_SHAPE = "realistic"  # of the events every bench sends (``lineage bench --shape``; bench_events.SHAPES)


def sample_events(count: int) -> list[RunEvent]:
    """Realistic run events: a job reading two tables and writing one with a schema facet, many runs and jobs."""
    fields = [schema_dataset.SchemaDatasetFacetFields(name=f"col_{i}", type="string") for i in range(8)]
    schema = schema_dataset.SchemaDatasetFacet(fields=fields)
    events = []
    for i in range(count):
        job = f"bench.job_{i % 200}"
        events.append(RunEvent(
            eventType=RunState.START if i % 2 == 0 else RunState.COMPLETE,
            eventTime=datetime.now(UTC).isoformat(),
            producer=PRODUCER,
            run=Run(runId=str(uuid.uuid4())),
            job=Job(namespace="bench", name=job),
            inputs=[InputDataset(namespace="postgres://db:5432", name=f"shop.public.src_{i % 50}_{n}")
                    for n in range(2)],
            outputs=[OutputDataset(namespace="s3://lake", name=f"mart/t_{i % 50}", facets={"schema": schema})],
        ))
    return events


def _measure_transport(transport: Any, events: list[RunEvent], close: Any) -> dict[str, float]:
    started = time.perf_counter()
    caller = 0.0
    for event in events:
        before = time.perf_counter()
        transport.emit(event)
        caller += time.perf_counter() - before
    close()
    elapsed = time.perf_counter() - started
    return {"events": len(events), "caller_us_per_event": caller / len(events) * 1e6,
            "events_per_s": len(events) / elapsed, "seconds": elapsed}


def bench_emit_transports(settings: ClientSettings, topic: str, count: int) -> dict[str, Any]:
    events = sample_events(count)
    ours = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": topic, "queue_size": max(10_000, count)}))
    time.sleep(1.0)  # let the worker look its schema up first, as it does in a long-lived job
    ours_result = _measure_transport(ours, events, ours.close)
    ours_result["undelivered"] = ours.undelivered + ours.dropped + ours.invalid
    # openlineage-python's own KafkaTransport with its defaults (JSON, flush after each event).
    stock = KafkaTransport(KafkaConfig.from_dict(
        {"topic": f"{topic}.stock-json", "config": {"bootstrap.servers": settings.kafka_bootstrap_servers}}))
    ensure_topic(settings.kafka_bootstrap_servers, f"{topic}.stock-json", partitions=3)
    stock_result = _measure_transport(stock, events, lambda: stock.close(30))
    return {
        "kafka_avro_transport": ours_result,
        "stock_kafka_transport": stock_result,
        "throughput_ratio": ours_result["events_per_s"] / stock_result["events_per_s"],
        "caller_time_ratio": stock_result["caller_us_per_event"] / ours_result["caller_us_per_event"],
    }


def bench_collector(topic: str, count: int, batch_size: int = 500, clients: int = 4) -> dict[str, Any]:
    bodies = []
    events = run_pairs(count)
    for start in range(0, count, batch_size):
        bodies.append(json.dumps(events[start:start + batch_size]).encode())
    with collector_process({"LINEAGE_EVENTS_TOPIC": topic}) as child, requests.Session() as warmup:
        url = child.url
        warmup.post(f"{url}/api/v1/lineage", data=bodies[0], timeout=60).raise_for_status()
        sessions = [requests.Session() for _ in range(clients)]

        def post(index: int) -> int:
            answer = sessions[index % clients].post(f"{url}/api/v1/lineage", data=bodies[index], timeout=120,
                                                    headers={"Content-Type": "application/json"})
            answer.raise_for_status()
            return answer.json()["accepted"]

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            accepted = sum(pool.map(post, range(len(bodies))))
        elapsed = time.perf_counter() - started
    return {"events": accepted, "batch_size": batch_size, "concurrent_clients": clients,
            "events_per_s": accepted / elapsed, "seconds": elapsed}


def run_emit_bench(count: int, output: Path) -> dict[str, Any]:
    settings = ClientSettings.from_env()
    topic = bench_topic(settings)
    result = {
        "bench": "emit",
        "at": datetime.now(UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "transports": bench_emit_transports(settings, topic, count),
        "collector": bench_collector(topic, count),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_pairs(count: int) -> list[dict[str, Any]]:
    """``count`` events as START/COMPLETE pairs of fresh runs (the common shape: nothing is held back), shaped as
    ``EVENT_SHAPE`` (``lineage bench --shape``)."""
    return bench_events.run_pairs(count, EVENT_SHAPE)


def _drain_normalized(settings: ClientSettings, topic: str, count: int, timeout: float
                      ) -> list[tuple[float, float]]:
    """Wait for ``count`` normalized records: (producedAt in epoch ms, added latency processedAt - producedAt in ms).
    A worker that ends meanwhile ends the wait (``ChildExited``)."""
    codec = AvroCodec("normalized_event", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": f"bench-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    latencies: list[tuple[float, float]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(latencies) < count and time.monotonic() < deadline:
            check_children()
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    processing = codec.decode(message.value())["processing"]
                    produced = processing["producedAt"]
                    if produced is not None:
                        latencies.append((produced.timestamp() * 1000,
                                          (processing["processedAt"] - produced).total_seconds() * 1000))
    finally:
        consumer.close()
    return latencies


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def bench_processor_workers(settings: ClientSettings, workers: int, count: int) -> dict[str, Any]:
    """Sustained events/s of ``workers`` processors on a backlog of ``count`` events, then added latency at a
    steady 500 events/s, and each worker's memory at the end."""
    prefix = f"lineage.bench.processor.{uuid.uuid4().hex[:8]}"
    env = pipeline_env(prefix, 6, Path(".lineage/bench") / prefix)
    events, steady = run_pairs(count), run_pairs(2000)
    with contextlib.ExitStack() as stack:
        children = [stack.enter_context(processor_process(env)) for _ in range(workers)]
        sleep_watching(5 if workers > 1 else 0)  # let the group settle after the last join
        publisher = EventPublisher.from_settings(settings, env["LINEAGE_EVENTS_TOPIC"])
        records = [publisher.encode(event) for event in events]
        started = time.perf_counter()
        publisher.send(records).result(300)
        backlog = _drain_normalized(settings, env["LINEAGE_NORMALIZED_TOPIC"], count, timeout=1800)
        elapsed = time.perf_counter() - started
        steady_from = time.time() * 1000
        for index in range(0, len(steady), 50):  # 50 events every 0.1 s
            publisher.send([publisher.encode(event) for event in steady[index:index + 50]])
            sleep_watching(0.1)
        publisher.close()
        latencies = [latency for produced, latency in
                     _drain_normalized(settings, env["LINEAGE_NORMALIZED_TOPIC"], count + len(steady), 120)
                     if produced >= steady_from]
        memory = [cpu_budget.resident_mib([child.process.pid]) for child in children]
    return {"workers": workers, "events": len(backlog), "events_per_s": len(backlog) / elapsed,
            "latency_ms_at_500_per_s": {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99)},
            "rss_mib": memory, "bare_faust": bare_faust(env["LINEAGE_EVENTS_TOPIC"], count)}


def bare_faust(topic: str, count: int) -> dict[str, Any]:
    """Events/s of a Faust worker that only consumes ``count`` records of ``topic`` (``bench_faust``): the ceiling
    Faust's consume path sets for the processor, measured right after it on the same backlog."""
    result = subprocess.run([sys.executable, "-m", "kafka_lineage_devtools.bench_faust", topic, str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    lines = [line[line.index('{"events"'):] for line in result.stdout.splitlines() if '{"events"' in line]
    if result.returncode != 0 or not lines:  # (the worker's terminal codes can precede the line)
        tail = "\n".join(result.stdout.splitlines()[-TAIL_LINES:])
        raise RuntimeError(f"bench_faust exited with code {result.returncode} without its figure; its last "
                           f"{TAIL_LINES} log lines:\n{tail}")
    return json.loads(lines[-1])


def run_processor_bench(count: int, output: Path) -> dict[str, Any]:
    settings = ClientSettings.from_env()
    result = {"bench": "processor", "at": datetime.now(UTC).isoformat(),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "runs": [bench_processor_workers(settings, workers, count) for workers in (1, 2)]}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_memory_bench(count: int, output: Path, ttl_seconds: float = 60.0, chunk: int = 50_000) -> dict[str, Any]:
    """Resident memory of one processor worker while ``count`` events of distinct runs stream through it with a
    dedupe TTL of ``ttl_seconds``: sampled after every ``chunk`` events, once the worker has caught up with them.
    Without the TTL the dedupe state (and memory) would grow with every run ever seen; with it, it levels off."""
    settings = ClientSettings.from_env()
    prefix = f"lineage.bench.memory.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 6, Path(".lineage/bench") / prefix), "LINEAGE_DEDUPE_TTL": str(ttl_seconds)}
    samples = []
    watcher = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": f"bench-{uuid.uuid4()}"})
    normalized = env["LINEAGE_NORMALIZED_TOPIC"]
    with processor_process(env) as child:
        publisher = EventPublisher.from_settings(settings, env["LINEAGE_EVENTS_TOPIC"])
        started, sent = time.perf_counter(), 0
        try:
            while sent < count:
                events = run_pairs(min(chunk, count - sent))
                publisher.send([publisher.encode(event) for event in events]).result(600)
                sent += len(events)
                # records on the topic: the processor's producer is idempotent, not transactional (no markers)
                wait_until(lambda sent=sent: sum(end_offsets(watcher, normalized).values()) >= sent, 600,
                           interval=0.5, what=f"the worker's output of {sent:,} events")
                samples.append({"events": sent, "seconds": time.perf_counter() - started,
                                "rss_mib": cpu_budget.resident_mib([child.process.pid])})
        finally:
            publisher.close()
            watcher.close()
    result = {"bench": "processor-memory", "at": datetime.now(UTC).isoformat(), "events": count,
              "dedupe_ttl_seconds": ttl_seconds, "samples": samples}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_memory(result: dict[str, Any]) -> str:
    rows = [f"one processor worker, dedupe TTL {result['dedupe_ttl_seconds']:.0f} s",
            f"{'events':>9} {'seconds':>8} {'RSS MiB':>8}"]
    rows += [f"{s['events']:>9,} {s['seconds']:>8.0f} {s['rss_mib']:>8.0f}" for s in result["samples"]]
    return "\n".join(rows)


def format_processor(result: dict[str, Any]) -> str:
    rows = [f"{'workers':>7} {'events':>8} {'events/s':>10} {'p50 ms':>8} {'p99 ms':>8}  RSS MiB per worker"]
    for run in result["runs"]:
        latency = run["latency_ms_at_500_per_s"]
        rows.append(f"{run['workers']:>7} {run['events']:>8} {run['events_per_s']:>10,.0f} {latency['p50']:>8.0f} "
                    f"{latency['p99']:>8.0f}  {', '.join(f'{m:.0f}' for m in run['rss_mib'])}")
    first = result["runs"][0]
    ceiling = first["bare_faust"]["events_per_s"]
    rows.append(f"bare Faust worker (consume only, same backlog): {ceiling:,.0f} events/s; one processor worker "
                f"reaches {first['events_per_s'] / ceiling:.0%} of it")
    return "\n".join(rows)


def bench_sink(settings: ClientSettings, count: int) -> dict[str, Any]:
    """Events/s of one ``lineage sink`` writing a backlog of ``count`` normalized events (START/COMPLETE pairs)."""
    prefix = f"lineage.bench.sink.{uuid.uuid4().hex[:8]}"
    env = pipeline_env(prefix, 6, Path(".lineage/bench") / prefix)
    local = ClientSettings.from_env({**os.environ, **env})
    namespace = f"bench-sink-{uuid.uuid4().hex[:6]}"
    events = run_pairs(count)
    for event in events:
        event["job"] = {**event["job"], "namespace": namespace}
    with sink_process(env):
        client = SchemaRegistryClient(local.registry_config())
        schema_id = registry.registered_id(client, local.normalized_topic, "normalized_event")
        codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
        now = datetime.now(UTC)
        records = [(f"run:{namespace}".encode(), codec.encode({
            "event": event_to_record(event), "schemaChanges": [], "processing": {
                "dedupeId": str(index), "processedAt": now, "late": False, "sourceTopic": None,
                "sourcePartition": None, "sourceOffset": None, "producedAt": None, "renamedDatasets": []}},
            schema_id)) for index, event in enumerate(events)]
        producer = AckingProducer({"bootstrap.servers": local.kafka_bootstrap_servers})
        started = time.perf_counter()
        producer.send(local.normalized_topic, records).result(300)
        producer.close()
        with driver_for(local) as driver, driver.session() as session:
            wait_until(lambda: session.run("MATCH (:Job {namespace: $ns})<-[:OF_JOB]-(r:Run) "
                                           "WHERE r.state = 'COMPLETE' RETURN count(r)",
                                           ns=namespace).single()[0] >= count // 2,
                       1800, interval=0.5, what=f"the graph sink's {count // 2:,} completed runs")
        elapsed = time.perf_counter() - started
    return {"events": count, "events_per_s": count / elapsed, "seconds": elapsed}


def bench_query(settings: ClientSettings, jobs: int, queries: int = 200, depth: int = 10) -> dict[str, Any]:
    """impact/upstream latency at ``depth`` on a generated layered DAG of ``jobs`` jobs (3 relationships each)."""
    namespace = f"bench-graph-{uuid.uuid4().hex[:6]}"
    width = max(10, jobs // 40)  # 40 layers of jobs; each reads two datasets of its layer and writes one below
    with driver_for(settings) as driver:
        with driver.session() as session:
            for start in range(0, jobs, 5000):
                session.run(
                    "UNWIND $ids AS i WITH i, i / $width AS layer, i % $width AS slot "
                    "MERGE (j:Job {namespace: $ns, name: 'job-' + toString(i)}) "
                    "MERGE (a:Dataset {namespace: $ns, name: 'd-' + toString(layer) + '-' + toString(slot)}) "
                    "MERGE (b:Dataset {namespace: $ns, name: 'd-' + toString(layer) + '-' + "
                    "toString((slot + 1) % $width)}) "
                    "MERGE (o:Dataset {namespace: $ns, name: 'd-' + toString(layer + 1) + '-' + toString(slot)}) "
                    "MERGE (a)-[:INPUT_TO]->(j) MERGE (b)-[:INPUT_TO]->(j) MERGE (j)-[:OUTPUTS]->(o)",
                    ids=list(range(start, min(jobs, start + 5000))), width=width, ns=namespace).consume()
            relationships = session.run("MATCH ()-[r]->() RETURN count(r)").single()[0]
        timings: dict[str, list[float]] = {"impact": [], "upstream": []}
        for index in range(queries):
            slot = (index * 7919) % width
            for name, query, layer in (("impact", impact, 0), ("upstream", upstream, 39)):
                started = time.perf_counter()
                query(driver, namespace, f"d-{layer}-{slot}", depth, 1000)
                timings[name].append((time.perf_counter() - started) * 1000)
    return {"jobs": jobs, "relationships_in_database": relationships, "depth": depth, "queries": queries,
            **{f"{name}_ms": {"p50": _percentile(values, 0.5), "p99": _percentile(values, 0.99)}
               for name, values in timings.items()}}


def _dag_rows(jobs: int, seed: int = 7, fields: int = 4, hubs: int = 20
              ) -> tuple[int, list[list[Any]], list[list[Any]]]:
    """A DAG as real platforms have them: 40 layers of jobs, each job reading 2-4 datasets of the five layers above
    (and, three times in ten, one of ``hubs`` shared upstream tables) and writing one; every output column derives
    from 1-2 columns of the job's inputs. Returns the width, job rows [layer, slot, [[input layer, input slot], ...]]
    and column rows [layer, slot, field, input layer, input slot, input field]."""
    import random

    rng = random.Random(seed)
    width = max(10, jobs // 40)
    job_rows, column_rows = [], []
    for layer in range(1, 41):
        for slot in range(width):
            inputs = {(rng.randrange(max(0, layer - 5), layer), rng.randrange(width))
                      for _ in range(rng.randint(2, 4))}
            if rng.random() < 0.3:
                inputs.add((0, rng.randrange(min(hubs, width))))
            job_rows.append([layer, slot, [list(pair) for pair in sorted(inputs)]])
            ordered = sorted(inputs)
            for column in range(fields):
                for source_layer, source_slot in rng.sample(ordered, min(len(ordered), rng.randint(1, 2))):
                    column_rows.append([layer, slot, column, source_layer, source_slot, rng.randrange(fields)])
    return width, job_rows, column_rows


def bench_query_dag(settings: ClientSettings, jobs: int, queries: int = 30, depths: tuple[int, ...] = (3, 10, 20),
                    limit: int = 1000) -> dict[str, Any]:
    """Traversal latency on a fan-in DAG (``_dag_rows``) at table and column level, upstream from the last layer
    and downstream from the first, p50/p99 per depth; also how many answers were cut by ``limit``."""
    namespace = f"bench-dag-{uuid.uuid4().hex[:6]}"
    with driver_for(settings) as driver:
        width, job_count, relationships = write_dag(driver, namespace, jobs)
        results: dict[str, Any] = {}
        cut: dict[str, int] = {}
        for depth in depths:
            for direction, layer in (("up", 40), ("down", 0)):
                table, column = [], []
                for index in range(3):  # warm-up: the first walks of a level shape load pages and plans
                    traverse(driver, namespace, f"d-{layer}-{index}", depth, direction, limit)
                    field_lineage(driver, namespace, f"d-{layer}-{index}", "c0", depth, direction, limit)
                for index in range(queries):
                    name = f"d-{layer}-{(index * 7919) % width}"
                    started = time.perf_counter()
                    walk = traverse(driver, namespace, name, depth, direction, limit)
                    table.append((time.perf_counter() - started) * 1000)
                    cut[f"table_{direction}_{depth}"] = cut.get(f"table_{direction}_{depth}", 0) + walk.truncated
                    started = time.perf_counter()
                    field_lineage(driver, namespace, name, "c0", depth, direction, limit)
                    column.append((time.perf_counter() - started) * 1000)
                for level, values in (("table", table), ("column", column)):
                    results[f"{level}_{direction}_{depth}_ms"] = {"p50": _percentile(values, 0.5),
                                                                  "p99": _percentile(values, 0.99)}
    return {"jobs": job_count, "width": width, "relationships_in_database": relationships, "queries": queries,
            "limit": limit, "truncated_answers": cut, **results}


def write_dag(driver: Any, namespace: str, jobs: int) -> tuple[int, int, int]:
    """The fan-in DAG of ``_dag_rows`` (datasets ``d-<layer>-<slot>``, columns ``c0``…) in ``namespace``:
    (width, jobs, relationships now in the database)."""
    width, job_rows, column_rows = _dag_rows(jobs)
    with driver.session() as session:
        for start in range(0, len(job_rows), 2000):
            session.run(
                "UNWIND $rows AS row "
                "MERGE (j:Job {namespace: $ns, name: 'j-' + toString(row[0]) + '-' + toString(row[1])}) "
                "MERGE (o:Dataset {namespace: $ns, name: 'd-' + toString(row[0]) + '-' + toString(row[1])}) "
                "MERGE (j)-[:OUTPUTS]->(o) WITH j, row UNWIND row[2] AS input "
                "MERGE (i:Dataset {namespace: $ns, name: 'd-' + toString(input[0]) + '-' + toString(input[1])}) "
                "MERGE (i)-[:INPUT_TO]->(j)", rows=job_rows[start:start + 2000], ns=namespace).consume()
        for start in range(0, len(column_rows), 10_000):
            session.run(
                "UNWIND $rows AS row "
                "MERGE (o:Field {namespace: $ns, name: 'd-' + toString(row[0]) + '-' + toString(row[1]), "
                "field: 'c' + toString(row[2])}) "
                "MERGE (i:Field {namespace: $ns, name: 'd-' + toString(row[3]) + '-' + toString(row[4]), "
                "field: 'c' + toString(row[5])}) MERGE (o)-[:DERIVES_FROM]->(i)",
                rows=column_rows[start:start + 10_000], ns=namespace).consume()
        relationships = session.run("MATCH ()-[r]->() RETURN count(r)").single()[0]
    return width, len(job_rows), relationships


def bench_api(settings: ClientSettings, jobs: int, queries: int = 50, depth: int = 10) -> dict[str, Any]:
    """The lineage server on a fan-in DAG of ``jobs`` jobs: p50/p99 of Marquez's lineage (depth ``depth``), column
    lineage and search, in the server (its ``Server-Timing``) and at the client (HTTP included), with the server's
    own node limit, and the web UI drawing a whole depth-``depth`` answer in Chromium (first chunk, all of it)."""
    namespace = f"bench-api-{uuid.uuid4().hex[:6]}"
    with driver_for(settings) as driver:
        width, job_count, relationships = write_dag(driver, namespace, jobs)
        ensure_constraints(driver)  # the search keys of the nodes written above, and their indexes
        driver.execute_query("CALL db.awaitIndexes(300)")
    server_ms: dict[str, list[float]] = {"lineage": [], "column_lineage": [], "search": []}
    client_ms: dict[str, list[float]] = {name: [] for name in server_ms}
    truncated = 0
    with server_process() as server, requests.Session() as http:
        def get(measure: str | None, path: str, **params: Any) -> requests.Response:
            started = time.perf_counter()
            answer = http.get(f"{server.url}{path}", params=params, timeout=120)
            answer.raise_for_status()
            if measure is not None:
                client_ms[measure].append((time.perf_counter() - started) * 1000)
                server_ms[measure].append(float(answer.headers["Server-Timing"].split("dur=", 1)[1]))
            return answer

        for index in range(queries + 3):  # three warm-up rounds: plans and pages
            layer, slot = 5 + index % 30, (index * 7919) % width
            measured = index >= 3
            answer = get("lineage" if measured else None, "/api/v1/lineage",
                         nodeId=f"dataset:{namespace}:d-{layer}-{slot}", depth=depth)
            truncated += measured and answer.headers.get("X-Lineage-Truncated") == "true"
            get("column_lineage" if measured else None, "/api/v1/column-lineage",
                nodeId=f"datasetField:{namespace}:d-40-{slot}:c0", depth=depth)
            get("search" if measured else None, "/api/v1/search", q=f"d-{layer}-{slot % 100}", limit=20)
        render_ms = _ui_render(server.url, f"dataset:{namespace}:d-20-{width // 2}", depth)
    return {"jobs": job_count, "relationships_in_database": relationships, "depth": depth, "queries": queries,
            "lineage_truncated": truncated, "ui_render_ms": render_ms,
            **{f"{name}_ms": {"p50": _percentile(values, 0.5), "p99": _percentile(values, 0.99),
                              "client_p50": _percentile(client_ms[name], 0.5),
                              "client_p99": _percentile(client_ms[name], 0.99)}
               for name, values in server_ms.items()}}


def _ui_render(url: str, node: str, depth: int) -> dict[str, Any]:
    """Milliseconds from navigation to the first chunk of the graph drawn and to all of it, in Chromium, three times
    (the first load, which fills the cache, not counted), and how many nodes were drawn."""
    import shutil
    from urllib.parse import quote

    from playwright.sync_api import sync_playwright

    first, whole, nodes = [], [], 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                             args=["--no-sandbox"])
        try:
            for attempt in range(4):
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(f"{url}/#/lineage?node={quote(node, safe='')}&depth={depth}")
                page.wait_for_function("document.body.dataset.drawnAt !== undefined", timeout=300_000)
                if attempt:
                    first.append(float(page.evaluate("Number(document.body.dataset.renderedAt)")))
                    whole.append(float(page.evaluate("Number(document.body.dataset.drawnAt)")))
                nodes = int(page.evaluate("Number(document.body.dataset.graphNodes)"))
                page.close()
        finally:
            browser.close()
    return {"nodes": nodes, "first_p50": _percentile(first, 0.5), "all_p50": _percentile(whole, 0.5),
            "all_max": max(whole)}


def bench_replay(settings: ClientSettings, count: int) -> dict[str, Any]:
    """Events/s of ``lineage replay`` (raw topic → processor core → graph) over ``count`` raw events, in this process
    and on Spark (``local[2]``, Spark's start-up included)."""
    prefix = f"lineage.bench.replay.{uuid.uuid4().hex[:8]}"
    local = ClientSettings.from_env({**os.environ, "LINEAGE_EVENTS_TOPIC": f"{prefix}.events"})
    namespace = f"bench-replay-{uuid.uuid4().hex[:6]}"
    events = run_pairs(count)
    for event in events:
        event["job"] = {**event["job"], "namespace": namespace}
    prepare_pipeline(local, 6)
    publisher = EventPublisher.from_settings(local, local.events_topic)
    try:
        publisher.send([publisher.encode(event) for event in events]).result(300)
    finally:
        publisher.close()
    results = {}
    for engine, run in (("local", lambda: replay(local, start="earliest")),
                        ("spark", lambda: replay_on_spark(local, start="earliest", master="local[2]"))):
        report = run()  # the second pass rewrites the same graph: statements are idempotent
        results[engine] = {"events": count, "events_per_s": report.records / report.seconds,
                           "seconds": report.seconds, "written": report.written}
    return results


# --- partitions (issue 22): `lineage ready` on a graph of ~1 M partitions ------------------------------------------
PARTITION_DAYS = 365
PARTITION_LAYERS = 10


def _partition_datasets(datasets: int) -> list[list[Any]]:
    """[dataset, layer, [upstream datasets]]: ``PARTITION_LAYERS`` layers, each dataset below the first reading two
    datasets of the layer above (the same day's partitions)."""
    width = max(2, datasets // PARTITION_LAYERS)
    rows = []
    for index in range(datasets):
        layer, slot = divmod(index, width)
        above = (layer - 1) * width
        upstream = [] if layer == 0 else sorted({above + slot, above + (slot * 7 + 1) % width})
        rows.append([index, layer, upstream])
    return rows


# One writing run per (dataset, day) — its Run, Partition, PartitionVersion and edges as the sink writes them; a run
# in 97 fails. Times: day k at the dataset's layer hour, so downstream runs start after their upstream ones ended.
_DAY_TIME = "toString(date('2024-01-01') + duration({days: k}))"
_BUILD_PARTITIONS = (
    "UNWIND $rows AS row MERGE (d:Dataset {namespace: $ns, name: 'd-' + toString(row[0])}) "
    "MERGE (j:Job {namespace: $ns, name: 'job-' + toString(row[0])}) WITH d, j, row "
    "UNWIND range(0, $days - 1) AS k WITH d, j, row, k, " + _DAY_TIME + " AS day, "
    "right('0' + toString(row[1]), 2) AS hour "
    "CREATE (p:Partition {namespace: $ns, name: d.name, key: 'date=' + day}) "
    "CREATE (v:PartitionVersion {namespace: $ns, name: d.name, key: 'date=' + day, "
    "runId: $ns + '-' + toString(row[0]) + '-' + toString(k)}) "
    "CREATE (r:Run {runId: v.runId, state: CASE WHEN (row[0] * 31 + k) % 97 = 0 THEN 'FAIL' ELSE 'COMPLETE' END, "
    "startTime: day + 'T' + hour + ':00:00.000000Z', endTime: day + 'T' + hour + ':30:00.000000Z'}) "
    "CREATE (d)-[:HAS_PARTITION]->(p), (p)-[:HAS_VERSION]->(v), (r)-[:OF_JOB]->(j), "
    "(r)-[:WROTE_PARTITION {firstSeen: r.startTime, lastSeen: r.endTime, rowCount: 1000 + k}]->(v)")
_BUILD_READS = (
    "UNWIND $rows AS row UNWIND range(0, $days - 1) AS k WITH row, k, 'date=' + " + _DAY_TIME + " AS key "
    "MATCH (r:Run {runId: $ns + '-' + toString(row[0]) + '-' + toString(k)}) UNWIND row[2] AS up "
    "MATCH (u:Partition {namespace: $ns, name: 'd-' + toString(up), key: key}) "
    "CREATE (r)-[:READ_PARTITION {firstSeen: r.startTime, lastSeen: r.startTime}]->(u)")
# A rewrite (a second version, two days later) of one first-layer partition in 101: their readers become STALE.
_BUILD_REWRITES = (
    "UNWIND $rows AS row UNWIND range(0, $days - 1) AS k WITH row, k WHERE (row[0] * 17 + k) % 101 = 0 "
    "WITH row, k, 'date=' + " + _DAY_TIME + " AS key, toString(date('2024-01-01') + duration({days: k + 2})) AS later "
    "MATCH (p:Partition {namespace: $ns, name: 'd-' + toString(row[0]), key: key}) "
    "CREATE (v:PartitionVersion {namespace: $ns, name: p.name, key: key, runId: $ns + '-rewrite-' + toString(row[0]) "
    "+ '-' + toString(k)}) CREATE (r:Run {runId: v.runId, state: 'COMPLETE', startTime: later + 'T00:00:00.000000Z', "
    "endTime: later + 'T00:30:00.000000Z'}) "
    "CREATE (p)-[:HAS_VERSION]->(v), (r)-[:WROTE_PARTITION {firstSeen: r.startTime, lastSeen: r.endTime}]->(v)")


def write_partitions(driver: Any, namespace: str, datasets: int, days: int = PARTITION_DAYS,
                     progress: Any = None) -> dict[str, Any]:
    """The partition graph of ``_partition_datasets`` in ``namespace``, in UNWIND batches: its size and build time."""
    rows = _partition_datasets(datasets)
    per_batch = max(1, 4000 // days)
    started = time.perf_counter()
    with driver.session() as session:
        for statement in (_BUILD_PARTITIONS, _BUILD_READS):
            for start in range(0, len(rows), per_batch):
                batch = [row for row in rows[start:start + per_batch] if statement is _BUILD_PARTITIONS or row[2]]
                if batch:
                    session.run(statement, rows=batch, ns=namespace, days=days).consume()
                if progress:
                    progress(statement is _BUILD_READS, start + per_batch, len(rows))
        first_layer = [row for row in rows if row[1] == 0]
        session.run(_BUILD_REWRITES, rows=first_layer, ns=namespace, days=days).consume()
        counts = session.run("MATCH (p:Partition {namespace: $ns}) WITH count(p) AS partitions "
                             "MATCH (v:PartitionVersion {namespace: $ns}) RETURN partitions, count(v)",
                             ns=namespace).single()
    return {"datasets": datasets, "days": days, "layers": PARTITION_LAYERS, "partitions": counts[0],
            "versions": counts[1], "build_seconds": time.perf_counter() - started}


def bench_partitions(settings: ClientSettings, partitions: int, queries: int = 2000, seed: int = 22,
                     namespace: str | None = None) -> dict[str, Any]:
    """``lineage ready`` over random (dataset, day) questions on a graph of about ``partitions`` partitions (365
    days per dataset, 10 layers, two upstream partitions each): p50/p99 of Neo4j's own time for the readiness query
    (server side: result available + consumed), of the whole ``ready()`` call the CLI and the lineage server make
    (driver round trip and the state computation included), and of the lineage server's readiness endpoint (its
    ``Server-Timing``, and at the client). ``namespace``: measure the graph an earlier run built there."""
    import random

    datasets = max(PARTITION_LAYERS * 2, partitions // PARTITION_DAYS)
    build = namespace is None
    namespace = namespace or f"bench-partitions-{uuid.uuid4().hex[:6]}"

    def progress(reads: bool, done: int, total: int) -> None:
        if done % max(1, total // 10) < max(1, 4000 // PARTITION_DAYS):
            print(f"  {'reads' if reads else 'partitions'}: {min(done, total)}/{total} datasets", flush=True)

    with driver_for(settings) as driver:
        ensure_constraints(driver)
        if build:
            size = write_partitions(driver, namespace, datasets, progress=progress)
        else:
            size = {"datasets": datasets, "days": PARTITION_DAYS, "layers": PARTITION_LAYERS, "build_seconds": 0.0,
                    **dict(zip(("partitions", "versions"), driver.execute_query(
                        "MATCH (p:Partition {namespace: $ns}) WITH count(p) AS partitions "
                        "MATCH (v:PartitionVersion {namespace: $ns}) RETURN partitions, count(v)",
                        ns=namespace).records[0].values(), strict=True))}
        rng = random.Random(seed)
        questions = [(f"d-{rng.randrange(datasets)}", rng.randrange(PARTITION_DAYS)) for _ in range(queries)]
        keys = {day: f"date={(datetime(2024, 1, 1) + timedelta(days=day)).date()}"
                for day in range(PARTITION_DAYS)}
        server, call, answers = [], [], {"ready": 0, "not_ready": 0}
        with driver.session() as session:
            for index, (name, day) in enumerate(questions):
                result = session.run(partition_reads._READY, namespace=namespace, name=name, keys=[keys[day]],
                                     maxVersions=partition_reads.MAX_VERSIONS)
                result.single()
                summary = result.consume()
                if index >= 20:  # the first questions warm the plan cache and pages
                    server.append(float(summary.result_available_after + summary.result_consumed_after))
        for index, (name, day) in enumerate(questions):
            started = time.perf_counter()
            ok, _, _ = partition_reads.ready(driver, namespace, name, keys[day])
            if index >= 20:
                call.append((time.perf_counter() - started) * 1000)
            answers["ready" if ok else "not_ready"] += 1
        with driver.session() as session:
            elements = session.run("MATCH (n) RETURN count(n)").single()[0], \
                session.run("MATCH ()-[r]->() RETURN count(r)").single()[0]
    http_server, http_client = [], []
    with server_process() as child, requests.Session() as http:
        for index, (name, day) in enumerate(questions[:500]):
            started = time.perf_counter()
            answer = http.get(f"{child.url}/api/v2/datasets/{namespace}/{name}/partitions/ready",
                              params={"key": keys[day]}, timeout=60)
            answer.raise_for_status()
            if index >= 20:
                http_client.append((time.perf_counter() - started) * 1000)
                http_server.append(float(answer.headers["Server-Timing"].split("dur=", 1)[1]))
    return {**size, "nodes_in_database": elements[0], "relationships_in_database": elements[1],
            "queries": queries, "answers": answers,
            "ready_http_ms": {"p50": _percentile(http_server, 0.5), "p99": _percentile(http_server, 0.99),
                              "client_p50": _percentile(http_client, 0.5),
                              "client_p99": _percentile(http_client, 0.99), "queries": len(http_server)},
            "ready_neo4j_ms": {"p50": _percentile(server, 0.5), "p99": _percentile(server, 0.99),
                               "max": max(server)},
            "ready_call_ms": {"p50": _percentile(call, 0.5), "p99": _percentile(call, 0.99), "max": max(call)}}


def format_partitions(result: dict[str, Any]) -> str:
    part = result["partitions"]
    neo4j, call = part["ready_neo4j_ms"], part["ready_call_ms"]
    return (f"partition graph: {part['partitions']:,} partitions, {part['versions']:,} versions of "
            f"{part['datasets']:,} datasets x {part['days']} days ({part['nodes_in_database']:,} nodes, "
            f"{part['relationships_in_database']:,} relationships in the database), built in "
            f"{part['build_seconds']:.0f} s\n"
            f"lineage ready over {part['queries']} random (dataset, day) questions ({part['answers']['ready']} ready, "
            f"{part['answers']['not_ready']} not):\n"
            f"  Neo4j (server side): p50 {neo4j['p50']:.1f} ms / p99 {neo4j['p99']:.1f} ms / "
            f"max {neo4j['max']:.0f} ms\n"
            f"  ready() call (what the CLI and the lineage server spend): p50 {call['p50']:.1f} ms / "
            f"p99 {call['p99']:.1f} ms / max {call['max']:.0f} ms\n"
            f"  lineage server, GET …/partitions/ready ({part['ready_http_ms']['queries']} questions): Server-Timing "
            f"p50 {part['ready_http_ms']['p50']:.1f} ms / p99 {part['ready_http_ms']['p99']:.1f} ms; client (HTTP "
            f"included) p50 {part['ready_http_ms']['client_p50']:.1f} ms / "
            f"p99 {part['ready_http_ms']['client_p99']:.1f} ms")


def run_partition_bench(partitions: int, output: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"bench": "partitions", "at": datetime.now(UTC).isoformat(),
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                              "partitions": bench_partitions(ClientSettings.from_env(), partitions)}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_graph_bench(stage: str, count: int, jobs: int, output: Path) -> dict[str, Any]:
    """``stage``: "sink" (sink backlog + replay), "query", or "graph" (all of them)."""
    settings = ClientSettings.from_env()
    result: dict[str, Any] = {"bench": stage, "at": datetime.now(UTC).isoformat(),
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    if stage in ("sink", "graph"):
        result["sink"] = bench_sink(settings, count)
        result["replay"] = bench_replay(settings, count)
    if stage in ("query", "graph"):
        result["query"] = bench_query(settings, jobs)
        result["query_dag"] = bench_query_dag(settings, jobs)
    if stage == "api":
        result["api"] = bench_api(settings, jobs)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_graph(result: dict[str, Any]) -> str:
    lines = []
    parts = [("graph sink", result["sink"])] if "sink" in result else []
    parts += [(f"replay ({engine})", part) for engine, part in result.get("replay", {}).items()]
    for name, part in parts:
        lines.append(f"{name}: {part['events']} events in {part['seconds']:.1f}s "
                     f"= {part['events_per_s']:,.0f} events/s")
    if "query" in result:
        query = result["query"]
        lines.append(f"queries at depth {query['depth']} over {query['relationships_in_database']:,} relationships: "
                     f"impact p50 {query['impact_ms']['p50']:.1f} ms / p99 {query['impact_ms']['p99']:.1f} ms, "
                     f"upstream p50 {query['upstream_ms']['p50']:.1f} ms / p99 {query['upstream_ms']['p99']:.1f} ms")
    if "api" in result:
        api = result["api"]
        lines.append(f"lineage server on a DAG of {api['jobs']:,} jobs, {api['relationships_in_database']:,} "
                     f"relationships in the database, depth {api['depth']} (p50 / p99 ms in the server; at the "
                     "client, HTTP included):")
        for key in ("lineage_ms", "column_lineage_ms", "search_ms"):
            lines.append(f"  {key[:-3].replace('_', ' ')}: {api[key]['p50']:.1f} / {api[key]['p99']:.1f}; client "
                         f"{api[key]['client_p50']:.1f} / {api[key]['client_p99']:.1f}")
        lines.append(f"  lineage answers cut at the server's node limit: {api['lineage_truncated']} of "
                     f"{api['queries']}")
        render = api["ui_render_ms"]
        lines.append(f"  web UI drawing a whole {render['nodes']:,}-node answer in Chromium: first chunk p50 "
                     f"{render['first_p50']:.0f} ms, all p50 {render['all_p50']:.0f} ms (max {render['all_max']:.0f})")
    if "query_dag" in result:
        dag = result["query_dag"]
        lines.append(f"fan-in DAG of {dag['jobs']:,} jobs, {dag['relationships_in_database']:,} relationships in the "
                     f"database, limit {dag['limit']} (p50 / p99 ms):")
        for key, value in dag.items():
            if key.endswith("_ms"):
                lines.append(f"  {key[:-3].replace('_', ' ')}: {value['p50']:.1f} / {value['p99']:.1f}")
    return "\n".join(lines)


def _scrape(url: str, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """The samples called ``name`` carrying ``labels`` on a component's ``/metrics``: (all their labels, value)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"{url}/metrics", timeout=10).text
    return [(sample.labels, sample.value) for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())]


def _histogram(url: str, name: str, **labels: str) -> dict[float, float]:
    """Cumulative bucket counts (upper bound → count) of one Prometheus histogram series."""
    return {float(found["le"]): value for found, value in _scrape(url, f"{name}_bucket", **labels)}


def histogram_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The ``q`` quantile of the observations between two snapshots, as the upper bound of the bucket holding it
    (Prometheus buckets: an honest "at most"); None without observations."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    for bound, count in zip(bounds, counts, strict=True):
        if count >= q * counts[-1]:
            return bound
    return bounds[-1]


def _counter(url: str, name: str, **labels: str) -> float:
    return sum(value for _, value in _scrape(url, name, **labels))


def _schema_change(namespace: str, index: int) -> list[dict[str, Any]]:
    """A START/COMPLETE pair whose output's ``amount`` column flips type: one drift alert each time."""
    run, kind = str(uuid.uuid4()), "double" if index % 2 else "string"
    output = {"namespace": "s3://lake", "name": f"{namespace}/drifting", "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": "id", "type": "bigint"}, {"name": "amount", "type": kind}]}}}
    return [{"eventType": state, "eventTime": datetime.now(UTC).isoformat(), "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": run}, "job": {"namespace": namespace, "name": "drifting-job"},
             "inputs": [], "outputs": [output]} for state in ("START", "COMPLETE")]


def _post_all(url: str, bodies: list[bytes], clients: int) -> int:
    """POST every body to the collector's lineage endpoint from ``clients`` keep-alive sessions; events accepted."""
    sessions = [requests.Session() for _ in range(clients)]

    def post(index: int) -> int:
        answer = sessions[index % clients].post(f"{url}/api/v1/lineage", data=bodies[index], timeout=300,
                                                headers={"Content-Type": "application/json"})
        answer.raise_for_status()
        return answer.json()["accepted"]

    try:
        with ThreadPoolExecutor(clients) as pool:
            return sum(pool.map(post, range(len(bodies))))
    finally:
        for session in sessions:
            session.close()


def _component_pids(children: Mapping[str, list[ChildProcess]]) -> dict[str, list[int] | int | None]:
    """The pipeline's processes and the stack's services, for the CPU budget; the bench itself as ``bench client``."""
    stack = Stack(StackSettings.from_env(), report=lambda _line: None)
    pids: dict[str, list[int] | int | None] = {
        name: [child.process.pid for child in processes] for name, processes in children.items()}
    pids.update({f"{name} (JVM)": stack.running_pid(name) for name in ("kafka", "registry", "neo4j")})
    pids[BENCH_CLIENT] = os.getpid()
    return pids


@contextlib.contextmanager
def running_pipeline(env: dict[str, str], processors: int = 1, sinks: int = 1
                     ) -> Iterator[dict[str, list[ChildProcess]]]:
    """The pipeline as deployed, each component a child process: a collector, ``processors`` processor workers (one
    consumer group), ``sinks`` graph sinks (one group) and an alert sink; metrics on free ports (several of a kind)."""
    env = {**env, **ANY_FREE_PORT}
    with contextlib.ExitStack() as stack:
        yield {"collector": [stack.enter_context(collector_process(env))],
               "processor": [stack.enter_context(processor_process(env)) for _ in range(processors)],
               "graph sink": [stack.enter_context(sink_process(env)) for _ in range(sinks)],
               "alert sink": [stack.enter_context(alert_sink_process(env))]}


def graph_sink_written(children: Mapping[str, list[ChildProcess]]) -> float:
    """Events the graph sinks have written so far (all of them)."""
    return sum(_counter(sink.metrics_url, "lineage_events_out_total", stage="graph-sink")
               for sink in children["graph sink"])


def backlog_bodies(count: int, namespace: str, batch_size: int) -> tuple[list[dict[str, Any]], list[bytes]]:
    """``count`` realistic events of jobs in ``namespace`` (a namespace per run: no dataset is shared with an earlier
    run), and the request bodies that post them ``batch_size`` per request."""
    backlog = bench_events.run_pairs(count, EVENT_SHAPE, namespace=namespace)
    return backlog, [json.dumps(backlog[start:start + batch_size]).encode() for start in range(0, count, batch_size)]


def drain_backlog(children: Mapping[str, list[ChildProcess]], bodies: list[bytes], count: int, clients: int,
                  pinned: AbstractSet[int] | None = None) -> dict[str, Any]:
    """Post the backlog to the collector from ``clients`` sessions and wait until the graph sinks wrote all
    ``count`` events: events/s end to end and each component's CPU µs per event over it. ``pinned``: the CPUs that
    every component, the stack's services and this bench run on (a smaller machine), for this call only."""
    pids = _component_pids(children)
    everything = [pid for roots in pids.values() if roots is not None
                  for pid in ([roots] if isinstance(roots, int) else roots)]
    all_cpus = os.sched_getaffinity(0)
    if pinned is not None:
        cpu_budget.pin(everything, pinned)
    try:
        cpu_before = cpu_budget.cpu_seconds(pids, alone=frozenset({BENCH_CLIENT}))
        started = time.perf_counter()
        accepted = _post_all(children["collector"][0].url, bodies, clients)
        posted = time.perf_counter() - started
        wait_until(lambda: graph_sink_written(children) >= count, 1800,
                   what="the graph sink catching up with the backlog")
        elapsed = time.perf_counter() - started
        cpu_after = cpu_budget.cpu_seconds(pids, alone=frozenset({BENCH_CLIENT}))
    finally:
        if pinned is not None:
            cpu_budget.pin(everything, all_cpus)
    return {"accepted": accepted, "events_per_s": count / elapsed, "seconds": elapsed, "http_seconds": posted,
            "cpu_us_per_event": cpu_budget.per_event_us(cpu_before, cpu_after, count)}


def bench_end_to_end(settings: ClientSettings, count: int, rate: int = 1000, seconds: float = 20.0,
                     batch_size: int = 100, clients: int = 4, code: Mapping[str, str] | None = None
                     ) -> dict[str, Any]:
    """The whole pipeline as deployed (collector, processor, graph sink, alert sink as processes; HTTP in): events/s
    on a backlog of ``count`` events posted ``batch_size`` per request, each component's CPU µs per event on it
    (the budget table), then produce→graph and produce→alert latency at a steady ``rate`` events/s (or half the
    backlog's events/s if that is less). ``code``: environment that makes the components run other code (an older
    checkout first on PYTHONPATH), to compare two versions side by side in one run."""
    prefix = f"lineage.bench.e2e.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 6, Path(".lineage/bench") / prefix), "LINEAGE_SINK_POLL_SECONDS": "0.1",
           **(code or {})}
    namespace = f"bench-e2e-{uuid.uuid4().hex[:6]}"
    backlog, bodies = backlog_bodies(count, namespace, batch_size)
    with running_pipeline(env) as children:
        collector, sink, alerts = children["collector"][0], children["graph sink"][0], children["alert sink"][0]
        drained = drain_backlog(children, bodies, count, clients)
        budget, elapsed = drained["cpu_us_per_event"], drained["seconds"]
        graph_before = _histogram(sink.metrics_url, "lineage_end_to_end_latency_seconds", path="graph")
        alert_before = _histogram(alerts.metrics_url, "lineage_end_to_end_latency_seconds", path="alert")
        # Latency means something only at a rate the pipeline sustains: at most half of the backlog's rate.
        rate = min(rate, max(10, int(count / elapsed / 2)))
        steady, tick, changes = bench_events.run_pairs(int(rate * seconds), EVENT_SHAPE, namespace=namespace), 0.1, 0
        per_tick = max(1, int(rate * tick))
        next_tick = time.monotonic()
        with requests.Session() as session:
            for index in range(0, len(steady), per_tick):
                batch = steady[index:index + per_tick]
                if index % (per_tick * 20) == 0:  # a schema change every 2 s
                    batch = batch + _schema_change(namespace, changes)
                    changes += 1
                session.post(f"{collector.url}/api/v1/lineage", data=json.dumps(batch).encode(), timeout=60,
                             headers={"Content-Type": "application/json"}).raise_for_status()
                next_tick += tick
                sleep_watching(max(0.0, next_tick - time.monotonic()))
        expected = count + len(steady) + 2 * changes
        with contextlib.suppress(TimeoutError):  # the latencies are of what arrived by then
            wait_until(lambda: (_counter(sink.metrics_url, "lineage_events_out_total", stage="graph-sink") >= expected
                                and _counter(alerts.metrics_url, "lineage_events_out_total",
                                             stage="alert-sink") >= changes - 1), 120, interval=0.5)
        graph_after = _histogram(sink.metrics_url, "lineage_end_to_end_latency_seconds", path="graph")
        alert_after = _histogram(alerts.metrics_url, "lineage_end_to_end_latency_seconds", path="alert")
    cores = os.cpu_count() or 1
    return {"events": count, "accepted": drained["accepted"], "shape": EVENT_SHAPE,
            "mean_event_bytes": bench_events.mean_bytes(backlog[:1000]), "events_per_s": drained["events_per_s"],
            "seconds": elapsed, "http_seconds": drained["http_seconds"], "batch_size": batch_size,
            "steady_rate": rate,
            "cpu_us_per_event": budget, "budget": cpu_budget.budget_rows(budget, cores), "cores": cores,
            "graph_latency_s_at_most": {q: histogram_quantile(graph_before, graph_after, p)
                                        for q, p in (("p50", 0.5), ("p99", 0.99))},
            "alert_latency_s_at_most": {q: histogram_quantile(alert_before, alert_after, p)
                                        for q, p in (("p50", 0.5), ("p99", 0.99))},
            "schema_changes": changes}


def run_e2e_bench(count: int, output: Path) -> dict[str, Any]:
    """``lineage bench e2e``: a short warm-up, then the end-to-end bench with its CPU budget table."""
    settings = ClientSettings.from_env()
    bench_end_to_end(settings, min(count, 3000), seconds=2.0)  # not reported: JIT and page caches warm up
    return saved("e2e", output, end_to_end=bench_end_to_end(settings, count))


def format_e2e(result: dict[str, Any]) -> str:
    e2e = result["end_to_end"]
    graph, alert = e2e["graph_latency_s_at_most"], e2e["alert_latency_s_at_most"]
    return "\n".join([
        f"{e2e['events']:,} {e2e['shape']} events (~{e2e['mean_event_bytes'] / 1000:.1f} KB), HTTP in, "
        f"{e2e['batch_size']} per request: {e2e['events_per_s']:,.0f} events/s end to end (target >= 10,000)",
        f"produce -> graph p50 / p99 at {e2e['steady_rate']:,} events/s (s, at most): {graph['p50']} / "
        f"{graph['p99']} (target p99 <= 1); produce -> drift alert p99: {alert['p99']}",
        cpu_budget.format_budget(e2e["budget"], e2e["cores"])])


def run_suite(count: int, jobs: int, output: Path) -> dict[str, Any]:
    """Every bench in one run, one JSON file: end to end first (the targets), then each stage."""
    settings = ClientSettings.from_env()
    topic = bench_topic(settings)
    # Warm-up, not reported: a stack just started (JIT, Neo4j's page cache) measured the first figure at half speed.
    bench_end_to_end(settings, min(count, 5000), seconds=3.0)
    result: dict[str, Any] = {"bench": "all", "at": datetime.now(UTC).isoformat(),
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                              "end_to_end": bench_end_to_end(settings, count),
                              "emit": {"transports": bench_emit_transports(settings, topic, count),
                                       "collector": bench_collector(topic, count)},
                              "processor": {"runs": [bench_processor_workers(settings, workers, count)
                                                     for workers in (1, 2)]},
                              "sink": bench_sink(settings, count), "replay": bench_replay(settings, count),
                              "query": bench_query(settings, jobs)}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_suite(result: dict[str, Any]) -> str:
    e2e = result["end_to_end"]
    graph, alert = e2e["graph_latency_s_at_most"], e2e["alert_latency_s_at_most"]
    graph_text = f"{graph['p50']} / {graph['p99']}"
    rows = [f"events: {e2e['shape']} (~{e2e['mean_event_bytes'] / 1000:.1f} KB)",
            f"{'measure':52} {'figure':>16}  target",
            f"{'end to end, backlog (events/s)':52} {e2e['events_per_s']:>16,.0f}  >= 10,000",
            f"{'produce -> graph p50 / p99 at ' + format(e2e['steady_rate'], ',') + ' events/s (s, at most)':52} "
            f"{graph_text:>16}  p99 <= 1 at 1,000/s",
            f"{'produce -> drift alert p99 (s, at most)':52} {alert['p99']!s:>16}  <= 1",
            cpu_budget.format_budget(e2e["budget"], e2e["cores"]),
            format_emit(result["emit"]), format_processor(result["processor"]),
            format_graph({"sink": result["sink"], "replay": result["replay"], "query": result["query"]})]
    return "\n".join(rows)


def format_emit(result: dict[str, Any]) -> str:
    ours = result["transports"]["kafka_avro_transport"]
    stock = result["transports"]["stock_kafka_transport"]
    collector = result["collector"]
    rows = [
        f"{'emitter':34} {'events':>8} {'µs/event (caller)':>18} {'events/s':>10}",
        f"{'KafkaAvroTransport (ours)':34} {ours['events']:>8} {ours['caller_us_per_event']:>18.1f} "
        f"{ours['events_per_s']:>10,.0f}",
        f"{'openlineage KafkaTransport (JSON)':34} {stock['events']:>8} {stock['caller_us_per_event']:>18.1f} "
        f"{stock['events_per_s']:>10,.0f}",
        f"{'HTTP collector, batches of ' + str(collector['batch_size']):34} {collector['events']:>8} {'-':>18} "
        f"{collector['events_per_s']:>10,.0f}",
        f"ours vs stock: {result['transports']['throughput_ratio']:.1f}x throughput, "
        f"{result['transports']['caller_time_ratio']:.1f}x less caller time; "
        f"undelivered: {ours['undelivered']}",
    ]
    return "\n".join(rows)


def saved(bench: str, output: Path, **figures: Any) -> dict[str, Any]:
    result = {"bench": bench, "at": datetime.now(UTC).isoformat(), "shape": EVENT_SHAPE,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **figures}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_collector_bench(count: int, output: Path) -> dict[str, Any]:
    """``lineage bench collector``: one event per request from 8 clients, then 100 per request (bench_collector)."""
    from kafka_lineage_devtools.bench_collector import bench_collector_single

    return saved("collector", output, collector=bench_collector_single(count, shape=EVENT_SHAPE))


def format_collector(result: dict[str, Any]) -> str:
    collector = result["collector"]
    rows = [f"{collector['concurrent_clients']} keep-alive clients, {result['shape']} events "
            f"(~{collector['event_bytes'] / 1000:.1f} KB)",
            f"{'requests':28} {'events/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'collector CPU µs/request':>25}"]
    for name, label in (("single", "one event per request"), ("batch_100", "100 events per request"),
                        ("http_ceiling", "health check (the ceiling)")):
        run = collector[name]
        rate = run.get("events_per_s", run["requests_per_s"])
        rows.append(f"{label:28} {rate:>10,.0f} {run['p50_ms']:>8} {run['p99_ms']:>8} "
                    f"{run['collector_cpu_us_per_request']!s:>25}")
    rows.append("target: one event per request >= 3,000 events/s, p99 <= 20 ms")
    return "\n".join(rows)


def run_bulk_replay_bench(count: int, output: Path) -> dict[str, Any]:
    """``lineage bench replay-bulk``: live ``replay --fresh``, then ``--fresh --bulk`` (neo4j-admin import) folded in
    one process and on Spark, of the same events. Replaces the stack's whole graph: a bench stack only."""
    from kafka_lineage_devtools.bench_replay_bulk import bench_bulk_replay

    return saved("replay-bulk", output, replay=bench_bulk_replay(ClientSettings.from_env(), count, EVENT_SHAPE))


def format_bulk_replay(result: dict[str, Any]) -> str:
    replay_result = result["replay"]
    lines = [f"{replay_result['events']:,} events"]
    if "live" in replay_result:
        lines.append(f"live replay: {replay_result['live']['events_per_s']:,.0f} events/s")
    for name, bulk in replay_result.items():
        if not (name.startswith("bulk") and isinstance(bulk, dict)):
            continue
        label = "bulk import, one process" if name == "bulk" else f"bulk import, folded on Spark {name[11:]}"
        phases = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in bulk["phases"].items())
        ratios = "; ".join(f"{value:.2f}x {key.split('_over_')[1]}" for key, value in replay_result.items()
                           if key.startswith(f"{name}_over_"))
        lines += [f"{label}: {bulk['events_per_s']:,.0f} events/s{f' ({ratios})' if ratios else ''}; phases: "
                  f"{phases}; peak memory {bulk['peak_memory_mib']:,} MiB, files {bulk['files_mib']:,} MiB, "
                  f"store {bulk['store_mib']:,} MiB"]
    lines.append(f"same graph (fingerprint): {'yes' if replay_result['fingerprints_equal'] else 'NO'}")
    return "\n".join(lines)
