"""A job's latest-run pointer (``Job.latestRunId``) against a brute-force ranking of its runs, whatever order and
batches the events come in: STARTs late (a run's key goes down), runs without a START, equal start times."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest
from neo4j import Driver

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.runtime.config import ClientSettings

pytestmark = pytest.mark.integration

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/tests/integration/sinks"
BRUTE_FORCE = ("MATCH (x:Run)-[:OF_JOB]->(j:Job {namespace: $ns, name: 'job'}) "
               "WITH x, coalesce(x.startTime, x.lastEventTime, '') AS key ORDER BY key DESC, x.runId DESC LIMIT 1 "
               "RETURN [x.runId, key]")
POINTER = "MATCH (j:Job {namespace: $ns, name: 'job'}) RETURN [j.latestRunId, j.latestRunKey]"


@pytest.fixture(scope="module")
def driver(clients: ClientSettings) -> Iterator[Driver]:
    with driver_for(clients) as neo4j:
        ensure_constraints(neo4j)
        yield neo4j


def _event(ns: str, kind: str, run: str, minute: int) -> dict:
    return {"eventType": kind, "eventTime": f"2024-05-01T10:{minute:02d}:00Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": {"runId": run}, "job": {"namespace": ns, "name": "job"}, "inputs": [], "outputs": []}


@pytest.mark.parametrize("seed", range(6))
def test_the_pointer_is_the_latest_run_in_any_order_and_batching(driver: Driver, seed: int) -> None:
    rng = random.Random(seed)
    ns = f"latest-{uuid.uuid4().hex[:8]}"
    events = []
    for _ in range(12):
        run, start = str(uuid.UUID(int=rng.getrandbits(128), version=4)), rng.randrange(0, 40)
        if rng.random() < 0.8:
            events.append(_event(ns, "START", run, start))
        events.append(_event(ns, "COMPLETE", run, start + rng.randrange(1, 20)))
    rng.shuffle(events)
    at = 0
    while at < len(events):  # batches of 1-5 events, the pointer checked after each
        size = rng.randint(1, 5)
        write_events(driver, events[at:at + size])
        at += size
        pointer = driver.execute_query(POINTER, ns=ns).records[0][0]
        assert pointer == driver.execute_query(BRUTE_FORCE, ns=ns).records[0][0]


def test_a_late_start_hands_the_pointer_back(driver: Driver) -> None:
    ns, x, y = f"latest-{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), str(uuid.uuid4())
    write_events(driver, [_event(ns, "COMPLETE", x, 50)])  # x: no START yet, keyed by its last event (50)
    write_events(driver, [_event(ns, "START", y, 40)])
    assert driver.execute_query(POINTER, ns=ns).records[0][0][0] == x
    write_events(driver, [_event(ns, "START", x, 35)])  # x started at 35: y (40) is the latest
    assert driver.execute_query(POINTER, ns=ns).records[0][0][0] == y


def test_older_graphs_get_their_pointers_at_start(driver: Driver) -> None:
    ns = f"latest-{uuid.uuid4().hex[:8]}"
    write_events(driver, [_event(ns, "START", str(uuid.uuid4()), minute) for minute in (1, 5, 3)])
    driver.execute_query("MATCH (j:Job {namespace: $ns}) REMOVE j.latestRunId, j.latestRunKey", ns=ns)
    ensure_constraints(driver)
    assert driver.execute_query(POINTER, ns=ns).records[0][0] == driver.execute_query(BRUTE_FORCE, ns=ns
                                                                                      ).records[0][0] is not None
