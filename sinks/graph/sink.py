"""Neo4j graph sink (``lineage sink``): normalized events → the lineage graph, one transaction per batch.

The graph statements (``graph.statements``) are fixed, parameterized ``UNWIND … MERGE`` statements, idempotent and
order independent, so the sink is at-least-once without harm: offsets are committed only after the Neo4j transaction
committed, and a batch repeated after a crash changes nothing. Neo4j unavailable → back off and retry the same batch
(nothing is skipped). A record that can never be written — it does not decode, or the database rejects its
statements — goes to the DLQ with the reason; the rest of its batch is written.

Pipelined: while batch N's transaction runs in a writer thread, the main thread polls batch N+1, decodes
it and builds its statements; it then waits for N, stores N's offsets and commits them, and hands N+1 to the writer.
At most one batch is in flight and one prepared (two batches of memory); the consumer stores offsets only for
written batches (``enable.auto.offset.store`` off), so a commit never covers a batch still in flight, and a
rebalance that takes partitions away first waits for the write in flight and commits it.

After a bulk rebuild (``replay.bulk``) the graph holds the raw offsets its import covers (``graph.coverage``): each
write's transaction first reads them, and a batch filtered with other ones is filtered again before it is written,
so the sink leaves out exactly the records the import holds.

The sink remembers the rows it wrote (``graph.known``) and leaves out of a batch those that would not change the
graph: on a steady stream, most of what a job's next run repeats. The memory is about one graph epoch
(``graph.epoch``): each write's transaction reads the epoch first and last, and a wipe, repair or rebuild since
makes the sink forget and write the batch whole.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from neo4j.exceptions import DriverError, Neo4jError

from kafka_lineage.graph.batch import GraphBatch
from kafka_lineage.graph.coverage import NO_COVERAGE, Coverage, CoverageChanged
from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_statements
from kafka_lineage.graph.epoch import UNKNOWN, Epoch, EpochChanged
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.graph.neo4j_errors import is_record_fault
from kafka_lineage.graph.statements import statements
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer, commit_offsets, prepare_pipeline
from kafka_lineage.runtime.logs import problem
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.retry import Backoff, Stopped
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import FacetCache, record_to_event
from kafka_lineage.schemas.wire import AvroCodec, RegistryUnavailable, WireFormatError
from kafka_lineage.sinks.consumer import LAG_SECONDS, SinkMember, batch_offsets, consume_batch, throttled
from kafka_lineage.sinks.graph.settings import SinkSettings

log = logging.getLogger(__name__)
STAGE = "graph-sink"


@dataclass(slots=True)
class _Prepared:
    """A polled batch, decoded and turned into statements: what the writer thread needs, and what to commit after."""

    messages: list[Message]
    offsets: dict[tuple[str, int], int]  # what commits the batch (``batch_offsets``, taken right after its poll)
    records: list[tuple[Message, dict[str, Any], dict[str, Any]]]  # every decodable one: message, event, processing
    coverage: Coverage = NO_COVERAGE  # the graph's rebuild coverage the batch was filtered with
    decoded: list[tuple[Message, dict[str, Any]]] = field(default_factory=list)  # the records it leaves
    batch: GraphBatch = field(default_factory=GraphBatch)  # their rows
    sent: GraphBatch = field(default_factory=GraphBatch)  # the rows that change the graph: what ``work`` writes
    epoch: Epoch = UNKNOWN  # the graph epoch the rows known in it were left out for
    work: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    produced: list[datetime] = field(default_factory=list)
    covered: int = 0  # records left out: the rebuild's import holds them

    def filter(self, coverage: Coverage, known: KnownRows) -> None:
        """Leave out what ``coverage`` holds; build the statements of the rest, without the rows ``known`` says
        the graph holds."""
        self.coverage, self.decoded, self.produced = coverage, [], []
        for message, event, processing in self.records:
            if not coverage.covers(processing):
                self.decoded.append((message, event))
                if processing.get("producedAt") is not None:
                    self.produced.append(processing["producedAt"])
        self.covered = len(self.records) - len(self.decoded)
        self.batch = (graph_batch([event for _, event in self.decoded], schema_field_rows=False) if self.decoded
                      else GraphBatch())
        self.plan(known)

    def plan(self, known: KnownRows) -> None:
        """The statements of the batch's rows that ``known`` does not say the graph holds."""
        self.epoch = known.epoch
        self.sent = known.changes(self.batch)
        self.work = statements(self.sent) if self.decoded else []


