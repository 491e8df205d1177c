"""Schema-drift alert sink (``lineage alerts``): normalized events' schema changes → SchemaDriftAlerts.

Each ``schemaChanges`` item of a normalized event becomes a SchemaDriftAlert on ``lineage.schema-drift`` (Avro, key
``{namespace}/{name}`` of the dataset) with what is downstream of it in the graph (depth- and size-limited): jobs,
datasets, and the columns derived from the changed fields; and who owns them, and the dataset's tags, for a router
(``ownership.py``: read with the impact, one more query per alert).

- Identity: the alert id hashes the finding's source (dataset, run id, event time, old and new version). A finding
  redelivered (a restart before the commit, the processor's one-batch repeat window) has the same id and is dropped
  by the recent-id set, which is seeded from the drift topic at start; a change that recurs (A→B→A→B) comes from
  another run and alerts every time. ``changeId`` (dataset + versions) groups the alerts of one change.
- Impact sees the records before the change: when a batch holds a new finding, the normalized topic's end offsets
  are read (one request), and the impact query waits, bounded by ``graph_wait_seconds``, until the graph sink's
  group has committed at least those offsets on every partition; ``impactComplete`` says whether it had.
- Nothing waits unbounded and everything watches ``stop``: Neo4j queries have a transaction timeout and a
  client-side bound (the query runs in a daemon thread); Neo4j unavailable → retried with backoff. A stop mid-batch
  leaves without committing the batch, so the next start reads it again (alerts already published are absorbed).
- Exactly once: a batch's alerts and its consumer offsets commit in one Kafka transaction (KIP-447: the group's
  generation goes with the offsets, so a member the group moved on from is refused and its transaction aborted).
  A crash before the commit leaves nothing visible to read_committed readers and the batch uncommitted; a
  transaction that aborts rewinds the consumer to the committed offsets, and nothing the batch found is remembered.
  A batch without an alert commits its offsets the plain way (one request instead of a transaction): safe because
  this sink commits one batch at a time and the group coordinator keeps whichever offset commit came last in its
  log, transactional or not. The recent-id set stays as the second line: a processor that repeats a finding in
  another record, or a new group reading the topic again, must still not alert twice.
- A batch gives up (rewind, read again) before ``BATCH_SECONDS``: librdkafka takes a member that did not poll for
  ``max.poll.interval.ms`` for dead and leaves the group, and its transaction would then be refused anyway.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from neo4j import Driver
from neo4j.exceptions import ClientError, DriverError, Neo4jError

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.graph.keys import utc_time
from kafka_lineage.graph.queries import (
    FacetKey,
    Reached,
    ReachedField,
    TraversalTimeout,
    column_impact,
    impact,
    node_facets,
)
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.crash_points import CrashPoints, parse_crash_points
from kafka_lineage.runtime.kafka_io import commit_offsets, prepare_pipeline
from kafka_lineage.runtime.logs import problem
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.retry import Backoff, Stopped
from kafka_lineage.runtime.tail import tail
from kafka_lineage.runtime.transactions import (
    TransactionAborted,
    TransactionalProducer,
    TransactionFatal,
    fenced,
    unchecked_by_the_group,
)
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import record_to_event
from kafka_lineage.schemas.wire import AvroCodec, WireFormatError
from kafka_lineage.sinks.alerts.exposure_watch import ExposureWatch
from kafka_lineage.sinks.alerts.ownership import Ownership, alert_ownership, facet_requests
from kafka_lineage.sinks.alerts.settings import ALERT_CRASH_POINTS, AlertSettings
from kafka_lineage.sinks.consumer import SinkMember, batch_offsets, consume_loop, throttled

log = logging.getLogger(__name__)
STAGE = "alert-sink"
BATCH_SIZE = 500  # normalized records per batch (most carry no schema change and are skipped at once)
RECENT_ALERTS = 100_000  # alert ids remembered to drop repeats (also read back from the topic at start)
QUERY_MARGIN = 5.0  # seconds past the transaction timeout before the client gives a query up
# A member that does not poll for this long is taken for dead by librdkafka (it leaves the group); said here rather
# than left to the default so that the batch budget below is tied to it.
MAX_POLL_INTERVAL_MS = 300_000
# A batch still waiting (graph sink, Neo4j) after this long is given up and read again: a minute below the poll
# interval leaves room for a query in flight (``query_timeout`` + margin) and the transaction's commit.
BATCH_SECONDS = MAX_POLL_INTERVAL_MS / 1000 - 60
# A transaction's publish (begin … commit) not done after this long is abandoned and its producer replaced: a
# healthy one takes well under a second, and one seen after a broker restart waited minutes in
# send_offsets_to_transaction for a TxnOffsetCommit answer that never came, past librdkafka's own timeout.
PUBLISH_SECONDS = 60.0
T = TypeVar("T")


class Unanswered(TimeoutError):
    """A call gave no answer within its client-side bound (a Neo4j connection that went silent, a transactional
    call waiting on a broker that never replies)."""


class BatchExpired(Exception):
    """A batch waited ``BATCH_SECONDS``: given up, to be read again after a poll."""


def transactional_id(group_id: str) -> str:
    """This process's transactional id: the group plus a part of its own.

    Not stable across restarts on purpose: KIP-447 fences a stale member through the group's generation, not
    through the id, so two sinks (or a sink and its restarted self) can never fence each other by configuration.
    The price: a killed sink's open transaction is not aborted by its successor but by the broker after
    ``TRANSACTION_TIMEOUT_MS``; until then read_committed readers of the drift topic, and the group's next member
    fetching its offsets, wait."""
    return f"{group_id}.{uuid.uuid4().hex[:12]}"


def change_id(change: Mapping[str, Any]) -> str:
    """The change itself (dataset + both versions): equal for every alert of a recurring change."""
    identity = "\x1f".join((change["namespace"], change["name"], change["previousVersion"], change["newVersion"]))
    return hashlib.sha256(identity.encode()).hexdigest()


def alert_id(change: Mapping[str, Any], event: Mapping[str, Any]) -> str:
    """The finding's source (dataset, run, event time, both versions): only a redelivery repeats it."""
    identity = "\x1f".join((change["namespace"], change["name"], str((event.get("run") or {}).get("runId", "")),
                            str(event.get("eventTime", "")), change["previousVersion"], change["newVersion"]))
    return hashlib.sha256(identity.encode()).hexdigest()


