"""Pipeline components as child processes (the real ``lineage`` CLI): for the demo, benchmarks and tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests


def pipeline_env(prefix: str, partitions: int, data_dir: Path) -> dict[str, str]:
    """Environment for a pipeline of its own: topics and consumer groups named from ``prefix``, the processor's state
    under ``data_dir``. A bench, a fault run or a test then never mixes with real lineage or with another one."""
    return {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_PROCESSOR_GROUP": f"{prefix}.processor", "LINEAGE_SINK_GROUP": f"{prefix}.sink",
            "LINEAGE_ALERT_GROUP": f"{prefix}.alerts", "LINEAGE_PARTITIONS": str(partitions),
            "LINEAGE_PROCESSOR_DATA_DIR": str(data_dir)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ChildProcess:
    url: str
    process: subprocess.Popen
    returncode: int | None = None
    output: str = field(default="", repr=False)
    metrics_url: str = ""  # the component's metrics/health endpoint, as it announced it
    log: Any = field(default=None, repr=False)  # the file the child writes to, while it runs

    def output_so_far(self) -> str:
        """What the child has written until now (``output`` is only filled in once it has ended)."""
        if self.log is None or self.log.closed:
            return self.output
        self.log.seek(0)
        return self.log.read()


# Children listen on any free port unless the caller chose one: tests and the demo run several at once.
_ANY_FREE_PORT = {"LINEAGE_PROCESSOR_METRICS_PORT": "0", "LINEAGE_SINK_METRICS_PORT": "0",
                  "LINEAGE_ALERT_METRICS_PORT": "0"}
_ENDPOINT = re.compile(r"metrics: (http://\S+)/metrics")


@contextlib.contextmanager
def lineage_process(args: list[str], is_ready: Callable[[ChildProcess, str], bool], env: dict[str, str] | None = None,
                    url: str = "", ready_timeout: float = 90.0) -> Iterator[ChildProcess]:
    """``lineage ARGS`` as a child process, ready (``is_ready(child, output so far)``) before yielding; stopped with
    SIGTERM (graceful) on exit unless it already ended (a test may SIGKILL it)."""
    # Output goes to a file, not a pipe: a chatty child can never block on a full pipe.
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen([sys.executable, "-m", "kafka_lineage.cli", *args],
                                   env={**_ANY_FREE_PORT, **os.environ, **(env or {})}, stdout=log,
                                   stderr=subprocess.STDOUT, text=True)
        child = ChildProcess(url, process, log=log)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                output = child.output_so_far()
                if is_ready(child, output):
                    if endpoint := _ENDPOINT.search(output):
                        child.metrics_url = endpoint.group(1)
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"lineage {args[0]} did not start: {output[-3000:]}")
                time.sleep(0.2)
            yield child
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                child.returncode = process.wait(90)
            except subprocess.TimeoutExpired:
                process.kill()
                child.returncode = process.wait()
            child.output = child.output_so_far()


def _http_live(child: ChildProcess, _output: str) -> bool:
    try:
        return requests.get(f"{child.url}/health/live", timeout=2).ok
    except requests.ConnectionError:
        return False


def collector_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """``lineage collector`` on a free port, answering before the block starts."""
    port = free_port()
    return lineage_process(["collector", "--port", str(port)], _http_live, env, url=f"http://127.0.0.1:{port}")


def processor_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage processor`` worker that has joined its group and recovered its tables."""
    return lineage_process(["processor"], lambda _child, output: "Worker]: Ready" in output, env)


def sink_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage sink`` that has created its constraints and subscribed."""
    return lineage_process(["sink"], lambda _child, output: "graph sink ready" in output, env)


def alert_sink_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage alerts run`` sink that has subscribed."""
    return lineage_process(["alerts", "run"], lambda _child, output: "alert sink ready" in output, env)
