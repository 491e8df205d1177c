"""The jobs of the streaming-engines scenario (``kafka_lineage_devtools.engines``), each run as ``python -m``, and
the supervision their scripts share (the Flink test jobs in tests/data/flink too)."""

from __future__ import annotations

import time
from typing import Any

TERMINAL = frozenset(("FINISHED", "FAILED", "CANCELED"))


def job_state(client: Any) -> str:
    """A PyFlink ``JobClient``'s status as Flink names it (``RUNNING``, ``FAILED`` …)."""
    return str(client.get_job_status().result()).rpartition(".")[2]


def supervise(client: Any, stop: list[bool]) -> tuple[str, bool]:
    """Until the job ends, or ``stop`` fills (the script's SIGTERM; then the job is cancelled): (state, cancelled)."""
    state = "RUNNING"
    while not stop:
        try:
            state = job_state(client)
        except Exception:  # the local cluster shuts down right after its only job ended
            break
        if state in TERMINAL:
            break
        time.sleep(0.5)
    cancelled = bool(stop)
    if cancelled:
        client.cancel().result()
        state = "CANCELED"
    return state, cancelled


def linger(stop: list[bool], seconds: float) -> None:
    """Stay up ``seconds`` (the listener's REST tracking sends the job's end meanwhile); a new SIGTERM ends it."""
    stop.clear()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop:
        time.sleep(0.2)
