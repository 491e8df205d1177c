"""Which input records a batch may process, and which offsets it may then commit: a pure ledger per partition.

The processor commits its input offsets inside the batch's Kafka transaction (``stream.py``), never through
Faust's acknowledgement bookkeeping, which counts records its consumer dropped as processed. The ledger knows, for
each owned partition, the next offset to process: the group's committed offset, read from Kafka after every
assignment. A record below it was processed and committed already (a redelivery after a seek): it is dropped. A
record at it is admitted and moves it on. A record past it leaves a *gap*: the records between were either never
delivered to this worker (a consumer that skipped them) or are not readable data (transaction markers, aborted
records, records deleted by retention). Only a fresh read from Kafka can tell the two apart, so the ledger admits
nothing of that partition until the shell has checked (``confirm_gap``); a gap that is really there is crossed, one
that is not makes the shell start again from the committed offsets. So a committed offset never passes a record
that was not processed, and every assignment starts the ledger over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


class Positioned(Protocol):
    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Gap:
    """Records ``expected`` .. ``found - 1`` of ``partition`` were not delivered before ``found``."""

    partition: int
    expected: int
    found: int


@dataclass
class Admitted:
    """What a batch may process, in arrival order, and what was held back."""

    records: list = field(default_factory=list)
    redelivered: int = 0  # below the next offset: processed and committed before
    gaps: list[Gap] = field(default_factory=list)  # first gap per partition; its records and the rest wait
    unowned: int = 0  # of partitions this worker does not own (any more)


class RecordsSkipped(Exception):
    """The consumer passed over records Kafka holds: nothing past them may be processed or committed."""

    def __init__(self, gap: Gap) -> None:
        self.gap = gap
        super().__init__(f"partition {gap.partition}: records from offset {gap.expected} were not delivered before "
                         f"offset {gap.found}, but Kafka holds them")


class OffsetLedger:
    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # partition → next offset to process
        self.epoch = 0  # counts resets: a batch read in an older epoch may not be committed

    def reset(self) -> None:
        """A rebalance: positions are read from Kafka again before anything is admitted."""
        self._next.clear()
        self.epoch += 1

    def unknown(self, partitions: Iterable[int]) -> set[int]:
        """The partitions among ``partitions`` whose next offset must be read first (``start``)."""
        return {partition for partition in partitions if partition not in self._next}

    def start(self, positions: Mapping[int, int]) -> None:
        """The next offset of each partition: its committed offset (or where reading begins without one)."""
        for partition, offset in positions.items():
            self._next.setdefault(partition, offset)

    def admit(self, batch: Iterable[Positioned], owned: set[int]) -> Admitted:
        """Split ``batch`` by the ledger; admitted records advance their partition's next offset."""
        result = Admitted()
        blocked: set[int] = set()
        for record in batch:
            partition, offset = record.partition, record.offset
            if partition not in owned:
                result.unowned += 1
                continue
            if partition in blocked:
                continue
            expected = self._next[partition]
            if offset < expected:
                result.redelivered += 1
            elif offset == expected:
                result.records.append(record)
                self._next[partition] = offset + 1
            else:
                result.gaps.append(Gap(partition, expected, offset))
                blocked.add(partition)
        return result

    def admit_checked(self, batch: list[Positioned], owned: set[int], gap_is_real: Callable[[Gap], bool]
                      ) -> Admitted:
        """``admit``, with every gap checked by ``gap_is_real`` (a read from Kafka): a real gap is crossed and its
        partition's held-back records admitted; a gap Kafka has records in raises ``RecordsSkipped``."""
        result = self.admit(batch, owned)
        gaps, result.gaps = result.gaps, []
        while gaps:
            for gap in gaps:
                if not gap_is_real(gap):
                    raise RecordsSkipped(gap)
                self.confirm_gap(gap)
            partitions = {gap.partition for gap in gaps}
            again = self.admit([record for record in batch if record.partition in partitions], owned)
            result.records += again.records
            gaps = again.gaps
        return result

    def confirm_gap(self, gap: Gap) -> None:
        """Kafka holds no readable record in the gap: reading goes on from where the records resumed."""
        if self._next.get(gap.partition) == gap.expected:
            self._next[gap.partition] = gap.found

    def positions(self) -> dict[int, int]:
        return dict(self._next)


def membership_problem(assigned: tuple[int, str] | None, current: tuple[int, str]) -> str | None:
    """Why offsets may not be committed under the consumer's ``current`` (generation, member id), given the one the
    worker's current assignment came with; None when they may. The broker checks transactional offsets against the
    group only when a generation or a member id is given: with generation -1 and no member id (what the consumer
    holds right after its session expired) it takes them unchecked, even into a group with live members, and a
    zombie's stale offsets would overwrite its successor's."""
    generation, member_id = current
    if generation < 0 or not member_id:
        return f"the consumer is not a member of its group now (generation {generation}, member {member_id!r})"
    if assigned is None:
        return "no assignment is in force (partitions were revoked)"
    if current != assigned:
        return (f"the consumer rejoined its group (generation {generation}) since this worker's assignment "
                f"(generation {assigned[0]})")
    return None
