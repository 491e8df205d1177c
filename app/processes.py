"""Pipeline components as child processes (the real ``lineage`` CLI): for the demo, benchmarks and tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import requests


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


@contextlib.contextmanager
def collector_process(env: dict[str, str] | None = None, ready_timeout: float = 60.0) -> Iterator[ChildProcess]:
    """``lineage collector`` on a free port, live before yielding; stopped with SIGTERM (graceful) on exit."""
    port = free_port()
    # Output goes to a file, not a pipe: a chatty child can never block on a full pipe.
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen([sys.executable, "-m", "kafka_lineage.cli", "collector", "--port", str(port)],
                                   env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, text=True)
        child = ChildProcess(f"http://127.0.0.1:{port}", process)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                with contextlib.suppress(requests.ConnectionError):
                    if requests.get(f"{child.url}/health/live", timeout=2).ok:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the collector did not start: {log.read()[-2000:]}")
                time.sleep(0.2)
            yield child
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            child.returncode = process.wait(60)
            log.seek(0)
            child.output = log.read()
