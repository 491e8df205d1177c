"""``lineage faults campaign``: seeded, randomized fault runs with exactly-once checks (the thin I/O runner).

Each run publishes a small ground-truth workload (``workload.generate``) through the real pipeline on the local
stack — processor workers, graph sink and alert sink as child processes, on topics and groups of the run's own —
while the faults ``campaign_schedule.plan(seed, run, duration)`` drew are injected at their instants. Then it waits
(bounded) for quiescence, reads everything back with ``read_committed`` and judges it with ``campaign_checks``.

A worker started with ``LINEAGE_PROCESSOR_CRASH_POINTS`` that kills itself at a crash point (its log says so) is an
expected fault: recorded, and the slot restarted without crash points (so one armed start costs one self-kill, and
a run always makes progress). Any other component that ends by itself fails the run at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from confluent_kafka.schema_registry import SchemaRegistryClient
from neo4j.exceptions import TransientError

from kafka_lineage.processors.identity import dedupe_id
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline, reading_consumer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import record_to_event, validate_event
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools import campaign_checks as checks
from kafka_lineage_devtools.campaign_checks import DeadLetterRecord, OutputRecord, SourceRecord, Violation
from kafka_lineage_devtools.campaign_schedule import (
    ADD_WORKER,
    KILL_ALERT_SINK,
    KILL_GRAPH_SINK,
    KILL_PROCESSOR,
    PAUSE_PROCESSOR,
    REMOVE_WORKER,
    RESTART_KAFKA,
    STOP_NEO4J,
    Fault,
    Schedule,
    crash_point_fired,
    format_schedule,
    plan,
)
from kafka_lineage_devtools.checker import check as check_graph_truth
from kafka_lineage_devtools.faults import _Component, _publish, drift_alerts, graph_rows, stop_components
from kafka_lineage_devtools.processes import (
    ChildExited,
    ChildProcess,
    alert_sink_process,
    check_children,
    lineage_process,
    pipeline_env,
    sink_process,
    sleep_watching,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.workload import Workload, generate

RUNS_PER_JOB = 4
EVENTS_PER_JOB_RUN = 2.4  # what ``generate`` yields per job and run, copies included (measured)
PARTITIONS = 6
QUIESCENCE_CAP_SECONDS = 1200.0  # the longest wait for quiescence, progress or not
CRASH_POINT = "crash-point"  # the kind of an observed self-kill at an injected crash point


@dataclass
class Injected:
    """A fault as it happened: ``at`` seconds into the run (a planned one may slip behind a blocking fault)."""

    at: float
    kind: str
    target: str
    note: str = ""

    def __str__(self) -> str:
        return f"{self.at:7.1f}s  {self.kind} {self.target}{f' ({self.note})' if self.note else ''}"


@dataclass
class RunReport:
    seed: int
    run: int
    schedule: Schedule
    events: int = 0
    tag: str = ""
    injected: list[Injected] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.violations


def _crash_env(crash_points: str) -> dict[str, str]:
    return {"LINEAGE_PROCESSOR_CRASH_POINTS": crash_points}  # "" too: never inherited from the caller


def _crash_exit(code: int, output: str) -> bool:
    return crash_point_fired(code, output) is not None


def worker_process(env: Mapping[str, str], crash_points: str = ""
                   ) -> contextlib.AbstractContextManager[ChildProcess]:
    """A processor worker (ready once it joined its group), whose self-kill at a crash point is expected."""

    def ready(child: ChildProcess, output: str) -> bool:  # a worker that already crashed is "ready" to be restarted
        return "Worker]: Ready" in output or crash_point_fired(child.process.poll(), output) is not None

    return lineage_process(["processor"], ready, {**env, **_crash_env(crash_points)}, expected_exit=_crash_exit)


class _Run:
    """One run's components, faults and the offsets sampled meanwhile."""

    def __init__(self, stack: Stack, env: dict[str, str], clients: ClientSettings, report: RunReport,
                 say: Callable[[str], None]) -> None:
        self.stack, self.env, self.clients, self.report, self.say = stack, env, clients, report, say
        self.workers: dict[str, _Component] = {}
        self.retired: list[_Component] = []
        self.sinks = {"graph sink": _Component("graph sink", lambda: sink_process(env)),
                      "alert sink": _Component("alert sink", lambda: alert_sink_process(env))}
        self.paused: dict[int, ChildProcess] = {}  # pid → a worker stopped with SIGSTOP
        self.stopped_services: set[str] = set()  # stack services a fault stopped and has not started again
        self.started = time.monotonic()
        self.samples: list[tuple[float, int, int]] = []

    # --- components --------------------------------------------------------------------------------------------
    def start_worker(self, slot: str, crash_points: str) -> None:
        worker = _Component(f"processor {slot}", lambda: worker_process(self.env, crash_points))
        self.workers[slot] = worker
        worker.start()

    def check(self) -> None:
        """Watched by every wait: a worker dead at a crash point is restarted (clean); any other end raises."""
        for slot, worker in list(self.workers.items()):
            child = worker.child
            if child is None:
                continue
            code = child.process.poll()
            point = crash_point_fired(code, child.output_so_far()) if code is not None else None
            if point is not None and not child.stop_requested:
                self.record(CRASH_POINT, slot, f"{point}; restarted without crash points")
                worker.restart(lambda: worker_process(self.env))
            worker.check()
        for sink in self.sinks.values():
            sink.check()

    def dump_stacks(self) -> None:
        """Every component's threads (SIGQUIT, the CLI's faulthandler) and, for processor workers, every asyncio
        task with the line it waits at (SIGUSR1: the Faust/mode worker's own dump): where a stalled run waited."""
        for name, component in self.components().items():
            if component.child is not None and component.child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # not send_signal: neither signal ends a lineage
                    os.kill(component.child.process.pid, signal.SIGQUIT)  # process, its exit stays unexpected
                    if name.startswith("processor"):
                        os.kill(component.child.process.pid, signal.SIGUSR1)
        time.sleep(2.0)  # the dumps are written by each process's own faulthandler

    def components(self) -> dict[str, _Component]:
        return {**{f"processor-{slot}": worker for slot, worker in self.workers.items()}, **self.sinks}

    def now(self) -> float:
        return time.monotonic() - self.started

    def record(self, kind: str, target: str, note: str = "") -> None:
        injected = Injected(round(self.now(), 1), kind, target, note)
        self.report.injected.append(injected)
        self.say(f"  {injected}")

    # --- faults ------------------------------------------------------------------------------------------------
    def begin(self, fault: Fault) -> None:
        self.check()  # a worker that died at a crash point meanwhile (a blocking fault was running) is back first
        self.record(fault.kind, fault.target, f"planned {fault.at:.1f}s" + (
            f", crash points {fault.crash_points}" if fault.crash_points else "") + (
            f", {fault.seconds:.1f}s" if fault.seconds else ""))
        if fault.kind == KILL_PROCESSOR:
            worker = self.workers[fault.target]
            assert worker.child is not None
            worker.child.process.kill()  # SIGKILL: no shutdown, no commit
            worker.child.process.wait(30)
            worker.restart(lambda: worker_process(self.env, fault.crash_points))
        elif fault.kind == PAUSE_PROCESSOR:
            child = self.workers[fault.target].child
            assert child is not None
            child.process.send_signal(signal.SIGSTOP)
            self.paused[child.process.pid] = child
        elif fault.kind == ADD_WORKER:
            self.start_worker(fault.target, fault.crash_points)
        elif fault.kind == REMOVE_WORKER:
            worker = self.workers.pop(fault.target)
            worker.stop()  # SIGTERM: a graceful leave, the group rebalances
            self.retired.append(worker)
        elif fault.kind in (KILL_GRAPH_SINK, KILL_ALERT_SINK):
            self.sinks[fault.target].kill_and_restart()
        elif fault.kind == RESTART_KAFKA:
            self.stopped_services.add("kafka")
            # a crash (SIGKILL), not a controlled shutdown: on a single broker, Kafka's controlled shutdown sets
            # every partition's leader to none while its transaction coordinator still sends the commit markers
            # of a transaction being committed, and the coordinator skips partitions without a leader as deleted
            # ("Couldn't find leader endpoint"): a hanging transaction no client can end (the long campaign's run
            # 38; ARCHITECTURE decision 72). A crash leaves the coordinator to finish the commit when it is back.
            self.stack.down(["kafka"], crash=True)
            self.stack.up(["kafka"])
            self.stopped_services.discard("kafka")
        elif fault.kind == STOP_NEO4J:
            self.stopped_services.add("neo4j")
            self.stack.down(["neo4j"])
        else:
            raise AssertionError(fault.kind)

    def end(self, fault: Fault) -> None:
        if fault.kind == PAUSE_PROCESSOR:
            self.resume_all()
        elif fault.kind == STOP_NEO4J:
            self.stack.up(["neo4j"])
            self.stopped_services.discard("neo4j")
        self.say(f"  {self.now():7.1f}s  end of {fault.kind} {fault.target}")

    def restore_services(self) -> None:
        """Start what a fault left stopped (a run that failed or was interrupted mid-fault): the next run needs it."""
        if self.stopped_services:
            self.stack.up(sorted(self.stopped_services))
            self.stopped_services.clear()

    def resume_all(self) -> None:
        for pid, child in list(self.paused.items()):
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGCONT)
            del self.paused[pid]

    def sleep_until(self, instant: float) -> None:
        sleep_watching(max(0.0, instant - self.now()), [self])

    # --- the processor group's committed offsets, every second ---------------------------------------------
    def sample_offsets(self, group: str, topic: str, stop: threading.Event) -> None:
        # quiet while the broker restarts (the run says when it does), and no reconnect storm
        consumer = Consumer(self.clients.kafka_config({"group.id": group, "enable.auto.commit": False,
                                                       "log_level": 2, "reconnect.backoff.ms": 500}))
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        try:
            while not stop.wait(1.0):
                with contextlib.suppress(Exception):  # the broker restarting: no sample this second
                    for tp in consumer.committed(partitions, timeout=5):
                        if tp.error is None and tp.offset >= 0:
                            self.samples.append((self.now(), tp.partition, tp.offset))
        finally:
            consumer.close()


