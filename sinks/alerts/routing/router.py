"""The alert router (``lineage alerts route``): the alert topic → each alert to the routes its rules select.

- One member of the router's group reads the alert topic (read_committed: alerts of aborted alert-sink transactions
  never go out). Each alert is matched against every route (``rules.py``); each route has a worker thread with its
  own queue, pace and retries, so a destination that is down holds up only its own route (until ``max_pending``
  alerts wait for it: then reading pauses, memory stays bounded). What was read and what may be committed is kept
  by ``tracking.py``.
- At least once per route: a worker retries a message with exponential backoff (honouring Retry-After) until its
  destination accepts it, however long that takes; only a refusal for good (a 4xx other than 408/409/425/429, or a
  message no template or size limit lets through) ends it, as a dead letter with the reason on the DLQ.
- Never twice per route after a restart: an alert done on a route is written to the ledger (``ledger.py``) and
  acknowledged before it counts as done; offsets on the alert topic are committed only past alerts every route is
  done with; a restart reads those again and the ledger skips what each route already has. The one window left —
  a crash after the destination accepted a message and before the ledger has it — sends that message again with the
  same ``X-Lineage-Delivery`` key (and, for Alertmanager, the same labels, so it is the same alert there).
- Bursts: a worker waits ``gather_seconds`` after a burst's first alert, and more than ``digest_after`` alerts
  waiting go out as one digest message; ``rate_per_minute`` bounds the messages (``delivery.py``).
- A stop (SIGTERM) lets each worker finish the message in flight and record it; what waits stays uncommitted and is
  read again by the next start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import requests
import urllib3
from confluent_kafka import KafkaException, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings, ConfigError
from kafka_lineage.runtime.crash_points import CrashPoints, parse_crash_points
from kafka_lineage.runtime.kafka_io import AckingProducer, PublishError, commit_bounded
from kafka_lineage.runtime.logs import active_redactor, problem
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.retry import Backoff, Stopped
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.wire import AvroCodec, RegistryUnavailable, WireFormatError
from kafka_lineage.sinks.alerts.routing.config import RouteConfig, load_routes
from kafka_lineage.sinks.alerts.routing.delivery import Outcome, Pace, batch_size, outcome, request
from kafka_lineage.sinks.alerts.routing.ledger import Done, Ledger, LedgerUnreadable
from kafka_lineage.sinks.alerts.routing.messages import (
    MessageError,
    TooLarge,
    default_templates,
    sample_alert,
    split_build,
)
from kafka_lineage.sinks.alerts.routing.rules import select
from kafka_lineage.sinks.alerts.routing.settings import ROUTER_CRASH_POINTS, RouterSettings
from kafka_lineage.sinks.alerts.routing.tracking import Entry, Tracker
from kafka_lineage.sinks.consumer import SinkMember, consume_batch, throttled

log = logging.getLogger(__name__)
STAGE = "alert-router"
BATCH_SIZE = 500
COMMIT_SECONDS = 1.0  # offsets committed at most this often (and at every stop and rebalance)
COMMIT_TIMEOUT = 30.0  # a commit not answered by then is left to its thread and tried again later
MAX_UNCOMMITTED = 200_000  # alerts read and not committed (behind one a route waits for): past it reading pauses
MAX_POLL_INTERVAL_MS = 300_000
CONNECT_SECONDS = 5.0
REVOKE_SECONDS = 30.0  # a worker's message in flight is waited for this long when its partition leaves the member
RECORD_RETRY_CAP = 10.0  # a ledger or DLQ write Kafka refused is tried again, at most this far apart
ANSWER_BYTES = 2000  # of a destination's answer, read (a refusal's reason); the rest is left unread
ROUTE_HEADER = "lineage.route"  # on a dead letter: the route that refused the alert (and on its redriven record)


class RouteWorker:
    """One route's deliveries, in a thread of its own."""

    def __init__(self, config: RouteConfig, router: AlertRouter) -> None:
        self.config, self.router, self.name = config, router, config.name
        self.delivery = config.route.delivery
        self.pace = Pace(self.delivery.rate_per_minute)
        self.queue: deque[Entry] = deque()
        self.in_flight: list[Entry] = []
        self.condition = threading.Condition()
        self.session = requests.Session()
        self.thread = threading.Thread(target=self._run, name=f"route-{self.name}", daemon=True)

    def offer(self, entry: Entry) -> None:
        with self.condition:
            self.queue.append(entry)
            self.condition.notify_all()
            waiting = len(self.queue) + len(self.in_flight)
        self.router.metrics.route_waiting(self.name, waiting)

    def waiting(self) -> int:
        with self.condition:
            return len(self.queue) + len(self.in_flight)

    def drop(self, partitions: set[int], deadline: float) -> None:
        """Forget queued alerts of ``partitions`` and wait (until ``deadline``, a time.monotonic()) for a message in
        flight holding one of them: one being sent is recorded, one waiting to be tried again is given up."""
        with self.condition:
            self.queue = deque(entry for entry in self.queue if entry.partition not in partitions)
            for entry in self.in_flight:
                if entry.partition in partitions:
                    entry.abandoned = True
            while any(entry.partition in partitions for entry in self.in_flight):
                left = deadline - time.monotonic()
                if left <= 0:
                    problem(log, f"route {self.name}: a message still in flight after {REVOKE_SECONDS:.0f}s while "
                            "its partition moves to another member; that member may send it again",
                            "nothing to do; its X-Lineage-Delivery key is the same", stage=STAGE)
                    return
                self.condition.wait(left)

    def _run(self) -> None:
        stop = self.router.stop
        try:
            while not stop.is_set():
                taken = self._next()
                if not taken:
                    continue
                try:
                    self._send(taken)
                finally:
                    with self.condition:
                        self.in_flight = []
                        self.condition.notify_all()
                self.router.metrics.route_waiting(self.name, self.waiting())
        except Stopped:
            pass
        except Exception:  # a bug: say so loudly; the router stops (a route that silently stops is worse)
            log.exception("route %s: its worker failed; the router stops", self.name)
            self.router.failed.set()
            stop.set()

    def _next(self) -> list[Entry]:
        """The alerts of the next message, once its time has come (gathered, paced); [] to look again."""
        stop = self.router.stop
        with self.condition:
            while not self.queue and not stop.is_set():
                self.condition.wait(0.5)
            if stop.is_set():
                return []
            # a burst's first alert waits for the rest of it, unless a full digest is already there (or none is made)
            while (self.delivery.digest_after and self.queue and len(self.queue) < self.delivery.digest_max
                   and not stop.is_set()
                   and (left := self.queue[0].arrived + self.delivery.gather_seconds - time.monotonic()) > 0):
                self.condition.wait(left)
        wait = self.pace.wait_needed()
        if wait > 0:
            stop.wait(wait)
            return []
        with self.condition:
            # an entry done meanwhile on this route (an earlier record of the same alert delivered) is not sent
            self.queue = deque(entry for entry in self.queue if self.name in entry.waiting and not entry.abandoned)
            count = batch_size(len(self.queue), self.delivery)
            self.in_flight = [self.queue.popleft() for _ in range(count)]
            return list(self.in_flight)

    def _send(self, taken: list[Entry]) -> None:
        """Deliver ``taken`` (one alert, or a digest). One alert must not sink a digest: a digest that cannot be
        built, or that its destination refuses, is sent again alert by alert, and only the refused ones are
        dead-lettered."""
        try:
            parts = split_build(self.config.template, self.config.route.destination.type,
                                [entry.alert for entry in taken], route=self.name, ui_url=self.router.ui_url)
        except MessageError as exc:
            if len(taken) > 1:
                for entry in taken:
                    self._send([entry])
                return
            if isinstance(exc, TooLarge):
                self._refuse(taken, f"the message is too large even for this alert alone ({exc})", "too-large")
            else:
                self._refuse(taken, f"the route's template cannot render it: {exc}", "template")
            return
        by_id = {entry.alert_id: entry for entry in taken}
        for alerts, delivery_id, body in parts:
            entries = [by_id[str(alert.get("alertId", ""))] for alert in alerts]
            refusal = self._deliver(entries, delivery_id, body)
            if refusal is None:
                continue
            if len(entries) > 1:
                for entry in entries:
                    self._send([entry])
            else:
                self._refuse(entries, f"{self.config.where()} refused it for good: {refusal}", "refused")

    def _deliver(self, entries: list[Entry], delivery_id: str, body: bytes) -> str | None:
        """Send until the destination accepts (recorded; None) or refuses for good (the reason, nothing recorded);
        Stopped (nothing recorded) on a stop. Alerts whose partition left this member are not sent any more."""
        backoff = Backoff(self.delivery.retry_initial_seconds, self.delivery.retry_max_seconds)
        attempts = 0
        while True:
            if all(entry.abandoned for entry in entries):
                return None
            self._sleep(self.pace.wait_needed(), entries)  # a retry is a message too: the limit holds for it
            if all(entry.abandoned for entry in entries):
                return None
            self.pace.spend()
            attempts += 1
            result = self._post(delivery_id, body)
            if result.result == "delivered":
                now = time.time()
                latencies = [now - _detected(entry.alert) for entry in entries]
                self.router.crash.reach("after-delivery")
                self._record(entries, "delivered", delivery_id)
                self.router.metrics.route_delivered(self.name, latencies, digest=len(entries) > 1)
                if attempts > 1:
                    log.info("route %s: delivered to %s after %d attempts (%d alerts)", self.name,
                             self.config.where(), attempts, len(entries))
                return None
            if result.result == "refused":
                return result.reason
            self.router.metrics.route_retried(self.name)
            delay = max(backoff.advance(), result.retry_after or 0.0)
            if attempts == 1 or attempts % 10 == 0:
                problem(log, f"route {self.name}: {self.config.where()} did not take {len(entries)} alerts "
                        f"({result.reason}); attempt {attempts}, trying again", "check the destination; nothing "
                        "is lost while it is away", retry_in=delay, stage=STAGE)
            self._sleep(delay, entries)

    def _sleep(self, seconds: float, entries: list[Entry]) -> None:
        """Wait ``seconds``, ending early when every one of ``entries`` left this member (a rebalance must not wait
        out a backoff); Stopped on a stop."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not all(entry.abandoned for entry in entries):
            if self.router.stop.wait(min(left, 0.2)):
                raise Stopped
        if self.router.stop.is_set():
            raise Stopped

    def _post(self, delivery_id: str, body: bytes) -> Outcome:
        prepared = request(self.config, body, delivery_id)
        try:
            with self.session.post(prepared.url, data=prepared.body, headers=prepared.headers, stream=True,
                                   timeout=(CONNECT_SECONDS, self.config.route.destination.timeout_seconds),
                                   allow_redirects=False) as answer:
                text = answer.raw.read(ANSWER_BYTES, decode_content=True).decode("utf-8", "replace")
        # (urllib3's own errors: while the answer is read) its text names the URL, a secret: only its kind is kept
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            return Outcome("retry", f"{type(exc).__name__} (no answer)")
        # an answer may echo the request's path (a token in it): redacted before it reaches a log or a dead letter
        return outcome(answer.status_code, answer.headers, active_redactor().redact(text))

    def _refuse(self, entries: list[Entry], reason: str, category: str) -> None:
        problem(log, f"route {self.name}: {len(entries)} alerts dead-lettered: {reason}",
                "fix the destination or the route's template; the alerts are on the DLQ (`lineage dlq tail`)",
                stage=STAGE)
        self.router.send_dead_letters([(entry, self.name, category, reason) for entry in entries])
        self.router.metrics.dead_letter(STAGE, category, len(entries))
        self.router.metrics.route_failed(self.name, len(entries))
        self._record(entries, "deadLettered", "")

    def _record(self, entries: list[Entry], result: str, delivery_id: str) -> None:
        dones = [Done(self.name, entry.alert_id, entry.partition, entry.offset, result, delivery_id)
                 for entry in entries]
        self.router.write(lambda: self.router.ledger.record(dones), "the ledger")
        self.router.crash.reach("after-record")
        self.router.finished(self.name, list(zip(entries, dones, strict=True)))


def _detected(alert: Mapping[str, Any]) -> float:
    detected = alert.get("detectedAt")
    return detected.timestamp() if isinstance(detected, datetime) else time.time()


class AlertRouter:
    def __init__(self, clients: ClientSettings, settings: RouterSettings, routes: list[RouteConfig], ui_url: str,
                 metrics: Metrics | None = None) -> None:
        self.clients, self.settings, self.ui_url = clients, settings, ui_url
        self.metrics = metrics or Metrics(process_metrics=False)
        client = SchemaRegistryClient(clients.registry_config())
        self.alerts = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
        self.dead_codec = AvroCodec("dead_letter", registry.schema_fetcher(client))
        self.dead_letter_id = registry.registered_id(client, clients.dlq_topic, "dead_letter")
        self.producer = AckingProducer(clients.kafka_config())
        self.ledger = Ledger(clients, settings.group_id, self.producer)
        self.member = SinkMember(clients, settings.group_id, clients.drift_topic,
                                 {"max.poll.interval.ms": str(MAX_POLL_INTERVAL_MS),
                                  "auto.offset.reset": settings.start_from})
        self.crash = CrashPoints(parse_crash_points(settings.crash_points, ROUTER_CRASH_POINTS), "router")
        self.matchers = [(route.name, route.route.match) for route in routes]
        self.workers = {route.name: RouteWorker(route, self) for route in routes}
        self.stop = threading.Event()
        self.failed = threading.Event()
        self.lock = threading.Lock()  # the entries and the ledger's view, shared with the workers
        self.tracked = Tracker()  # what was read and what each route did (tracking.py), under ``lock``
        self.ledger_partitions: set[int] = set()  # the partitions held when the ledger was last read
        self.unfinished = False  # a batch read from Kafka is not all entries yet: no commit passes it
        self.paused = False
        self.read = self.unrouted = 0
        self._last_commit = 0.0

    # --- the member's loop --------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        self.ledger.ensure()
        self.member.subscribe(on_revoke=self._on_revoke)
        for worker in self.workers.values():
            worker.thread.start()
        print(f"alert router ready: {self.clients.drift_topic} → {len(self.workers)} routes "
              f"({', '.join(f'{w.name}: {w.config.where()}' for w in self.workers.values())})", flush=True)
        reporting = throttled(self.settings.report_seconds, self._report)
        try:
            while not stop.is_set():
                messages = consume_batch(self.member.consumer, BATCH_SIZE, self.settings.poll_seconds, STAGE)
                self.unfinished = bool(messages)  # until each is an entry, the position is past what is not
                self._read_ledger_if_new_partitions()
                if messages:
                    self._handle(messages)
                    self.member.watch.busy()
                elif not self._pending():  # (a stalled consumer is rebuilt only with nothing uncommitted)
                    self.member.check(STAGE)
                self.unfinished = False
                self._commit()
                self._backpressure()
                reporting()
        finally:
            stop.set()  # the workers finish the message in flight (recorded) and leave
            for worker in self.workers.values():
                if worker.thread.is_alive():
                    worker.thread.join(worker.config.route.destination.timeout_seconds + CONNECT_SECONDS + 70)
            self._commit(force=True)
            self.member.consumer.close()
            self.producer.close()
            print(f"alert router stopped: {self.read} alerts read", flush=True)
        if self.failed.is_set():
            raise RuntimeError("a route's worker failed (see the log above)")

    def _handle(self, messages: list[Message]) -> None:
        self.metrics.events_in(STAGE, len(messages))
        self.read += len(messages)
        held = {tp.partition for tp in self.member.consumer.assignment()}
        for message in messages:
            if message.partition() not in held:  # fetched before its partition left: its next owner has it
                continue
            if not message.value():  # a tombstone or an empty record: nothing to deliver, but never a crash
                self._dead_letter_unreadable(message, "an empty record")
                continue
            value = message.value()
            try:  # (the registry away: waited for, like Kafka)
                alert = self.write(lambda value=value: self.alerts.decode(value), "decoding an alert")
            except WireFormatError as exc:
                self._dead_letter_unreadable(message, str(exc))
                continue
            entry = Entry(message.partition(), message.offset(), message.key(), value, alert)
            names = select(self.matchers, alert)
            redriven = dict(message.headers() or ()).get(ROUTE_HEADER)
            if redriven is not None:  # a dead letter of one route, redriven: that route sends it, no other
                names = [name for name in names if name.encode() == redriven]
            with self.lock:
                again = self.tracked.to_rerecord(names, entry.alert_id)
            if again:  # read again after its record was tombstoned: the record goes back first (tracking.py)
                self.write(lambda again=again: self.ledger.record(again), "the ledger")
                with self.lock:
                    self.tracked.rerecorded(again)
            with self.lock:
                offered = self.tracked.track(entry, names, redriven is not None)
            if not entry.waiting and not entry.done:
                self.unrouted += 1
            for name in offered:
                self.workers[name].offer(entry)
        self.metrics.seen(STAGE)

    def finished(self, route: str, done: list[tuple[Entry, Done]]) -> None:
        """A worker is done with these alerts on ``route`` (recorded in the ledger)."""
        with self.lock:
            self.tracked.finished(route, done)
        self.metrics.events_out(STAGE, len(done))

    def _pending(self) -> bool:
        with self.lock:
            return self.tracked.pending()

    def _commit(self, force: bool = False, partitions: set[int] | None = None) -> None:
        """Commit what every route is done with (``Tracker.commits``), then tombstone the ledger records the
        offsets passed. A commit that fails or hangs is tried again later."""
        if not force and time.monotonic() - self._last_commit < COMMIT_SECONDS:
            return
        self._last_commit = time.monotonic()
        consumer = self.member.consumer
        try:
            assigned = [tp for tp in consumer.assignment() if partitions is None or tp.partition in partitions]
            positions = {tp.partition: tp.offset for tp in consumer.position(assigned)} if assigned else {}
        except KafkaException as exc:
            log.warning("%s: positions not read (%s); committing later", STAGE, exc)
            return
        with self.lock:
            commits = self.tracked.commits(positions, self.unfinished)
        if not commits:
            return
        try:
            commit_bounded(consumer, COMMIT_TIMEOUT, [TopicPartition(self.clients.drift_topic, partition, c.offset)
                                                      for partition, c in commits.items()])
        except (KafkaException, TimeoutError) as exc:  # a rebalance under way, the coordinator away
            log.warning("%s: offsets not committed (%s); committing later", STAGE, exc)
            return
        with self.lock:
            forgotten = self.tracked.committed_to(commits)
        self.ledger.forget(forgotten)

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """Partitions leave this member: their queued alerts are dropped (the next owner reads them again from the
        committed offset; the ledger says what is done) once a message in flight is recorded."""
        if _consumer is not self.member.consumer:  # a stalled consumer closed after its replacement joined
            return
        leaving = {tp.partition for tp in partitions if tp.topic == self.clients.drift_topic}
        deadline = time.monotonic() + REVOKE_SECONDS  # one for every route: the group waits for this member
        for worker in self.workers.values():
            worker.drop(leaving, deadline)
        self._commit(force=True, partitions=leaving)
        with self.lock:
            self.tracked.leave(leaving)
        self.ledger_partitions -= leaving

    def _read_ledger_if_new_partitions(self) -> None:
        """Partitions newly held (the start, a rebalance): read what every route has done, whoever did it."""
        held = {tp.partition for tp in self.member.consumer.assignment()}
        if held <= self.ledger_partitions:
            return
        consumer, topic = self.member.consumer, self.clients.drift_topic

        def read() -> tuple[dict[tuple[str, str], Done], dict[int, int], dict[int, int]]:
            committed = {tp.partition: tp.offset for tp in consumer.committed(
                [TopicPartition(topic, p) for p in held], timeout=10) if tp.error is None}
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in held}
            return self.ledger.load(), committed, ends

        records, committed, ends = self.write(read, "reading the ledger")
        with self.lock:
            passed = self.tracked.loaded(records, committed, ends, held)
        self.ledger_partitions = held
        log.info("%s: %d ledger records read (%d already passed by the committed offsets)", STAGE, len(records),
                 passed)

    def _backpressure(self) -> None:
        """Stop reading (every route then waits: memory is bounded) while a route has ``max_pending`` alerts waiting
        or ``MAX_UNCOMMITTED`` are held; read again once all are at half."""
        with self.lock:
            held = self.tracked.held()
        loads = [(worker.waiting(), worker.delivery.max_pending) for worker in self.workers.values()]
        loads.append((held, MAX_UNCOMMITTED))
        assigned = self.member.consumer.assignment()
        if not self.paused and any(waiting >= limit for waiting, limit in loads):
            self.member.consumer.pause(assigned)
            self.paused = True
            log.warning("%s: a route has reached its max_pending alerts, or %d alerts wait for their commit; reading "
                        "paused", STAGE, held)
        elif self.paused and all(waiting <= limit // 2 for waiting, limit in loads):
            self.member.consumer.resume(assigned)
            self.paused = False
            log.info("%s: reading resumed", STAGE)

    def _report(self) -> None:
        waiting = {name: worker.waiting() for name, worker in self.workers.items()}
        for name, count in waiting.items():  # (also after a rebalance dropped queued alerts)
            self.metrics.route_waiting(name, count)
        log.info("alert router: %d alerts read (%d matched no route); waiting per route: %s", self.read,
                 self.unrouted, waiting)

    # --- writes every worker shares -----------------------------------------------------------------------------
    def write(self, action: Any, what: str) -> Any:
        """``action()`` until Kafka (or the registry) takes it: a ledger or DLQ write must not be skipped; Stopped on
        a stop. A record Kafka refuses for good (too large) is raised."""
        backoff = Backoff(1.0, RECORD_RETRY_CAP)
        while True:
            try:
                return action()
            except (PublishError, KafkaException, TimeoutError, LedgerUnreadable, RegistryUnavailable) as exc:
                if isinstance(exc, PublishError) and exc.permanent:
                    raise
                problem(log, f"{STAGE}: {what} did not go through ({exc}); trying again",
                        "check that Kafka and the schema registry run", retry_in=backoff.delay, stage=STAGE)
                backoff.wait(self.stop)

    def send_dead_letters(self, refusals: list[tuple[Entry, str | None, str, str]]) -> None:
        """Dead letters of (entry, route, category, reason), acknowledged; one Kafka refuses for good (an alert near
        the record limit plus the letter's own fields) goes again without the alert's bytes, saying so."""
        def send(key: bytes | None, letter: bytes) -> None:
            self.write(lambda: self.producer.send(self.clients.dlq_topic, [(key, letter)]).result(60), "a dead letter")

        for entry, route, category, reason in refusals:
            try:
                send(entry.key, self.dead_letter(entry, route, category, reason))
            except PublishError as exc:
                bare = Entry(entry.partition, entry.offset, entry.key, b"", entry.alert)
                send(entry.key, self.dead_letter(bare, route, category, f"{reason} (the alert itself not kept: {exc})"))

    def dead_letter(self, entry: Entry, route: str | None, category: str, reason: str) -> bytes:
        """A DeadLetter of ``entry``, refused by ``route`` (None: by none, unreadable)."""
        return self.dead_codec.encode(dead_letter(
            stage=STAGE, error_class=category, error_message=f"route {route}: {reason}" if route else reason,
            key=entry.key, value=entry.value or None, headers=[(ROUTE_HEADER, route.encode())] if route else [],
            source_topic=self.clients.drift_topic, source_partition=entry.partition, source_offset=entry.offset),
            self.dead_letter_id)

    def _dead_letter_unreadable(self, message: Message, reason: str) -> None:
        entry = Entry(message.partition(), message.offset(), message.key(), message.value() or b"", {})
        self.send_dead_letters([(entry, None, "decode", f"not a SchemaDriftAlert: {reason}")])
        self.metrics.dead_letter(STAGE, "decode")
        with self.lock:
            self.tracked.track(entry, [])  # done: nothing waits


def load_routes_checked(settings: RouterSettings) -> tuple[str, list[RouteConfig]]:
    """The routes file read and validated, its secrets added to the log redactor, and every route's template tried
    on sample alerts (one alone, and a full digest): ConfigError says what is wrong and where."""
    file_ui_url, routes = load_routes(settings.routes_file, default_templates())
    active_redactor().add_secrets(*(secret for route in routes for secret in route.secret_values()))
    ui_url = settings.ui_url or file_ui_url or settings.local_ui_url
    samples = {"a schema change": [sample_alert(0)], "a sensitive exposure": [sample_alert(0, exposure=True)]}
    for route in routes:
        count = route.route.delivery.digest_max
        digest = [sample_alert(i, exposure=i % 10 == 9) for i in range(count)]
        for what, alerts in {**samples, f"a digest of {count}": digest}.items():
            try:
                split_build(route.template, route.route.destination.type, alerts, route=route.name, ui_url=ui_url)
            except MessageError as exc:
                raise ConfigError(f"LINEAGE_ALERT_ROUTES: route {route.name}: its template on {what}: {exc}") from None
    return ui_url, routes