def changed_fields(change: Mapping[str, Any]) -> list[str]:
    """The changed field paths and their parents (a column derived from ``address`` is hit by ``address.zip``)."""
    fields: set[str] = set()
    for item in change.get("changes") or ():
        parts = str(item.get("path", "")).split(".")
        fields.update(".".join(parts[:end]) for end in range(1, len(parts) + 1) if parts[0])
    return sorted(fields)


def column_rows(columns: Iterable[ReachedField]) -> list[dict[str, Any]]:
    """ImpactedColumn records, nearest first, each column once (at its smallest depth)."""
    best: dict[tuple[str, str, str], int] = {}
    for column in columns:
        key = (column.namespace, column.name, column.field)
        best[key] = min(best.get(key, column.depth), column.depth)
    return [{"namespace": ns, "name": name, "field": field, "depth": depth}
            for depth, ns, name, field in sorted((depth, *key) for key, depth in best.items())]


def caught_up(targets: Mapping[int, int], committed: Mapping[int, int]) -> bool:
    """Whether a group's committed offsets reach ``targets`` (partition → end offset) on every partition; a
    partition it never committed counts as offset 0."""
    return all(max(committed.get(partition, 0), 0) >= end for partition, end in targets.items())


def wait_until(condition: Callable[[], bool], timeout: float, stop: threading.Event, interval: float = 0.25,
               clock: Callable[[], float] = time.monotonic) -> bool:
    """True as soon as ``condition()`` holds, False once ``timeout`` seconds passed without; Stopped when ``stop``
    is set first."""
    deadline = clock() + timeout
    while True:
        if stop.is_set():
            raise Stopped
        if condition():
            return True
        remaining = deadline - clock()
        if remaining <= 0:
            return False
        stop.wait(min(interval, remaining))


