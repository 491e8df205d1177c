"""Prometheus metrics and health endpoints of the long-running components.

Components record through a :class:`Metrics` facade (``metrics.batch(stage, size)``, ``metrics.dead_letter(stage,
reason)``, ``metrics.latency("graph", seconds)``, ``metrics.lag(stage, topic, partition, value)`` …); each facade owns
its own ``CollectorRegistry``, so tests may build as many as they like. Stages are the components' ``STAGE`` names
(``collector``, ``processor``, ``graph-sink``, ``alert-sink``); label values must stay few (a dead-letter ``reason``
is a short category such as ``decode`` or ``rejected``, never an error message).

Components without an HTTP server of their own (the sinks' threads, the Faust worker) expose ``/metrics``,
``/health/live`` and ``/health/ready`` with :func:`serve_http`; the aiohttp collector mounts
:func:`aiohttp_handlers`. Readiness checks are callables that raise when a dependency is unusable; each runs with a
timeout and its answer is cached for a moment, so frequent probes and scrapes cannot overload Kafka or Neo4j.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, NamedTuple
from urllib.parse import urlsplit

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from kafka_lineage.runtime.logs import redact

if TYPE_CHECKING:
    from aiohttp import web
    from confluent_kafka import Consumer, TopicPartition

    from kafka_lineage.runtime.config import ClientSettings

log = logging.getLogger(__name__)

NAMESPACE = "lineage"
# generate_latest writes the classic text format; with our (legacy-valid) names that is exactly version 0.0.4, the
# type prometheus_client's own server announces for it and every Prometheus 2.x/3.x scraper parses.
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
TRANSACTION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# librdkafka's "no offset" (RD_KAFKA_OFFSET_INVALID): no committed offset, no position yet, watermark not cached.
OFFSET_INVALID = -1001

LatencyPath = Literal["graph", "alert"]
Check = Callable[[], None]


class Metrics:
    """The pipeline's metric families in a registry of their own, behind methods named for what happened.

    ``process_metrics`` adds the standard ``process_*``/``python_*`` families (memory, CPU, open fds, GC)."""

    def __init__(self, *, process_metrics: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        ns, reg = NAMESPACE, self.registry
        self._in = Counter("events_in", "Events read by a stage", ["stage"], namespace=ns, registry=reg)
        self._out = Counter("events_out", "Events written by a stage", ["stage"], namespace=ns, registry=reg)
        self._duplicates = Counter("duplicates", "Events dropped as duplicates", ["stage"], namespace=ns,
                                   registry=reg)
        self._late = Counter("late_events", "Events that arrived after a newer event of the same run", ["stage"],
                             namespace=ns, registry=reg)
        self._dead_letters = Counter("dead_letters", "Records sent to the dead-letter topic, by reason",
                                     ["stage", "reason"], namespace=ns, registry=reg)
        self._schema_changes = Counter("schema_changes", "Dataset schema changes detected", ["stage"], namespace=ns,
                                       registry=reg)
        self._lag = Gauge("consumer_lag", "Records between the consumer's position and the partition's end",
                          ["stage", "topic", "partition"], namespace=ns, registry=reg)
        self._batch = Histogram("batch_size", "Records per processed batch", ["stage"], namespace=ns, registry=reg,
                                buckets=BATCH_SIZE_BUCKETS)
        self._neo4j = Histogram("neo4j_transaction_seconds", "Duration of Neo4j write transactions", namespace=ns,
                                registry=reg, buckets=TRANSACTION_BUCKETS)
        self._latency = Histogram("end_to_end_latency_seconds",
                                  "From event produced to graph committed (path=graph) or drift alert published "
                                  "(path=alert)", ["path"], namespace=ns, registry=reg, buckets=LATENCY_BUCKETS)
        self._queue = Gauge("emitter_queue_depth", "Events waiting in the emitter's queue", namespace=ns,
                            registry=reg)
        self._undelivered = Counter("emitter_undelivered", "Events the emitter could not deliver", namespace=ns,
                                    registry=reg)
        # the alert router, per route (label values: the routes file's names, few by construction)
        self._route_delivered = Counter("route_alerts_delivered", "Alerts a route's destination accepted",
                                        ["route"], namespace=ns, registry=reg)
        self._route_messages = Counter("route_messages", "Messages a route sent and its destination accepted, by "
                                       "kind (alert or digest)", ["route", "kind"], namespace=ns, registry=reg)
        self._route_retried = Counter("route_retries", "Deliveries a route tried again (destination unreachable, "
                                      "rate-limited or failing)", ["route"], namespace=ns, registry=reg)
        self._route_failed = Counter("route_alerts_failed", "Alerts a route's destination refused for good (dead "
                                     "letters)", ["route"], namespace=ns, registry=reg)
        self._route_waiting = Gauge("route_alerts_waiting", "Alerts waiting for a route's destination", ["route"],
                                    namespace=ns, registry=reg)
        self._route_latency = Histogram("route_delivery_latency_seconds", "From alert detected to its destination's "
                                        "acceptance", ["route"], namespace=ns, registry=reg,
                                        buckets=(*LATENCY_BUCKETS, 120.0, 300.0, 900.0, 3600.0))
        self._last_event = Gauge("last_event_timestamp_seconds", "Unix time of the last event a stage handled",
                                 ["stage"], namespace=ns, registry=reg)
        self._ready = Gauge("ready", "1 when the last readiness evaluation passed, else 0", namespace=ns,
                            registry=reg)
        self._lag_labels: dict[str, set[tuple[str, str]]] = {}
        self._lag_lock = threading.Lock()

    def events_in(self, stage: str, count: int = 1) -> None:
        self._in.labels(stage).inc(count)

    def events_out(self, stage: str, count: int = 1) -> None:
        self._out.labels(stage).inc(count)

    def duplicate(self, stage: str, count: int = 1) -> None:
        self._duplicates.labels(stage).inc(count)

    def late(self, stage: str, count: int = 1) -> None:
        self._late.labels(stage).inc(count)

    def dead_letter(self, stage: str, reason: str, count: int = 1) -> None:
        """``reason`` is a short category (label value), not an error message."""
        self._dead_letters.labels(stage, reason).inc(count)

    def schema_change(self, stage: str, count: int = 1) -> None:
        self._schema_changes.labels(stage).inc(count)

    def batch(self, stage: str, size: int) -> None:
        self._batch.labels(stage).observe(size)

    def neo4j_transaction(self, seconds: float) -> None:
        self._neo4j.observe(seconds)

    @contextmanager
    def neo4j_timer(self) -> Iterator[None]:
        """Time the enclosed Neo4j transaction (also when it raises)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._neo4j.observe(time.perf_counter() - started)

    def latency(self, path: LatencyPath, seconds: float) -> None:
        """End-to-end latency: ``path`` is ``"graph"`` (produced → graph committed) or ``"alert"`` (produced →
        drift alert published). A negative value (clock skew between hosts) counts as 0."""
        self._latency.labels(path).observe(max(seconds, 0.0))

    def latency_since(self, path: LatencyPath, produced_at: float, now: float | None = None) -> None:
        """Latency from ``produced_at`` (Unix seconds; a Kafka message timestamp is milliseconds: divide by 1000)."""
        self.latency(path, (time.time() if now is None else now) - produced_at)

    def lag(self, stage: str, topic: str, partition: int, value: int) -> None:
        with self._lag_lock:
            self._lag_labels.setdefault(stage, set()).add((topic, str(partition)))
            self._lag.labels(stage, topic, str(partition)).set(value)

    def update_lag(self, stage: str, consumer: Consumer, partitions: Iterable[TopicPartition] | None = None,
                   *, committed: bool = False, timeout: float = 1.0) -> dict[tuple[str, int], int]:
        """Set ``consumer_lag`` for the consumer's assigned partitions (see :func:`consumer_lag`) and drop the series
        of partitions it no longer holds (after a rebalance). Returns the lags set."""
        lags = consumer_lag(consumer, partitions, committed=committed, timeout=timeout)
        current = {(topic, str(partition)) for topic, partition in lags}
        with self._lag_lock:
            for topic, label in self._lag_labels.get(stage, set()) - current:
                self._lag.remove(stage, topic, label)
            self._lag_labels[stage] = current
            for (topic, partition), value in lags.items():
                self._lag.labels(stage, topic, str(partition)).set(value)
        return lags

    def route_delivered(self, route: str, latencies: Iterable[float], digest: bool) -> None:
        """A message accepted: one latency per alert it carried (detected → accepted)."""
        count = 0
        for seconds in latencies:
            self._route_latency.labels(route).observe(max(seconds, 0.0))
            count += 1
        self._route_delivered.labels(route).inc(count)
        self._route_messages.labels(route, "digest" if digest else "alert").inc()

    def route_retried(self, route: str) -> None:
        self._route_retried.labels(route).inc()

    def route_failed(self, route: str, count: int) -> None:
        self._route_failed.labels(route).inc(count)

    def route_waiting(self, route: str, count: int) -> None:
        self._route_waiting.labels(route).set(count)

    def emitter_queue(self, depth: int) -> None:
        self._queue.set(depth)

    def emitter_undelivered(self, count: int = 1) -> None:
        self._undelivered.inc(count)

    def seen(self, stage: str, at: float | None = None) -> None:
        """The stage handled an event now (or at Unix time ``at``): ``last_event_timestamp_seconds``."""
        self._last_event.labels(stage).set(time.time() if at is None else at)

    def set_ready(self, ready: bool) -> None:
        self._ready.set(1 if ready else 0)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in the Prometheus text format, and its Content-Type."""
        return generate_latest(self.registry), METRICS_CONTENT_TYPE


def lag_from(high: int, position: int, low: int = 0) -> int:
    """Records left to read in a partition whose end (high watermark) is ``high`` when the consumer is at
    ``position`` (its next offset to read, or its committed offset).

    An unknown end (negative, e.g. ``OFFSET_INVALID``) gives 0: nothing can be said. An unknown position (no
    committed offset yet; the consumers start from the earliest offset) counts everything from the partition's start
    ``low`` (0 when unknown). Never negative (a position past a stale cached end)."""
    if high < 0:
        return 0
    start = position if position >= 0 else max(low, 0)
    return max(high - start, 0)


def consumer_lag(consumer: Consumer, partitions: Iterable[TopicPartition] | None = None, *,
                 committed: bool = False, timeout: float = 1.0) -> dict[tuple[str, int], int]:
    """Lag per ``(topic, partition)`` of a confluent-kafka consumer (its assignment unless ``partitions`` given).

    The end is the high watermark librdkafka caches from fetch responses (no broker round trip); only a partition
    without a cached value yet is asked from the broker (``timeout``). The start is the consumer's position (local),
    or its committed offset (one request to the group coordinator) when ``committed`` is true or the position is
    not known yet. Partitions whose watermarks cannot be fetched are left out (logged at DEBUG)."""
    from confluent_kafka import KafkaException

    wanted = list(consumer.assignment() if partitions is None else partitions)
    if not wanted:
        return {}
    try:
        found = consumer.committed(wanted, timeout=timeout) if committed else consumer.position(wanted)
    except KafkaException as exc:  # the group coordinator did not answer: better no value than a wrong one
        log.debug("consumer offsets unavailable for lag: %s", exc)
        return {}
    positions = {(tp.topic, tp.partition): tp.offset for tp in found}
    unknown = [tp for tp in wanted if positions.get((tp.topic, tp.partition), OFFSET_INVALID) < 0]
    if unknown and not committed:
        try:
            for tp in consumer.committed(unknown, timeout=timeout):
                positions[(tp.topic, tp.partition)] = tp.offset
        except KafkaException as exc:
            log.debug("committed offsets unavailable for lag: %s", exc)
    lags: dict[tuple[str, int], int] = {}
    for tp in wanted:
        try:
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high < 0:
                low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        except KafkaException as exc:
            log.debug("watermarks of %s[%d] unavailable for lag: %s", tp.topic, tp.partition, exc)
            continue
        lags[(tp.topic, tp.partition)] = lag_from(high, positions.get((tp.topic, tp.partition), OFFSET_INVALID), low)
    return lags


@dataclass(frozen=True)
class ReadinessReport:
    """The outcome of every check: ``"ok"`` or ``"unavailable: <reason>"``."""

    checks: dict[str, str]

    @property
    def ready(self) -> bool:
        return all(result == "ok" for result in self.checks.values())

    @property
    def status(self) -> int:
        return 200 if self.ready else 503

    def body(self) -> dict[str, Any]:
        return {"status": "ready" if self.ready else "not ready", "checks": dict(self.checks)}


@dataclass
class _CheckState:
    result: str | None = None
    at: float = float("-inf")
    outcome: str = ""
    done: threading.Event | None = None  # set when the run in flight finished; None before the first run


@dataclass
class Readiness:
    """Named readiness checks (``() -> None``, raising when the dependency is unusable), each run in a daemon thread
    with ``timeout`` seconds to answer; answers (also timeouts) are reused for ``ttl`` seconds. A check still
    running from an earlier evaluation is waited for, never started twice. Evaluations are serialized."""

    checks: Mapping[str, Check] = field(default_factory=dict)
    timeout: float = 2.0
    ttl: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _states: dict[str, _CheckState] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.checks = dict(self.checks)

    def evaluate(self) -> ReadinessReport:
        with self._lock:
            now = self.clock()
            waiting: dict[str, _CheckState] = {}
            for name, check in self.checks.items():
                state = self._states.setdefault(name, _CheckState())
                if state.result is not None and now - state.at < self.ttl:
                    continue
                if state.done is None or state.done.is_set():
                    state.done = threading.Event()
                    threading.Thread(target=_run_check, args=(check, state, state.done), daemon=True,
                                     name=f"readiness-{name}").start()
                waiting[name] = state
            deadline = time.monotonic() + self.timeout
            for state in waiting.values():
                assert state.done is not None
                if state.done.wait(max(deadline - time.monotonic(), 0.0)):
                    state.result = state.outcome
                else:
                    state.result = f"unavailable: no answer within {self.timeout:g}s"
                state.at = self.clock()
            return ReadinessReport({name: self._states[name].result or "" for name in self.checks})


def _run_check(check: Check, state: _CheckState, done: threading.Event) -> None:
    try:
        check()
        state.outcome = "ok"
    except Exception as exc:
        detail = " ".join(str(exc).split())
        state.outcome = redact(f"unavailable: {type(exc).__name__}" + (f": {detail}" if detail else ""))
    finally:
        done.set()


def _readiness(health: Readiness | Mapping[str, Check] | None) -> Readiness:
    return health if isinstance(health, Readiness) else Readiness(health or {})


class MetricsServer:
    """A running :func:`serve_http` server: ``port`` is the bound port (useful with port 0); ``close()`` stops it."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._server, self._thread = server, thread
        self.host: str = str(server.server_address[0])
        self.port: int = int(server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self, timeout: float = 5.0) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    metrics: Metrics
    readiness: Readiness


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "kafka-lineage"

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        try:
            if path == "/metrics":
                self._send(200, *self.server.metrics.exposition())
            elif path == "/health/live":
                self._json(200, {"status": "live"})
            elif path == "/health/ready":
                report = self.server.readiness.evaluate()
                self.server.metrics.set_ready(report.ready)
                self._json(report.status, report.body())
            else:
                self._json(404, {"error": f"no such path {path!r}; try /metrics, /health/live, /health/ready"})
        except Exception as exc:
            log.exception("metrics server: GET %s failed", path)
            self._json(500, {"error": redact(f"{type(exc).__name__}: {exc}")})

    def _json(self, status: int, body: dict[str, Any]) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics server: %s " + format, self.address_string(), *args)