class GraphSink:
    def __init__(self, clients: ClientSettings, settings: SinkSettings, metrics: Metrics | None = None) -> None:
        self.clients = clients
        self.settings = settings
        self.metrics = metrics or Metrics(process_metrics=False)
        prepare_pipeline(clients, settings.partitions)
        self.driver = driver_for(clients)
        registry_client = SchemaRegistryClient(clients.registry_config())
        self.codec = AvroCodec("normalized_event", registry.schema_fetcher(registry_client))
        self.dead_codec = AvroCodec("dead_letter", registry.schema_fetcher(registry_client))
        self.dead_letter_id = registry.registered_id(registry_client, clients.dlq_topic, "dead_letter")
        self.dlq = AckingProducer(clients.kafka_config())
        # offsets are stored by hand once their batch is in Neo4j: the next batch is polled while one is written
        self.member = SinkMember(clients, settings.group_id, clients.normalized_topic,
                                 {"enable.auto.offset.store": False})
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graph-writer")
        self._in_flight: tuple[Future[None], _Prepared] | None = None
        self._stop = threading.Event()
        self.written = self.dead = self.covered = 0
        self.written_since_coverage = 0  # into the graph as it is since its rebuild coverage was last read
        # the graph's rebuild coverage as last read (the writer thread reads it again when the graph says it changed)
        self.coverage = NO_COVERAGE
        self._dead_count = threading.Lock()  # the main thread dead-letters undecodable records, the writer refused ones
        self.neo4j_problem: str | None = None  # why the last write failed, while it is the environment's fault
        self._backoff = Backoff()  # waits for Neo4j, from the first failure of a write on
        self.facets = FacetCache()  # every run of a job repeats its datasets' schema facets: parse each text once
        self.known = KnownRows(settings.known_rows)  # rows the graph holds: a batch sends only what changes it

    def run(self, stop: threading.Event) -> None:
        self._stop = stop
        self.member.subscribe(on_revoke=self._on_revoke)
        print(f"graph sink ready: {self.clients.normalized_topic} → {self.clients.neo4j_uri}", flush=True)
        report = throttled(self.settings.report_seconds,
                           lambda: log.info("graph sink: %d events written, %d dead letters, %d held by a rebuild "
                                            "already, %d rows the graph held left out", self.written, self.dead,
                                            self.covered, self.known.left_out))
        try:
            self._with_retry(lambda: ensure_constraints(self.driver), stop)  # Neo4j may refuse us until fixed
            self._loop(stop, report)
        except Stopped:
            log.info("graph sink: stopped while waiting for Neo4j; the unwritten batch is read again at the next start")
        finally:
            try:
                self._finish()  # the batch in flight: written (or given up on stop) before leaving
            except Stopped:
                log.info("graph sink: stopped while waiting for Neo4j; the unwritten batch is read again")
            finally:
                self._writer.shutdown(wait=True)
                self.member.consumer.close()  # leaves the group; uncommitted records go to the next member
            self.dlq.close()
            self.driver.close()
            since = (f"; {self.written_since_coverage} written since the graph's rebuild {self.coverage.rebuild}"
                     if self.coverage.rebuild else "")
            print(f"graph sink stopped: {self.written} events written, {self.dead} dead letters, {self.covered} "
                  f"held by a rebuild already{since}; {self.known.left_out} rows the graph held left out", flush=True)

    def _loop(self, stop: threading.Event, every: Callable[[], None]) -> None:
        """Poll, prepare and write until ``stop``; a batch's offsets are committed once its transaction committed."""
        update_lag = throttled(LAG_SECONDS, lambda: self.metrics.update_lag(STAGE, self.member.consumer))
        while not stop.is_set():
            update_lag()
            messages = consume_batch(self.member.consumer, self.settings.batch_size, self.settings.poll_seconds,
                                     STAGE)
            offsets = batch_offsets(self.member.consumer, messages) if messages else {}
            prepared = self._prepare(messages, offsets, stop) if messages else None  # while the batch before is written
            self._finish()
            if prepared is not None:
                if prepared.records:  # also when the coverage leaves none: the write checks it is the graph's
                    self._in_flight = (self._writer.submit(self._write_prepared, prepared, stop), prepared)
                else:  # every record dead-lettered: nothing to write, commit them now
                    self._commit(prepared)
                self.member.watch.busy()
            else:  # nothing polled and nothing in flight: positions are all written; a new consumer loses nothing
                self.member.commit_idle_positions(STAGE)
                self.member.check(STAGE)
            every()

    def _finish(self) -> None:
        """Wait for the batch in flight, then commit its offsets."""
        if self._in_flight is None:
            return
        future, prepared = self._in_flight
        self._in_flight = None
        future.result()  # the write's own failure (Stopped, a bug) surfaces here
        self._commit(prepared)

    def _commit(self, prepared: _Prepared) -> None:
        """Store the batch's offsets, taken at its poll, and commit what is stored (a commit of positions now would
        cover the batch polled since, not yet written)."""
        try:
            self.member.consumer.store_offsets(offsets=[TopicPartition(topic, partition, offset) for
                                                        (topic, partition), offset in prepared.offsets.items()])
        except KafkaException as exc:  # partitions no longer ours: their next owner reads the batch again
            log.warning("%s: offsets not stored (%s); the batch will be delivered again", STAGE, exc)
            return
        commit_offsets(self.member.consumer, self._stop, log, STAGE)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions leave this member: the batch in flight is written and committed while they are still ours."""
        self._finish()

    def _prepare(self, messages: list[Message], offsets: dict[tuple[str, int], int], stop: threading.Event
                 ) -> _Prepared:
        """Decode a batch (undecodable records to the DLQ) and build its statements."""
        self.metrics.events_in(STAGE, len(messages))
        self.metrics.batch(STAGE, len(messages))
        records: list[tuple[Message, dict[str, Any], dict[str, Any]]] = []
        for message in messages:
            try:
                record = self._decode(message, stop)
                records.append((message, record_to_event(record["event"], self.facets), record["processing"]))
            except (WireFormatError, ValueError, TypeError, KeyError) as exc:
                reason = exc.error_class if isinstance(exc, WireFormatError) else "undecodable"
                self._dead([(message, reason, str(exc))])
        prepared = _Prepared(messages, offsets, records)
        prepared.filter(self.coverage, self.known)
        return prepared

    def _write_prepared(self, prepared: _Prepared, stop: threading.Event) -> None:
        """The writer thread: the batch, filtered again whenever the graph's rebuild coverage or epoch is not the one
        it was filtered with (checked in the write's own transaction: a rebuild replaced the graph meanwhile, or a
        wipe or repair deleted from it)."""
        while True:
            try:
                self._write_filtered(prepared, stop)
                with self._dead_count:
                    self.covered += prepared.covered
                return
            except CoverageChanged as changed:
                log.info("graph sink: the graph was rebuilt (coverage %s of %s, %d partitions); records its import "
                         "holds are left out", changed.coverage.rebuild, changed.coverage.topic,
                         len(changed.coverage.ends))
                self.coverage, self.written_since_coverage = changed.coverage, 0
                # the epoch was checked first in the same transaction: what the sink knows still holds
                prepared.filter(changed.coverage, self.known)
            except EpochChanged as changed:
                if self.known.epoch.id is not None:
                    log.info("graph sink: %s; rows written before are written again", changed)
                self.known.reset(changed.epoch)
                prepared.plan(self.known)

    def _write_filtered(self, prepared: _Prepared, stop: threading.Event) -> None:
        """One transaction for the batch; refused → record by record, the refused to the DLQ."""
        decoded, produced, coverage = prepared.decoded, prepared.produced, prepared.coverage
        while True:
            try:
                with self.metrics.neo4j_timer():
                    self._with_retry(lambda: write_statements(self.driver, prepared.work, coverage, prepared.epoch),
                                     stop)
                self.known.learn(prepared.sent, prepared.epoch)
                self._written(len(decoded), produced)
                return
            except Neo4jError as exc:  # refused for a record it carries: find which one(s)
                log.warning("batch of %d rejected by Neo4j (%s); writing its records one by one", len(decoded), exc)
            failures = []
            for message, event in decoded:
                try:
                    self._with_retry(lambda event=event: write_statements(
                        self.driver, statements(graph_batch([event])), coverage), stop)
                    self._written(1, [])
                except Neo4jError as single:
                    failures.append((message, "neo4j-rejected", f"{single.code}: {single.message}"))
            if len(decoded) <= 1 or len(failures) < len(decoded):
                self._dead(failures)
                return
            # Every record refused on its own: the statements are fixed and the events were validated, so this is
            # the database (an unknown code, a broken procedure), not 50 bad records. Wait and write it again.
            self._wait_for_neo4j(RuntimeError(f"all {len(decoded)} records of the batch refused: {failures[0][2]}"),
                                 stop, "every record of a batch refused by Neo4j")

    def _written(self, count: int, produced: list[datetime]) -> None:
        self.written += count
        self.written_since_coverage += count
        self.metrics.events_out(STAGE, count)
        committed = time.time()
        for moment in produced:  # event produced (raw topic timestamp) → in the graph
            self.metrics.latency_since("graph", moment.timestamp(), committed)
        self.metrics.seen(STAGE)

    def _decode(self, message: Message, stop: threading.Event) -> dict[str, Any]:
        backoff = Backoff()
        while True:
            try:
                return self.codec.decode(message.value())
            except RegistryUnavailable as exc:  # not the record's fault: wait for the registry
                problem(log, "schema registry unavailable", "check SCHEMA_REGISTRY_URL and that the registry runs",
                        error=exc, retry_in=backoff.delay, stage=STAGE)
                backoff.wait(stop)

    def _with_retry(self, write: Callable[[], None], stop: threading.Event) -> None:
        """Write, waiting out every error of the environment (Neo4j unreachable, credentials, permissions, a
        read-only or full database: ``neo4j_errors``); only a record's own fault is raised, to be dead-lettered."""
        self._backoff.reset()
        while True:
            try:
                write()
                self.neo4j_problem = None
                return
            except (Neo4jError, DriverError, OSError) as exc:
                if is_record_fault(exc):
                    raise
                self._wait_for_neo4j(exc, stop, "Neo4j cannot take writes, the batch waits")

    def _wait_for_neo4j(self, exc: Exception, stop: threading.Event, what: str) -> None:
        """Not ready until a write succeeds again; the wait ends at once on ``stop`` (nothing committed)."""
        self.neo4j_problem = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
        problem(log, what, "check NEO4J_URI, the credentials and the database's state (`lineage stack status`); "
                "nothing is skipped or dead-lettered", error=exc, retry_in=self._backoff.delay, stage=STAGE)
        self._backoff.wait(stop)

    def check_writable(self) -> None:
        """The readiness check: raises while the last write failed for a reason of the environment."""
        if self.neo4j_problem is not None:
            raise RuntimeError(f"Neo4j refuses writes: {self.neo4j_problem}")

    def _dead(self, failures: list[tuple[Message, str, str]]) -> None:
        records = []
        for message, error_class, reason in failures:
            self.metrics.dead_letter(STAGE, error_class)
            problem(log, f"dead letter {error_class}: {reason}", "the record is on the DLQ: `lineage dlq tail`",
                    stage=STAGE, topic=message.topic(), partition=message.partition(), offset=message.offset())
            records.append((message.key(), self.dead_codec.encode(dead_letter(
                stage=STAGE, error_class=error_class, error_message=reason, key=message.key(), value=message.value(),
                headers=message.headers() or (), source_topic=message.topic(), source_partition=message.partition(),
                source_offset=message.offset()), self.dead_letter_id)))
        self.dlq.send(self.clients.dlq_topic, records).result(600)  # acknowledged before the offset is committed
        with self._dead_count:
            self.dead += len(failures)
