"""The HTTP collector under OpenLineage clients' usual load: one event per request from several keep-alive clients.

Most emitters (the Spark and Flink agents, Airflow's listener) post each event as it happens, one per request, so
the collector's single-event rate and latency are the figures that matter; 100 events per request is measured in the
same run for comparison. The client is asyncio + aiohttp with one keep-alive connection per simulated client: a
thread pool of ``requests`` sessions costs more CPU per request than the collector itself on a 2-core machine, and
the bench would measure itself. ``http_ceiling`` is the same client against the collector's liveness endpoint (no
body, no Kafka): the most any collector could answer on this machine with this client. CPU time per request, of the
collector process and of the client, is reported beside the rates: on a shared machine it varies far less than
events/s, and says where a request's cost lies.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.bench_setup import bench_topic
from kafka_lineage_devtools.cpu_budget import cpu_seconds as tree_cpu_seconds
from kafka_lineage_devtools.cpu_budget import process_cpu_seconds as cpu_seconds  # noqa: F401 (its unit test)
from kafka_lineage_devtools.processes import collector_process

BATCH_SIZE = 100  # events per request of the batched comparison
WARMUP_REQUESTS = 50
RETRY_SECONDS, MAX_TRIES = 0.2, 150  # a request answered 503 is sent again after 0.2 s, for 30 s at most


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values`` by the nearest-rank method; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


def batches(events: Sequence[Any], size: int) -> list[bytes]:
    """The JSON bodies of ``events``: one event each (``size`` 1: a bare object, as agents send it) or arrays of
    up to ``size``."""
    if size == 1:
        return [json.dumps(event).encode() for event in events]
    return [json.dumps(list(events[start:start + size])).encode() for start in range(0, len(events), size)]


async def drive(url: str, bodies: Sequence[bytes | None], clients: int, server_pid: int | None = None
                ) -> dict[str, float]:
    """POST every body (``None``: GET ``url`` instead) from ``clients`` concurrent keep-alive connections, each
    sending its next request once the previous is answered; events/s (the answers' ``accepted`` counts), requests/s,
    request latency percentiles in ms (a request retried after a 503 counts from its first try), and CPU µs per
    request of this client and of ``server_pid``. Any other non-200 answer fails the run."""
    latencies: list[float] = []
    accepted = retried = 0
    next_body = iter(range(len(bodies)))

    async def client() -> None:
        nonlocal accepted, retried
        # One connection per client, kept alive: what an agent's HTTP transport holds.
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
            for index in next_body:
                body = bodies[index]
                started = time.perf_counter()
                if body is None:
                    async with session.get(url) as answer:
                        await answer.read()
                        answer.raise_for_status()
                else:
                    for _ in range(MAX_TRIES):  # a 503 (Kafka starved on a loaded machine) is retried, as agents
                        # do, and counted
                        async with session.post(url, data=body, headers={"Content-Type": "application/json"}
                                                ) as answer:
                            reply = await answer.json()
                        if answer.status != 503:
                            break
                        retried += 1
                        await asyncio.sleep(RETRY_SECONDS)
                    if answer.status != 200:
                        raise RuntimeError(f"collector answered {answer.status}: {str(reply)[:300]}")
                    accepted += reply["accepted"]
                latencies.append(time.perf_counter() - started)

    server_cpu = _tree_cpu(server_pid) if server_pid else 0.0
    client_cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed, client_cpu = time.perf_counter() - started, time.process_time() - client_cpu
    if server_pid:
        server_cpu = _tree_cpu(server_pid) - server_cpu
    per_request = 1e6 / len(bodies)
    return {"events_per_s": round(accepted / elapsed, 1), "requests_per_s": round(len(bodies) / elapsed, 1),
            "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
            "collector_cpu_us_per_request": round(server_cpu * per_request) if server_pid else None,
            "client_cpu_us_per_request": round(client_cpu * per_request),
            "events": accepted, "requests": len(bodies), "retried_503": retried, "seconds": round(elapsed, 2)}


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children: a collector of several processes is a supervisor and workers."""
    return tree_cpu_seconds({"collector": pid})["collector"]


def bench_collector_single(count: int, clients: int = 8, shape: str = "realistic", *,
                           env: dict[str, str] | None = None, topic: str | None = None) -> dict[str, Any]:
    """A collector process fed ``count`` spec-valid events of ``shape`` (bench_events), one per request from
    ``clients`` keep-alive clients, then the same events 100 per request; events/s and p50/p99 latency of each,
    and the client's ceiling. ``env``: the collector's environment over ours (settings, or another tree's
    PYTHONPATH to compare with older code); ``topic``: the events topic (default: the bench topic)."""
    if topic is None:

        topic = bench_topic(ClientSettings.from_env())
    events = run_pairs(count, shape)
    singles, grouped = batches(events, 1), batches(events, BATCH_SIZE)
    with collector_process({"LINEAGE_EVENTS_TOPIC": topic, **(env or {})}) as child:
        lineage, pid = f"{child.url}/api/v1/lineage", child.process.pid
        asyncio.run(drive(lineage, singles[:WARMUP_REQUESTS], clients))  # registry lookup, connections, caches
        ceiling = asyncio.run(drive(f"{child.url}/health/live", [None] * min(count, 5000), clients, pid))
        single = asyncio.run(drive(lineage, singles, clients, pid))
        batched = asyncio.run(drive(lineage, grouped, clients, pid))
    return {"shape": shape, "event_bytes": round(sum(map(len, singles)) / len(singles)), "concurrent_clients": clients,
            "single": single, f"batch_{BATCH_SIZE}": batched,
            "http_ceiling": {key: ceiling[key] for key in ("requests_per_s", "p50_ms", "p99_ms",
                                                            "collector_cpu_us_per_request",
                                                            "client_cpu_us_per_request")}}


def bench_collector_compare(count: int, old: Path, rounds: int = 3, clients: int = 8, shape: str = "realistic", *,
                            env: dict[str, str] | None = None, old_env: dict[str, str] | None = None,
                            warmup: int = WARMUP_REQUESTS) -> dict[str, Any]:
    """The collector of ``old`` (a checkout, e.g. ``git worktree add /tmp/old HEAD``) and this one side by side on a
    shared machine: ``rounds`` rounds, each feeding both the same ``count`` fresh events of ``shape`` one per request
    from ``clients`` keep-alive clients, old and new alternating (the order flips every round so that a drift of the
    machine's load favours neither). Each run starts its own collector process and sends it ``warmup`` other runs'
    events of the same jobs first (a few thousand: a platform whose jobs have run before, the collector's caches in
    their steady state; the default 50 only warms connections and the registry lookup). Per run:
    events/s, p50/p99, collector and client CPU µs per request and the load average; then the medians and new/old."""
    from kafka_lineage_devtools.bench_sink import _baseline_path

    topic = bench_topic(ClientSettings.from_env())
    pythonpath = os.pathsep.join(filter(None, [str(_baseline_path(old)), os.environ.get("PYTHONPATH")]))
    sides = {"old": {"PYTHONPATH": pythonpath, **(old_env or {})}, "new": dict(env or {})}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for round_index in range(rounds):
        singles = batches(run_pairs(count, shape), 1)
        for side in ("old", "new") if round_index % 2 == 0 else ("new", "old"):
            with collector_process({"LINEAGE_EVENTS_TOPIC": topic, **sides[side]}) as child:
                lineage, pid = f"{child.url}/api/v1/lineage", child.process.pid
                asyncio.run(drive(lineage, batches(run_pairs(warmup, shape), 1), clients))
                load = os.getloadavg()[0]
                result = asyncio.run(drive(lineage, singles, clients, pid))
            runs[side].append({"round": round_index + 1, "load_average_1m": round(load, 2), **result})

    def median(side: str, key: str) -> float:
        return round(statistics.median(run[key] for run in runs[side]), 2)

    keys = ("events_per_s", "p50_ms", "p99_ms", "collector_cpu_us_per_request", "client_cpu_us_per_request")
    medians = {side: {key: median(side, key) for key in keys} for side in runs}
    return {"shape": shape, "events_per_run": count, "warmup_events": warmup, "rounds": rounds,
            "concurrent_clients": clients,
            "old": str(old), "runs": runs, "median": medians,
            "new_over_old": {key: round(medians["new"][key] / medians["old"][key], 2) for key in keys
                             if medians["old"][key]}}
