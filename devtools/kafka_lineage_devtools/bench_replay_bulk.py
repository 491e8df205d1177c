"""Events/s of ``lineage replay --fresh --bulk`` (offline neo4j-admin import), folded in one process and on Spark,
beside the live-write replay, on the same realistic events in one run, and whether all build the same graph
(fingerprint).

The bulk import replaces the stack's whole graph: run it on a bench stack only.
"""

from __future__ import annotations

import os
import threading
import uuid
from itertools import islice
from typing import Any

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.bulk.importer import bulk_replay
from kafka_lineage.replay.local import replay, wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench_events import encoded_run_pairs
from kafka_lineage_devtools.cpu_budget import process_tree, resident_mib
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import SERVICES_BY_NAME

FILL_CHUNK = 50_000


def stack_neo4j_home() -> str:
    """The local stack's Neo4j home (its ``bin/neo4j-admin`` and ``bin/neo4j``, written when the stack starts)."""
    settings = StackSettings.from_env()
    neo4j = SERVICES_BY_NAME["neo4j"]
    neo4j.write_scripts(settings)  # type: ignore[attr-defined]  # a stack started before the scripts existed
    return str(neo4j.home(settings))


def fill_topic(settings: ClientSettings, count: int, shape: str = "realistic") -> ClientSettings:
    """A fresh events topic holding ``count`` bench events (START/COMPLETE pairs) in a namespace of its own; the
    settings that read it."""
    prefix = f"lineage.bench.replay-bulk.{uuid.uuid4().hex[:8]}"
    local = ClientSettings.from_env({**os.environ, "LINEAGE_EVENTS_TOPIC": f"{prefix}.events",
                                     "LINEAGE_NEO4J_HOME": settings.neo4j_home or stack_neo4j_home()})
    namespace = f"bench-replay-bulk-{uuid.uuid4().hex[:6]}"
    prepare_pipeline(local, 6)
    publisher = EventPublisher.from_settings(local, local.events_topic)
    try:  # in chunks: a million records at once would not fit in memory
        records = encoded_run_pairs(publisher.encode, count, namespace, shape)
        while chunk := list(islice(records, FILL_CHUNK)):
            publisher.send(chunk).result(600)
    finally:
        publisher.close()
    return local


class PeakMemory:
    """The largest resident memory of this process and all its descendants together (the Spark JVM, its Python
    workers, neo4j-admin), sampled every ``interval`` seconds from /proc."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval, self.peak = interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, int(resident_mib(process_tree(os.getpid())) * 1024 ** 2))


def bench_bulk_replay(settings: ClientSettings, count: int, shape: str = "realistic",
                      spark_masters: tuple[str, ...] = ("local[2]",), *, live: bool = True,
                      local_bulk: bool = True) -> dict[str, Any]:
    """Live replay (``replay --fresh``, after an untimed wipe so the timed one empties an empty graph; ``live``),
    then bulk replay (``replay --fresh --bulk``) folded in this process (``local_bulk``), then on Spark with each of
    ``spark_masters``, of the same ``count`` events of ``shape``: events/s of each, their ratios to the live replay
    (or to the first bulk run), the bulk replays' phases, peak memory, files and store, and whether the graphs'
    fingerprints are equal."""
    local = fill_topic(settings, count, shape)
    result: dict[str, Any] = {"events": count}
    fingerprints: dict[str, str] = {}
    if live:
        with driver_for(local) as driver:
            wipe(driver)
        report = replay(local, start="earliest", fresh=True)
        result["live"] = {"events_per_s": report.records / report.seconds, "seconds": report.seconds,
                          "written": report.written}
        with driver_for(local) as driver:
            fingerprints["live"] = graph_fingerprint(driver)
    runs = ([("bulk", None)] if local_bulk else []) + [(f"bulk_spark_{master}", master) for master in spark_masters]
    for name, master in runs:
        with PeakMemory() as memory:
            bulk = bulk_replay(local, start="earliest", spark_master=master)
        with driver_for(local) as driver:
            fingerprints[name] = graph_fingerprint(driver)
        mib = 1024 ** 2
        result[name] = {"events_per_s": bulk.records / bulk.seconds, "seconds": bulk.seconds,
                        "written": bulk.written,
                        "phases": {phase: round(seconds, 2) for phase, seconds in bulk.phases.items()},
                        "peak_memory_mib": round(memory.peak / mib), "files_mib": round(bulk.files_bytes / mib),
                        "store_mib": round(bulk.store_bytes / mib), "imported": bulk.counts}
    baseline = "live" if live else (runs[0][0] if runs else None)
    for name, _ in runs:
        if baseline and name != baseline:
            result[f"{name}_over_{baseline}"] = result[name]["events_per_s"] / result[baseline]["events_per_s"]
    result["fingerprints_equal"] = len(set(fingerprints.values())) <= 1
    return result


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("events", type=int, nargs="?", default=20000)
    parser.add_argument("--spark", default="local[2]", help="Spark masters, comma-separated ('' for none)")
    parser.add_argument("--no-live", action="store_true", help="no live replay (at ~500 events/s: long)")
    parser.add_argument("--no-local", action="store_true", help="no single-process bulk fold")
    args = parser.parse_args()
    print(json.dumps(bench_bulk_replay(ClientSettings.from_env(), args.events,
                                       spark_masters=tuple(m for m in args.spark.split(",") if m),
                                       live=not args.no_live, local_bulk=not args.no_local), indent=2))