def _actions(schedule: Schedule) -> list[tuple[float, int, str, int]]:
    """(planned instant, tie order, "begin"|"end", fault index): each fault's begin and, for a pause or an outage,
    its end, in time order; ends first on a tie."""
    actions = [(fault.at, 1, "begin", index) for index, fault in enumerate(schedule.faults)]
    actions += [(round(fault.at + fault.seconds, 1), 0, "end", index) for index, fault in enumerate(schedule.faults)
                if fault.kind in (PAUSE_PROCESSOR, STOP_NEO4J)]
    return sorted(actions, key=lambda action: (action[0], action[1]))


def workload_for(seed: int, run: int, events: int) -> Workload:
    """The run's workload: seeded from (seed, run), in namespaces of its own (a fresh tag each time)."""
    jobs = max(10, round(events / (RUNS_PER_JOB * EVENTS_PER_JOB_RUN)))
    tag = f"c{seed % 100_000}r{run}-{uuid.uuid4().hex[:6]}"
    return generate(jobs, RUNS_PER_JOB, seed * 1_000 + run, schema_changes=4, tag=tag)


def run_once(stack_settings: StackSettings, seed: int, run: int, *, events: int = 2400, publish_seconds: float = 60.0,
             quiesce_patience: float = 120.0, workdir: Path = Path(".lineage/campaign"),
             say: Callable[[str], None] = print) -> RunReport:
    """One run of the campaign: publish, inject, wait for quiescence, read back, check."""
    began = time.monotonic()
    workload = workload_for(seed, run, events)
    tag = str(workload.params["tag"])
    schedule = plan(seed, run, publish_seconds)
    report = RunReport(seed, run, schedule, len(workload.events), tag)
    prefix = f"lineage.campaign.{tag}"
    report.workdir = workdir / f"run-{run}-{tag}"
    env = pipeline_env(prefix, PARTITIONS, report.workdir / "data")
    clients = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(clients, PARTITIONS)
    say(f"run {run} (seed {seed}): {len(workload.events)} events of workload {tag} over {publish_seconds:.0f}s, "
        f"{len(schedule.faults)} faults planned")
    state = _Run(Stack(stack_settings, report=lambda _line: None), env, clients, report, say)
    stop = threading.Event()
    sampler = threading.Thread(target=state.sample_offsets, args=(env["LINEAGE_PROCESSOR_GROUP"],
                                                                  clients.events_topic, stop), daemon=True)
    try:
        state.start_worker("w0", schedule.first_crash_points)
        for sink in state.sinks.values():
            sink.start()
        state.started = time.monotonic()
        sampler.start()
        published: list[BaseException] = []  # the publisher's failure, if it gave up

        def publish() -> None:
            try:
                _publish(clients, workload.events, len(workload.events) / publish_seconds, stop)
            except BaseException as exc:  # handed to the run, which fails at once
                published.append(exc)

        publisher = threading.Thread(target=publish, name="campaign-publisher", daemon=True)
        publisher.start()
        began_at: dict[int, float] = {}  # fault index → when it really began
        for at, _order, phase, index in _actions(schedule):
            fault = schedule.faults[index]
            if phase == "begin":
                state.sleep_until(at)
                began_at[index] = state.now()
                state.begin(fault)
            else:  # a pause or an outage lasts its seconds however late it began (an earlier fault may block)
                state.sleep_until(max(at, began_at[index] + fault.seconds))
                state.end(fault)
        wait_until(lambda: not publisher.is_alive(), 600, watch=[state], what="the publisher")
        if published:  # a workload not all sent cannot be judged: the run fails here, saying why
            raise TimeoutError(f"the publisher gave up after {state.now():.0f}s: {published[0]}")
        say(f"  {state.now():7.1f}s  all events acknowledged by Kafka; faults over; waiting for quiescence")
        quiet = _quiescence(clients, env, workload, state, quiesce_patience)
        if not quiet:  # a post-mortem: each component's threads, in its log (the CLI's SIGQUIT handler)
            state.dump_stacks()
        say(f"  {state.now():7.1f}s  {'quiescent' if quiet else 'not quiescent'}; "
            "reading back")
        report.violations += _judge(clients, env, workload, state)
    except (ChildExited, TimeoutError) as exc:
        report.violations.append(Violation(checks.HARNESS, f"{type(exc).__name__}: {exc}"))
    except Exception as exc:  # the harness's own failure (a read, a query): this run's, the campaign goes on
        report.violations.append(Violation(checks.HARNESS, "".join(traceback.format_exception(exc))))
    finally:
        stop.set()
        state.resume_all()  # a stopped process would not see SIGTERM
        state.restore_services()
        ended = stop_components(state.components(), report.workdir)
        (report.workdir / "committed-offsets.tsv").write_text(  # the processor group's, as sampled: a post-mortem
            "".join(f"{instant:.1f}\t{partition}\t{offset}\n" for instant, partition, offset in state.samples))
        for number, worker in enumerate(state.retired):
            (report.workdir / f"retired-{number}.log").write_text("\n".join(worker.outputs))
        report.violations += [Violation(checks.HARNESS, str(exc)) for exc in ended]
        if report.ok:  # a failed run keeps its topics for the post-mortem
            _drop_run(clients, prefix, say)
        report.seconds = time.monotonic() - began
    return report


