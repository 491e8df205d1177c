"""The graph sink on realistic events (issue 23): events/s of a ``lineage sink`` process on a backlog of normalized
events, and where a batch's time goes — Neo4j server time per statement, Avro decode and model building in Python.

``bench_graph_sink(settings, count)`` is what ``lineage bench`` calls. With ``baseline`` (a checkout of an older
commit, e.g. ``git worktree add /tmp/old-sink <commit>``) the older sink runs in the same call, on a backlog of the
same size and shape, alternating with this one, and every figure is reported for both and as a ratio: the machine
is shared and noisy, so only figures of one run compare.

Every backlog is a fresh set of runs (its own seed) of the same 2,000-job DAG in one job namespace, after a warm-up
that wrote the DAG's jobs, datasets and fields once: the steady state of a platform, where runs are new and the
tables they read and write are not.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import requests
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph import events as current_events
from kafka_lineage.graph import statements as current_statements
from kafka_lineage.graph.driver import driver_for, ensure_constraints
from kafka_lineage.graph.epoch import read as read_epoch
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import FacetCache, event_to_record, record_to_event
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.cpu_budget import process_cpu_seconds
from kafka_lineage_devtools.processes import pipeline_env, sink_process

_OUT = re.compile(r'^lineage_events_out_total\{stage="graph-sink"\} (\S+)$', re.MULTILINE)


def _baseline_path(checkout: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes ``kafka_lineage`` the checkout's (its folders are the package's
    subpackages, as pyproject's package-dir maps them; the editable install's finder comes after the path)."""
    root = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    (root / "kafka_lineage").mkdir()
    for folder in ("schemas", "runtime", "graph", "producers", "processors", "sinks", "replay", "server", "app"):
        if (checkout / folder).is_dir():  # older checkouts have the graph model in sinks/graph/
            (root / "kafka_lineage" / folder).symlink_to(checkout.resolve() / folder)
    return root


def _load_model(checkout: Path) -> SimpleNamespace:
    """The checkout's graph model (pure: it imports only ``kafka_lineage.schemas`` and its own package) beside this
    one: ``graph_batch``, ``statements`` and ``STATEMENTS``. A checkout from before the model was split along its
    seams has it in one file (``graph/model.py``, earlier ``sinks/graph/model.py``)."""
    for single in (checkout / "graph/model.py", checkout / "sinks/graph/model.py"):
        if single.exists():
            module = _load_source("baseline_graph_model", single.read_text())
            return SimpleNamespace(graph_batch=module.graph_batch, statements=module.statements,
                                   STATEMENTS=module.STATEMENTS)
    # the model's modules import each other as kafka_lineage.graph.*: load them as baseline_graph.* instead
    package = ModuleType("baseline_graph")
    package.__path__ = []
    sys.modules["baseline_graph"] = package
    loaded: dict[str, ModuleType] = {}
    for name in ("keys", "batch", "facets", "events", "statements"):  # dependency order
        source = (checkout / "graph" / f"{name}.py").read_text().replace("kafka_lineage.graph.", "baseline_graph.")
        loaded[name] = _load_source(f"baseline_graph.{name}", source)
    return SimpleNamespace(graph_batch=loaded["events"].graph_batch, statements=loaded["statements"].statements,
                           STATEMENTS=loaded["statements"].STATEMENTS)


def _load_source(name: str, source: str) -> ModuleType:
    module = ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # a checkout of this project, as a module
    return module


