"""What the router has read and what each route has done with it, pure: the alerts read and not yet committed (per
partition, in offset order), what each route still waits for, the ledger records known, and how far each partition
may be committed. The router's shell calls it under its lock.

Per (route, alert id): a later record of an alert already queued follows the first and is done with it; a ledger
record is tombstoned only when no uncommitted record holds it; one a start finds passed by the committed offsets
stays until the commits reach the topic's end of that start (the repeat of a committed alert may still be ahead);
records tombstoned lately are kept (``RECENT_RECORDS``) to skip a late repeat, and written back to the ledger before
that repeat counts.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_lineage.sinks.alerts.routing.ledger import Done, stale

RECENT_RECORDS = 100_000  # (route, alert id) pairs kept after their tombstone, to skip a late repeat
Key = tuple[str, str]  # (route, alert id)


@dataclass(eq=False)
class Entry:
    """One alert read from the topic, and the routes it still waits for."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    alert: dict[str, Any]
    waiting: set[str] = field(default_factory=set)
    done: list[Done] = field(default_factory=list)  # ledger records of this alert (tombstoned once committed)
    # later records of the same alert id (a repeat on the topic, same key and so same partition) waiting on a route
    # for this one's delivery: done with it, never sent twice
    followers: list[tuple[str, Entry]] = field(default_factory=list)
    arrived: float = field(default_factory=time.monotonic)
    abandoned: bool = False  # its partition left this member: the next owner delivers what is not recorded
    released: bool = False  # committed, or its partition left: no longer tracked

    @property
    def alert_id(self) -> str:
        return str(self.alert.get("alertId", ""))

    def settle(self) -> None:
        """Done on every route: only its id is kept (it may wait long for its commit behind a route that waits)."""
        self.alert, self.value = {"alertId": self.alert_id}, b""


@dataclass
class Commit:
    """What one partition's commit is: its offset, and the entries it passes."""

    offset: int
    passed: list[int]


