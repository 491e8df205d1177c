"""What a writer knows the graph holds, so a batch sends only rows that change it. Pure.

Every row kind merges by rules that form a semilattice (``graph.batch``: min, max, latest group, bounded union; the
Cypher statements apply the same rules), and nothing but a deleter (``graph.epoch``) lowers what the graph holds.
So a row this writer wrote, merged with the others it wrote of the same identity, is a lower bound of the graph's
element, whatever other writers did since; and a new row whose merge into that bound leaves the bound as it was
leaves the graph as it is too: it is left out. On a steady stream almost every event is another run of a known job,
with the same datasets, schemas and column lineage: their schema versions and HAS_SCHEMA edges, and any node or edge
an event repeats without a later time, are such rows. Rows whose times move (an edge's lastSeen, a job's
lastEventTime, a facet's latest document) still go, once per identity and batch (``graph_batch`` folds them).

A run's own rows (the run, OF_JOB, CHILD_OF, READ, WROTE, run totals, partition versions and their edges) are never
left out: a run is new, so remembering them would only push the repeating rows out. The memory is bounded (least
recently used out) and lives in one process: a restart, another epoch or a bulk rebuild start it empty, and an
empty memory leaves nothing out. A "latest"/"earliest" group is remembered by its order alone (what decides a
merge; a facet document's JSON is not kept), so a row costs ~0.6 KB besides its names.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from kafka_lineage.graph.batch import GraphBatch, Row, merge_changes, merge_into, row_identity
from kafka_lineage.graph.epoch import UNKNOWN, Epoch

# Kinds whose rows repeat across a job's runs (identity → merged row remembered). Not fields and HAS_FIELD: a
# batch holds one for every schema field (~30 an event), and the statements send only those no schema version
# of the batch carries (column lineage naming a field outside every schema; ARCHITECTURE 61), so checking them
# cost more than the few it would leave out.
REMEMBERED = frozenset({
    "jobs", "datasets", "facets", "schema_versions", "input_to", "outputs", "derives_from", "same_as",
    "depends_on", "has_schema", "partitions", "has_partition", "jobs_names", "datasets_names",
    "schema_versions_names"})
DEFAULT_LIMIT = 100_000  # rows (~1 KB each with their names); a realistic job's repeating rows are ~10-30


class KnownRows:
    """Rows known to be in the graph of one epoch. Thread safe: a sink prepares one batch while it writes another."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.epoch: Epoch = UNKNOWN
        self._rows: OrderedDict[tuple[str, Any], Row] = OrderedDict()
        self._lock = threading.Lock()
        self.left_out = 0  # rows left out of batches so far

    def __len__(self) -> int:
        return len(self._rows)

    def reset(self, epoch: Epoch) -> None:
        """Forget everything: the graph is now ``epoch``'s."""
        with self._lock:
            self._rows.clear()
            self.epoch = epoch

    def changes(self, batch: GraphBatch) -> GraphBatch:
        """``batch`` without the rows that would not change the graph (what to send, and then to ``learn``)."""
        with self._lock:
            if not self._rows:
                return batch
            rows = {}
            known = self._rows
            for kind, kind_rows in batch.rows.items():
                if kind not in REMEMBERED:
                    rows[kind] = kind_rows
                    continue
                kept = []
                for row in kind_rows:
                    key = (kind, row_identity(kind, row))
                    old = known.get(key)
                    if old is None:
                        kept.append(row)
                    else:
                        known.move_to_end(key)
                        if merge_changes(kind, old, row):
                            kept.append(row)
                self.left_out += len(kind_rows) - len(kept)
                if kept:
                    rows[kind] = tuple(kept)
        return GraphBatch(rows, batch.schema_paths)

    def learn(self, sent: GraphBatch, epoch: Epoch) -> None:
        """The graph of ``epoch`` now holds ``sent`` (what ``changes`` left of a batch; its transaction committed).
        The rows it left out changed nothing known: the known rows have only grown since."""
        with self._lock:
            if epoch != self.epoch or not epoch.stable:
                return
            known = self._rows
            for kind, kind_rows in sent.rows.items():
                if kind not in REMEMBERED:
                    continue
                for row in kind_rows:
                    key = (kind, row_identity(kind, row))
                    old = known.get(key)
                    if old is None:
                        known[key] = _compact(row)
                    else:
                        merged = dict(old)
                        merge_into(kind, merged, row)
                        known[key] = _compact(merged)
                        known.move_to_end(key)
            while len(known) > self.limit:
                known.popitem(last=False)


def _compact(row: Row) -> Row:
    """The row as remembered: a property group by its order (the rules compare orders, and a group's order ends
    with the digest of its values, so an equal order is an equal group)."""
    return {prop: {"order": value["order"]} if isinstance(value, dict) and "order" in value else value
            for prop, value in row.items()}