def _drop_run(clients: ClientSettings, prefix: str, say: Callable[[str], None]) -> None:
    """Delete a passed run's topics and consumer groups: every run then restarts a broker that holds what one run
    holds (after a hundred runs a SIGKILLed broker recovered ~2,900 partitions, and its restarts took 3x longer)."""
    admin = AdminClient(clients.kafka_config())
    try:
        topics = [name for name in admin.list_topics(timeout=30).topics if name.startswith(prefix + ".")]
        for future in admin.delete_topics(topics, request_timeout=30).values() if topics else ():
            future.result()
        groups = [group.group_id for group in admin.list_consumer_groups(request_timeout=30).result().valid
                  if group.group_id.startswith(prefix + ".")]
        for future in admin.delete_consumer_groups(groups, request_timeout=30).values() if groups else ():
            future.result()
    except Exception as exc:  # the run passed; a leftover topic costs only restart time
        say(f"  could not delete the run's topics and groups ({type(exc).__name__}: {exc}); left in place")


@dataclass
class ProgressBound:
    """When to stop waiting for a distance to reach zero: not at a fixed time, but after ``patience`` seconds
    without a new lowest distance (or at ``cap``). ``None`` distances (not measurable yet) are no progress."""

    patience: float
    cap: float
    began: float
    best: int | None = None
    progressed: float = 0.0

    def __post_init__(self) -> None:
        self.progressed = self.began

    def observe(self, distance: int | None, now: float) -> bool | None:
        """True: reached zero; False: give up; None: wait on."""
        if distance == 0:
            return True
        if distance is not None and (self.best is None or distance < self.best):
            self.best, self.progressed = distance, now
        if now - self.progressed > self.patience or now - self.began > self.cap:
            return False
        return None


