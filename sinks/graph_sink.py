"""Neo4j graph sink (``lineage sink``): normalized events → the lineage graph, one transaction per batch.

The graph statements are ``graph_model``'s fixed, parameterized ``UNWIND … MERGE`` statements, idempotent and order
independent, so the sink is at-least-once without harm: offsets are committed only after the Neo4j transaction
committed, and a batch repeated after a crash changes nothing. Neo4j unavailable → back off and retry the same batch
(nothing is skipped). A record that can never be written — it does not decode, or the database rejects its
statements — goes to the DLQ with the reason; the rest of its batch is written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, Message
from confluent_kafka.schema_registry import SchemaRegistryClient
from kafka_lineage.config import ClientSettings, SinkSettings
from kafka_lineage.kafka_io import AckingProducer, commit_offsets, prepare_pipeline
from kafka_lineage.logs import problem
from kafka_lineage.metrics import Metrics
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.openlineage import FacetCache, record_to_event
from kafka_lineage.schemas.wire import AvroCodec, RegistryUnavailable, WireFormatError
from kafka_lineage.sinks.graph_model import CONSTRAINTS, FINGERPRINT_QUERIES, fingerprint, graph_batch, statements
from neo4j import Driver, GraphDatabase
from neo4j.exceptions import ClientError, DatabaseError, DriverError, Neo4jError

log = logging.getLogger(__name__)
STAGE = "graph-sink"


def driver_for(clients: ClientSettings, **options: Any) -> Driver:
    """The pipeline's Neo4j driver; ``options``: further driver settings (timeouts)."""
    # Notifications off: the server otherwise warns about every label a query names before the graph has one.
    return GraphDatabase.driver(clients.neo4j_uri, auth=(clients.neo4j_user, clients.neo4j_password),
                                notifications_min_severity="OFF", **options)


def ensure_constraints(driver: Driver) -> None:
    with driver.session() as session:
        for statement in CONSTRAINTS:
            session.run(statement).consume()


def graph_fingerprint(driver: Driver) -> str:
    """Canonical hash of every node and relationship with its identity (``lineage graph fingerprint``)."""
    with driver.session() as session:
        rows = {name: [record.data() for record in session.run(query)] for name, query in FINGERPRINT_QUERIES.items()}
    return fingerprint(rows)


def write_events(driver: Driver, events: list[dict[str, Any]]) -> None:
    """All statements of one batch in one write transaction (retried by the driver on transient errors)."""
    write_statements(driver, statements(graph_batch(events)))


def write_statements(driver: Driver, work: list[tuple[str, dict[str, Any]]]) -> None:
    """Run prepared ``graph_model.statements`` in one write transaction (a thread may do this while the caller
    prepares the next batch: the driver waits on the socket without holding the GIL)."""

    def transaction(tx: Any) -> None:
        for query, parameters in work:
            tx.run(query, parameters).consume()

    with driver.session() as session:
        session.execute_write(transaction)


class GraphSink:
    def __init__(self, clients: ClientSettings, settings: SinkSettings,
                 sleep: Callable[[float], None] = time.sleep, metrics: Metrics | None = None) -> None:
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
        self.consumer = Consumer(clients.kafka_config({
            "group.id": settings.group_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "session.timeout.ms": "10000",
        }))
        self.sleep = sleep
        self.written = self.dead = 0
        self.facets = FacetCache()  # every run of a job repeats its datasets' schema facets: parse each text once

    def run(self, stop: threading.Event) -> None:
        ensure_constraints(self.driver)
        self.consumer.subscribe([self.clients.normalized_topic])
        print(f"graph sink ready: {self.clients.normalized_topic} → {self.clients.neo4j_uri}", flush=True)
        last_report = last_lag = time.monotonic()
        try:
            while not stop.is_set():
                messages = [m for m in self.consumer.consume(self.settings.batch_size, self.settings.poll_seconds)
                            if m.error() is None]
                if messages:
                    self._write_batch(messages, stop)
                    commit_offsets(self.consumer, stop, log, STAGE)  # only after the graph transaction committed
                if time.monotonic() - last_lag >= 5.0:  # lag needs broker round trips: not every batch
                    last_lag = time.monotonic()
                    self.metrics.update_lag(STAGE, self.consumer)
                if time.monotonic() - last_report >= self.settings.report_seconds:
                    last_report = time.monotonic()
                    log.info("graph sink: %d events written, %d dead letters", self.written, self.dead)
        finally:
            self.consumer.close()  # leaves the group; uncommitted records go to the next member
            self.dlq.close()
            self.driver.close()
            print(f"graph sink stopped: {self.written} events written, {self.dead} dead letters", flush=True)

    def _write_batch(self, messages: list[Message], stop: threading.Event) -> None:
        self.metrics.events_in(STAGE, len(messages))
        self.metrics.batch(STAGE, len(messages))
        decoded: list[tuple[Message, dict[str, Any]]] = []
        produced: list[datetime] = []
        for message in messages:
            try:
                record = self._decode(message, stop)
                decoded.append((message, record_to_event(record["event"], self.facets)))
                if record["processing"].get("producedAt") is not None:
                    produced.append(record["processing"]["producedAt"])
            except (WireFormatError, ValueError, TypeError, KeyError) as exc:
                reason = exc.error_class if isinstance(exc, WireFormatError) else "undecodable"
                self._dead([(message, reason, str(exc))])
        if not decoded:
            return
        try:
            with self.metrics.neo4j_timer():
                self._with_retry(lambda: write_events(self.driver, [event for _, event in decoded]), stop)
            self.written += len(decoded)
            self.metrics.events_out(STAGE, len(decoded))
            committed = time.time()
            for moment in produced:  # event produced (raw topic timestamp) → in the graph
                self.metrics.latency_since("graph", moment.timestamp(), committed)
            self.metrics.seen(STAGE)
        except (ClientError, DatabaseError) as exc:  # the database refuses the batch: find the record(s) it refuses
            log.warning("batch of %d rejected by Neo4j (%s); writing its records one by one", len(decoded), exc)
            for message, event in decoded:
                try:
                    self._with_retry(lambda event=event: write_events(self.driver, [event]), stop)
                    self.written += 1
                    self.metrics.events_out(STAGE)
                except (ClientError, DatabaseError) as single:
                    self._dead([(message, "neo4j-rejected", f"{single.code}: {single.message}")])

    def _decode(self, message: Message, stop: threading.Event) -> dict[str, Any]:
        delay = 0.5
        while True:
            try:
                return self.codec.decode(message.value())
            except RegistryUnavailable as exc:  # not the record's fault: wait for the registry
                if stop.is_set():
                    raise
                problem(log, "schema registry unavailable", "check SCHEMA_REGISTRY_URL and that the registry runs",
                        error=exc, retry_in=delay, stage=STAGE)
                self.sleep(delay)
                delay = min(delay * 2, 30.0)

    def _with_retry(self, write: Callable[[], None], stop: threading.Event) -> None:
        """Retry while Neo4j is unreachable (the driver already retried transient errors within the transaction)."""
        delay = 0.5
        while True:
            try:
                write()
                return
            except (ClientError, DatabaseError):
                raise
            except (Neo4jError, DriverError, OSError) as exc:  # ServiceUnavailable, SessionExpired, reset …
                if stop.is_set():
                    raise
                problem(log, "Neo4j unavailable, the batch waits", "check NEO4J_URI and that Neo4j runs "
                        "(`lineage stack status`); nothing is skipped", error=exc, retry_in=delay, stage=STAGE)
                self.sleep(delay)
                delay = min(delay * 2, 30.0)

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
        self.dead += len(failures)