class Tracker:
    def __init__(self) -> None:
        self.entries: dict[int, dict[int, Entry]] = {}  # partition → offset → entry, in offset order
        self.recorded: dict[Key, Done] = {}  # in the ledger
        self.references: Counter[Key] = Counter()  # uncommitted entries holding each record
        self.recent: OrderedDict[Key, Done] = OrderedDict()  # tombstoned lately
        self.deferred: list[tuple[list[Done], dict[int, int]]] = []  # found passed at a start, with the ends then
        self.committed: dict[int, int] = {}  # partition → the offset committed last
        self.queued: dict[Key, Entry] = {}  # the entry a worker has for (route, alert id)
        self.read_to: dict[int, int] = {}  # partition → the offset after its last entry

    # --- reading ----------------------------------------------------------------------------------------------------
    def to_rerecord(self, names: Iterable[str], alert_id: str) -> list[Done]:
        """Records of this alert on these routes that were tombstoned: to write back before the alert counts."""
        return [self.recent[(name, alert_id)] for name in names
                if (name, alert_id) in self.recent and (name, alert_id) not in self.recorded]

    def rerecorded(self, records: Iterable[Done]) -> None:
        self.recorded.update({(done.route, done.alert_id): done for done in records})

    def track(self, entry: Entry, names: Iterable[str], redriven: bool = False) -> list[str]:
        """``entry`` read, for the routes ``names``: the routes whose worker must get it (not done already, not
        following an earlier record of the same alert). ``redriven``: a dead letter sent back, whose route's
        ``deadLettered`` record does not count."""
        offered = []
        for name in names:
            key = (name, entry.alert_id)
            recorded = self.recorded.get(key)
            if redriven and recorded is not None and recorded.outcome == "deadLettered":
                recorded = None
            if recorded is not None:
                self._hold(entry, recorded)
                continue
            entry.waiting.add(name)
            first = self.queued.get(key)
            if first is not None:
                first.followers.append((name, entry))
            else:
                self.queued[key] = entry
                offered.append(name)
        self.entries.setdefault(entry.partition, {})[entry.offset] = entry
        self.read_to[entry.partition] = entry.offset + 1
        if not entry.waiting:
            entry.settle()
        return offered

    def finished(self, route: str, done: Iterable[tuple[Entry, Done]]) -> None:
        """A worker is done with these alerts on ``route`` (recorded in the ledger). Also done: later records of the
        same alert, following it or read again meanwhile (its partition left this member and came back)."""
        for entry, record in done:
            key = (route, entry.alert_id)
            holders = [entry, *(other for name, other in entry.followers if name == route)]
            again = self.queued.pop(key, None)
            if again is not None and again is not entry:
                holders += [again, *(other for name, other in again.followers if name == route)]
            live = [holder for holder in holders if not holder.released]
            for holder in live:
                holder.waiting.discard(route)
                self._hold(holder, record)
                if not holder.waiting:
                    holder.settle()
            if live:
                self.recorded[key] = record
            else:
                self._remember(key, record)

    def loaded(self, records: Mapping[Key, Done], committed: Mapping[int, int], ends: Mapping[int, int],
               held: set[int]) -> int:
        """The ledger read at a start or a rebalance (``held``: the partitions this member holds now, ``ends``: their
        end offsets then); how many records the committed offsets have passed already."""
        mine = {key: done for key, done in records.items() if done.partition in held}  # others: their owners'
        leftovers = stale(mine.values(), committed)
        self.recorded.update(mine)
        self.deferred.append((leftovers, dict(ends)))
        return len(leftovers)

    # --- committing -------------------------------------------------------------------------------------------------
    def commits(self, positions: Mapping[int, int], unfinished: bool) -> dict[int, Commit]:
        """Per partition (``positions``: the consumer's, of the partitions to commit): up to its first alert some
        route waits for; when none waits, its position (past the alert sink's transaction markers) or, while a
        batch read is not all entries yet (``unfinished``), past its last entry."""
        commits = {}
        for partition, position in positions.items():
            passed: list[int] = []
            target: int | None = None
            for offset, entry in self.entries.get(partition, {}).items():  # insertion order: ascending
                if entry.waiting:
                    target = offset
                    break
                passed.append(offset)
            if target is None:
                if unfinished:
                    target = self.read_to.get(partition)
                elif position >= 0:
                    target = position
                elif passed:
                    target = passed[-1] + 1
            if target is not None:
                commits[partition] = Commit(target, passed)
        return commits

    def committed_to(self, commits: Mapping[int, Commit]) -> list[Done]:
        """The commits went through: the records to tombstone (no uncommitted entry holds them any more)."""
        forgotten: list[Done] = []
        for partition, commit in commits.items():
            held = self.entries.get(partition, {})
            for offset in commit.passed:
                entry = held.pop(offset, None)
                if entry is not None:
                    forgotten.extend(self._release(entry))
            self.committed[partition] = commit.offset
        for group in list(self.deferred):
            records, ends = group
            if all(ends.get(r.partition, 0) <= self.committed.get(r.partition, 0) for r in records):
                self.deferred.remove(group)
                forgotten.extend(self._forget_unheld(records))
        return forgotten

    def leave(self, partitions: set[int]) -> None:
        """Partitions left this member: their entries are dropped, their records kept in the ledger (not committed:
        the next owner needs them)."""
        for partition in partitions:
            for entry in self.entries.pop(partition, {}).values():
                self._release(entry, remember=False)
            self.committed.pop(partition, None)
            self.read_to.pop(partition, None)
        self.deferred = [([r for r in records if r.partition not in partitions], ends)
                         for records, ends in self.deferred]
        self.queued = {key: entry for key, entry in self.queued.items() if entry.partition not in partitions}

    def pending(self) -> bool:
        return any(self.entries.values())

    def held(self) -> int:
        return sum(len(entries) for entries in self.entries.values())

    # --- records held and released --------------------------------------------------------------------------------
    def _hold(self, entry: Entry, record: Done) -> None:
        entry.done.append(record)
        self.references[(record.route, record.alert_id)] += 1

    def _release(self, entry: Entry, *, remember: bool = True) -> list[Done]:
        """``entry`` leaves (committed, or its partition moved): the records no entry holds any more, to tombstone
        (``remember``: and kept a while in ``recent``)."""
        entry.released = True
        for record in entry.done:
            self.references[(record.route, record.alert_id)] -= 1
        return self._forget_unheld(entry.done, remember=remember)

    def _forget_unheld(self, records: Iterable[Done], *, remember: bool = True) -> list[Done]:
        unheld = []
        for record in records:
            key = (record.route, record.alert_id)
            if self.references.get(key, 0) > 0:
                continue
            self.references.pop(key, None)
            if self.recorded.pop(key, None) is None:  # forgotten already
                continue
            if remember:
                unheld.append(record)
                self._remember(key, record)
        return unheld

    def _remember(self, key: Key, record: Done) -> None:
        self.recent[key] = record
        if len(self.recent) > RECENT_RECORDS:
            self.recent.popitem(last=False)
