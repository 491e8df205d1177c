"""``lineage bench scaling``: what more cores and more workers give, measured rather than assumed.

The same realistic backlog goes end to end (HTTP in through the collector, processor, graph sink, alert sink, all as
deployed) through three layouts, alternated round by round on the same stack so that noise spreads evenly:

- ``1 core``: one worker of each kind, and every process — the pipeline's, the stack's JVMs, this bench — pinned
  to one CPU (``cpu_budget.pin``): a machine half this size, measured on this one;
- ``2 cores``: the same processes on both CPUs;
- ``2 cores, 2 workers``: two processor workers and two graph sinks (each pair one consumer group over the
  topics' six partitions);
- ``… 24 partitions``: the same over 24 partitions per topic (what more partitions, room for more workers, cost).

Two figures answer "what would a bigger machine give": the events/s ratio of one layout to another, and each
component's CPU µs per event in each layout — if the per-event cost stays flat as processes are added, the work
spreads over cores without coordination overhead, and the CPU budget (cores * 1e6 / total µs) is the ceiling a
machine of that size reaches; where it rises (Neo4j lock waits, rebalances, duplicated caches), that is the price.
"""

from __future__ import annotations

import os
import statistics
import uuid
from collections.abc import Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_lineage_devtools import bench
from kafka_lineage_devtools.processes import pipeline_env

BATCH_SIZE = 100  # events per request: the collector's batched path, so that HTTP is not what is measured
CLIENTS = 4


@dataclass(frozen=True)
class Layout:
    name: str
    cpus: int  # the first ``cpus`` CPUs of the machine
    processors: int = 1
    sinks: int = 1
    partitions: int = 6  # of every pipeline topic (and of the processor's tables)


LAYOUTS = (Layout("1 core", 1), Layout("2 cores", 2), Layout("2 cores, 2 workers", 2, processors=2, sinks=2),
           Layout("… 24 partitions", 2, processors=2, sinks=2, partitions=24))


def run_layout(layout: Layout, count: int, all_cpus: Set[int]) -> dict[str, Any]:
    """One end-to-end pass of a fresh ``count``-event backlog through ``layout``."""
    cpus = set(sorted(all_cpus)[:layout.cpus])
    prefix = f"lineage.bench.scaling.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, layout.partitions, Path(".lineage/bench") / prefix),
           "LINEAGE_SINK_POLL_SECONDS": "0.1"}
    _, bodies = bench.backlog_bodies(count, f"bench-scaling-{uuid.uuid4().hex[:6]}", BATCH_SIZE)
    with bench.running_pipeline(env, processors=layout.processors, sinks=layout.sinks) as children:
        drained = bench.drain_backlog(children, bodies, count, CLIENTS,
                                      pinned=None if cpus == set(all_cpus) else cpus)
    return {"layout": layout.name, "cpus": len(cpus), "processors": layout.processors, "sinks": layout.sinks,
            "partitions": layout.partitions, "events_per_s": drained["events_per_s"],
            "cpu_us_per_event": drained["cpu_us_per_event"]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per layout: the median events/s, the mean CPU µs/event of each component, and the ratios to ``1 core``."""
    layouts: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(run["layout"] for run in runs):
        mine = [run for run in runs if run["layout"] == name]
        components = {component for run in mine for component in run["cpu_us_per_event"]}
        cpu = {component: statistics.fmean(run["cpu_us_per_event"].get(component, 0.0) for run in mine)
               for component in sorted(components)}
        layouts[name] = {key: mine[0][key] for key in ("cpus", "processors", "sinks", "partitions")} | {
            "events_per_s": statistics.median(run["events_per_s"] for run in mine),
            "rounds": [run["events_per_s"] for run in mine], "cpu_us_per_event": cpu,
            "cpu_total_us_per_event": sum(cpu.values())}
    base = layouts.get(LAYOUTS[0].name)
    for figures in layouts.values():
        if base:
            figures["speedup_over_1_core"] = figures["events_per_s"] / base["events_per_s"]
            figures["cpu_per_event_over_1_core"] = figures["cpu_total_us_per_event"] / base["cpu_total_us_per_event"]
        # Reached share of the CPU ceiling of its cores: how much of the machine the layout can use.
        figures["share_of_cpu_ceiling"] = (figures["events_per_s"] * figures["cpu_total_us_per_event"]
                                           / (figures["cpus"] * 1e6))
    return layouts


def bench_scaling(count: int, rounds: int = 2, layouts: tuple[Layout, ...] = LAYOUTS) -> dict[str, Any]:
    """Every layout ``rounds`` times, alternating, after one unreported warm-up pass (JIT, page caches)."""
    all_cpus = os.sched_getaffinity(0)
    if len(all_cpus) < max(layout.cpus for layout in layouts):
        raise RuntimeError(f"scaling bench: needs {max(layout.cpus for layout in layouts)} CPUs, this process may "
                           f"use {len(all_cpus)}")
    run_layout(layouts[-1], min(count, 3000), all_cpus)
    runs = [run_layout(layout, count, all_cpus) for _ in range(rounds) for layout in layouts]
    return {"events": count, "rounds": rounds, "shape": bench.EVENT_SHAPE, "runs": runs, "layouts": summarize(runs)}


def format_scaling(result: Mapping[str, Any]) -> str:
    scaling = result["scaling"]
    layouts: dict[str, dict[str, Any]] = scaling["layouts"]
    components = sorted({c for figures in layouts.values() for c in figures["cpu_us_per_event"]},
                        key=lambda c: -max(figures["cpu_us_per_event"].get(c, 0.0) for figures in layouts.values()))
    width = max(len(name) for name in layouts) + 2
    lines = [f"{scaling['events']:,} {scaling['shape']} events end to end per pass, {scaling['rounds']} rounds "
             "alternating; events/s = median, CPU = mean",
             f"{'':26}" + "".join(f"{name:>{width}}" for name in layouts),
             f"{'events/s':26}" + "".join(f"{f['events_per_s']:>{width},.0f}" for f in layouts.values()),
             f"{'  vs 1 core':26}" + "".join(f"{f.get('speedup_over_1_core', 0):>{width - 1}.2f}x"
                                             for f in layouts.values()),
             f"{'  share of CPU ceiling':26}" + "".join(f"{f['share_of_cpu_ceiling']:>{width}.0%}"
                                                       for f in layouts.values()),
             "CPU µs/event"]
    for component in components:
        lines.append(f"{'  ' + component:26}" + "".join(
            f"{f['cpu_us_per_event'].get(component, 0.0):>{width},.0f}" for f in layouts.values()))
    lines.append(f"{'  TOTAL':26}" + "".join(f"{f['cpu_total_us_per_event']:>{width},.0f}"
                                           for f in layouts.values()))
    return "\n".join(lines)


def run_scaling_bench(count: int, output: Path) -> dict[str, Any]:
    return bench.saved("scaling", output, scaling=bench_scaling(count))