def _quiescence(clients: ClientSettings, env: Mapping[str, str], workload: Workload, state: _Run,
                patience: float) -> bool:
    """Wait until no group lags and the graph equals the truth; whether that happened. Bounded by progress, not by
    the clock (``ProgressBound``): the distance to quiescence is the records the groups lag behind plus the
    graph's differences from the truth. A slow machine then only makes a run slower; a stalled pipeline still
    fails it."""
    bound = ProgressBound(patience, QUIESCENCE_CAP_SECONDS, time.monotonic())
    while True:
        check_children([state])
        distance = _distance(clients, env, workload)
        verdict = bound.observe(distance, time.monotonic())
        if verdict is not None:
            if not verdict:
                state.say(f"  {state.now():7.1f}s  no progress towards quiescence for "
                          f"{time.monotonic() - bound.progressed:.0f}s (distance {distance}, lowest {bound.best})")
            return verdict
        sleep_watching(5.0, [state])


def _distance(clients: ClientSettings, env: Mapping[str, str], workload: Workload) -> int | None:
    """Records the groups lag behind plus the graph's differences from the truth; None when not answerable yet
    (offsets held by an open transaction, a topic not readable to its end, a graph the sink keeps changing under
    a whole read)."""
    try:
        lag = sum(_lags(clients, env).values())
        rows = graph_rows(clients, workload)
    except (KafkaException, TimeoutError, TransientError):
        return None
    return lag + check_graph_truth(workload.truth, rows, drift_alerts(clients)).problems()


