"""Reading an Avro topic's latest records: ``lineage alerts tail`` and ``lineage dlq tail``, the alert sink's recent
alerts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import OFFSET_END, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import partitions_of, reading_consumer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec, WireFormatError

log = logging.getLogger(__name__)
# (partition, offset, why it does not decode)
UnreadableHandler = Callable[[int, int, WireFormatError], None]


def tail(clients: ClientSettings, topic: str, schema: str, last: int, follow: bool,
         on_unreadable: UnreadableHandler | None = None, stop: threading.Event | None = None
         ) -> Iterator[dict[str, Any]]:
    """The last ``last`` records of every partition, oldest first per partition; then new ones if ``follow``
    (until ``stop`` is set).

    A record that is not framed Avro of ``schema`` raises WireFormatError, unless ``on_unreadable`` is given: then
    it is told about the record, and the records after it are read on (a topic anyone can produce to may hold
    anything)."""
    codec = AvroCodec(schema, registry.schema_fetcher(SchemaRegistryClient(clients.registry_config())))
    consumer = reading_consumer(clients, "tail")
    try:
        partitions, ends = [], {}
        for partition in partitions_of(consumer, topic):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            partitions.append(TopicPartition(topic, partition, max(low, high - last) if high > low else OFFSET_END))
            ends[partition] = high
        consumer.assign(partitions)
        while stop is None or not stop.is_set():
            message = consumer.poll(0.5)
            if message is None:
                if not follow and all(consumer.position([TopicPartition(topic, p)])[0].offset >= end
                                      for p, end in ends.items() if end > 0):
                    return
                continue
            if message.error() is not None:  # a partition's end is not one; anything else is said, not dropped
                if message.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("reading %s: %s", topic, message.error())
                continue
            try:
                record = codec.decode(message.value())
            except WireFormatError as exc:
                if on_unreadable is None:
                    raise
                on_unreadable(message.partition(), message.offset(), exc)
                continue
            yield record
    finally:
        consumer.close()
