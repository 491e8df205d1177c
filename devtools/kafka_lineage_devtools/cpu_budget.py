"""CPU spent per event by each part of the pipeline while a bench runs: the budget table that says which component
a machine of this size runs out of first, and what more cores would give.

Each component is a process tree (the pid and every descendant, as ``/proc`` shows them); its CPU is user + system
time. The bench's own process is counted alone (its children are the components).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses


def _cpu_ticks(fields: list[str]) -> int:
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (all its threads, not its children)."""
    fields = _stat_fields(pid)
    if fields is None:
        raise ProcessLookupError(pid)
    return _cpu_ticks(fields) / TICKS


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def process_tree(pid: int, tree: Mapping[int, list[int]] | None = None) -> list[int]:
    """``pid`` and every descendant it has now (``tree``: a ``/proc`` parent → children reading to reuse)."""
    tree = _children() if tree is None else tree
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(tree.get(current, ()))
    return found


def resident_mib(pids: Iterable[int | None]) -> float:
    """Resident memory of these processes together, in MiB (gone or unknown ones count 0)."""
    kib = 0
    for pid in pids:
        if pid is None:
            continue
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kib += int(line.split()[1])
    return kib / 1024


def cpu_seconds(pids: Mapping[str, int | Sequence[int] | None], alone: frozenset[str] = frozenset()
                ) -> dict[str, float]:
    """CPU seconds so far of each named component: one process tree or several (a component with more than one
    process, e.g. two processor workers); only the processes themselves for names in ``alone``."""
    tree = _children()
    result: dict[str, float] = {}
    for name, roots in pids.items():
        if roots is None:
            continue
        ticks = 0
        for root in [roots] if isinstance(roots, int) else roots:
            for current in [root] if name in alone else process_tree(root, tree):
                if (fields := _stat_fields(current)) is not None:
                    ticks += _cpu_ticks(fields)
        result[name] = ticks / TICKS
    return result


def pin(pids: Iterable[int], cpus: AbstractSet[int]) -> None:
    """Run every thread of each process tree on ``cpus`` only (threads and processes started later inherit it): a
    machine with fewer cores, measured on this one. Processes that ended meanwhile are skipped."""
    tree = _children()
    for root in pids:
        for pid in process_tree(root, tree):
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError):  # a thread that ended meanwhile
                        os.sched_setaffinity(int(task.name), cpus)


def per_event_us(before: Mapping[str, float], after: Mapping[str, float], events: int) -> dict[str, float]:
    """µs of CPU per event of each component between two ``cpu_seconds`` readings."""
    return {name: (after[name] - before[name]) / max(1, events) * 1e6 for name in after if name in before}


def budget_rows(us_per_event: Mapping[str, float], cores: int) -> list[dict[str, float | str]]:
    """The table: each component's µs/event, its share, the events/s it alone would allow on one core, and the
    ceiling of the whole on ``cores`` cores if CPU were the only limit (no waiting, perfect overlap)."""
    total = sum(us_per_event.values())
    rows: list[dict[str, float | str]] = [
        {"component": name, "us_per_event": us, "share": us / total if total else 0.0,
         "events_per_s_per_core": 1e6 / us if us > 0 else float("inf")}
        for name, us in sorted(us_per_event.items(), key=lambda item: -item[1])]
    rows.append({"component": "TOTAL", "us_per_event": total, "share": 1.0,
                 "events_per_s_per_core": 1e6 / total if total else float("inf"),
                 "ceiling_events_per_s": cores * 1e6 / total if total else float("inf")})
    return rows


def format_budget(rows: list[dict[str, float | str]], cores: int) -> str:
    lines = [f"{'component':26} {'CPU µs/event':>13} {'share':>7} {'events/s on 1 core':>19}"]
    for row in rows:
        lines.append(f"{row['component']!s:26} {row['us_per_event']:>13,.0f} {row['share']:>7.0%} "
                     f"{row['events_per_s_per_core']:>19,.0f}")
    total = rows[-1]
    lines.append(f"CPU ceiling on {cores} cores (all services on the machine): "
                 f"{total['ceiling_events_per_s']:,.0f} events/s")
    return "\n".join(lines)
