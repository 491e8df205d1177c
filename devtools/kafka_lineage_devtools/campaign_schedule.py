"""The fault campaign's scheduler: (seed, run, duration) → the faults of one run, at which instants, on what. Pure.

``plan(seed, run, duration)`` is deterministic (``random.Random`` seeded from the pair), so ``lineage faults
campaign --seed S --only-run K`` replays run K's schedule exactly. The faults' *effects* are not replayable: a
crash point fires at random inside the processor, and the instants slip by however long a blocking fault (a broker
restart, a worker start) took.

Faults live on lanes that never overlap, so that two faults never fight over one component: the processor workers
(a kill, a pause, a second worker for a while — with maybe a kill or a pause of one of the two meanwhile), the
graph side (the graph sink or Neo4j: a sink restarted while Neo4j is down would wait for Neo4j, which the runner
brings back only after the start), the alert sink, the broker. Worker slots are named ``w0`` (the first worker),
``w1``, … (each added worker a new name); a kill or pause names a slot alive at that instant.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

__all__ = [
    "CRASH_POINTS",
    "FAULT_KINDS",
    "GROUP_SESSION_SECONDS",
    "Fault",
    "Schedule",
    "crash_point_fired",
    "format_schedule",
    "plan",
]

GROUP_SESSION_SECONDS = 10.0  # the processor's broker_session_timeout: a pause longer than it fences the worker
# The processor's injected crash points (LINEAGE_PROCESSOR_CRASH_POINTS): name=probability per transaction.
CRASH_POINTS = ("outputs-sent", "state-sent", "before-commit", "after-commit")
CRASH_PROBABILITIES = (0.005, 0.01, 0.02)
CRASH_SHARE = 0.35  # the share of worker starts that get crash points

KILL_PROCESSOR, PAUSE_PROCESSOR = "kill-processor", "pause-processor"
ADD_WORKER, REMOVE_WORKER = "add-worker", "remove-worker"
KILL_GRAPH_SINK, KILL_ALERT_SINK = "kill-graph-sink", "kill-alert-sink"
RESTART_KAFKA, STOP_NEO4J = "restart-kafka", "stop-neo4j"
FAULT_KINDS = (KILL_PROCESSOR, PAUSE_PROCESSOR, ADD_WORKER, REMOVE_WORKER, KILL_GRAPH_SINK, KILL_ALERT_SINK,
               RESTART_KAFKA, STOP_NEO4J)
# What the scheduler draws from (a second worker comes with its removal)
_DRAWN = (KILL_PROCESSOR, PAUSE_PROCESSOR, ADD_WORKER, KILL_GRAPH_SINK, KILL_ALERT_SINK, RESTART_KAFKA, STOP_NEO4J)
_LANES = {KILL_PROCESSOR: "processor", PAUSE_PROCESSOR: "processor", ADD_WORKER: "processor",
          KILL_GRAPH_SINK: "graph", STOP_NEO4J: "graph", KILL_ALERT_SINK: "alerts", RESTART_KAFKA: "kafka"}
# Seconds a fault keeps its lane busy past its own span: what the component takes to be back (start, recovery)
_SETTLE = {KILL_PROCESSOR: 12.0, PAUSE_PROCESSOR: 8.0, ADD_WORKER: 10.0, KILL_GRAPH_SINK: 8.0,
           KILL_ALERT_SINK: 8.0, RESTART_KAFKA: 25.0, STOP_NEO4J: 25.0}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: at ``at`` seconds after the run's publishing began, ``kind`` on ``target`` (a worker slot or a
    component); ``seconds``: how long it lasts (a pause, a Neo4j outage); ``crash_points``: the
    LINEAGE_PROCESSOR_CRASH_POINTS of the worker this fault starts (a restart, an added worker), if any."""

    at: float
    kind: str
    target: str
    seconds: float = 0.0
    crash_points: str = ""

    def describe(self) -> str:
        text = f"{self.kind} {self.target}"
        if self.seconds:
            text += f" for {self.seconds:.1f}s"
        if self.crash_points:
            text += f" (crash points {self.crash_points})"
        return text


@dataclass(frozen=True, slots=True)
class Schedule:
    """One run's faults in time order; ``first_crash_points``: those of the first worker (``w0``)."""

    seed: int
    run: int
    duration: float
    faults: tuple[Fault, ...] = ()
    first_crash_points: str = ""
    kinds: tuple[str, ...] = field(default=())  # the kinds the scheduler drew, placed or not

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for fault in self.faults:
            counts[fault.kind] = counts.get(fault.kind, 0) + 1
        return counts


def _crash_points(rng: random.Random) -> str:
    """A worker start's crash points: none mostly, else 1-4 of them with a small probability each."""
    if rng.random() >= CRASH_SHARE:
        return ""
    chosen = sorted(rng.sample(CRASH_POINTS, rng.randint(1, len(CRASH_POINTS))), key=CRASH_POINTS.index)
    return ",".join(f"{point}={rng.choice(CRASH_PROBABILITIES)}" for point in chosen)


