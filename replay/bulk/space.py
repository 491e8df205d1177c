"""Disk space a bulk rebuild needs: the import files and the new store, checked before the graph is touched.

Before the fold, only the records to read are known, so the need is an upper bound per record (a realistic event
whose run and job are all new: the CSV share of each record falls as runs of known jobs repeat their datasets'
rows). After the fold the files' own size is known and the store is checked again against it, still before the
import replaces anything. Where the files and the store share a filesystem, their needs add up.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

# Bytes per record at most (measured on realistic events, 6.6 KB each, every run and job new: 4.5 KB of CSV)
CSV_BYTES_PER_RECORD = 5_000
# The store neo4j-admin builds from the files, per byte of them, at most (measured on realistic events)
STORE_BYTES_PER_CSV_BYTE = 2.0
HEADROOM_BYTES = 512 * 1024 * 1024  # left free for Neo4j's logs and transaction files once it runs again


@dataclass(frozen=True)
class Need:
    what: str  # "the import files", "the new store"
    directory: Path
    bytes: int


def needs_before_fold(records: int, files_dir: Path, store_dir: Path) -> list[Need]:
    files = records * CSV_BYTES_PER_RECORD
    return [Need("the import files", files_dir, files),
            Need("the new store", store_dir, int(files * STORE_BYTES_PER_CSV_BYTE))]


def needs_after_fold(files_bytes: int, store_dir: Path) -> list[Need]:
    return [Need("the new store", store_dir, int(files_bytes * STORE_BYTES_PER_CSV_BYTE))]


def shortfalls(needs: Iterable[Need], free: Callable[[Path], int], device: Callable[[Path], int]) -> list[str]:
    """What does not fit: per filesystem, the needs on it (plus the headroom) against its free bytes."""
    by_device: dict[int, list[Need]] = {}
    for need in needs:
        by_device.setdefault(device(need.directory), []).append(need)
    problems = []
    for group in by_device.values():
        wanted = sum(need.bytes for need in group) + HEADROOM_BYTES
        available = free(group[0].directory)
        if wanted > available:
            parts = " + ".join(f"{_size(need.bytes)} for {need.what} in {need.directory}" for need in group)
            problems.append(f"{parts} (+ {_size(HEADROOM_BYTES)} headroom) but only {_size(available)} free there")
    return problems


def existing(directory: Path) -> Path:
    """The directory, or its nearest existing parent (a store or work directory not created yet)."""
    while not directory.exists() and directory.parent != directory:
        directory = directory.parent
    return directory


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(existing(directory)).free


def device_of(directory: Path) -> int:
    return os.stat(existing(directory)).st_dev


def files_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def _size(count: int) -> str:
    return f"{count / 1024 ** 3:.1f} GiB" if count >= 1024 ** 3 else f"{count / 1024 ** 2:.0f} MiB"
