"""The tables' changelog writes through librdkafka instead of Faust's aiokafka producer.

A worker writes one dedupe entry per accepted event; through ``table[key] = value`` each took Faust's per-message
path (a ``FutureMessage``, the producer buffer, aiokafka's Python batching and sender task, a callback per record):
~17% of a worker's CPU on realistic events (ARCHITECTURE 62). Here the same records -- key and value serialized by
the table's own changelog topic, to the partition the shell chose -- go to the changelog topic through the
librdkafka producer that already writes the outputs, and the table's local data is updated directly (what
``Table.__setitem__`` does besides sending; a memory store keeps no persisted offsets). Recovery reads the same
records from the same topics, so a restarted or moved worker sees exactly what it saw before.

The shell produces a batch's records in the batch's Kafka transaction, with its outputs and input offsets, so a
state record is visible (to recovery, which reads ``read_committed``) exactly when the outputs it accounts for are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust


class ChangelogWriter:
    """Stages table writes: local data at once, changelog records kept for the batch's transaction."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, int, bytes | None, bytes | None]] = []
        # per table: its changelog topic's name and serializers, looked up once
        self._tables: dict[int, tuple[str, Callable[[Any], bytes | None], Callable[[Any], bytes | None]]] = {}

    def write(self, table: faust.Table, key: Any, partition: int, value: Any) -> None:
        """Set (or, ``value`` None, delete) ``key`` in ``table``; its changelog record is staged for ``take``."""
        topic, dump_key, dump_value = self._serializers(table)
        if value is None:
            table.data.pop(key, None)
            record = None  # a tombstone, as Faust writes a deleted key (value None, raw)
        else:
            table.data[key] = value
            record = dump_value(value)
        self._staged.append((topic, partition, dump_key(key), record))

    def take(self) -> list[tuple[str, int, bytes | None, bytes | None]]:
        """The staged changelog records (topic, partition, key, value), in the order written; staging starts over."""
        staged, self._staged = self._staged, []
        return staged

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