def serve_http(host: str, port: int, metrics: Metrics, health: Readiness | Mapping[str, Check] | None = None
               ) -> MetricsServer:
    """Serve ``GET /metrics``, ``/health/live`` and ``/health/ready`` from a daemon thread (port 0: any free port,
    see ``MetricsServer.port``). ``health``: a :class:`Readiness` or its checks by name. Raises ``OSError`` when the
    address cannot be bound."""
    server = _Server((host, port), _Handler)
    server.metrics, server.readiness = metrics, _readiness(health)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                              name=f"metrics-http-{server.server_address[1]}")
    thread.start()
    handle = MetricsServer(server, thread)
    log.info("metrics and health on %s (/metrics, /health/live, /health/ready)", handle.url)
    return handle


Handler = Callable[["web.Request"], Awaitable["web.Response"]]


class AiohttpHandlers(NamedTuple):
    metrics: Handler
    ready: Handler


def aiohttp_handlers(metrics: Metrics, health: Readiness | Mapping[str, Check] | None = None) -> AiohttpHandlers:
    """Handlers for an aiohttp application (the collector): ``GET /metrics`` and ``GET /health/ready``, e.g.
    ``app.router.add_get("/metrics", handlers.metrics)``. The checks run in a worker thread, off the event loop."""
    import asyncio

    from aiohttp import web

    readiness = _readiness(health)

    async def metrics_handler(_request: web.Request) -> web.Response:
        body, content_type = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type, "Cache-Control": "no-store"})

    async def ready_handler(_request: web.Request) -> web.Response:
        report = await asyncio.to_thread(readiness.evaluate)
        metrics.set_ready(report.ready)
        return web.json_response(report.body(), status=report.status)

    return AiohttpHandlers(metrics_handler, ready_handler)


