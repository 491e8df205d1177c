"""The batch protocol under crashes at every step: a model of Kafka (events, changelog partitions, committed offsets,
the normalized topic) driven by the real ``ProcessorCore`` in the shell's order (``processors/stream.py``: outputs,
then ``Output.state_writes`` to their changelog partitions, then the input offsets).

Committed in one transaction, a batch survives a crash at any step whole or not at all, and every event comes out
exactly once. Written as independent appends, as before transactions (outputs acknowledged, then each changelog
partition, then Faust's commit), a crash between the dedupe partition and the runs partition leaves a COMPLETE's
dedupe id durable and its held state nowhere: the restarted worker drops the COMPLETE as a duplicate. The model
must find that loss too, or it could not find one at all.
"""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections import defaultdict
from typing import Any

import pytest

from kafka_lineage.processors.core import Incoming, Output, ProcessorCore
from kafka_lineage.processors.identity import dedupe_id
from kafka_lineage.schemas.openlineage import FacetCache, event_to_record, partition_key
from tests.unit.processors.test_processor_core import CODEC, PRODUCED_MS, PRODUCER

PARTITIONS = 2


class Crash(Exception):
    pass


class Kafka:
    """What survives a worker: the events, the committed changelog records, offsets and outputs."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events: dict[int, list[Incoming]] = defaultdict(list)
        for event in events:
            key = partition_key(event).encode()
            partition = sum(key) % PARTITIONS
            log = self.events[partition]
            log.append(Incoming(key, CODEC.encode(event_to_record(event), 1), partition, len(log), PRODUCED_MS,
                                "events"))
        self.changelog: dict[tuple[str, int | str], list[tuple[str, Any]]] = defaultdict(list)
        self.committed = dict.fromkeys(range(PARTITIONS), 0)
        self.normalized: list[str] = []  # dedupe ids of the committed outputs

    def table(self, name: str) -> dict[str, Any]:
        """A table as recovery rebuilds it from the changelog (values through JSON, as Faust's codec writes)."""
        data: dict[str, Any] = {}
        for (table, _where), records in self.changelog.items():
            if table == name:
                for key, value in records:
                    if value is None:
                        data.pop(key, None)
                    else:
                        data[key] = json.loads(json.dumps(value))
        return data


class Worker:
    """A worker from what Kafka holds; ``crash_at``: the protocol step (counted over its life) where it dies."""

    def __init__(self, kafka: Kafka, atomic: bool, crash_at: int | None, rng: random.Random, now: float) -> None:
        self.kafka, self.atomic, self.crash_at, self.rng, self.now = kafka, atomic, crash_at, rng, now
        self.steps = 0
        self.core = ProcessorCore(CODEC, kafka.table("runs"), kafka.table("schemas"), dedupe=kafka.table("dedupe"),
                                  window_seconds=2.0, facets=FacetCache())
        self.position = dict(kafka.committed)

    def step(self) -> None:
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            raise Crash

    def run(self) -> None:
        while any(self.position[p] < len(self.kafka.events[p]) for p in range(PARTITIONS)):
            batch = []
            for partition in range(PARTITIONS):
                take = self.rng.randint(0, 4)
                batch += self.kafka.events[partition][self.position[partition]:self.position[partition] + take]
            if not batch:
                continue
            self.now += 0.5
            offsets = {record.partition: record.offset + 1 for record in batch}
            for record in batch:
                self.position[record.partition] = record.offset + 1
            self.publish(self.core.process(batch, self.now), offsets)
            self.publish(self.core.expire(self.now, set(range(PARTITIONS))), {})
        self.now += 60  # every window passed: nothing may stay held
        self.publish(self.core.expire(self.now, set(range(PARTITIONS))), {})

    def publish(self, output: Output, offsets: dict[int, int]) -> None:
        outputs = [record["processing"]["dedupeId"] for _key, record in output.normalized]
        by_partition: dict[tuple[str, int | str], list[tuple[str, Any]]] = defaultdict(list)
        for table, key, where, value in output.state_writes():
            by_partition[(table, where)].append((key, value))
        if self.atomic:  # one transaction: visible only once every step passed
            for _ in range(1 + len(by_partition) + 1):
                self.step()
            self.kafka.normalized += outputs
            for where, records in by_partition.items():
                self.kafka.changelog[where] += records
            self.kafka.committed.update(offsets)
        else:  # outputs acknowledged, then each changelog partition, then the offset commit
            self.step()
            self.kafka.normalized += outputs
            for where, records in by_partition.items():
                self.step()
                self.kafka.changelog[where] += records
            self.step()
            self.kafka.committed.update(offsets)
        self.core.written(output)


def workload(rng: random.Random, runs: int) -> list[dict[str, Any]]:
    """Runs whose COMPLETE often comes before their START (held for reordering), some events sent twice."""
    events = []
    for _ in range(runs):
        run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        lifecycle = [_event(run, kind, second) for second, kind in enumerate(("START", "RUNNING", "COMPLETE"))]
        if rng.random() < 0.6:
            lifecycle.reverse()
        events += lifecycle
        if rng.random() < 0.3:
            events.append(rng.choice(lifecycle))
    return events


def _event(run: str, event_type: str, second: int) -> dict[str, Any]:
    return {"eventType": event_type, "eventTime": f"2024-05-01T00:00:{second:02d}Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run}, "job": {"namespace": "tests", "name": f"job-{run[:8]}"}, "inputs": [], "outputs": []}


def trial(seed: int, atomic: bool) -> tuple[int, int]:
    """(events lost, events output twice) after one crash at a random step and a restart."""
    rng = random.Random(seed)
    events = workload(rng, runs=6)
    expected = {dedupe_id(event) for event in events}
    kafka = Kafka(events)
    with contextlib.suppress(Crash):
        Worker(kafka, atomic, crash_at=rng.randint(1, 60), rng=rng, now=1000.0).run()
    Worker(kafka, atomic, crash_at=None, rng=rng, now=2000.0).run()
    counts: dict[str, int] = defaultdict(int)
    for identity in kafka.normalized:
        counts[identity] += 1
    assert set(counts) <= expected
    return len(expected - set(counts)), sum(1 for count in counts.values() if count > 1)


@pytest.mark.parametrize("first", range(0, 600, 200))
def test_a_transactional_batch_loses_and_repeats_nothing_whatever_step_a_crash_hits(first: int) -> None:
    for seed in range(first, first + 200):
        assert trial(seed, atomic=True) == (0, 0), f"seed {seed}"


def test_without_transactions_the_model_finds_the_lost_complete() -> None:
    lost = sum(trial(seed, atomic=False)[0] > 0 for seed in range(600))
    assert lost > 0  # the same crashes, with the writes landing one by one
