"""openlineage-python Transport that publishes events to Kafka as Avro through a Schema Registry.

Select it in openlineage.yml (or OPENLINEAGE_CONFIG) by class path, no code changes in the integration::

    transport:
      type: kafka_lineage.producers.client.kafka_avro_transport.KafkaAvroTransport
      topic: openlineage.events                      # default
      config: {bootstrap.servers: 127.0.0.1:9092}    # Confluent producer settings (SASL/SSL pass through)
      schema_registry: {url: http://127.0.0.1:8081/apis/ccompat/v7}

The job's thread only puts the event on a bounded queue (``emit`` never blocks and never raises on broker
trouble); a daemon thread converts, validates, serializes and produces with an idempotent producer (acks=all).
When the queue is full the event is counted as dropped and logged. ``close`` (also run at interpreter exit)
flushes and reports how many events could not be delivered.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
from typing import Any

import attr
from confluent_kafka import KafkaError, Message
from openlineage.client.transport.transport import Config, Transport

from kafka_lineage.producers.client.client_events import event_dict
from kafka_lineage.producers.client.publisher import KNOWN_GOOD_EVENT, EventPublisher, PublishError
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.metrics import Metrics, serve_http
from kafka_lineage.runtime.retry import Backoff
from kafka_lineage.schemas.openlineage import InvalidEvent

log = logging.getLogger(__name__)

_STOP = object()

@attr.define
class KafkaAvroConfig(Config):
    config: dict[str, str] = attr.field(factory=dict)
    schema_registry: dict[str, str] = attr.field(factory=dict)
    topic: str = "openlineage.events"
    queue_size: int = 10_000
    flush_timeout: float = 30.0
    metrics_port: int | None = None  # serve /metrics (queue depth, undelivered events) on 127.0.0.1; 0 = any port

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> KafkaAvroConfig:
        """Unset connection settings fall back to the standard environment variables (KAFKA_BOOTSTRAP_SERVERS,
        SCHEMA_REGISTRY_URL, KAFKA_SECURITY_PROTOCOL, …); inside a user's job nothing else is read (no YAML file, no
        secret files)."""
        return cls.from_settings(ClientSettings.from_values(os.environ, neo4j=False), params)

    @classmethod
    def from_settings(cls, settings: ClientSettings, params: dict[str, Any] | None = None) -> KafkaAvroConfig:
        """The transport to the pipeline ``settings`` describe; ``params`` (openlineage.yml's) take precedence."""
        params = params or {}
        given = {str(k): str(v) for k, v in (params.get("config") or {}).items()}
        # the environment's security settings apply only to the environment's cluster
        config = given if "bootstrap.servers" in given else {
            str(k): str(v) for k, v in settings.kafka_config(given).items()}
        registry = {str(k): str(v) for k, v in (params.get("schema_registry") or {}).items()}
        if "url" not in registry:
            registry = {**{k: str(v) for k, v in settings.registry_config().items() if k != "timeout"}, **registry}
        return cls(
            config=config,
            schema_registry=registry,
            topic=str(params.get("topic") or settings.events_topic),
            queue_size=int(params.get("queue_size", 10_000)),
            flush_timeout=float(params.get("flush_timeout", 30.0)),
            metrics_port=int(params["metrics_port"]) if params.get("metrics_port") is not None else None,
        )


class KafkaAvroTransport(Transport):
    kind = "kafka_lineage"
    config_class = KafkaAvroConfig

    def __init__(self, config: KafkaAvroConfig) -> None:
        self.config = config
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=config.queue_size)
        self._publisher = EventPublisher(config.config, config.schema_registry, config.topic)
        self.delivered = self.undelivered = self.dropped = self.invalid = 0
        self.metrics = Metrics(process_metrics=False)
        # The job's own process: an endpoint only when asked for (a Spark driver or Airflow worker has its own).
        self.endpoint = (serve_http("127.0.0.1", config.metrics_port, self.metrics)
                         if config.metrics_port is not None else None)
        self._lock = threading.Lock()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="openlineage-kafka-avro", daemon=True)
        self._worker.start()
        atexit.register(self.close)

    # --- the job's thread ------------------------------------------------------------------------------------------
    def emit(self, event: Any) -> None:
        if self._closed:
            self._count("dropped")
            log.warning("OpenLineage transport is closed; event dropped")
            return
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._count("dropped")
            log.warning("OpenLineage event queue is full (%d); event dropped (%d so far)", self.config.queue_size,
                        self.dropped)

    def close(self, timeout: float = -1) -> bool:
        """Deliver what is queued; True if every accepted event reached Kafka."""
        if not self._closed:
            self._closed = True
            wait = self.config.flush_timeout if timeout < 0 else timeout
            # If the worker is stuck (e.g. registry down) the queue may stay full; what it never took is counted below.
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=wait)
            self._worker.join(wait)
            remaining = self._publisher.close(wait)
            self._count("undelivered", remaining + self._take_unsent())
            if self.endpoint is not None:
                self.endpoint.close()
            if self.undelivered or self.dropped or self.invalid:
                log.warning("OpenLineage transport closed: %d delivered, %d undelivered, %d dropped, %d invalid",
                            self.delivered, self.undelivered, self.dropped, self.invalid)
        return self.undelivered == 0 and self.dropped == 0

    def _take_unsent(self) -> int:
        """Empty the queue and count the events in it (not the stop marker): accepted but never sent."""
        unsent = 0
        while True:
            try:
                unsent += self._queue.get_nowait() is not _STOP
            except queue.Empty:
                return unsent

    # --- the worker thread -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        # Look the subject's schema up now, off the job's thread: an event flushed by the exit hook then needs no
        # registry round trip while the interpreter is shutting down.
        try:
            self._encode_with_retry(KNOWN_GOOD_EVENT)
        except Exception:
            log.exception("OpenLineage transport could not prepare its Avro serializer")
        while True:
            item = self._queue.get()
            self.metrics.emitter_queue(self._queue.qsize())  # here, not on the job's thread: emit stays ~1 µs
            if item is _STOP:
                return
            try:
                self._publish(item)
            except Exception:  # never let one event kill the worker
                self._count("undelivered")
                log.exception("OpenLineage event could not be published")

    def _publish(self, item: Any) -> None:
        try:
            event = event_dict(item)
            key, value = self._encode_with_retry(event)
        except InvalidEvent as exc:
            self._count("invalid")
            log.error("OpenLineage event rejected: %s", exc)
            return
        except PublishError:  # closing while the registry is still unreachable
            raise
        except Exception:  # anything else is this event's problem: count it and go on with the next one
            self._count("invalid")
            log.exception("OpenLineage event could not be converted or validated; it is dropped")
            return
        self._publisher.produce(key, value, self._on_delivery)

    def _encode_with_retry(self, event: dict[str, Any]) -> tuple[bytes, bytes]:
        """Only an unreachable registry (PublishError) is retried: nothing else gets better by waiting."""
        backoff = Backoff(cap=10.0)
        while True:
            try:
                return self._publisher.encode(event)
            except PublishError as exc:  # registry unreachable: back off, keep the event
                if self._closed:
                    raise
                log.warning("schema registry unavailable (%s); retrying in %.1fs", exc, backoff.delay)
                backoff.wait()

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self._count("delivered")
        else:
            self._count("undelivered")
            log.error("OpenLineage event not delivered to Kafka: %s", error)

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)
        if name != "delivered" and amount:
            self.metrics.emitter_undelivered(amount)
