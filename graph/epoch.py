"""The graph's epoch: which graph a writer's memory of it (``graph.known``) is about.

Everything the sink writes merges monotonically (min, max, latest, bounded union), so rows it wrote stay a lower
bound of what the graph holds — until something deletes or lowers values: a fresh replay's wipe, a repair's
forgetting and settling, a bulk rebuild's new store. Those run inside ``deleting``: it gives the one ``GraphEpoch``
node a new id and marks a deleter at work before, and a new id and no deleter after. A writer reads the epoch first
and last in each write transaction (``check``): another id than the one its memory is about, or a deleter at work,
and it writes everything (remembers nothing) instead; an id that changes during its own transaction rolls the
transaction back. A deleter that dies leaves its mark: writers then write everything until the next deleter ends —
slower, never wrong (two deleters at once were never supported: the first to end clears the mark). Whoever deletes
by hand while writers run gives the graph a new epoch after (``renew``: ``lineage graph forget``), or a writer may
leave out a row it wrote before and the graph no longer holds. A graph without the node (a store just imported, a
graph emptied by hand) has no epoch: writers leave nothing out until ``ensure_constraints`` (every writer's start,
the import's last step, ``lineage graph indexes``) makes one. The node is not lineage: the fingerprint and every
query leave it out, and a wipe keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from neo4j import Driver

LABEL = "GraphEpoch"
CONSTRAINT = f"CREATE CONSTRAINT graph_epoch_key IF NOT EXISTS FOR (e:{LABEL}) REQUIRE e.key IS UNIQUE"
_NODE = f"MERGE (e:{LABEL} {{key: 'graph'}}) ON CREATE SET e.id = randomUUID(), e.deleting = 0 "
# Made by ensure_constraints, in a transaction of its own: made inside a write whose check then fails, it would be
# rolled back and made again, with another id, at every try.
ENSURE = _NODE + "RETURN e.id"
# Read only. No node (a store just imported, a graph wiped by hand): no epoch, so nothing is learned or left out.
# Two nodes (made by two writers before the constraint existed) are written alike; the smallest id is read.
READ_QUERY = (f"MATCH (e:{LABEL} {{key: 'graph'}}) RETURN e.id AS id, e.deleting AS deleting "
              "ORDER BY e.id LIMIT 1")
_BEGIN = _NODE + "SET e.id = randomUUID(), e.deleting = 1"
_END = _NODE + "SET e.id = randomUUID(), e.deleting = 0"
_RENEW = _NODE + "SET e.id = randomUUID()"


@dataclass(frozen=True)
class Epoch:
    id: str | None = None  # None: no graph read yet
    deleting: int = 0  # 1: a deleter at work

    @property
    def stable(self) -> bool:
        """Whether rows written now stay in the graph (no deleter at work)."""
        return self.id is not None and not self.deleting


UNKNOWN = Epoch()


class EpochChanged(Exception):
    """The graph's epoch is not the one a batch was prepared for: a deleter ran or runs."""

    def __init__(self, epoch: Epoch) -> None:
        super().__init__(f"the graph's epoch is now {epoch.id}" + (" (a deleter at work)" if epoch.deleting else ""))
        self.epoch = epoch


def read(tx: Any) -> Epoch:
    record = tx.run(READ_QUERY).single()
    return UNKNOWN if record is None else Epoch(record["id"], int(record["deleting"] or 0))


def check(tx: Any, expected: Epoch) -> None:
    """Raise ``EpochChanged`` unless the graph's epoch is ``expected``."""
    found = read(tx)
    if found != expected:
        raise EpochChanged(found)


def renew(driver: Driver) -> None:
    """A new epoch: running writers forget what they knew (``lineage graph forget``, after deleting by hand)."""
    driver.execute_query(_RENEW)


@contextmanager
def deleting(driver: Driver) -> Iterator[None]:
    """Around what deletes from the graph or lowers its values: writers remember nothing meanwhile, and forget what
    they knew after."""
    driver.execute_query(_BEGIN)
    try:
        yield
    finally:
        driver.execute_query(_END)
