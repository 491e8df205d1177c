"""Progress of a bulk rebuild, phase by phase (read, fold, merge, files, import, indexes, …): while a phase runs,
one line redrawn with its bar, rate and ETA where its size is known, its elapsed time where not; when it ends, a
line with its seconds."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


def progress_line(phase: str, done: int, total: int | None, elapsed: float, unit: str = "records",
                  width: int = 30) -> str:
    """``fold [#####.....] 120,000/1,000,000 records  8,400/s  ETA 1m45s`` (no total: the elapsed time only)."""
    if not total:
        return f"{phase} ... {_duration(elapsed)}"
    done = min(done, total)
    filled = int(width * done / total)
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = _duration((total - done) / rate) if rate > 0 else "?"
    return (f"{phase} [{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} {unit}  {rate:,.0f}/s  "
            f"ETA {eta}")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class PhaseProgress:
    """Phases on ``out`` (stderr): ``begin`` a phase (its size, if known), ``update`` how much of it is done (from
    any thread), ``end`` it. A phase without updates still shows its elapsed time, redrawn every ``tick`` seconds."""

    def __init__(self, out: TextIO = sys.stderr, clock: Callable[[], float] = time.monotonic,
                 tick: float = 1.0) -> None:
        self.out, self.clock, self.tick = out, clock, tick
        self._lock = threading.Lock()
        self._phase: tuple[str, int | None, str, float] | None = None  # name, total, unit, started
        self._done = 0
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self.seconds: dict[str, float] = {}  # each ended phase's

    def begin(self, phase: str, total: int | None = None, unit: str = "records") -> None:
        self.end()
        with self._lock:
            self._phase, self._done = (phase, total, unit, self.clock()), 0
        self._stop.clear()
        self._ticker = threading.Thread(target=self._redraw_every_tick, name="bulk-progress", daemon=True)
        self._ticker.start()
        self._draw()

    def update(self, done: int) -> None:
        with self._lock:
            self._done = done
        self._draw()

    def end(self) -> float | None:
        """End the running phase (if any): its line with its seconds; returns them."""
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self._phase is None:
                return None
            name, total, unit, started = self._phase
            self._phase = None
            seconds = self.seconds[name] = self.clock() - started
            size = f" ({total:,} {unit}, {total / seconds:,.0f}/s)" if total and seconds > 0 else ""
            self.out.write(f"\r\033[K{name}: {seconds:.1f}s{size}\n")
            self.out.flush()
        return seconds

    def _redraw_every_tick(self) -> None:
        while not self._stop.wait(self.tick):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._phase is None:
                return
            name, total, unit, started = self._phase
            self.out.write("\r\033[K" + progress_line(name, self._done, total, self.clock() - started, unit))
            self.out.flush()
