"""Harnesses fail fast: a bench or fault run whose component dies stops at once, saying which and how (the real CLI)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import TAIL_LINES, ChildExited, collector_process, wait_until

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def _still_running(harness: subprocess.Popen) -> None:
    if harness.poll() is not None:
        raise AssertionError(f"the harness ended (code {harness.returncode}) before its child was killed:\n"
                             f"{harness.communicate()[1][-5000:]}")


def _child_running(harness: subprocess.Popen, args: bytes) -> int | None:
    """The pid of the harness's child ``lineage ARGS`` (NUL-separated), if it has started."""
    _still_running(harness)
    for pid in _children(harness.pid):
        try:
            if b"kafka_lineage.app.cli\0" + args + b"\0" in Path(f"/proc/{pid}/cmdline").read_bytes():
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


@dataclass
class Ended:
    """How a harness ended after one of its children was SIGKILLed by someone else."""

    child: int
    code: int
    out: str
    err: str
    took: float  # seconds from the kill to the harness's end


def _kill_a_child_of(args: list[str], child: bytes, what: str, before_kill: Callable[[subprocess.Popen, int], None],
                     cwd: Path | None = None) -> Ended:
    """Run ``lineage ARGS``; once its child ``lineage CHILD`` runs and ``before_kill(harness, pid)`` returned,
    SIGKILL that child (not through the harness) and wait for the harness to end."""
    harness = subprocess.Popen([sys.executable, "-m", "kafka_lineage.app.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        pid = wait_until(lambda: _child_running(harness, child), 300, what=what)
        before_kill(harness, pid)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        out, err = harness.communicate(timeout=120)
        return Ended(pid, harness.returncode, out, err, time.monotonic() - killed)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()


def test_the_processor_bench_fails_at_once_when_its_worker_dies(clients: ClientSettings, tmp_path: Path) -> None:
    """The worker is SIGKILLed (by someone else than the bench) once it has committed its first batches, while the
    bench waits for the rest of its 30,000 events: before, the bench waited 30 minutes for a dead worker."""
    def first_commit(bench: subprocess.Popen, worker: int) -> None:
        env = _environment(worker)
        group, topic = env["LINEAGE_PROCESSOR_GROUP"], env["LINEAGE_EVENTS_TOPIC"]
        reader = Consumer({"bootstrap.servers": clients.kafka_bootstrap_servers, "group.id": group})
        try:  # committed offsets: the worker is processing the backlog, and the bench is waiting for its output
            wait_until(lambda: _committed(bench, reader, topic) > 0, 300, interval=1, what="the worker's first commit")
        finally:
            reader.close()

    ended = _kill_a_child_of(["bench", "processor", "--events", "30000", "--output", str(tmp_path / "processor.json")],
                             b"processor", "the bench's processor worker", first_commit)
    print(f"the bench ended {ended.took:.1f} s after its worker was killed")
    worker, err, took = ended.child, ended.err, ended.took
    assert ended.code == 1, err[-3000:]
    assert took < 30, f"the bench took {took:.0f} s to notice"
    assert (f"lineage: lineage processor (pid {worker}) exited with code -9 (killed by SIGKILL) without being asked "
            f"to; its last {TAIL_LINES} log lines:\n") in err, err[-3000:]
    tail = err.split("log lines:\n", 1)[1].splitlines()
    assert 5 <= len(tail) <= TAIL_LINES, tail
    assert any(f"[{worker}]" in line or "faust" in line for line in tail), tail  # the worker's own log
    assert "Traceback" not in err, err[-3000:]
    assert not (tmp_path / "processor.json").exists()


def test_the_fault_run_fails_at_once_when_a_component_ends_by_itself(tmp_path: Path) -> None:
    """``lineage workload`` (the fault suite's runner without its own faults): the alert sink is SIGKILLed by someone
    else than the runner while events are being published. Before, the run went on to its end and only then listed
    the component as ``exited``."""
    # once the run is publishing (~4,800 events at 200 events/s after 5 s)
    ended = _kill_a_child_of(["workload", "--jobs", "200", "--runs-per-job", "10", "--rate", "200"], b"alerts\0run",
                             "the run's alert sink", lambda _run, _sink: time.sleep(5),
                             cwd=tmp_path)  # its logs go to ./.lineage/faults
    print(f"the fault run ended {ended.took:.1f} s after its alert sink was killed")
    sink, out, err, took = ended.child, ended.out, ended.err, ended.took
    assert ended.code == 1, (out[-2000:], err[-3000:])
    assert took < 30, f"the run took {took:.0f} s to notice"
    assert f"lineage: lineage alerts run (pid {sink}) exited with code -9 (killed by SIGKILL) without being asked" \
           in err, err[-3000:]
    logs = tmp_path / ".lineage" / "faults"
    assert f"every component's whole output: {logs.resolve()}" in err, err[-3000:]
    assert all((logs / f"{name}.log").read_text() for name in ("processor", "graph-sink", "alert-sink"))


def test_a_test_whose_child_dies_fails_at_once(events_topic: str) -> None:
    """The autouse fixture of conftest: a test waiting in its own loop for a child that died is interrupted."""
    with pytest.raises(ChildExited) as raised, collector_process({"LINEAGE_EVENTS_TOPIC": events_topic}) as child:
        os.kill(child.process.pid, signal.SIGKILL)  # not through the harness: an unexpected death
        killed = time.monotonic()
        time.sleep(60)  # what a test's own polling loop does
    assert time.monotonic() - killed < 2
    assert raised.value.code == -signal.SIGKILL and raised.value.name.startswith("lineage collector")
    assert "collector" in raised.value.tail
