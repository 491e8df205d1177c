"""``lineage faults``: a ground-truth workload through the real pipeline while it is being broken, then an exact
check (``lineage workload``: the same without the faults).

The workload (``workload.generate``: duplicates, late STARTs, retries, schema changes) is published at a steady
rate while the processor and the graph sink are killed with SIGKILL at random points and restarted, the Kafka broker
is restarted and Neo4j is stopped for a while. Then the graph and the alert topic are compared with the ground truth
(``checker.check``): every element present, nothing extra, nothing wrong, no alert twice. A component that ends by
itself (not killed by the run) ends the run at once with ``ChildExited``: its exit code and last log lines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neo4j.exceptions import TransientError

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.runtime.tail import tail
from kafka_lineage_devtools.checker import GRAPH_QUERIES, CheckReport, check, query_parameters
from kafka_lineage_devtools.processes import (
    ChildExited,
    ChildProcess,
    alert_sink_process,
    pipeline_env,
    processor_process,
    sink_process,
    sleep_watching,
    wait_until,
)
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.workload import Workload, generate

log = logging.getLogger(__name__)

@dataclass
class FaultReport:
    events: int
    faults: list[str] = field(default_factory=list)
    publish_seconds: float = 0.0
    converge_seconds: float = 0.0
    check: CheckReport | None = None

    @property
    def ok(self) -> bool:  # the exact graph and alerts (a component that ended by itself raised ChildExited)
        return self.check is not None and self.check.ok


class _Component:
    """A pipeline component as a child process that can be killed and started again."""

    def __init__(self, name: str, start: Callable[[], contextlib.AbstractContextManager[ChildProcess]]) -> None:
        self.name, self._start = name, start
        self._stack = contextlib.ExitStack()
        self.child: ChildProcess | None = None
        self.outputs: list[str] = []  # every child's whole output, in order (a post-mortem of a failed run)

    def start(self) -> None:
        self.child = self._stack.enter_context(self._start())

    def kill_and_restart(self) -> None:
        assert self.child is not None
        self.child.process.kill()  # SIGKILL: no shutdown, no commit
        self.child.process.wait(30)
        self.restart()

    def restart(self, start: Callable[[], contextlib.AbstractContextManager[ChildProcess]] | None = None) -> None:
        """Stop the current child (if it still runs: gracefully) and start a new one; ``start``: from now on, how."""
        self.stop()
        self._stack = contextlib.ExitStack()
        if start is not None:
            self._start = start
        self.start()

    def check(self) -> None:  # watched by the run's waits through its current child
        if self.child is not None:
            self.child.check()

    def stop(self) -> None:
        try:
            self._stack.close()  # raises ChildExited if the child had ended by itself, unreported
        finally:
            if self.child is not None:
                self.outputs.append(self.child.output)


def graph_rows(clients: ClientSettings, workload: Workload) -> dict[str, list[dict[str, Any]]]:
    parameters = query_parameters(workload.truth)

    def read(tx: Any) -> dict[str, list[dict[str, Any]]]:
        return {kind: [record.data() for record in tx.run(query, parameters)] for kind, query in GRAPH_QUERIES.items()}

    # a managed read: retried when the sink's concurrent writes make Neo4j ask for it (for the driver's 30 s; a
    # sink still catching up can outlast that: TransientError, which the polling callers take as "not yet")
    with driver_for(clients) as driver, driver.session() as session:
        return session.execute_read(read)


def drift_alerts(clients: ClientSettings) -> list[dict[str, Any]]:
    """The schema-drift alerts on the alert topic (its sensitive-exposure alerts are not the workload's truth)."""
    return [alert for alert in tail(clients, clients.drift_topic, "schema_drift_alert", 1_000_000, False)
            if alert["kind"] == "schemaDrift"]


# A batch Kafka did not acknowledge within this long is sent again, as an emitter with retries does (the processor
# absorbs the repeats): once, librdkafka's producer delivered nothing for five minutes after the broker restart.
DELIVERY_TIMEOUT_MS = 60_000
SEND_ATTEMPTS = 10


def _publish(clients: ClientSettings, events: list[dict[str, Any]], rate: float, stop: threading.Event) -> None:
    # Errors only (a broker restart's hundreds of leader warnings are noise): a publisher that cannot deliver for
    # minutes after one (seen once in clean-clone CI, cause unknown) must leave its account
    publisher = EventPublisher.from_settings(clients, producer={"message.timeout.ms": str(DELIVERY_TIMEOUT_MS),
                                                                "log_level": "3"})
    try:
        pending, batch, started = [], max(1, int(rate / 10)), time.monotonic()
        for index in range(0, len(events), batch):
            if stop.is_set():
                return
            chunk = events[index:index + batch]
            pending.append((chunk, publisher.send([publisher.encode(event) for event in chunk])))
            time.sleep(max(0.0, started + (index + batch) / rate - time.monotonic()))
        for chunk, delivery in pending:
            for attempt in range(1, SEND_ATTEMPTS + 1):
                try:
                    delivery.result(600)
                    break
                except PublishError as exc:
                    if exc.permanent or stop.is_set() or attempt == SEND_ATTEMPTS:
                        raise
                    log.warning("fault run: %d events not acknowledged (%s); sending them again", len(chunk), exc)
                    delivery = publisher.send([publisher.encode(event) for event in chunk])
    finally:
        publisher.close(600)


def run_faults(stack_settings: StackSettings, base: ClientSettings, *, jobs: int = 2000, runs_per_job: int = 20,
               seed: int = 7, rate: float = 2000.0, neo4j_outage: float = 30.0, timeout: float = 900.0,
               inject: bool = True,
               workdir: Path = Path(".lineage/faults"), say: Callable[[str], None] = print) -> FaultReport:
    tag = f"f{seed}-{uuid.uuid4().hex[:6]}"
    workload = generate(jobs, runs_per_job, seed, schema_changes=4, tag=tag)
    prefix = f"lineage.faults.{tag}"
    env = pipeline_env(prefix, 6, workdir / prefix)
    clients = ClientSettings.from_env({**os.environ, **env})
    prepare_pipeline(clients, 6)
    report = FaultReport(events=len(workload.events))
    say(f"workload {tag}: {len(workload.events)} events ({workload.summary()['delivery']})")
    components = {name: _Component(name, lambda start=start: start(env)) for name, start in
                  (("processor", processor_process), ("graph sink", sink_process),
                   ("alert sink", alert_sink_process))}
    watched = list(components.values())
    stack = Stack(stack_settings)
    rng = random.Random(seed)
    stop = threading.Event()
    try:
        for component in components.values():
            component.start()
        started = time.monotonic()
        publisher = threading.Thread(target=_publish, args=(clients, workload.events, rate, stop), daemon=True)
        publisher.start()
        publish_span = len(workload.events) / rate

        def at(share: float) -> None:  # wait until ``share`` of the publishing time (± jitter) has passed
            sleep_watching(max(0.0, started + publish_span * (share + rng.uniform(-0.05, 0.05)) - time.monotonic()))

        def fault(text: str, action: Callable[[], Any]) -> None:
            say(f"  {time.monotonic() - started:6.1f}s  {text}")
            report.faults.append(text)
            action()

        if inject:
            at(0.15)
            fault("SIGKILL processor, restart", components["processor"].kill_and_restart)
            at(0.30)
            fault("SIGKILL graph sink, restart", components["graph sink"].kill_and_restart)
            at(0.45)
            fault("restart the Kafka broker", lambda: (stack.down(["kafka"]), stack.up(["kafka"])))
            at(0.60)
            fault(f"stop Neo4j for {neo4j_outage:.0f}s", lambda: (stack.down(["neo4j"]), sleep_watching(neo4j_outage),
                                                                 stack.up(["neo4j"])))
            at(0.80)
            fault("SIGKILL processor, restart", components["processor"].kill_and_restart)
            fault("SIGKILL graph sink, restart", components["graph sink"].kill_and_restart)
        with contextlib.suppress(TimeoutError):  # a publisher still stuck shows in the check below
            wait_until(lambda: not publisher.is_alive(), timeout, watch=watched)
        report.publish_seconds = time.monotonic() - started
        say(f"  {report.publish_seconds:6.1f}s  all {len(workload.events)} events acknowledged by Kafka")

        def converged() -> bool:
            try:
                rows = graph_rows(clients, workload)
            except TransientError as exc:  # the sink still writing all the while: read again at the next look
                say(f"  {time.monotonic() - started:6.1f}s  graph read not possible yet: {exc.code}")
                return False
            report.check = check(workload.truth, rows, drift_alerts(clients))
            return report.check.ok

        with contextlib.suppress(TimeoutError):  # not converged: the last check is the report
            wait_until(converged, timeout, watch=watched, interval=10)
        report.converge_seconds = time.monotonic() - started
    except ChildExited as exc:
        exc.add_note(f"every component's whole output: {workdir.resolve()}")
        raise
    finally:
        stop.set()
        ended = stop_components(components, workdir)
    if ended:
        raise ended[0]
    return report


def stop_components(components: Mapping[str, _Component], workdir: Path) -> list[ChildExited]:
    """Stop every component and keep each one's whole output (all restarts) in ``workdir/<name>.log``; the ones
    that had ended by themselves (a failed run, even after the last wait)."""
    workdir.mkdir(parents=True, exist_ok=True)
    ended: list[ChildExited] = []
    for name, component in components.items():
        try:
            component.stop()
        except ChildExited as exc:
            ended.append(exc)
        (workdir / f"{name.replace(' ', '-')}.log").write_text("\n".join(component.outputs))
    return ended
