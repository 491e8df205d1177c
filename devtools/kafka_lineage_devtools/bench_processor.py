"""Events/s of ``lineage processor`` workers on a backlog of platform-shaped events (``bench_events``).

``bench_processor_realistic`` publishes the whole backlog first (to a pipeline of its own) and only then starts the
workers, so that the figure is the workers' alone, not the publisher's: the rate is the outputs' count over the time
from the first output to the last (their produce timestamps), once the group is up. ``code``: another checkout's
``kafka_lineage`` package for the workers (a directory holding ``kafka_lineage/``, put first on their PYTHONPATH), so
that an old and a new version run side by side on the same events (``python -m kafka_lineage_devtools.bench_processor
--old DIR``, alternating, reported as ratios: the machines are shared and noisy). ``profile``: py-spy's binary, to
record the first worker's stacks (``--profile``) while it drains the backlog.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench import bare_faust
from kafka_lineage_devtools.bench_events import mean_bytes, run_pairs
from kafka_lineage_devtools.cpu_budget import process_cpu_seconds, resident_mib
from kafka_lineage_devtools.processes import check_children, pipeline_env, processor_process

PARTITIONS = 6


def encode_backlog(settings: ClientSettings, count: int, shape: str) -> tuple[list[tuple[bytes, bytes]], float]:
    """The backlog as the publisher frames it (partition key, Avro value), and the events' mean JSON size."""
    events = run_pairs(count, shape)
    clients = _pipeline(settings, pipeline_env("lineage.bench.processor-encode", PARTITIONS, Path("/nonexistent")))
    publisher = EventPublisher.from_settings(clients)  # (the registry gives one schema the same id in every subject)
    try:
        return [publisher.encode(event) for event in events], mean_bytes(events[:1000])
    finally:
        publisher.close()


