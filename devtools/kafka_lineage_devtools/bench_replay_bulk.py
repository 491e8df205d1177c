"""Events/s of ``lineage replay --fresh --bulk`` (offline neo4j-admin import), folded in one process and on Spark,
beside the live-write replay, on the same realistic events in one run, and whether all build the same graph
(fingerprint).

The bulk import replaces the stack's whole graph: run it on a bench stack only.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.bulk.importer import bulk_replay
from kafka_lineage.replay.local import replay, wipe
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import SERVICES_BY_NAME


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
    events = run_pairs(count, shape, namespace=f"bench-replay-bulk-{uuid.uuid4().hex[:6]}")
    prepare_pipeline(local, 6)
    publisher = EventPublisher.from_settings(local, local.events_topic)
    try:
        publisher.send([publisher.encode(event) for event in events]).result(600)
    finally:
        publisher.close()
    return local


def bench_bulk_replay(settings: ClientSettings, count: int, shape: str = "realistic",
                      spark_master: str | None = "local[2]") -> dict[str, Any]:
    """Live replay (``replay --fresh``, after an untimed wipe so the timed one empties an empty graph), then bulk
    replay (``replay --fresh --bulk``) folded in this process, then on Spark (``spark_master``; None: not), of the
    same ``count`` events of ``shape``: events/s of each, their ratios to the live replay, the bulk replays' phases
    and the graphs' fingerprints."""
    local = fill_topic(settings, count, shape)
    with driver_for(local) as driver:
        wipe(driver)
    live = replay(local, start="earliest", fresh=True)
    with driver_for(local) as driver:
        live_fingerprint = graph_fingerprint(driver)
    live_rate = live.records / live.seconds
    result: dict[str, Any] = {
        "events": count, "live": {"events_per_s": live_rate, "seconds": live.seconds, "written": live.written}}
    for name, master in (("bulk", None), ("bulk_spark", spark_master)):
        if name == "bulk_spark" and master is None:
            continue
        bulk = bulk_replay(local, start="earliest", spark_master=master)
        with driver_for(local) as driver:
            fingerprint = graph_fingerprint(driver)
        rate = bulk.records / bulk.seconds
        result[name] = {"events_per_s": rate, "seconds": bulk.seconds, "written": bulk.written,
                        "phases": {phase: round(seconds, 2) for phase, seconds in bulk.phases.items()},
                        "imported": bulk.counts, "fingerprint_equal": fingerprint == live_fingerprint}
        result[f"{name}_over_live"] = rate / live_rate
    result["fingerprint_equal"] = all(result[name]["fingerprint_equal"] for name in ("bulk", "bulk_spark")
                                      if name in result)
    result["fingerprint"] = live_fingerprint
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(bench_bulk_replay(ClientSettings.from_env(), int(sys.argv[1]) if len(sys.argv) > 1 else 20000),
                     indent=2))
