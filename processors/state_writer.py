"""The tables' changelog writes through librdkafka instead of Faust's aiokafka producer.

A worker writes one dedupe entry per accepted event; through ``table[key] = value`` each took Faust's per-message
path (a ``FutureMessage``, the producer buffer, aiokafka's Python batching and sender task, a callback per record):
~17% of a worker's CPU on realistic events (ARCHITECTURE 62). Here the same records -- key and value serialized by
the table's own changelog topic, to the partition the shell chose -- go to the changelog topic through the
librdkafka producer that already writes the outputs, and the table's local data is updated directly (what
``Table.__setitem__`` does besides sending; a memory store keeps no persisted offsets). Recovery reads the same
records from the same topics, so a restarted or moved worker sees exactly what it saw before.

The shell sends a batch's writes only after its outputs were acknowledged and awaits their acknowledgement before
the batch counts as done (Faust commits its input offsets only then): the order and the guarantee of the Faust
path, with a failed delivery failing the batch (the worker exits without committing it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import faust
from confluent_kafka import KafkaError, Message

from kafka_lineage.runtime.kafka_io import AckingProducer, PublishError


class ChangelogWriter:
    """Stages table writes (local data at once, changelog records kept) and sends them as one acknowledged batch."""

    def __init__(self, producer: AckingProducer) -> None:
        self.producer = producer
        self._staged: list[tuple[str, int, bytes | None, bytes | None]] = []
        # per table: its changelog topic's name and serializers, looked up once
        self._tables: dict[int, tuple[str, Callable[[Any], bytes | None], Callable[[Any], bytes | None]]] = {}

    def write(self, table: faust.Table, key: Any, partition: int, value: Any) -> None:
        """Set (or, ``value`` None, delete) ``key`` in ``table``; its changelog record is staged for ``send``."""
        topic, dump_key, dump_value = self._serializers(table)
        if value is None:
            table.data.pop(key, None)
            record = None  # a tombstone, as Faust writes a deleted key (value None, raw)
        else:
            table.data[key] = value
            record = dump_value(value)
        self._staged.append((topic, partition, dump_key(key), record))

    def staged(self) -> int:
        return len(self._staged)

    def send(self) -> Future[int]:
        """Produce every staged record; the future gives their count once Kafka acknowledged all of them, or a
        ``PublishError`` for the first one it refused (the batch must then not count as done)."""
        staged, self._staged = self._staged, []
        done: Future[int] = Future()
        if self.producer.failure is not None:
            done.set_exception(self.producer.failure)
            return done
        if not staged:
            done.set_result(0)
            return done
        pending = [len(staged)]
        lock = threading.Lock()

        def on_delivery(error: KafkaError | None, _message: Message) -> None:  # in librdkafka's poll thread
            with lock:
                pending[0] -= 1
                finished = pending[0] == 0
            if error is not None:
                if not done.done():
                    done.set_exception(PublishError(f"Kafka did not acknowledge a state record: {error.str()}"))
            elif finished and not done.done():
                done.set_result(len(staged))

        produce, poll = self.producer.producer.produce, self.producer.producer.poll
        for topic, partition, key, value in staged:
            while True:
                try:
                    produce(topic, value, key, partition, on_delivery)
                    break
                except BufferError:  # the local queue is full: wait for deliveries to free room (as for outputs)
                    poll(0.05)
        return done

    def _serializers(self, table: faust.Table) -> tuple[str, Callable[[Any], bytes | None],
                                                          Callable[[Any], bytes | None]]:
        found = self._tables.get(id(table))
        if found is None:
            changelog = table.changelog_topic
            key_serializer, value_serializer = table.key_serializer, table.value_serializer
            found = self._tables[id(table)] = (
                changelog.get_topic_name(),
                lambda key: changelog.prepare_key(key, key_serializer)[0],
                lambda value: changelog.prepare_value(value, value_serializer)[0])
        return found
