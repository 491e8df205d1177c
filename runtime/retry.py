"""Waiting to try again: one stop-aware exponential backoff for every retry loop of the pipeline."""

from __future__ import annotations

import threading
import time


class Stopped(Exception):
    """Asked to stop while waiting to try again: the work in hand stays undone (its records uncommitted)."""


class Backoff:
    """Delays that double from ``first`` up to ``cap``. ``delay`` is the next wait (for the log line that announces
    it); ``wait`` sleeps it and doubles it, and raises Stopped at once when ``stop`` is set before or during."""

    def __init__(self, first: float = 0.5, cap: float = 30.0) -> None:
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    def advance(self) -> float:
        """The next wait, doubled for the one after (for a caller that waits its own way)."""
        delay, self.delay = self.delay, min(self.delay * 2, self.cap)
        return delay

    def wait(self, stop: threading.Event | None = None) -> None:
        delay = self.advance()
        if stop is None:
            time.sleep(delay)
        elif stop.wait(delay):
            raise Stopped
