"""The sinks' consumer loop: one member of the sink's group reads the normalized topic in batches, hands each batch
to the sink, and commits its offsets only after the sink is done with it (at-least-once; the sinks are idempotent).
A stop while a batch waits (``Stopped``) leaves the batch uncommitted for the next start."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import commit_offsets
from kafka_lineage.runtime.logs import problem
from kafka_lineage.runtime.metrics import Metrics

log = logging.getLogger(__name__)
LAG_SECONDS = 5.0  # the lag gauge needs broker round trips: not every batch


def sink_consumer(clients: ClientSettings, group_id: str, extra: Mapping[str, Any] | None = None) -> Consumer:
    """A member of ``group_id`` that commits by hand and reads committed records only; ``extra``: further consumer
    settings (the graph sink stores the offsets it wrote itself)."""
    return Consumer(clients.kafka_config({
        "group.id": group_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": "10000", **(extra or {}),
    }))


def consume_batch(consumer: Consumer, size: int, timeout: float, stage: str) -> list[Message]:
    """Up to ``size`` records; errors the consumer reports are logged (a partition's end is not one)."""
    messages = []
    for message in consumer.consume(size, timeout):
        error = message.error()
        if error is None:
            messages.append(message)
        elif error.code() != KafkaError._PARTITION_EOF:
            problem(log, f"Kafka consumer error: {error}", "check the broker and the topic", stage=stage)
    return messages


def consume_loop(consumer: Consumer, stop: threading.Event, handle: Callable[[list[Message]], None], *,
                 stage: str, metrics: Metrics, batch_size: int, poll_seconds: float,
                 every: Callable[[], None] | None = None) -> None:
    """Batches to ``handle`` until ``stop``, each committed after it was handled; ``every`` runs after each poll."""
    last_lag = time.monotonic()
    while not stop.is_set():
        if time.monotonic() - last_lag >= LAG_SECONDS:
            last_lag = time.monotonic()
            metrics.update_lag(stage, consumer)
        messages = consume_batch(consumer, batch_size, poll_seconds, stage)
        if messages:
            handle(messages)
            commit_offsets(consumer, stop, log, stage)
        if every is not None:
            every()
