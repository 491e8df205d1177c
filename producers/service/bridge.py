"""``lineage bridge``: events from OpenLineage's own Kafka transport (JSON on a topic) onto the events topic as Avro.

Jobs that already emit with the official Kafka transport (openlineage-python's ``KafkaTransport``, the Java client's
``KafkaTransport``: one JSON event per record) switch to this pipeline without touching them: the bridge consumes
their topic and republishes each event exactly as the collector would (validated, Avro through the registry, keyed
by the root job's run). Nothing is dropped silently: a record that is not JSON, not a valid event or too large for
the events topic becomes a dead letter (original bytes, topic/partition/offset, reason).

Delivery: a batch's records are produced by an idempotent producer (acks=all), the dead letters likewise, and only
once Kafka has acknowledged both is the batch's offset committed. A crash in between sends the batch again on
restart, and the processor's dedupe (event id) removes the repeats: each source record lands once in the graph.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.producers.service.intake import Refusal, encode_or_refuse, message_max_bytes, strict_json
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.retry import Backoff, Stopped
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.wire import AvroCodec

log = logging.getLogger(__name__)
STAGE = "bridge"
BATCH = 500
ACK_TIMEOUT = 60.0


class Encoder(Protocol):
    def encode(self, event: Any) -> tuple[bytes, bytes]: ...


@dataclass
class Batch:
    """One poll's records sorted out: what to publish, what to dead-letter (with the reason), the offsets to commit."""

    records: list[tuple[bytes, bytes]] = field(default_factory=list)
    letters: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) → next offset


# dead-letter classes by refusal kind
_ERROR_CLASS = {"invalid": "invalid-event", "unencodable": "invalid-event", "too_large": "too-large"}


def sort_out(messages: Sequence[Message], encoder: Encoder, max_record_bytes: int) -> Batch:
    """Each message as an events-topic record or a dead letter. Raises PublishError when the registry cannot be
    asked: nothing of the batch is decided then (retry it whole)."""
    batch = Batch()
    for message in messages:
        batch.offsets[(message.topic(), message.partition())] = message.offset() + 1
        try:
            outcome = encode_or_refuse(encoder.encode, strict_json(message.value() or b""), max_record_bytes)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NotJSON
            reason, error_class = f"not JSON: {exc}", "not-json"
        else:
            if not isinstance(outcome, Refusal):
                batch.records.append(outcome)
                continue
            reason, error_class = outcome.reason, _ERROR_CLASS[outcome.kind]
        batch.letters.append((message.key(), dead_letter(
            stage=STAGE, error_class=error_class, error_message=reason, key=message.key(), value=message.value(),
            headers=message.headers() or (), source_topic=message.topic(), source_partition=message.partition(),
            source_offset=message.offset())))
    return batch


class Bridge:
    def __init__(self, clients: ClientSettings, source_topic: str, group: str,
                 publisher: EventPublisher | None = None, metrics: Metrics | None = None) -> None:
        self.clients, self.source_topic = clients, source_topic
        self.metrics = metrics or Metrics(process_metrics=False)
        self.publisher = publisher or EventPublisher.from_settings(clients)
        self.consumer = Consumer(clients.kafka_config({
            "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed", "enable.partition.eof": True}))
        self._assigned: set[tuple[str, int]] = set()
        self._at_end: set[tuple[str, int]] = set()  # assigned partitions read to their end
        self.dlq = AckingProducer(clients.kafka_config())
        registry_client = SchemaRegistryClient(clients.registry_config())
        self._dead_letter_id = registry.registered_id(registry_client, clients.dlq_topic, "dead_letter")
        self._dead_letter_codec = AvroCodec("dead_letter", registry.schema_fetcher(registry_client))
        self.max_record_bytes = message_max_bytes()
        self.published = self.dead_lettered = 0

    def run(self, stop: threading.Event, idle: Callable[[], None] | None = None) -> None:
        """Bridge until ``stop`` is set; a batch in hand is finished (published and committed) first. ``idle`` is
        called whenever every assigned partition has been read to its end (``--once`` stops there)."""
        self.consumer.subscribe([self.source_topic], on_assign=self._on_assign)
        try:
            while not stop.is_set():
                messages = [m for m in self.consumer.consume(BATCH, timeout=1.0) if not self._skipped(m)]
                if not messages:
                    if idle is not None and self._assigned and self._assigned <= self._at_end:
                        idle()
                    continue
                self._bridge(messages, stop)
        except Stopped:
            pass
        finally:
            self.consumer.close()
            self.publisher.close()
            self.dlq.close()

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned = {(p.topic, p.partition) for p in partitions}
        self._at_end &= self._assigned

    def _skipped(self, message: Message) -> bool:
        """An error or end-of-partition notice rather than a record (end of partition noted for ``idle``)."""
        where = (message.topic(), message.partition())
        error = message.error()
        if error is None:
            self._at_end.discard(where)
            return False
        if error.code() == KafkaError._PARTITION_EOF:
            self._at_end.add(where)
        else:
            log.warning("reading %s: %s", self.source_topic, error)
        return True

    def _bridge(self, messages: list[Message], stop: threading.Event) -> None:
        """Publish one batch and commit its offsets, retrying (with backoff) until Kafka and the registry take it:
        the offsets move only past records that were published or dead-lettered."""
        backoff = Backoff()
        while True:
            try:
                batch = sort_out(messages, self.publisher, self.max_record_bytes)
                sent = self.publisher.send(batch.records) if batch.records else None
                letters = self.dlq.send(self.clients.dlq_topic, [
                    (key, self._dead_letter_codec.encode(letter, self._dead_letter_id))
                    for key, letter in batch.letters]) if batch.letters else None
                for future in (sent, letters):
                    if future is not None:
                        future.result(ACK_TIMEOUT)
            except (PublishError, TimeoutError, OSError) as exc:
                log.warning("bridging %d records failed (%s); retrying in %.1f s", len(messages), exc, backoff.delay)
                backoff.wait(stop)
                continue
            try:
                self.consumer.commit(offsets=[TopicPartition(topic, partition, offset)
                                              for (topic, partition), offset in batch.offsets.items()],
                                     asynchronous=False)
            except KafkaException as exc:  # e.g. the partitions moved to another bridge: it reads them again
                log.warning("committing the offsets of %d published records failed (%s): they will be read and "
                            "published again, and deduplicated downstream", len(messages), exc)
            self.published += len(batch.records)
            self.dead_lettered += len(batch.letters)
            self.metrics.events_in(STAGE, len(messages))
            self.metrics.events_out(STAGE, len(batch.records))
            for _key, letter in batch.letters:
                self.metrics.dead_letter(STAGE, letter["errorClass"])
            self.metrics.seen(STAGE)
            return