def _records(local: ClientSettings, events: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    client = SchemaRegistryClient(local.registry_config())
    schema_id = registry.registered_id(client, local.normalized_topic, "normalized_event")
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    now = datetime.now(UTC)
    return [(f"run:{event['run']['runId']}".encode(), codec.encode({
        "event": event_to_record(event), "schemaChanges": [], "processing": {
            "dedupeId": str(index), "processedAt": now, "late": False, "sourceTopic": None,
            "sourcePartition": None, "sourceOffset": None, "producedAt": None, "renamedDatasets": []}},
        schema_id)) for index, event in enumerate(events)]


def _written(url: str) -> float | None:
    """The sink's ``events_out`` counter; None when its endpoint did not answer in time (a loaded machine)."""
    try:
        found = _OUT.search(requests.get(url, timeout=5).text)
    except requests.RequestException:
        return None
    return float(found.group(1)) if found else 0.0


def _sink_rate(settings: ClientSettings, count: int, shape: str, namespace: str, seed: int,
               pythonpath: Path | None, extra_env: dict[str, str], churn: bool = False) -> dict[str, Any]:
    """Events/s of one sink process reading a backlog of ``count`` events produced before it starts, by its
    ``events_out`` counter: from its first written batch to its last (group join and start-up left out), and from
    its readiness (a pipelined sink prepares its second batch while the first is written: timing from the first
    write would leave that out); its CPU µs per event over the latter (steadier than rates on a shared machine)."""
    prefix = f"lineage.bench.gsink.{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **pipeline_env(prefix, 6, Path(".lineage/bench") / prefix), **extra_env}
    if pythonpath is not None:
        env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env.get('PYTHONPATH', '')}"
    local = ClientSettings.from_env(env)
    prepare_pipeline(local, 6)
    records = _records(local, run_pairs(count, shape, seed=seed, namespace=namespace, churn=churn))
    producer = AckingProducer({"bootstrap.servers": local.kafka_bootstrap_servers})
    producer.send(local.normalized_topic, records).result(600)
    producer.close()
    with sink_process(env) as sink:
        ready, cpu = time.perf_counter(), process_cpu_seconds(sink.process.pid)
        url = sink.metrics_url if sink.metrics_url.endswith("/metrics") else sink.metrics_url.rstrip("/") + "/metrics"
        first: tuple[float, float] | None = None
        deadline, done = time.monotonic() + 3600, 0.0
        while True:
            read, now = _written(url), time.perf_counter()
            done = done if read is None else read
            if first is None and done > 0:
                first = (now, done)
            if done >= count or time.monotonic() > deadline:
                cpu = process_cpu_seconds(sink.process.pid) - cpu
                break
            time.sleep(0.1)
    if first is None or done <= first[1]:
        raise RuntimeError(f"the sink wrote {done:.0f} of {count} events")
    return {"events": count, "events_per_s": (done - first[1]) / (now - first[0]), "seconds": now - first[0],
            "events_per_s_from_ready": done / (now - ready), "cpu_us_per_event": cpu / done * 1e6,
            "load_average": os.getloadavg()[0]}


def _python_costs(model: Any, events: list[dict[str, Any]], codec: AvroCodec, encoded: list[bytes],
                  batch: int) -> dict[str, float]:
    """µs/event of Avro decode (bytes → record → event dict, as the sink does) and of the model (rows and
    statement parameters)."""
    facets = FacetCache()
    started = time.perf_counter()
    for value in encoded:
        record_to_event(codec.decode(value)["event"], facets)
    decode = time.perf_counter() - started
    started = time.perf_counter()
    for start in range(0, len(events), batch):
        model.statements(model.graph_batch(events[start:start + batch]))
    build = time.perf_counter() - started
    return {"decode_us_per_event": decode / len(encoded) * 1e6, "model_us_per_event": build / len(events) * 1e6}


def _statement_times(driver: Any, model: Any, batches: list[list[dict[str, Any]]],
                     known: KnownRows | None = None) -> dict[str, Any]:
    """Per statement of the model: rows per batch and Neo4j's time per batch (server: available + consumed, ms) and
    the client's (ms, packing and sending the rows included); the commit (the transaction's time beside its
    statements: Neo4j applies the writes then); medians over ``batches`` (one transaction each). ``known``: the
    rows the graph holds, left out as the sink leaves them out (and learned after each batch)."""
    per: dict[str, dict[str, list[float]]] = {}
    totals: list[float] = []
    commits: list[float] = []
    names = {query: name for name, query in model.STATEMENTS.items()}
    for events in batches:
        batch = model.graph_batch(events)
        if known is not None:
            batch = known.changes(batch)
        work = model.statements(batch)
        timings: list[tuple[str, int, float, float]] = []

        def transaction(tx: Any, work: list[tuple[str, dict[str, Any]]] = work,
                        timings: list[tuple[str, int, float, float]] = timings) -> None:
            timings.clear()
            for query, parameters in work:
                started = time.perf_counter()
                summary = tx.run(query, parameters).consume()
                client = (time.perf_counter() - started) * 1000
                server = (summary.result_available_after or 0) + (summary.result_consumed_after or 0)
                timings.append((names.get(query, query[:40]), len(parameters.get("rows", ())), server, client))

        started = time.perf_counter()
        with driver.session() as session:
            session.execute_write(transaction)
        totals.append((time.perf_counter() - started) * 1000)
        if known is not None:
            known.learn(batch, known.epoch)
        commits.append(totals[-1] - sum(client for *_, client in timings))  # commit (applying the writes) + begin
        for name, rows, server, client in timings:
            entry = per.setdefault(name, {"rows": [], "server_ms": [], "client_ms": []})
            entry["rows"].append(rows)
            entry["server_ms"].append(server)
            entry["client_ms"].append(client)
    size = len(batches[0])
    return {"batch_events": size, "transaction_ms": statistics.median(totals),
            "transaction_us_per_event": statistics.median(totals) * 1000 / size,
            "commit_ms": statistics.median(commits),
            "statements": {name: {key: round(statistics.median(values), 1) for key, values in entry.items()}
                           for name, entry in per.items()}}


