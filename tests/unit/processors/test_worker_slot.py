"""A worker's transactional id (processors/stream.worker_slot_id): the lowest slot no live worker holds."""

from __future__ import annotations

from pathlib import Path

from kafka_lineage.processors import stream


def test_live_workers_get_different_slots_and_a_freed_slot_is_taken_again(tmp_path: Path) -> None:
    first = stream.worker_slot_id("group", tmp_path)
    second = stream.worker_slot_id("group", tmp_path)
    assert first.endswith("-0") and second.endswith("-1") and first[:-2] == second[:-2]
    stream._slot_locks.pop(0).close()  # the first worker ended (a SIGKILL frees its lock the same way)
    assert stream.worker_slot_id("group", tmp_path) == first
    other = stream.worker_slot_id("group", tmp_path / "..")
    assert other.rsplit("-", 2)[-2] != first.rsplit("-", 2)[-2]  # another data directory: another place
    for lock in stream._slot_locks:
        lock.close()
    stream._slot_locks.clear()
