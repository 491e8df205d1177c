"""``ChangelogWriter`` (processors/state_writer.py): the tables' changelog records carry the bytes Faust's own path
would send, to the partition the shell chose, and the table's local data changes at once."""

from __future__ import annotations

from typing import Any

import faust
import pytest

from kafka_lineage.processors.state_writer import ChangelogWriter


@pytest.fixture
def app() -> faust.App:
    return faust.App("test-state-writer", broker="kafka://localhost:1", store="memory://", value_serializer="raw",
                     key_serializer="raw")


def _faust_bytes(table: faust.Table, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
    """What ``Table.on_key_set``/``on_key_del`` hand Faust's producer for this write."""
    message = table.changelog_topic.as_future_message(
        key=key, value=value, partition=0, key_serializer=table.key_serializer,
        value_serializer="raw" if value is None else table.value_serializer).message
    return message.key, message.value


def test_records_carry_faust_bytes_to_the_chosen_partition_and_update_the_table(app: faust.App) -> None:
    dedupe = app.Table("dedupe", default=None, partitions=6)
    runs = app.Table("runs", default=None, partitions=6)
    writer = ChangelogWriter()
    writes = [(dedupe, "id-é\u2028", 4, [1_714_521_600.25, 4]), (runs, "run/1", 2, {"order": {"held": [1]}, "p": 2}),
              (dedupe, "id-é\u2028", 4, None)]
    for table, key, partition, value in writes:
        writer.write(table, key, partition, value)
    records = writer.take()
    assert writer.take() == []  # taken once
    assert [(topic, partition) for topic, partition, _k, _v in records] == [
        (dedupe.changelog_topic.get_topic_name(), 4), (runs.changelog_topic.get_topic_name(), 2),
        (dedupe.changelog_topic.get_topic_name(), 4)]
    for (table, key, _partition, value), (_topic, _p, sent_key, sent_value) in zip(writes, records, strict=True):
        assert (sent_key, sent_value) == _faust_bytes(table, key, value)
    assert "id-é\u2028" not in dedupe.data  # set, then deleted
    assert runs.data["run/1"] == {"order": {"held": [1]}, "p": 2}