def build_alert(change: dict[str, Any], event: dict[str, Any], impacted: list[Reached], depth: int, limit: int,
                detected_at: datetime, *, columns: Iterable[ReachedField] = (), complete: bool = True,
                ownership: Ownership | None = None) -> dict[str, Any]:
    """The SchemaDriftAlert record of one finding (``schemas/avro/schema_drift_alert.avsc``); ``ownership``: the
    owners and tags it carries (``ownership.py``; none when not given)."""
    job = event.get("job") or {}
    owned = ownership or Ownership()
    listed = impacted[:limit]
    column_list = column_rows(columns)
    return {
        "alertId": alert_id(change, event),
        "changeId": change_id(change),
        "dataset": {"namespace": change["namespace"], "name": change["name"]},
        "job": {"namespace": job.get("namespace", ""), "name": job.get("name", "")},
        "runId": (event.get("run") or {}).get("runId", ""),
        "previousVersion": change["previousVersion"], "newVersion": change["newVersion"],
        "previousSchema": change["previousSchema"], "newSchema": change["newSchema"],
        "changes": change["changes"], "severity": change["severity"],
        "eventTime": event.get("eventTime", ""), "detectedAt": detected_at, "impactDepth": depth,
        "impactedJobs": [{"namespace": r.namespace, "name": r.name, "depth": r.depth,
                          "owners": owned.of("job", r.namespace, r.name)} for r in listed if r.kind == "job"],
        "impactedDatasets": [{"namespace": r.namespace, "name": r.name, "depth": r.depth,
                              "owners": owned.of("dataset", r.namespace, r.name)}
                             for r in listed if r.kind == "dataset"],
        "impactedColumns": column_list[:limit],
        "impactTruncated": len(impacted) > limit or len(column_list) > limit,
        "impactComplete": complete,
        "changedAt": change.get("changedAt"), "late": bool(change.get("late")),
        "supersedes": change.get("supersedes"), "beyondHistory": bool(change.get("beyondHistory")),
        "kind": "schemaDrift", "exposure": None,
        "datasetOwners": list(owned.dataset_owners), "datasetTags": list(owned.dataset_tags),
    }


def alert_driver(clients: ClientSettings, settings: AlertSettings) -> Driver:
    """A driver whose every wait is bounded: connecting, acquiring a connection, the driver's own retries."""
    return driver_for(clients, connection_timeout=5.0, connection_acquisition_timeout=settings.query_timeout,
                      max_transaction_retry_time=settings.query_timeout, liveness_check_timeout=30.0)


class GraphProgress:
    """How far the graph sink got: the normalized topic's end offsets and the graph sink group's committed ones.

    Read through a consumer of the graph sink's group that never subscribes (it only asks, it never joins): the
    admin API's ListConsumerGroupOffsets crashed the process in native code (SIGSEGV) when asked while the broker
    restarted, in 2 of 3 fault runs; a consumer's committed() and watermark queries fail as plain KafkaExceptions."""

    def __init__(self, clients: ClientSettings, group_id: str, timeout: float = 5.0) -> None:
        # read_committed: the end offsets it reads are then the last stable offsets (past the processor's commit
        # markers, short of a transaction still open), which the graph sink's committed positions reach
        self.reader = Consumer(clients.kafka_config({"group.id": group_id, "enable.auto.commit": False,
                                                     "isolation.level": "read_committed"}))
        self.topic, self.timeout = clients.normalized_topic, timeout
        self._partitions: list[int] = []

    def partitions(self) -> list[int]:
        if not self._partitions:
            metadata = self.reader.list_topics(self.topic, timeout=self.timeout).topics[self.topic]
            if metadata.error is not None:
                raise KafkaException(metadata.error)
            self._partitions = sorted(metadata.partitions)
        return self._partitions

    def end_offsets(self) -> dict[int, int]:
        return {p: self.reader.get_watermark_offsets(TopicPartition(self.topic, p), timeout=self.timeout)[1]
                for p in self.partitions()}

    def committed(self) -> dict[int, int]:
        return {tp.partition: tp.offset for tp in self.reader.committed(
            [TopicPartition(self.topic, p) for p in self.partitions()], timeout=self.timeout) if tp.error is None}

    def close(self) -> None:
        self.reader.close()