# --- reading back ----------------------------------------------------------------------------------------------
def _groups(clients: ClientSettings, env: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(env["LINEAGE_PROCESSOR_GROUP"], clients.events_topic), (env["LINEAGE_SINK_GROUP"],
            clients.normalized_topic), (env["LINEAGE_ALERT_GROUP"], clients.normalized_topic)]


def _committed(clients: ClientSettings, group: str, topic: str, partitions: list[int],
               timeout: float = 120.0) -> dict[int, int | None]:
    """The group's committed offsets. Asked for stable offsets (read_committed), the broker answers only once no
    transaction holding offsets of the group is open: one a crashed worker left open lasts until it times out
    (the producer's transaction.timeout.ms), or the broker may have just restarted; so asked again until
    ``timeout``."""
    consumer = Consumer(clients.kafka_config({"group.id": group, "enable.auto.commit": False, "log_level": 2}))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
                return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in found}
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
    finally:
        consumer.close()


def _ends(consumer: Consumer, topic: str) -> dict[int, int]:
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}


def _stable_ends(clients: ClientSettings, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """Each partition's end for read_committed readers (its last stable offset) and its end."""
    admin = AdminClient(clients.kafka_config())
    partitions = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    found = []
    for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        answers = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                     isolation_level=isolation, request_timeout=30)
        found.append({tp.partition: future.result().offset for tp, future in answers.items()})
    return found[0], found[1]


def _lags(clients: ClientSettings, env: Mapping[str, str]) -> dict[tuple[str, int], int]:
    """(group, partition) → committed records past the group's committed offset (markers count for nothing)."""
    lags: dict[tuple[str, int], int] = {}
    reader = reading_consumer(clients, "campaign-lag")
    try:
        for group, topic in _groups(clients, env):
            ends = _ends(reader, topic)
            committed = _committed(clients, group, topic, list(ends), timeout=15)
            behind = {p: committed[p] or 0 for p, end in ends.items() if (committed[p] or 0) < end}
            unread = Counter(message.partition() for message in _read(clients, topic, behind)) if behind else {}
            for partition in ends:
                lags[(group, partition)] = unread.get(partition, 0)
    finally:
        reader.close()
    return lags


