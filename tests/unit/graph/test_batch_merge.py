"""Merging graph batches is a monoid: any split of a stream's events into batches, built separately and merged in
any order and grouping, gives the rows of the whole stream built at once (what a parallel rebuild relies on)."""

from __future__ import annotations

import copy
import json
import random

import pytest

from kafka_lineage.graph.batch import GraphBatch, RowBuilder, merge_batches, row_identity
from kafka_lineage.graph.events import graph_batch, graph_batches
from kafka_lineage_devtools.bench_events import run_pairs
from kafka_lineage_devtools.partition_workload import generate_partitions
from kafka_lineage_devtools.workload import Delivery, generate


def _streams() -> dict[str, list[dict]]:
    return {
        # late STARTs, duplicates, schema changes, parents, symlinks: delivered out of order
        "ground truth": generate(jobs=12, runs_per_job=6, seed=5, delivery=Delivery()).events,
        "partitions": generate_partitions(jobs=8, days=10, seed=3, backfill_from=3, backfill_days=2).events,
        "realistic": run_pairs(300, "realistic", seed=9, namespace="merge"),
    }


STREAMS = _streams()


def _merged(parts: list[GraphBatch], rng: random.Random) -> GraphBatch:
    """Merged in a random grouping: pairs of neighbours, picked at random, until one batch is left."""
    parts = list(parts)
    while len(parts) > 1:
        at = rng.randrange(len(parts) - 1)
        parts[at:at + 2] = [merge_batches(parts[at:at + 2])]
    return parts[0]


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("seed", range(6))
def test_any_split_and_merge_order_gives_the_whole_streams_rows(name, seed):
    events = STREAMS[name]
    rng = random.Random(seed)
    count = rng.randint(2, 7)
    split: list[list[dict]] = [[] for _ in range(count)]
    for event in events:
        split[rng.randrange(count)].append(copy.deepcopy(event))
    parts = [graph_batch(part) for part in split]
    rng.shuffle(parts)
    assert _merged(parts, rng) == graph_batch(events)


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_empty_batch_is_the_identity_and_merging_is_idempotent(name):
    whole = graph_batch(STREAMS[name])
    assert merge_batches([GraphBatch(), whole]) == whole == merge_batches([whole, GraphBatch()])
    assert merge_batches([whole, whole]) == whole
    assert merge_batches([]) == GraphBatch()


def test_merging_leaves_its_inputs_unchanged():
    events = STREAMS["ground truth"]
    first, second = graph_batch(events[::2]), graph_batch(events[1::2])
    before = copy.deepcopy((first, second))
    merge_batches([first, second])
    assert (first, second) == before


@pytest.mark.parametrize("name", list(STREAMS))
def test_rows_reduced_by_identity_in_any_order_give_the_whole_streams_rows(name):
    """What the Spark fold's shuffle does (``spark_fold.merged_rows``): every part's rows, arriving in an order the
    engine picks, merged by identity into one row each."""
    events = STREAMS[name]
    rng = random.Random(len(name))
    split: list[list[dict]] = [[] for _ in range(5)]
    for event in events:
        split[rng.randrange(5)].append(event)
    keyed = [((kind, row_identity(kind, row)), row) for part in split
             for kind, rows in graph_batch(part).rows.items() for row in rows]
    rng.shuffle(keyed)
    builder = RowBuilder()
    for (kind, _), row in keyed:
        builder.add(kind, copy.deepcopy(row))  # (each arrives unpickled: its own copy)
    reduced = {(kind, identity): row for kind, rows in builder.rows.items() for identity, row in rows.items()}
    whole = graph_batch(events)
    assert reduced == {
        (kind, row_identity(kind, row)): row for kind, rows in whole.rows.items() for row in rows}


def _sharing_facets(events: list[dict], rng: random.Random) -> list[dict]:
    """The events with one facets object per distinct dataset facets content and one job object per distinct job
    (as the decoder's FacetCache hands them out), some of them without an eventTime (all of one job's)."""
    shared: dict[str, dict] = {}
    events = copy.deepcopy(events)
    untimed_job = min(str(event["job"].get("name")) for event in events if isinstance(event.get("job"), dict))
    for event in events:
        if rng.random() < 0.1 or event.get("job", {}).get("name") == untimed_job:  # one job never has a time
            event.pop("eventTime", None)
        if isinstance(event.get("job"), dict):
            facets = event["job"].setdefault("facets", {})  # a job type and a document: rows kept by latest
            facets.setdefault("jobType", {"processingType": "BATCH", "integration": "SPARK", "jobType": "JOB"})
            facets.setdefault("documentation", {"description": f"job {event['job'].get('name')}"})
            event["job"] = shared.setdefault(json.dumps(event["job"], sort_keys=True), event["job"])
        datasets = [*event.get("inputs", []), *event.get("outputs", [])]
        if isinstance(event.get("dataset"), dict):
            datasets.append(event["dataset"])
        for dataset in datasets:
            if dataset.get("facets"):
                dataset["facets"] = shared.setdefault(json.dumps(dataset["facets"], sort_keys=True), dataset["facets"])
    return events


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("seed", range(3))
def test_datasets_and_jobs_sharing_one_object_give_the_rows_of_separate_objects(name, seed):
    """graph_batch builds a dataset's rows once per facets object and merges the other times in (events._dataset),
    and a job's once per job object (events._job): the same rows as building them for every event."""
    rng = random.Random(seed)
    events = STREAMS[name] * 3  # every dataset repeated, at its run's times
    rng.shuffle(events)
    events = _sharing_facets(events, rng)
    # the reference builds each event's rows alone (a batch of one shares nothing), merged by the model's rules
    batch = graph_batch(events)
    assert batch == merge_batches(graph_batch([event]) for event in json.loads(json.dumps(events)))
    untimed = [event["job"] for event in events if isinstance(event.get("job"), dict) and "eventTime" not in event]
    assert {(job["namespace"], job["name"]) for job in untimed} <= {(row["namespace"], row["name"])
                                                                    for row in batch["jobs"]}


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_stream_folded_in_slices_merges_to_the_whole_streams_rows(name):
    events = STREAMS[name]
    slices = list(graph_batches(iter(events), 37))
    assert len(slices) == -(-len(events) // 37)
    assert merge_batches(slices) == graph_batch(events)