@dataclass
class _Finding:
    alert_id: str
    change: dict[str, Any]
    event: dict[str, Any]
    produced_at: datetime | None


class AlertSink:
    def __init__(self, clients: ClientSettings, settings: AlertSettings, metrics: Metrics | None = None) -> None:
        prepare_pipeline(clients, settings.partitions)
        self.clients, self.settings = clients, settings
        self.metrics = metrics or Metrics(process_metrics=False)
        client = SchemaRegistryClient(clients.registry_config())
        self.normalized = AvroCodec("normalized_event", registry.schema_fetcher(client))
        self.alerts = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
        self.alert_schema_id = registry.registered_id(client, clients.drift_topic, "schema_drift_alert")
        self.driver = alert_driver(clients, settings)
        self.transactional_id = transactional_id(settings.group_id)
        self.producer = self.new_producer()
        self.progress = GraphProgress(clients, settings.graph_group_id)
        self.member = SinkMember(clients, settings.group_id, clients.normalized_topic,
                                 {"max.poll.interval.ms": str(MAX_POLL_INTERVAL_MS)})
        self.crash = CrashPoints(parse_crash_points(settings.crash_points, ALERT_CRASH_POINTS), "sink")
        self.recent: OrderedDict[str, None] = OrderedDict()  # alert ids published lately, to drop repeats
        self.published = 0
        # normalized records read, those not decodable, schema changes found in them (for the report)
        self.read = self.undecodable = self.findings = 0
        self.aborted = 0  # batches given up (transaction aborted, or out of time) and read again
        self.replaced = 0  # producers replaced because a transactional call hung
        self.stop = threading.Event()
        self.exposures = ExposureWatch(clients, settings, self.driver, self.alerts, self.alert_schema_id, self.crash,
                                       self._bounded) if settings.sensitive_alerts else None
        self._deadline = float("inf")  # the batch in work gives up at this time.monotonic()

    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        # Alerts this sink (or its predecessor) already published: a finding repeated after a restart — records
        # redelivered past the last commit, a processor's repeated batch — must not alert twice. Committed ones
        # only (tail reads read_committed): an aborted transaction's alerts were never published.
        self._seed_recent()
        self.member.subscribe(on_revoke=self._on_revoke)
        print(f"alert sink ready: {self.clients.normalized_topic} → {self.clients.drift_topic}", flush=True)
        def handle(messages: list[Any]) -> None:
            self.metrics.events_in(STAGE, len(messages))
            self.read += len(messages)
            offsets = batch_offsets(self.member.consumer, messages)  # before anything else moves the positions
            try:
                self._handle(messages, offsets)
            except (TransactionAborted, BatchExpired) as exc:
                self.aborted += 1
                problem(log, f"batch of {len(messages)} records given up ({exc}); it is read again from the "
                        "committed offsets", "nothing to do if it goes through the next time", stage=STAGE)
                self.member.rewind(STAGE, messages)
            self.metrics.seen(STAGE)

        def report() -> None:  # a sink that went quiet shows whether it still reads, and which partitions it holds
            held = sorted(tp.partition for tp in self.member.consumer.assignment())
            log.info("alert sink: %d records read (%d not decodable), %d schema changes, %d alerts published, "
                     "%d batches read again; partitions held: %s", self.read, self.undecodable, self.findings,
                     self.published, self.aborted, held)

        reporting = throttled(self.settings.report_seconds, report)
        owner = TopicPartition(self.clients.normalized_topic, 0)

        def every() -> None:
            reporting()
            if self.exposures is not None:  # the member holding partition 0 compares (exposure_watch.py)
                self.exposures.tick(owner in self.member.consumer.assignment())

        try:
            consume_loop(self.member, stop, handle, stage=STAGE, metrics=self.metrics, batch_size=BATCH_SIZE,
                         poll_seconds=self.settings.poll_seconds, every=every, commits=False)
        except Stopped:
            log.warning("%s: stopped in the middle of a batch; it is not committed and will be read again", STAGE)
        finally:
            self.member.consumer.close()  # no commit here: an unfinished batch goes to the next start
            if self.exposures is not None:
                self.exposures.release()
            self.progress.close()
            self.producer.close()  # a transaction still open is aborted: its alerts never show
            self._close_driver()
            print(f"alert sink stopped: {self.published} alerts published", flush=True)

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """Partitions leave this member (a rebalance, or the assignment lost): without partition 0 it no longer
        compares exposures, and what it remembered may be stale by the time it gets the partition back."""
        if self.exposures is not None and any(tp.topic == self.clients.normalized_topic and tp.partition == 0
                                              for tp in partitions):
            self.exposures.release()

    def _handle(self, messages: list[Any], offsets: dict[tuple[str, int], int]) -> None:
        """Alerts for the batch's new findings, published with the batch's ``offsets`` in one transaction (or the
        offsets alone committed when there is none). Counters and remembered ids change only once it committed."""
        self._deadline = time.monotonic() + BATCH_SECONDS
        findings: list[_Finding] = []
        batch_ids: set[str] = set()
        found = 0
        for message in messages:
            try:
                record = self.normalized.decode(message.value())
            except WireFormatError:
                self.undecodable += 1
                continue  # the graph sink dead-letters undecodable records; one DLQ record is enough
            if not record["schemaChanges"]:
                continue
            event = record_to_event(record["event"])
            for change in record["schemaChanges"]:
                identity = alert_id(change, event)
                found += 1
                if identity not in self.recent and identity not in batch_ids:
                    batch_ids.add(identity)
                    findings.append(_Finding(identity, change, event, record["processing"].get("producedAt")))
        if not findings:
            commit_offsets(self.member.consumer, self.stop, log, STAGE)  # the positions: ``offsets`` and no more
            self.findings += found
            return
        # Everything on the topic now — the change's own record and any downstream runs read with it or before —
        # must be in the graph before impact is asked.
        targets = self._end_offsets()
        complete = targets is not None and self._wait_for_graph(targets)
        alerts = []
        for finding in findings:
            # (a retry while Neo4j was away waits for the graph sink again: it may be complete by then)
            impacted, columns, facets, complete, answered = self._impact(finding.change, targets, complete)
            ownership = alert_ownership(facets, finding.change["namespace"], finding.change["name"], finding.event,
                                        impacted[:self.settings.max_impacted])
            alert = build_alert(finding.change, finding.event, impacted, self.settings.depth,
                                self.settings.max_impacted, datetime.now(UTC), columns=columns,
                                complete=complete and answered, ownership=ownership)
            change, event = finding.change, finding.event
            alerts.append((f"{change['namespace']}/{change['name']}".encode(),
                           self.alerts.encode(alert, self.alert_schema_id)))
            log.warning("schema drift (%s) on %s/%s by %s: %d changes, %d jobs and %d columns downstream%s",
                        change["severity"], change["namespace"], change["name"], (event.get("job") or {}).get("name"),
                        len(change["changes"]), len(alert["impactedJobs"]), len(alert["impactedColumns"]),
                        "" if alert["impactComplete"] else " (impact may be incomplete)",
                        extra={"stage": STAGE, "dataset": f"{change['namespace']}/{change['name']}",
                               "job": (event.get("job") or {}).get("name"),
                               "run_id": (event.get("run") or {}).get("runId")})
        self._publish(alerts, offsets)
        self.findings += found
        for finding in findings:
            self._remember(finding.alert_id)
        published = time.time()
        for finding in findings:  # event produced (raw topic timestamp) → its alert acknowledged
            if finding.produced_at is not None:
                self.metrics.latency_since("alert", finding.produced_at.timestamp(), published)

    def new_producer(self) -> TransactionalProducer:
        return TransactionalProducer(self.clients.kafka_config(), self.transactional_id)

    def _seed_recent(self) -> None:
        """The alert ids on the drift topic now (committed ones: tail reads read_committed)."""
        self.recent.clear()
        for alert in tail(self.clients, self.clients.drift_topic, "schema_drift_alert", RECENT_ALERTS, False):
            self._remember(alert["alertId"])

    def _remember(self, identity: str) -> None:
        self.recent[identity] = None
        if len(self.recent) > RECENT_ALERTS:
            self.recent.popitem(last=False)

    def _end_offsets(self) -> dict[int, int] | None:
        """The normalized topic's end offsets now; None if Kafka does not answer within the graph wait."""
        found: dict[str, dict[int, int]] = {}

        def read() -> bool:
            try:
                found["ends"] = self.progress.end_offsets()
                return True
            except (KafkaException, TimeoutError) as exc:  # a broker restarting: not an answer yet, wait on
                log.warning("%s: end offsets of %s not read (%r); retrying", STAGE, self.clients.normalized_topic, exc)
                return False

        wait_until(read, self._budget(self.settings.graph_wait_seconds), self.stop, interval=1.0)
        return found.get("ends")

    def _wait_for_graph(self, targets: Mapping[int, int]) -> bool:
        """Wait (bounded) until the graph sink's group committed ``targets``; whether it did."""
        last: dict[int, int] = {}

        def reached() -> bool:
            try:
                last.update(self.progress.committed())
            except (KafkaException, TimeoutError) as exc:  # the admin request's future timed out mid-restart
                log.debug("%s: committed offsets of %s not read: %r", STAGE, self.settings.graph_group_id, exc)
                return False
            return caught_up(targets, last)

        if wait_until(reached, self._budget(self.settings.graph_wait_seconds), self.stop):
            return True
        behind = {p: end - max(last.get(p, 0), 0) for p, end in targets.items() if max(last.get(p, 0), 0) < end}
        problem(log, f"the graph sink ({self.settings.graph_group_id}) has not written everything before the change "
                f"after {self.settings.graph_wait_seconds:.0f}s (records behind per partition: {behind}); the alert "
                "goes out with impactComplete=false", "check that `lineage sink` runs and keeps up", stage=STAGE)
        return False

    def _impact(self, change: dict[str, Any], targets: Mapping[int, int] | None, complete: bool
                ) -> tuple[list[Reached], list[ReachedField], dict[FacetKey, tuple[str | None, str]] | None, bool,
                           bool]:
        """Jobs, datasets and columns downstream of the change, the ownership and tags facets of the dataset and of
        the listed nodes (None: not read), whether the graph sink had caught up when they were read (``complete``,
        updated by the waits between retries), and whether Neo4j answered the impact query at all. Retried while
        Neo4j is unavailable or silent."""
        namespace, name, fields = change["namespace"], change["name"], changed_fields(change)
        depth, limit, timeout = self.settings.depth, self.settings.max_impacted + 1, self.settings.query_timeout

        # A late change happened before others already alerted: its impact is the lineage as it was then
        as_of = utc_time(change.get("changedAt")) if change.get("late") else None

        def query() -> tuple[list[Reached], list[ReachedField], dict[FacetKey, tuple[str | None, str]] | None]:
            reached = impact(self.driver, namespace, name, depth, limit, timeout=timeout, as_of=as_of)
            columns = column_impact(self.driver, namespace, name, fields, depth, limit, timeout=timeout) \
                if fields else []
            try:  # one query for the owners and tags of every node the alert lists
                facets = node_facets(self.driver, facet_requests(namespace, name, reached[:limit - 1]),
                                     timeout=timeout)
            except ClientError as exc:  # refused, or out of time: the impact stands, the owners are the event's
                problem(log, f"owners and tags not read ({exc.code}); the alert names its dataset's owners only if "
                        "the event carries them", "see the Neo4j log", stage=STAGE, dataset=f"{namespace}/{name}")
                facets = None
            return reached, columns, facets

        backoff = Backoff(cap=10.0)
        while True:
            try:
                reached, columns, facets = self._bounded(query, self._budget(timeout + QUERY_MARGIN), "Neo4j")
                return reached, columns, facets, complete, True
            except (ClientError, TraversalTimeout) as exc:  # refused, or out of time: alert without impact
                reason = exc.code if isinstance(exc, ClientError) else str(exc)
                problem(log, f"impact query refused ({reason}); the alert goes out without its impact",
                        "see the Neo4j log; LINEAGE_ALERT_QUERY_TIMEOUT bounds the query", stage=STAGE,
                        dataset=f"{namespace}/{name}")
                return [], [], None, complete, False
            except (Neo4jError, DriverError, OSError, Unanswered) as exc:  # unavailable, restarting, silent
                problem(log, "impact query failed, the alert waits for its downstream list",
                        "check NEO4J_URI and that Neo4j runs", error=exc, retry_in=backoff.delay, stage=STAGE,
                        dataset=f"{namespace}/{name}")
                self._budget(backoff.delay)
                backoff.wait(self.stop)
                if not complete and targets is not None:  # the graph sink may have caught up meanwhile
                    complete = self._wait_for_graph(targets)

    def _budget(self, seconds: float) -> float:
        """``seconds``, cut to what is left of the batch's time; BatchExpired when nothing is left."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise BatchExpired(f"still waiting after {BATCH_SECONDS:.0f}s")
        return min(seconds, left)

    def _bounded(self, work: Callable[[], T], timeout: float, what: str, *, stoppable: bool = True) -> T:
        """``work()`` in a daemon thread, waited for at most ``timeout`` seconds (and, if ``stoppable``, only while
        not stopped): a connection that went silent must not hold the sink (its thread ends when the socket times
        out)."""
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            try:
                outcome["value"] = work()
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc
            finally:
                done.set()

        thread = threading.Thread(target=target, name=f"bounded-{what}", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout
        while not done.wait(0.2):
            if stoppable and self.stop.is_set():
                raise Stopped
            if time.monotonic() >= deadline:
                raise Unanswered(f"no answer from {what} within {timeout:.0f}s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def _publish(self, alerts: list[tuple[bytes, bytes]], offsets: dict[tuple[str, int], int]) -> None:
        """The alerts and the batch's offsets in one transaction. TransactionAborted: none of it is visible;
        TransactionFatal (fenced by another process with the id) ends the sink, the batch uncommitted."""
        if self.stop.is_set():
            raise Stopped
        membership = self.member.consumer.consumer_group_metadata()
        if unchecked_by_the_group(membership, self.settings.group_id):
            raise TransactionAborted("the consumer is not a member of its group now (its session expired); the "
                                     "batch is read again")
        producer, abandoned = self.producer, threading.Event()

        def transact() -> None:
            producer.begin()
            for key, value in alerts:
                producer.produce(self.clients.drift_topic, key, value)
            producer.send_offsets(offsets, membership)
            # a test's crash lands with the records on the broker, not still in a local queue
            self.crash.reach("before-commit", producer.flush)
            if not abandoned.is_set():  # its replacement has fenced it by now: nothing left to commit
                producer.commit()

        try:
            # not cut short by a stop: a transaction half done is finished (or abandoned) before the sink closes
            self._bounded(transact, PUBLISH_SECONDS, "the transaction's publish", stoppable=False)
        except Unanswered as exc:
            abandoned.set()
            self._replace_producer(f"a transactional call hung for {PUBLISH_SECONDS:g}s")
            raise TransactionAborted(f"{exc}; its producer was replaced") from exc
        except TransactionFatal as exc:
            if fenced(exc):  # another process has this id: this one is the zombie, and must stop
                raise
            # a call that timed out past its retries (a broker restart outlasting them): not the batch's fault
            self._replace_producer(str(exc))
            raise TransactionAborted(f"{exc}; its producer was replaced") from exc
        self.published += len(alerts)
        self.metrics.events_out(STAGE, len(alerts))

    def _replace_producer(self, reason: str) -> None:
        """A new producer with the same transactional id in place of one stuck in a call, or left unusable by one
        that timed out past its retries. Its init fences the old one and returns once that one's transaction is
        settled: aborted, or, if its commit was already decided, completed. The committed offsets and drift topic
        read after it are then final, so the alert ids are read again from the topic: a batch read again must not
        alert twice for a transaction that did commit."""
        problem(log, f"the transactional producer {self.transactional_id} cannot go on ({reason}); a new producer "
                "with the same id fences it", "nothing to do if the next batch goes through", stage=STAGE)
        self.producer = self.new_producer()  # the stuck one is left to its thread, never closed under it
        self.replaced += 1
        self._seed_recent()

    def _close_driver(self) -> None:
        """Close the driver, but never wait long for a query thread still blocked on a silent connection."""
        closer = threading.Thread(target=self.driver.close, name="neo4j-close", daemon=True)
        closer.start()
        closer.join(5.0)