def _read(clients: ClientSettings, topic: str, starts: Mapping[int, int] | None = None,
          timeout: float = 120.0) -> list[Message]:
    """The committed records of ``topic`` (``starts``: partition → first offset; default every partition from its
    beginning) up to where a ``read_committed`` reader ends now."""
    consumer = Consumer(clients.kafka_config({"group.id": f"campaign-read-{uuid.uuid4()}", "enable.auto.commit": False,
                                              "isolation.level": "read_committed", "enable.partition.eof": True}))
    try:
        if starts is None:
            starts = {p: OFFSET_BEGINNING for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions}
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
        messages: list[Message] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(starts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(set(starts) - at_end)} not read to their "
                                   f"end within {timeout:g} s")
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return messages
    finally:
        consumer.close()


def _changelog(clients: ClientSettings, group: str, table: str) -> dict[str, Any]:
    """A processor table's live entries: each key's last value in its changelog (a tombstone removes the key)."""
    topic = f"{group}-{table}-changelog"  # Faust's name: <app id>-<table>-changelog
    reader = reading_consumer(clients, "campaign-changelog")
    try:
        if topic not in reader.list_topics(timeout=10).topics:
            raise TimeoutError(f"the processor's changelog topic {topic} does not exist")
    finally:
        reader.close()
    live: dict[str, Any] = {}
    for message in _read(clients, topic):
        key = _json_or_text(message.key())
        if message.value() is None:
            live.pop(key, None)
        else:
            live[key] = _json_or_text(message.value())
    return live