def _free(busy: list[tuple[float, float]], start: float, end: float) -> bool:
    return all(end <= begun or start >= ended for begun, ended in busy)


def plan(seed: int, run: int, duration: float, *, faults: tuple[int, int] = (3, 5), attempts: int = 30) -> Schedule:
    """The faults of run ``run`` of the campaign ``seed``, over a run whose workload is published in ``duration``
    seconds: ``faults`` (min, max) kinds drawn without repeats, each placed at a random instant in the first 85% of
    the publishing on a free stretch of its lane (a kind that finds none in ``attempts`` tries is left out)."""
    if duration <= 0:
        raise ValueError("duration must be positive")
    rng = random.Random(f"lineage-fault-campaign/{seed}/{run}")
    first = _crash_points(rng)
    kinds = tuple(rng.sample(_DRAWN, rng.randint(*faults)))
    busy: dict[str, list[tuple[float, float]]] = {}
    placed: list[tuple[float, list[Fault]]] = []  # each episode's start and its faults
    for kind in kinds:
        for _ in range(attempts):
            at = round(rng.uniform(0.05, 0.85) * duration, 1)
            episode = _episode(rng, kind, at)
            end = max(fault.at + fault.seconds for fault in episode) + _SETTLE[kind]
            lane = busy.setdefault(_LANES[kind], [])
            if _free(lane, at, end):
                lane.append((at, end))
                placed.append((at, episode))
                break
    # Worker slots by instant: which slots a processor fault may name (the lane keeps episodes apart)
    faults_out: list[Fault] = []
    alive, added = ["w0"], 0
    for _at, episode in sorted(placed, key=lambda item: item[0]):
        if _LANES[episode[0].kind] != "processor":
            faults_out += episode
            continue
        for fault in episode:
            target = fault.target
            if fault.kind == ADD_WORKER:
                added += 1
                target = f"w{added}"
                alive.append(target)
            elif fault.kind in (KILL_PROCESSOR, PAUSE_PROCESSOR, REMOVE_WORKER):
                target = rng.choice(alive)
                if fault.kind == REMOVE_WORKER:
                    alive.remove(target)
            faults_out.append(Fault(fault.at, fault.kind, target, fault.seconds, fault.crash_points))
    faults_out.sort(key=lambda fault: fault.at)  # stable: an episode's own order kept for equal instants
    return Schedule(seed, run, duration, tuple(faults_out), first, kinds)


def _pause_seconds(rng: random.Random) -> float:
    """Longer than the group session: the group gives the paused worker's partitions away, it comes back a zombie."""
    return round(GROUP_SESSION_SECONDS + rng.uniform(2.0, 6.0), 1)


def _episode(rng: random.Random, kind: str, at: float) -> list[Fault]:
    """The faults of one drawn kind at ``at``; processor targets are filled in by ``plan`` (slot "?")."""
    if kind == KILL_PROCESSOR:
        return [Fault(at, kind, "?", crash_points=_crash_points(rng))]
    if kind == PAUSE_PROCESSOR:
        return [Fault(at, kind, "?", _pause_seconds(rng))]
    if kind == ADD_WORKER:
        faults = [Fault(at, kind, "?", crash_points=_crash_points(rng))]
        stay = rng.uniform(15.0, 25.0)
        if rng.random() < 0.6:  # meanwhile one of the two is paused (a zombie beside a live worker) or killed
            inner = round(at + rng.uniform(3.0, 8.0), 1)
            if rng.random() < 0.7:
                pause = _pause_seconds(rng)
                faults.append(Fault(inner, PAUSE_PROCESSOR, "?", pause))
                stay = max(stay, inner - at + pause + 5.0)
            else:
                faults.append(Fault(inner, KILL_PROCESSOR, "?", crash_points=_crash_points(rng)))
                stay = max(stay, inner - at + 15.0)
        faults.append(Fault(round(at + stay, 1), REMOVE_WORKER, "?"))
        return faults
    if kind == STOP_NEO4J:
        return [Fault(at, kind, "neo4j", round(rng.uniform(5.0, 20.0), 1))]
    target = {KILL_GRAPH_SINK: "graph sink", KILL_ALERT_SINK: "alert sink", RESTART_KAFKA: "kafka"}[kind]
    return [Fault(at, kind, target)]


def format_schedule(schedule: Schedule) -> str:
    """The schedule as an operator reads it (and pastes into a bug report)."""
    lines = [f"seed {schedule.seed} run {schedule.run}: {len(schedule.faults)} faults over a {schedule.duration:.0f}s "
             f"publish; first worker w0 " + (f"with crash points {schedule.first_crash_points}"
                                               if schedule.first_crash_points else "without crash points")]
    lines += [f"  {fault.at:7.1f}s  {fault.describe()}" for fault in schedule.faults]
    return "\n".join(lines)


_CRASH_LINE = re.compile(r"crash point ([^\s:]+): killing this\b")


def crash_point_fired(code: int | None, output: str) -> str | None:
    """The crash point that made a worker kill itself (its log says so, and it died of SIGKILL), else None."""
    if code != -9:
        return None
    found = _CRASH_LINE.findall(output)
    return found[-1] if found else None
