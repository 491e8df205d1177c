"""Leaving out rows a writer knows the graph holds (``graph.known``) never changes the graph: the rows written, merged
as the statements merge them, are the whole stream's, whatever the batches, their order, the writers sharing the
graph, their restarts (a cold memory) and the memory's bound."""

from __future__ import annotations

import copy
import random

import pytest

from kafka_lineage.graph.batch import GraphBatch, merge_batches, merge_changes, merge_into, row_identity
from kafka_lineage.graph.epoch import UNKNOWN, Epoch
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.known import REMEMBERED, KnownRows
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.partition_workload import generate_partitions
from kafka_lineage_devtools.workload import Delivery, generate

EPOCH = Epoch("e1")
STREAMS = {
    # late STARTs, duplicates, schema changes, parents, symlinks: delivered out of order
    "ground truth": generate(jobs=12, runs_per_job=6, seed=5, delivery=Delivery()).events,
    "partitions": generate_partitions(jobs=8, days=10, seed=3, backfill_from=3, backfill_days=2).events,
    "realistic": run_pairs(600, "realistic", seed=9, namespace="known"),
}


def _memory(limit: int) -> KnownRows:
    known = KnownRows(limit)
    known.reset(EPOCH)
    return known


def _write(graph: GraphBatch, known: KnownRows, events: list[dict]) -> GraphBatch:
    """What a sink does with a batch: send the rows that change the graph, then learn the whole batch."""
    sent = known.changes(graph_batch(copy.deepcopy(events)))
    graph = merge_batches([graph, sent])
    known.learn(sent, EPOCH)
    return graph


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("seed", range(5))
def test_writers_that_leave_known_rows_out_build_the_whole_streams_rows(name: str, seed: int) -> None:
    rng = random.Random(seed)
    events = list(STREAMS[name])
    if seed % 2:  # in another order than the stream's (the ground truth's is already out of time order)
        rng.shuffle(events)
    writers = [_memory(rng.choice([10_000, 40])) for _ in range(rng.randint(1, 3))]  # 40: evicting all the time
    graph, at, left_out = GraphBatch(), 0, 0
    while at < len(events):
        size = rng.randint(1, 60)
        index = rng.randrange(len(writers))
        if rng.random() < 0.05:  # a restart: the memory starts empty
            left_out += writers[index].left_out
            writers[index] = _memory(writers[index].limit)
        graph = _write(graph, writers[index], events[at:at + size])
        at += size
    assert graph == graph_batch(copy.deepcopy(events))
    assert left_out + sum(writer.left_out for writer in writers) > 0  # the memory did leave rows out


def test_a_steady_stream_sends_its_repeated_rows_once() -> None:
    events = STREAMS["realistic"]
    known = _memory(100_000)
    first = graph_batch(copy.deepcopy(events[:300]))
    known.learn(first, EPOCH)
    again = graph_batch(copy.deepcopy(events[:300]))  # the same events once more: nothing changes
    assert {kind: rows for kind, rows in known.changes(again).rows.items() if kind in REMEMBERED} == {}
    later = graph_batch(copy.deepcopy(events[300:]))
    sent = known.changes(later)
    assert len(sent["schema_versions"]) < len(later["schema_versions"])  # known versions are not sent again
    assert sent["runs"] == later["runs"]  # a run's own rows always go


def test_rows_are_learned_only_for_the_memorys_stable_epoch() -> None:
    batch = graph_batch(copy.deepcopy(STREAMS["realistic"][:50]))
    known = KnownRows()
    known.learn(batch, UNKNOWN)
    assert len(known) == 0  # no epoch read yet
    known.reset(EPOCH)
    known.learn(batch, Epoch("e0"))  # prepared for another graph
    known.learn(batch, Epoch("e1", deleting=1))  # a deleter at work
    assert len(known) == 0 and known.changes(batch) == batch
    known.learn(batch, EPOCH)
    assert len(known) > 0 and known.changes(batch) != batch
    known.reset(Epoch("e2"))
    assert len(known) == 0 and known.changes(batch) == batch


@pytest.mark.parametrize("name", list(STREAMS))
def test_merge_changes_says_whether_a_merge_changes_the_row(name: str) -> None:
    events = STREAMS[name]
    halves = [graph_batch(copy.deepcopy(events[start::3])) for start in range(3)]
    compared = changed = 0
    for kind in REMEMBERED:
        for first in halves:
            by_identity = {row_identity(kind, row): row for row in first[kind]}
            for second in halves:
                for row in second[kind]:
                    old = by_identity.get(row_identity(kind, row))
                    if old is None:
                        continue
                    merged = dict(old)
                    merge_into(kind, merged, row)
                    assert merge_changes(kind, old, row) == (merged != old), (kind, old, row)
                    compared += 1
                    changed += merged != old
    assert compared and changed  # both answers were asked for