def _json_or_text(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _judge(clients: ClientSettings, env: Mapping[str, str], workload: Workload, state: _Run) -> list[Violation]:
    """Read everything back (committed records only) and run every check."""
    fetch = registry.schema_fetcher(SchemaRegistryClient(clients.registry_config()))
    events_codec = AvroCodec("openlineage_event", fetch)
    normalized_codec, dlq_codec = AvroCodec("normalized_event", fetch), AvroCodec("dead_letter", fetch)
    sources = [_source(message, events_codec) for message in _read(clients, clients.events_topic)]
    outputs = [_output(message, normalized_codec) for message in _read(clients, clients.normalized_topic)]
    dead = [_dead_letter(message, dlq_codec) for message in _read(clients, clients.dlq_topic)]
    group = env["LINEAGE_PROCESSOR_GROUP"]
    dedupe_live, runs_live = _changelog(clients, group, "dedupe"), _changelog(clients, group, "runs")
    committed = _committed(clients, group, clients.events_topic, list(range(PARTITIONS)))
    final = {p: offset for p, offset in committed.items() if offset is not None}
    graph = check_graph_truth(workload.truth, graph_rows(clients, workload), drift_alerts(clients))
    state.report.stats = {"events topic": len(sources), "normalized": len(outputs), "dead letters": len(dead),
                          "live dedupe ids": len(dedupe_live), "live runs": len(runs_live),
                          "late": sum(o.late for o in outputs), "graph problems": graph.problems(),
                          "offset samples": len(state.samples)}
    violations = checks.check_exactly_once(sources, outputs, dead, clients.events_topic,
                                           published=[dedupe_id(event) for event in workload.events])
    violations += checks.check_dedupe_table(dedupe_live, outputs, sources, dead, clients.events_topic)
    violations += checks.check_offsets(state.samples, final, sources, outputs, dead, clients.events_topic)
    violations += checks.check_runs_table(runs_live)
    violations += checks.check_lifecycle(outputs)
    violations += checks.check_graph(graph)
    for topic in (clients.normalized_topic, clients.dlq_topic, clients.drift_topic,
                  *(f"{group}-{table}-changelog" for table in ("dedupe", "runs", "dataset-schemas"))):
        violations += checks.check_hanging(topic, *_stable_ends(clients, topic))
    reader = reading_consumer(clients, "campaign-ends")
    try:
        for group_id, topic in _groups(clients, env):
            ends = _ends(reader, topic)
            offsets = _committed(clients, group_id, topic, list(ends))
            behind = {p: offsets[p] or 0 for p, end in ends.items() if (offsets[p] or 0) < end}
            unread = Counter(m.partition() for m in _read(clients, topic, behind)) if behind else Counter()
            violations += checks.check_lag(group_id, topic, offsets, ends, unread)
    finally:
        reader.close()
    return violations


def _source(message: Message, codec: AvroCodec) -> SourceRecord:
    try:  # as the processor decodes and validates (processors/core.py); what fails is the DLQ's
        event = record_to_event(codec.decode(message.value()))
        validate_event(event)
        identity: str | None = dedupe_id(event)
    except Exception:
        identity = None
    return SourceRecord(message.partition(), message.offset(), identity)


def _output(message: Message, codec: AvroCodec) -> OutputRecord:
    record = codec.decode(message.value())
    processing = record["processing"]
    event = record_to_event(record["event"])
    return OutputRecord(message.partition(), message.offset(), processing["dedupeId"],
                        processing.get("sourcePartition"), processing.get("sourceOffset"),
                        bool(processing.get("late")), (event.get("run") or {}).get("runId"), event.get("eventType"))


def _dead_letter(message: Message, codec: AvroCodec) -> DeadLetterRecord:
    record = codec.decode(message.value())
    return DeadLetterRecord(message.partition(), message.offset(), record.get("sourceTopic"),
                            record.get("sourcePartition"), record.get("sourceOffset"),
                            record.get("errorClass") or "", record.get("errorMessage") or "")


# --- the campaign ----------------------------------------------------------------------------------------------
@dataclass
class CampaignReport:
    seed: int
    runs: list[RunReport] = field(default_factory=list)
    recorded: list[dict[str, Any]] = field(default_factory=list)  # runs read from the ledger, not run again

    def tallies(self) -> list[dict[str, Any]]:
        """Every run as a ledger entry tallies it (run, ok, faults and violations by kind): the runs of this
        invocation and the recorded ones alike."""
        return [*({"run": run.run, "ok": run.ok, "faults": Counter(i.kind for i in run.injected),
                   "violations": checks.count_by_check(run.violations)} for run in self.runs), *self.recorded]

    @property
    def ok(self) -> bool:
        return all(entry["ok"] for entry in self.tallies())

    @property
    def run_count(self) -> int:
        return len(self.runs) + len(self.recorded)

    def failed_runs(self) -> list[int]:
        return sorted(entry["run"] for entry in self.tallies() if not entry["ok"])

    def faults_by_kind(self) -> Counter[str]:
        return sum((Counter(entry["faults"]) for entry in self.tallies()), Counter())

    def violations_by_check(self) -> Counter[str]:
        return sum((Counter(entry["violations"]) for entry in self.tallies()), Counter())


def ledger_entry(report: RunReport, events: int, publish_seconds: float, commit: str) -> dict[str, Any]:
    """One finished run as a line of the campaign's ledger (JSON): enough to count it again without its logs."""
    return {"seed": report.seed, "run": report.run, "events": events, "publishSeconds": publish_seconds,
            "ok": report.ok, "seconds": round(report.seconds, 1), "commit": commit,
            "faults": dict(Counter(injected.kind for injected in report.injected)),
            "violations": dict(checks.count_by_check(report.violations)),
            "examples": [f"{v.check}: {v.message[:500]}" for v in report.violations[:5]],
            "workdir": str(report.workdir), "finishedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def read_ledger(path: Path, seed: int, events: int, publish_seconds: float) -> dict[int, dict[str, Any]]:
    """The ledger's runs of this campaign (same seed and run shape), by run index; the last entry of a run wins."""
    found: dict[int, dict[str, Any]] = {}
    if path.exists():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:  # a line cut by a crash of the harness: that run is run again
                print(f"{path}:{number}: not a ledger entry ({exc}); ignored")
                continue
            if (entry.get("seed"), entry.get("events"), entry.get("publishSeconds")) == (seed, events,
                                                                                       publish_seconds):
                found[entry["run"]] = entry
    return found


def run_campaign(stack_settings: StackSettings, *, seed: int, runs: int, events: int = 2400,
                 publish_seconds: float = 60.0, only_run: int | None = None, keep_going: bool = False,
                 quiesce_patience: float = 120.0, workdir: Path = Path(".lineage/campaign"),
                 ledger: Path | None = None, say: Callable[[str], None] = print) -> CampaignReport:
    """Runs ``0..runs-1`` (or only ``only_run``) of the campaign ``seed``; stops after a failed run unless
    ``keep_going``. With a ``ledger`` (JSON lines), each finished run is appended to it and runs already there are
    counted, not run again: a long campaign goes on where an earlier invocation stopped."""
    campaign = CampaignReport(seed)
    recorded = read_ledger(ledger, seed, events, publish_seconds) if ledger else {}
    commit = _commit() if ledger else ""
    for run in [only_run] if only_run is not None else range(runs):
        if run in recorded and only_run is None:
            campaign.recorded.append(recorded[run])
            continue
        report = run_once(stack_settings, seed, run, events=events, publish_seconds=publish_seconds,
                          quiesce_patience=quiesce_patience, workdir=workdir, say=say)
        campaign.runs.append(report)
        say(format_run(report, events, publish_seconds))
        if ledger:
            with ledger.open("a") as out:
                out.write(json.dumps(ledger_entry(report, events, publish_seconds, commit)) + "\n")
        if not report.ok and not keep_going:
            break
    if campaign.recorded:
        say(f"{len(campaign.recorded)} runs counted from {ledger}")
    return campaign


def _commit() -> str:
    """The code the runs ran on (a ledger may span changes): the work tree's commit, "+dirty" when it differs."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent).stdout

    head = git("rev-parse", "--short", "HEAD").strip()
    return f"{head}+dirty" if head and git("status", "--porcelain", "--untracked-files=no").strip() else head


def format_run(report: RunReport, events: int, publish_seconds: float, examples: int = 5) -> str:
    head = (f"run {report.run} (seed {report.seed}, workload {report.tag}, {report.events} events): "
            f"{'OK' if report.ok else f'{len(report.violations)} VIOLATIONS'} after {report.seconds:.0f}s; "
            f"read back: {report.stats}")
    if report.ok:
        return head
    lines = [head, format_schedule(report.schedule), "as injected:", *(f"  {i}" for i in report.injected)]
    by_check: dict[str, list[Violation]] = {}
    for violation in report.violations:
        by_check.setdefault(violation.check, []).append(violation)
    for check_name, found in by_check.items():
        lines.append(f"check {check_name}: {len(found)}")
        lines += [f"    {v.message[:2000]}" for v in found[:examples]]
        if len(found) > examples:
            lines.append(f"    … {len(found) - examples} more")
    lines.append(f"components' logs: {report.workdir}")
    lines.append(f"replay: lineage faults campaign --seed {report.seed} --only-run {report.run} "
                 f"--events-per-run {events} --publish-seconds {publish_seconds:g}")
    return "\n".join(lines)


def format_summary(campaign: CampaignReport) -> str:
    failed = campaign.failed_runs()
    lines = [f"campaign seed {campaign.seed}: {campaign.run_count} runs, {len(failed)} failed"
             + (f" (runs {', '.join(map(str, failed))})" if failed else "")]
    if campaign.recorded:
        commits = sorted({entry.get("commit") or "?" for entry in campaign.recorded})
        hours = sum(entry.get("seconds", 0.0) for entry in campaign.recorded) / 3600
        lines.append(f"{len(campaign.recorded)} of them from the ledger: {hours:.1f} h of runs, on commits "
                     f"{', '.join(commits)}")
    lines += ["", f"{'fault':<18} {'injected':>8}"]
    for kind, count in sorted(campaign.faults_by_kind().items()):
        lines.append(f"{kind:<18} {count:>8}")
    lines += ["", f"{'check':<18} {'violations':>10}"]
    by_check = campaign.violations_by_check()
    for check_name in checks.CHECKS:
        lines.append(f"{check_name:<18} {by_check.get(check_name, 0):>10}")
    return "\n".join(lines)