# --- the pipeline's own readiness checks and endpoint --------------------------------------------------------------
def kafka_check(kafka_config: Mapping[str, object]) -> Check:
    """Ready when the cluster answers a metadata request (with the component's own security settings)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(dict(kafka_config))

    def check() -> None:
        admin.list_topics(timeout=2)

    return check


def registry_check(registry_config: Mapping[str, object]) -> Check:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient(dict(registry_config))

    def check() -> None:
        client.get_subjects()

    return check


def pipeline_checks(clients: ClientSettings, **more: Check) -> dict[str, Check]:
    """Every component's readiness checks: Kafka and the registry answer; then its own (``more``, e.g. neo4j)."""
    return {"kafka": kafka_check(clients.kafka_config()), "registry": registry_check(clients.registry_config()),
            **more}


def start_endpoint(component: str, setting: str, host: str, port: int, metrics: Metrics,
                   checks: Mapping[str, Check]) -> MetricsServer:
    """``serve_http`` for a component, announced on stdout; a taken port is a configuration error naming ``setting``."""
    from kafka_lineage.runtime.config import ConfigError

    try:
        server = serve_http(host, port, metrics, checks)
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another port "
                          "(0 = any free port)") from None
    print(f"{component} metrics: {server.url}/metrics  health: {server.url}/health/ready", flush=True)
    return server