WORKLOADS = ("steady", "churn")


def bench_graph_sink(settings: ClientSettings, count: int, shape: str = "realistic", *, baseline: str | None = None,
                     batches: int = 3, rounds: int = 1, sink_env: dict[str, str] | None = None,
                     workload: str = "steady") -> dict[str, Any]:
    """Events/s and CPU µs/event of a ``lineage sink`` process on a backlog of ``count`` normalized ``shape``
    events, plus Neo4j time per statement per batch (``batches`` transactions of ``LINEAGE_SINK_BATCH`` events,
    written in-process; 0: none) and the Python costs per event. ``baseline``: a checkout whose sink and model are
    measured in the same call, alternating over ``rounds``; ``sink_env``: extra environment for the sink processes
    (``LINEAGE_SINK_BATCH``). ``workload``: "steady" (new runs of the known DAG) or "churn" (every run's output
    schema new)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}: one of {', '.join(WORKLOADS)}")
    churn = workload == "churn"
    extra = dict(sink_env or {})
    batch_size = int(extra.get("LINEAGE_SINK_BATCH", os.environ.get("LINEAGE_SINK_BATCH", "2000")))
    namespace = f"bench-gsink-{uuid.uuid4().hex[:6]}"
    current = SimpleNamespace(graph_batch=current_events.graph_batch, statements=current_statements.statements,
                              STATEMENTS=current_statements.STATEMENTS)
    variants: dict[str, tuple[Any, Path | None]] = {"new": (current, None)}
    known = KnownRows()  # the new sink's memory, warmed as a running sink's is
    if baseline is not None:
        variants = {"old": (_load_model(Path(baseline)), _baseline_path(Path(baseline))), **variants}
    prefix = f"lineage.bench.gsink.{uuid.uuid4().hex[:8]}"
    local = ClientSettings.from_env({**os.environ, **pipeline_env(prefix, 1, Path(".lineage/bench") / prefix)})
    prepare_pipeline(local, 1)  # registers the schemas under the bench's own topics
    codec = AvroCodec("normalized_event", registry.schema_fetcher(SchemaRegistryClient(local.registry_config())))
    with driver_for(settings) as driver:
        ensure_constraints(driver)
        with driver.session() as session:
            known.reset(session.execute_write(read_epoch))
        # warm-up: the DAG's jobs, datasets, fields and schema versions exist, as on a running platform
        warm = run_pairs(8000, shape, seed=1, namespace=namespace)  # 4,000 runs: nearly every job of the DAG
        for start in range(0, len(warm), batch_size):
            current_model_write(driver, warm[start:start + batch_size])
            known.learn(current_events.graph_batch(warm[start:start + batch_size]), known.epoch)
        seed = 100
        result: dict[str, Any] = {"events": count, "shape": shape, "workload": workload, "batch": batch_size,
                                  "namespace": namespace,
                                  **{name: {} for name in variants}}
        for name, (model, _) in variants.items() if batches else ():  # batches=0: the sink processes only
            events = run_pairs(batch_size * batches, shape, seed=(seed := seed + 1), namespace=namespace, churn=churn)
            result[name]["neo4j"] = _statement_times(
                driver, model, [events[i:i + batch_size] for i in range(0, len(events), batch_size)],
                known if model is current else None)
            sample = run_pairs(min(count, 4000), shape, seed=(seed := seed + 1), namespace=namespace, churn=churn)
            encoded = [value for _, value in _records(local, sample)]
            result[name]["python"] = _python_costs(model, sample, codec, encoded, batch_size)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for turn in range(rounds):  # alternating, each variant first in every other round
        for name, (_, path) in (variants.items() if turn % 2 == 0 else reversed(variants.items())):
            seed += 1
            runs[name].append(_sink_rate(settings, count, shape, namespace, seed, path, extra, churn))
    for name, measured in runs.items():
        for key in ("events_per_s", "events_per_s_from_ready", "cpu_us_per_event", "load_average"):
            result[name][key] = [round(run[key], 1) for run in measured]
    for _, path in variants.values():
        if path is not None:
            shutil.rmtree(path)  # the symlinks only
    if baseline is not None:
        old, new = result["old"], result["new"]
        for key in ("events_per_s", "events_per_s_from_ready"):
            result[f"ratio_{key}"] = round(statistics.median(new[key]) / statistics.median(old[key]), 2)
        result["ratio_cpu_us_per_event"] = round(statistics.median(new["cpu_us_per_event"])
                                                 / statistics.median(old["cpu_us_per_event"]), 2)
        if batches:
            result["ratio_neo4j_transaction"] = round(old["neo4j"]["transaction_ms"] / new["neo4j"]["transaction_ms"],
                                                      2)
    return result


def run_stream_bench(count: int, workload: str, baseline: str | None, rounds: int, output: Path) -> dict[str, Any]:
    """``lineage bench sink-stream``: ``bench_graph_sink`` on the stack, saved to ``output``."""
    from kafka_lineage_devtools.bench import EVENT_SHAPE, saved

    return saved("sink-stream", output, **bench_graph_sink(ClientSettings.from_env(os.environ), count, EVENT_SHAPE,
                                                            baseline=baseline, rounds=rounds, workload=workload))


def format_stream(result: dict[str, Any]) -> str:
    """Events/s, CPU and Neo4j's transaction per variant, then the statements' server ms per batch side by side."""
    variants = [name for name in ("old", "new") if result.get(name)]
    lines = [f"{result['events']:,} {result['shape']} events, workload {result['workload']}, batches of "
             f"{result['batch']:,}"]
    for name in variants:
        figures = result[name]
        neo4j = figures.get("neo4j", {})
        lines.append(f"{name}: {statistics.median(figures['events_per_s']):,.0f} events/s, "
                     f"{statistics.median(figures['cpu_us_per_event']):,.0f} sink CPU µs/event, Neo4j transaction "
                     f"{neo4j.get('transaction_ms', 0):,.0f} ms a batch (commit {neo4j.get('commit_ms', 0):,.0f})")
    names = sorted({statement for name in variants for statement in result[name].get("neo4j", {}).get(
        "statements", {})})
    for statement in names:
        cells = [result[name]["neo4j"]["statements"].get(statement, {}) for name in variants]
        lines.append(f"  {statement[:24]:<24} " + "   ".join(
            f"{cell.get('rows', 0):>6,.0f} rows {cell.get('server_ms', 0):>6.0f} ms" for cell in cells))
    for key in ("ratio_events_per_s", "ratio_cpu_us_per_event", "ratio_neo4j_transaction"):
        if key in result:
            lines.append(f"{key}: {result[key]}")
    return "\n".join(lines)


def current_model_write(driver: Any, events: list[dict[str, Any]]) -> None:
    """Write ``events`` with this checkout's statements, one transaction."""
    work = current_statements.statements(current_events.graph_batch(events))

    def transaction(tx: Any) -> None:
        for query, parameters in work:
            tx.run(query, parameters).consume()

    with driver.session() as session:
        session.execute_write(transaction)


if __name__ == "__main__":  # python -m kafka_lineage_devtools.bench_sink COUNT [BASELINE [ROUNDS [BATCHES [WORKLOAD]]]]
    import json

    print(json.dumps(bench_graph_sink(ClientSettings.from_env(os.environ), int(sys.argv[1]),
                                      baseline=sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None,
                                      rounds=int(sys.argv[3]) if len(sys.argv) > 3 else 1,
                                      batches=int(sys.argv[4]) if len(sys.argv) > 4 else 3,
                                      workload=sys.argv[5] if len(sys.argv) > 5 else "steady"), indent=1))
