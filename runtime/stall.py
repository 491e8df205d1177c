"""When a quiet consumer should look at its group's progress, and which partitions count as stuck: a pure watch
shared by the sinks' members (``sinks/consumer.py``) and the processor (``processors/stream.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


def stuck_partitions(ends: Mapping[int, int], before: Mapping[int, int], now: Mapping[int, int]) -> list[int]:
    """Partitions with records past the group's committed offset (``now``) that did not move since ``before``; a
    partition without a committed offset counts as offset 0."""
    return sorted(partition for partition, end in ends.items()
                  if max(now.get(partition, 0), 0) < end and now.get(partition) == before.get(partition))


class StallWatch:
    """When a member that got no records should look at its group's progress, and what the last look found."""

    def __init__(self, stall_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_seconds, self.clock = stall_seconds, clock
        self._quiet_since = clock()
        self._looked: dict[int, int] | None = None
        self._unreadable = 0  # looks in a row that could not read the group's progress

    def busy(self) -> None:
        """Records came (or a batch was handled): the member is not stalled; looks start over."""
        self._quiet_since, self._looked, self._unreadable = self.clock(), None, 0

    def due(self) -> bool:
        return self.clock() - self._quiet_since >= self.stall_seconds

    def postpone(self) -> None:
        """No look possible now (the broker did not answer): the next one in ``stall_seconds``."""
        self._quiet_since = self.clock()

    def unreadable(self) -> bool:
        """A look could not read the group's progress (the broker did not answer): the next look in
        ``stall_seconds``; True when the previous look could not either. A member whose own queries to its group
        keep failing while it gets no records is as stuck as one whose partitions do not move (seen: a sink's
        consumer silent for minutes after its session timed out in a broker restart), and a new consumer costs
        nothing when the broker really is away."""
        self._unreadable += 1
        self._quiet_since = self.clock()
        return self._unreadable >= 2

    def stuck(self, ends: Mapping[int, int], committed: Mapping[int, int]) -> list[int]:
        """A look: the partitions stuck since the previous look (none at the first), the next look due later."""
        self._unreadable = 0
        before, self._looked = self._looked, dict(committed)
        self._quiet_since = self.clock()
        return [] if before is None else stuck_partitions(ends, before, committed)
