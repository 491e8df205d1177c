"""Harnesses fail fast: a bench whose worker dies stops at once and says which child died and how (the real CLI)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_lineage.config import ClientSettings
from kafka_lineage.processes import TAIL_LINES, wait_until

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def _still_running(bench: subprocess.Popen) -> None:
    if bench.poll() is not None:
        raise AssertionError(f"the bench ended (code {bench.returncode}) before its worker was killed:\n"
                             f"{bench.communicate()[1][-5000:]}")


def _processor_worker(bench: subprocess.Popen) -> int | None:
    _still_running(bench)
    for pid in _children(bench.pid):
        try:
            if b"kafka_lineage.cli\0processor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except FileNotFoundError:
            continue
    return None


def _environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def _committed(bench: subprocess.Popen, reader: Consumer, topic: str) -> int:
    _still_running(bench)
    return sum(max(0, tp.offset) for tp in reader.committed([TopicPartition(topic, p) for p in range(6)], timeout=10))


def test_the_processor_bench_fails_at_once_when_its_worker_dies(clients: ClientSettings, tmp_path: Path) -> None:
    """The worker is SIGKILLed (by someone else than the bench) once it has committed its first batches, while the
    bench waits for the rest of its 30,000 events: before, the bench waited 30 minutes for a dead worker."""
    bench = subprocess.Popen([sys.executable, "-m", "kafka_lineage.cli", "bench", "processor", "--events", "30000",
                              "--output", str(tmp_path / "processor.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker = wait_until(lambda: _processor_worker(bench), 300, what="the bench's processor worker")
        env = _environment(worker)
        group, topic = env["LINEAGE_PROCESSOR_GROUP"], env["LINEAGE_EVENTS_TOPIC"]
        reader = Consumer({"bootstrap.servers": clients.kafka_bootstrap_servers, "group.id": group})
        try:  # committed offsets: the worker is processing the backlog, and the bench is waiting for its output
            wait_until(lambda: _committed(bench, reader, topic) > 0, 300, interval=1, what="the worker's first commit")
        finally:
            reader.close()
        os.kill(worker, signal.SIGKILL)
        killed = time.monotonic()
        _, err = bench.communicate(timeout=120)
        took = time.monotonic() - killed
        print(f"the bench ended {took:.1f} s after its worker was killed")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 1, err[-3000:]
    assert took < 30, f"the bench took {took:.0f} s to notice"
    assert (f"lineage: lineage processor (pid {worker}) exited with code -9 (killed by SIGKILL) without being asked "
            f"to; its last {TAIL_LINES} log lines:\n") in err, err[-3000:]
    tail = err.split("log lines:\n", 1)[1].splitlines()
    assert 5 <= len(tail) <= TAIL_LINES, tail
    assert any(f"[{worker}]" in line or "faust" in line for line in tail), tail  # the worker's own log
    assert "Traceback" not in err, err[-3000:]
    assert not (tmp_path / "processor.json").exists()
