"""A bulk rebuild's mark beside the store it replaces: which process rebuilds, into which database, where its files
are and how far it got. A rebuild killed while Neo4j was stopped leaves its mark; the next one sees that it died
(its process is gone), takes the database name from it (Neo4j may not answer), removes its leftover files, and
starts over from the topic: every phase is redone, the import replaces whatever a killed import left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

MARK_FILE = "lineage-rebuild.json"


class RebuildRunning(RuntimeError):
    """Another rebuild of this store is running."""


@dataclass(frozen=True)
class RebuildMark:
    pid: int
    database: str
    phase: str  # the phase it was in when it last wrote the mark: stop, fold, import, start
    directory: str | None = None  # its import files' directory, once made

    def at(self, phase: str, directory: str | None = None) -> RebuildMark:
        return replace(self, phase=phase, directory=directory if directory is not None else self.directory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def read_mark(store: Path) -> RebuildMark | None:
    try:
        found = json.loads((store / MARK_FILE).read_text(encoding="utf-8"))
        return RebuildMark(int(found["pid"]), str(found["database"]), str(found["phase"]), found.get("directory"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):  # a torn write of a killed rebuild: no name to go on
        return None


def left_by_killed_rebuild(store: Path, alive: Callable[[int], bool] = _alive) -> RebuildMark | None:
    """The mark of a rebuild that died (its files removed), None when there is none; ``RebuildRunning`` when the
    rebuild that wrote it still runs."""
    mark = read_mark(store)
    if mark is None:
        return None
    if mark.pid != os.getpid() and alive(mark.pid):
        raise RebuildRunning(f"a rebuild (pid {mark.pid}) is running on this store, now in its {mark.phase} phase; "
                             f"wait for it, or stop it and start again ({store / MARK_FILE})")
    if mark.directory:
        shutil.rmtree(mark.directory, ignore_errors=True)
    return mark


def write_mark(store: Path, mark: RebuildMark) -> None:
    """Written whole or not at all (a rename), so a kill never leaves half a mark."""
    store.mkdir(parents=True, exist_ok=True)
    partial = store / f".{MARK_FILE}.{os.getpid()}"
    partial.write_text(json.dumps(asdict(mark)), encoding="utf-8")
    partial.replace(store / MARK_FILE)


def remove_mark(store: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (store / MARK_FILE).unlink()
