"""A dataset's schema versions in event-time order, whatever order the observations arrive in. Pure.

Drift is a property of the event-time history of a dataset's schema, not of arrival order: a run of day 2 that
arrives before day 1's still means the schema changed from day 1's version to day 2's, on day 2. ``SchemaHistory``
keeps a dataset's observations (event time, version) sorted by event time and says, for each new observation, which
changes between consecutive versions it reveals:

- in order (the newest so far): at most the change from the version before it;
- late (older than the newest kept): the change into it from its predecessor, and the change from it to its
  successor; a change it splits (A → C known, B arrives between them) is *superseded* by the two it really was, and
  named in them, so a consumer can tell that the earlier alert told half the story. A change already revealed is
  never revealed again: ``(from, to, at)`` identifies it, and the history remembers the ones it revealed while
  their ``at`` is kept. Flapping (A → B → A) is one change per transition.

So, whatever the order and repeats of arrival: every change of the event-time-sorted history is revealed exactly
once, and every revealed change that is not one of them was superseded.

Bounded: at most ``limit`` observations are kept. Over it, observations inside a stretch of one version go first,
oldest first (a version's first and last observations are what changes are made of; the ones inside only place a
late version exactly), then the oldest observations. A late observation older than everything kept is still
compared with the oldest kept one, and its change is marked ``beyond_history``: never silently dropped.

Ties (two versions at one instant, from two producers) are ordered by version, so the order of arrival never
changes the history.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafka_lineage.schemas.openlineage import event_instant

__all__ = ["DEFAULT_HISTORY_LIMIT", "Change", "SchemaHistory"]

DEFAULT_HISTORY_LIMIT = 64


@dataclass(frozen=True, slots=True)
class Change:
    """The schema of a dataset changed from ``previous_version`` (last seen at ``previous_time``) to ``version``
    (first seen at ``at``), both event times."""

    previous_version: str
    version: str
    previous_time: str
    at: str
    late: bool = False  # revealed by an observation older than the newest one kept
    supersedes: tuple[str, str, str] | None = None  # (from, to, at) of a change revealed before, split by this one
    beyond_history: bool = False  # the observation was older than every one kept: its successor may have been lost

    @property
    def identity(self) -> tuple[str, str, str]:
        return self.previous_version, self.version, self.at


@dataclass(frozen=True, slots=True, order=True)
class _Observation:
    instant: float
    version: str
    time: str


class SchemaHistory:
    """One dataset's observations, oldest first; ``entries()`` round-trips through ``SchemaHistory(entries)``."""

    def __init__(self, entries: Iterable[Sequence[str]] = (), *, revealed: Iterable[Sequence[str]] = (),
                 limit: int = DEFAULT_HISTORY_LIMIT, truncated: bool = False) -> None:
        if limit < 2:
            raise ValueError("limit must be at least 2")
        self.limit = limit
        self.truncated = truncated  # observations were dropped from the old end
        self._observations = sorted(_observation(time, version) for time, version in entries)
        self._revealed = {(before, after, at) for before, after, at in revealed}

    def entries(self) -> list[list[str]]:
        """(event time, version) pairs, oldest first: what a state table keeps, with ``revealed()``."""
        return [[observation.time, observation.version] for observation in self._observations]

    def revealed(self) -> list[list[str]]:
        """(from, to, at) of the changes revealed whose ``at`` is still kept."""
        return [list(identity) for identity in sorted(self._revealed, key=lambda identity: identity[2])]

    def versions(self) -> set[str]:
        """The versions kept: the ones whose fields a diff may still need."""
        return {observation.version for observation in self._observations}

    def latest(self) -> tuple[str, str] | None:
        """(event time, version) of the newest observation, or None."""
        return (self._observations[-1].time, self._observations[-1].version) if self._observations else None

    def changes(self) -> list[Change]:
        """The changes of the history as it stands, oldest first: what every arrival order reveals in the end, less
        the changes later observations split (a replay's answer, whatever order it read the observations in)."""
        observations = self._observations
        return [change for before, after in itertools.pairwise(observations)
                if (change := _change(before, after)) is not None]

    def observe(self, time: str, version: str) -> list[Change]:
        """Place one observation; the changes it reveals (none for a repeat or a version equal to its neighbours)."""
        new = _observation(time, version)
        observations = self._observations
        at = bisect.bisect_left(observations, new)
        if at < len(observations) and observations[at] == new:
            return []
        before = observations[at - 1] if at > 0 else None
        after = observations[at] if at < len(observations) else None
        late = after is not None
        split = _change(before, after) if before is not None and after is not None else None
        changes = []
        if before is not None and before.version != version:
            changes.append(Change(before.version, version, before.time, time, late))
        if after is not None and after.version != version:
            beyond = before is None and self.truncated
            changes.append(Change(version, after.version, time, after.time, late, beyond_history=beyond))
        if split is not None and all(change.identity != split.identity for change in changes):
            # the change known between the neighbours was really these
            changes = [Change(c.previous_version, c.version, c.previous_time, c.at, c.late, split.identity,
                              c.beyond_history) for c in changes]
        changes = [change for change in changes if change.identity not in self._revealed]
        self._revealed.update(change.identity for change in changes)
        observations.insert(at, new)
        self._bound()
        return changes

    def _bound(self) -> None:
        observations = self._observations
        while len(observations) > self.limit:
            inner = next((index for index in range(1, len(observations) - 1)
                          if observations[index - 1].version == observations[index].version
                          == observations[index + 1].version), None)
            if inner is not None:
                del observations[inner]
            else:
                del observations[0]
                self.truncated = True
        if len(self._revealed) > 2 * self.limit:  # only changes at a kept instant can come up again
            kept = {observation.time for observation in observations}
            self._revealed = {identity for identity in self._revealed if identity[2] in kept}


def _change(before: _Observation, after: _Observation) -> Change | None:
    if before.version == after.version:
        return None
    return Change(before.version, after.version, before.time, after.time)


def _observation(time: str, version: str) -> _Observation:
    return _Observation(event_instant(time), version, time)  # an unusable time sorts last, as everywhere