def bench_processor_realistic(settings: ClientSettings, count: int, workers: int = 1, shape: str = "realistic", *,
                              records: list[tuple[bytes, bytes]] | None = None, code: Path | None = None,
                              profile: Path | None = None, profile_out: Path | None = None,
                              faust_ceiling: bool = False) -> dict[str, Any]:
    """Events/s of ``workers`` ``lineage processor`` workers on a backlog of ``count`` ``shape`` events.

    ``records``: the backlog already encoded (``encode_backlog``), to run several versions on the same bytes.
    ``faust_ceiling``: also the events/s of a Faust worker that only consumes the same backlog (``bench_faust``).
    """
    size = None
    if records is None:
        records, size = encode_backlog(settings, count, shape)
    prefix = f"lineage.bench.processor-{shape}.{uuid.uuid4().hex[:8]}"
    env = pipeline_env(prefix, PARTITIONS, Path(".lineage/bench") / prefix)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
    clients = _pipeline(settings, env)
    publisher = EventPublisher.from_settings(clients)
    try:
        publisher.send(records).result(600)
    finally:
        publisher.close()
    with contextlib.ExitStack() as stack:
        children = [stack.enter_context(processor_process(env)) for _ in range(workers)]
        recorder = None
        if profile is not None:
            out = profile_out or Path(f"/tmp/{prefix}.stacks")  # collapsed stacks: one line per stack and its count
            recorder = subprocess.Popen([str(profile), "record", "--pid", str(children[0].process.pid), "--rate",
                                         "100", "--nonblocking", "--format", "raw", "--output", str(out)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        cpu = [process_cpu_seconds(child.process.pid) for child in children]
        times = _drain(clients, len(records), timeout=1800)
        cpu = [process_cpu_seconds(child.process.pid) - before for child, before in zip(children, cpu, strict=True)]
        if recorder is not None:
            recorder.send_signal(signal.SIGINT)  # py-spy writes its output on an interrupt (not on SIGTERM)
            recorder.wait(60)
        rss = [resident_mib([child.process.pid]) for child in children]
    ceiling = bare_faust(env["LINEAGE_EVENTS_TOPIC"], len(records)) if faust_ceiling else None
    first, last = times[0], times[-1]
    # The group's start (join, table recovery) can trickle the first outputs: the steady rate leaves out the
    # first tenth of the backlog as well.
    tenth = times[len(times) // 10]
    return {"workers": workers, "shape": shape, "events": len(times), "event_bytes": size,
            "code": str(code) if code else "this checkout",
            "events_per_s": (len(times) - 1) / max(1e-3, (last - first) / 1000),
            "steady_events_per_s": (len(times) - 1 - len(times) // 10) / max(1e-3, (last - tenth) / 1000),
            # CPU the workers spent on the backlog (all their threads) per event: steadier than events/s when the
            # machine is shared, as the wall clock stretches with the other processes' load and CPU time does not
            "cpu_us_per_event": sum(cpu) / len(times) * 1e6,
            "rss_mib": rss, **({"bare_faust": ceiling} if ceiling else {})}


def _pipeline(settings: ClientSettings, env: dict[str, str]) -> ClientSettings:
    """``settings`` for the topics of ``env`` (``pipeline_env``), created with their schemas registered."""
    clients = dataclasses.replace(settings, events_topic=env["LINEAGE_EVENTS_TOPIC"],
                                  normalized_topic=env["LINEAGE_NORMALIZED_TOPIC"],
                                  drift_topic=env["LINEAGE_DRIFT_TOPIC"], dlq_topic=env["LINEAGE_DLQ_TOPIC"])
    prepare_pipeline(clients, PARTITIONS)
    return clients


def _drain(clients: ClientSettings, count: int, timeout: float) -> list[float]:
    """The produce timestamps (ms) of ``count`` records of the normalized topic, sorted (not decoded: cheap, so
    that the bench takes little of the CPU it shares with the worker)."""
    consumer = Consumer({"bootstrap.servers": clients.kafka_bootstrap_servers, "group.id": f"bench-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([clients.normalized_topic])
    times: list[float] = []
    deadline = time.monotonic() + timeout
    try:
        while len(times) < count and time.monotonic() < deadline:
            check_children()
            for message in consumer.consume(5000, 0.5):
                if message.error() is None:
                    times.append(float(message.timestamp()[1]))
    finally:
        consumer.close()
    if len(times) < 2:
        raise RuntimeError(f"the workers wrote {len(times)} of {count} outputs within {timeout:.0f} s")
    return sorted(times)[:count]  # (a rebalance on a loaded machine can repeat a batch: at-least-once)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--shape", default="realistic")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs per version (alternating old and new)")
    parser.add_argument("--old", type=Path, help="a directory holding another checkout's kafka_lineage/ to compare")
    parser.add_argument("--profile", type=Path, help="py-spy's binary: record the (new) worker's stacks")
    parser.add_argument("--faust", action="store_true", help="also a bare Faust consumer on the same backlog")
    parser.add_argument("--only", choices=("old", "new"), help="run this version alone: start two of these at once "
                                                               "(same --events) for a side by side under the same load")
    args = parser.parse_args(argv)
    settings = ClientSettings.from_env()
    records, size = encode_backlog(settings, args.events, args.shape)
    print(f"{len(records)} {args.shape} events of {size:,.0f} bytes (JSON) encoded", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _ in range(args.repeat):
        for version in (args.only,) if args.only else ("old", "new") if args.old else ("new",):
            result = bench_processor_realistic(settings, args.events, args.workers, args.shape, records=records,
                                               code=args.old if version == "old" else None,
                                               profile=args.profile if version == "new" else None,
                                               faust_ceiling=args.faust and version == "new")
            runs[version].append(result)
            print(version, json.dumps(result), flush=True)
    if args.old and not args.only:
        for key in ("events_per_s", "steady_events_per_s", "cpu_us_per_event"):
            ratios = [new[key] / old[key] for old, new in zip(runs["old"], runs["new"], strict=True)]
            print(f"new/old {key}: " + ", ".join(f"{ratio:.2f}" for ratio in ratios))


if __name__ == "__main__":
    main()
