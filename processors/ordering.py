"""Lifecycle ordering per run with a bounded hold-back window: a pure state machine, the caller supplies the time.

Guarantee: within a runId, events leave in lifecycle order (START < RUNNING/OTHER < COMPLETE/FAIL/ABORT, then
eventTime) whenever the disorder fits in the window; whatever does not fit still leaves, marked ``late``.

- An event leaves at once when nothing that should precede it can still be missing: it is a START, or the run is
  *open* (some event of it has already left). In-order streams therefore see no added latency at all.
- Otherwise (RUNNING/COMPLETE before any START) it is held for at most ``window_seconds`` from its own arrival. A
  START of the run releases itself and everything held, sorted; ``expire(now)`` releases what has waited long
  enough (plus anything of the run that sorts before it), so a streaming job whose START was lost still flows.
- An event whose rank is below the highest rank already released for its run (a START after its COMPLETE went out)
  leaves at once with ``late=True``; sinks apply it order-independently.
- Events without a run (DatasetEvent, JobEvent) have nothing to be ordered against: ``add`` with ``run_id=None``
  returns them at once (callers may also skip ``add`` for them).

``now`` is seconds on a clock that survives restarts (epoch seconds such as ``time.time()``), since snapshots store
absolute times; it should not go backwards (a smaller ``now`` is treated as no time passing for retention).
A run's state is dropped ``retention_seconds`` after its last activity (by ``expire``), so memory stays bounded.
What one run holds is bounded too (``max_held`` events, ``max_held_bytes`` of their ``size_of``): when a new event
would not fit, the run's earliest-sorting held events leave early, as if their window had passed; an event too large
to be held at all leaves at once, marked ``late`` (with the held events that sort before it). So a burst of one run
or one huge event never grows the run's snapshot past what a changelog record may carry.
Per-run state round-trips through plain dicts (``snapshot_run``/``restore_run``) for a changelog-backed table; held
items are stored in the snapshot as they are, so they must be serializable when the snapshot is persisted.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Generic, TypeVar

from kafka_lineage.schemas.openlineage import event_instant, lifecycle_rank

__all__ = ["Released", "RunReorderBuffer", "event_instant", "lifecycle_rank"]  # the last two: re-exported

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Released(Generic[T]):
    """An item the buffer lets go: ``late`` when its run had already released a later lifecycle stage."""

    run_id: str | None
    item: T
    late: bool = False


@dataclass(slots=True)
class _Held:
    rank: int
    instant: float
    seq: int  # arrival order: the last tie-breaker, so equal events keep their arrival order
    arrived: float
    event_type: str | None
    event_time: Any
    item: Any
    size: int = 0  # the item's size_of, counted against the run's max_held_bytes

    @property
    def key(self) -> tuple[int, float, int]:
        return self.rank, self.instant, self.seq


_KEY = attrgetter("key")


@dataclass(slots=True)
class _Run:
    max_rank: int = -1  # highest rank released so far; -1: nothing released, the run is not open yet
    started: bool = False  # its START was released (a run a window opened without one has not)
    last_activity: float = -math.inf
    held: list[_Held] = field(default_factory=list)  # kept sorted by key


class RunReorderBuffer(Generic[T]):
    """Holds events of runs whose START has not been seen, for at most ``window_seconds`` each."""

    def __init__(self, window_seconds: float, retention_seconds: float = 3600.0, *, max_held: int = 1_000,
                 max_held_bytes: int = 1 << 62, size_of: Callable[[T], int] | None = None) -> None:
        if not window_seconds >= 0 or not retention_seconds >= 0:
            raise ValueError("window_seconds and retention_seconds must be >= 0")
        if retention_seconds < window_seconds:
            raise ValueError("retention_seconds must be at least window_seconds, or held events would be dropped")
        if max_held < 1 or max_held_bytes < 1:
            raise ValueError("max_held and max_held_bytes must be >= 1")
        self.window = float(window_seconds)
        self.retention = float(retention_seconds)
        self.max_held = max_held
        self.max_held_bytes = max_held_bytes
        self._size_of = size_of or (lambda _item: 0)
        self._runs: OrderedDict[str, _Run] = OrderedDict()  # least recently active first
        self._deadlines: list[tuple[float, str]] = []  # min-heap of (held event's deadline, run); stale entries ok
        self._seq = 0
        self._changed: set[str] = set()
        self._unordered = False  # restores arrive in any order; the retention sweep re-sorts once before running

    # --- public API ----------------------------------------------------------------------------------------------
    def add(self, run_id: str | None, event: dict[str, Any], item: T, now: float) -> list[Released[T]]:
        """Offer one event; returns what may leave now (possibly this item, possibly earlier held ones), in order."""
        if run_id is None:
            return [Released(None, item, False)]
        run = self._touch(run_id, now)
        self._seq += 1
        held = _Held(lifecycle_rank(event.get("eventType")), event_instant(event.get("eventTime")), self._seq,
                     now, event.get("eventType"), event.get("eventTime"), item)
        forced: list[Released[T]] = []
        too_large = False
        if run.max_rank < 0 and held.rank > 0 and self.window > 0:
            held.size = self._size_of(item)
            too_large = held.size > self.max_held_bytes
            if not too_large:
                forced = self._make_room(run_id, run, held)  # releasing anything opens the run
                if not forced:
                    self._hold(run_id, run, held)
                    return []
        if held.rank == 0 and run.max_rank < 0:  # the START opens the run: it and all held events go, sorted
            batch = sorted([held, *run.held], key=_KEY)
            run.held = []
        else:  # open run: this event goes now, and held events that sort before it must go first
            cut = _count_before(run.held, held.key)
            batch = [*run.held[:cut], held]
            run.held = run.held[cut:]
        if len(batch) > 1:
            self._changed.add(run_id)  # held events left
        released = forced + self._release(run_id, run, batch)
        if too_large:  # could not be held: it left without waiting for what should precede it
            released[-1] = Released(run_id, item, True)
        return released

    def expire(self, now: float) -> list[Released[T]]:
        """Release held events whose window has elapsed (in run order), then drop runs idle past the retention."""
        out: list[Released[T]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, run_id = heapq.heappop(self._deadlines)
            run = self._runs.get(run_id)
            if run is None or not run.held:
                continue  # stale heap entry: already released or restored differently
            due = [i for i, h in enumerate(run.held) if h.arrived + self.window <= now]
            if not due:
                continue
            cut = due[-1] + 1  # everything sorting before a due event leaves with it, to keep the order
            batch, run.held = run.held[:cut], run.held[cut:]
            self._changed.add(run_id)
            out.extend(self._release(run_id, run, batch))
        if self._unordered:
            self._runs = OrderedDict(sorted(self._runs.items(), key=lambda kv: kv[1].last_activity))
            self._unordered = False
        while self._runs:
            run_id, run = next(iter(self._runs.items()))
            if run.last_activity + self.retention > now or run.held:
                break
            del self._runs[run_id]
            self._changed.add(run_id)
        return out

    def state_size(self) -> int:
        """Runs currently tracked (open or holding events)."""
        return len(self._runs)

    def held_count(self) -> int:
        """Events currently held back, over all runs."""
        return sum(len(run.held) for run in self._runs.values())

    def next_deadline(self) -> float | None:
        """The earliest time at which ``expire`` would release something, or None (for the shell's timer)."""
        while self._deadlines:
            deadline, run_id = self._deadlines[0]
            run = self._runs.get(run_id)
            if run is not None and any(h.arrived + self.window == deadline for h in run.held):
                return deadline
            heapq.heappop(self._deadlines)
        return None

    def drain_changed(self) -> set[str]:
        """Run ids whose state changed (or was dropped) since the last call: what a changelog table must rewrite.

        Activity alone (``lastActivity``) is not a change: a long-running run's stream of RUNNING events does not
        rewrite its state each time. A restored state may thus carry an older activity time: the run is retained
        from then, and a run dropped early only waits one window for a START again."""
        changed, self._changed = self._changed, set()
        return changed

    def snapshot_run(self, run_id: str) -> dict[str, Any] | None:
        """The run's state as plain data (JSON-ready if the held items are), or None if the run is not tracked."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        return {
            "maxRank": run.max_rank,
            "started": run.started,
            "lastActivity": run.last_activity,
            "held": [
                {"eventType": h.event_type, "eventTime": h.event_time, "arrived": h.arrived, "item": h.item}
                for h in run.held
            ],
        }

    def restore_run(self, run_id: str, state: dict[str, Any] | None) -> None:
        """Replace the run's state with a ``snapshot_run`` result (None forgets the run)."""
        self._runs.pop(run_id, None)
        if state is None:
            return
        run = _Run(max_rank=int(state.get("maxRank", -1)), started=bool(state.get("started", True)),
                   last_activity=float(state.get("lastActivity", -math.inf)))
        for entry in state.get("held") or ():
            self._seq += 1
            item = entry.get("item")
            run.held.append(_Held(lifecycle_rank(entry.get("eventType")), event_instant(entry.get("eventTime")),
                                  self._seq, float(entry["arrived"]), entry.get("eventType"), entry.get("eventTime"),
                                  item, self._size_of(item)))
            heapq.heappush(self._deadlines, (float(entry["arrived"]) + self.window, run_id))
        run.held.sort(key=_KEY)
        self._runs[run_id] = run
        self._unordered = True

    # --- internals -----------------------------------------------------------------------------------------------
    def _touch(self, run_id: str, now: float) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            self._changed.add(run_id)
        else:
            self._runs.move_to_end(run_id)
        run.last_activity = max(run.last_activity, now)
        return run

    def _hold(self, run_id: str, run: _Run, held: _Held) -> None:
        run.held.insert(_count_before(run.held, held.key), held)
        heapq.heappush(self._deadlines, (held.arrived + self.window, run_id))
        self._changed.add(run_id)

    def _make_room(self, run_id: str, run: _Run, held: _Held) -> list[Released[T]]:
        """Release the run's earliest-sorting held events until ``held`` fits the run's bounds."""
        total = sum(h.size for h in run.held) + held.size
        cut = 0
        while cut < len(run.held) and (len(run.held) - cut >= self.max_held or total > self.max_held_bytes):
            total -= run.held[cut].size
            cut += 1
        if not cut:
            return []
        batch, run.held = run.held[:cut], run.held[cut:]
        self._changed.add(run_id)
        return self._release(run_id, run, batch)

    def _release(self, run_id: str, run: _Run, batch: list[_Held]) -> list[Released[T]]:
        out = []
        before = run.max_rank
        for h in batch:
            out.append(Released(run_id, h.item, h.rank < run.max_rank))
            run.max_rank = max(run.max_rank, h.rank)
            run.started = run.started or h.rank == 0
        if run.max_rank != before:
            self._changed.add(run_id)
        return out


def _count_before(held: list[_Held], key: tuple[int, float, int]) -> int:
    """How many held events sort before ``key`` (held is sorted and short, so a scan beats bisect's key plumbing)."""
    n = 0
    for h in held:
        if h.key >= key:
            break
        n += 1
    return n
