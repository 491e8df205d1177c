"""``lineage replay``: a time window repairs exactly what it covers; the Spark engine rebuilds the same graph."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.replay.local import missing_history
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from tests.integration.conftest import lineage
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
LINEAGE_FACET = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def _dataset(name: str, fields: list[str], sources: list[str] = ()) -> dict:
    facets = {"schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET,
                         "fields": [{"name": f, "type": "string"} for f in fields]}}
    if sources:
        facets["columnLineage"] = {"_producer": PRODUCER, "_schemaURL": LINEAGE_FACET, "fields": {
            field: {"inputFields": [{"namespace": "s3://lake", "name": source, "field": field} for source in sources]}
            for field in fields}}
    return {"namespace": "s3a://lake", "name": name, "facets": facets}


def _runs(namespace: str, count: int, first: int, hour: int = 12) -> list[dict]:
    """``count`` runs of a chain of jobs (t{i} → job-{i} → t{i+1}), with column lineage, a repeated START and
    a COMPLETE published before its START; event times in ``hour`` of 2024-05-01."""
    events = []
    for i in range(first, first + count):
        run = {"runId": str(uuid.uuid4())}
        inputs = [_dataset(f"{namespace}/t{i}", ["id", "amount"])]
        outputs = [_dataset(f"{namespace}/t{i + 1}", ["id", "amount"], [f"{namespace}/t{i}"])]
        job = {"namespace": namespace, "name": f"job-{i}"}
        start, complete = ({"eventType": kind, "eventTime": f"2024-05-01T{hour:02d}:00:{i % 50 + second:02d}Z",
                            "producer": PRODUCER, "schemaURL": RUN_EVENT, "run": run, "job": job,
                            "inputs": inputs, "outputs": outputs} for kind, second in (("START", 0), ("COMPLETE", 5)))
        events += [complete, start, start] if i % 3 == 0 else [start, complete]
    return events


@pytest.fixture
def replay_topic(clients: ClientSettings) -> dict[str, str]:
    env = {"LINEAGE_EVENTS_TOPIC": f"test.replay.{uuid.uuid4().hex[:8]}.events", "LINEAGE_PARTITIONS": "3"}
    prepare_pipeline(ClientSettings.from_env({**os.environ, **env}), 3)
    return env


def _publish(settings: ClientSettings, events: list[dict]) -> None:
    publisher = EventPublisher.from_settings(settings)
    try:
        publisher.send([publisher.encode(event) for event in events]).result(60)
    finally:
        publisher.close()


def test_a_replayed_event_time_window_repairs_exactly_that_window(clients: ClientSettings,
                                                                    replay_topic: dict) -> None:
    settings = ClientSettings.from_env({**os.environ, **replay_topic})
    namespace = f"replay-{uuid.uuid4().hex[:6]}"
    before, window, after = _runs(namespace, 4, 0, 10), _runs(namespace, 4, 4, 12), _runs(namespace, 4, 8, 14)
    # The window's events arrive last, after later ones: replay selects by eventTime, not by Kafka time.
    _publish(settings, before + after)
    _publish(settings, window)
    full = lineage("replay", "--fresh", "--yes", env=replay_topic)
    assert "replayed 28 records" in full.stdout and "28 events written" in full.stdout, full.stdout
    with driver_for(settings) as driver:
        complete = graph_fingerprint(driver)
        with driver.session() as session:  # lose the window's runs and what only they wrote
            session.run("MATCH (j:Job {namespace: $ns}) WHERE j.name IN ['job-4', 'job-5', 'job-6', 'job-7'] "
                        "OPTIONAL MATCH (r:Run)-[:OF_JOB]->(j) DETACH DELETE r, j", ns=namespace).consume()
        assert graph_fingerprint(driver) != complete
    repair = lineage("replay", "--from", "2024-05-01T11:00:00Z", "--to", "2024-05-01T13:00:00+00:00",
                     env=replay_topic)
    assert "replayed 9 records" in repair.stdout, repair.stdout  # the window's events only
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == complete


def _wrong_runs(namespace: str) -> list[dict]:
    """Runs inside the 12:00 window that a corrected topic no longer has: a job of its own writing a dataset (with
    column lineage) and a partition, and a second run of job-5 reading a dataset nothing else knows."""
    ghost, extra = _runs(namespace, 1, 40, 12), _runs(namespace, 1, 5, 12)
    for event in ghost:
        event["job"] = {"namespace": namespace, "name": "job-ghost"}
        event["outputs"] = [_dataset(f"{namespace}/ghost", ["id"], [f"{namespace}/t5"]),
                            _dataset(f"{namespace}/daily/date=2024-05-01", ["id"])]
    for event in extra:
        event["eventTime"] = event["eventTime"].replace(":00:", ":40:")
        event["inputs"] = [_dataset(f"{namespace}/extra-input", ["id"])]
    return ghost + extra


def test_repair_removes_what_the_window_no_longer_says_and_nothing_outside(clients: ClientSettings,
                                                                           replay_topic: dict) -> None:
    settings = ClientSettings.from_env({**os.environ, **replay_topic})
    namespace = f"repair-{uuid.uuid4().hex[:6]}"
    _publish(settings, _runs(namespace, 4, 0, 10) + _runs(namespace, 4, 4, 12) + _runs(namespace, 4, 8, 14))
    lineage("replay", "--fresh", "--yes", env=replay_topic)  # the graph the corrected topic says
    with driver_for(settings) as driver:
        corrected = graph_fingerprint(driver)
    wrong_topic = {**replay_topic, "LINEAGE_EVENTS_TOPIC": replay_topic["LINEAGE_EVENTS_TOPIC"] + ".wrong"}
    wrong = ClientSettings.from_env({**os.environ, **wrong_topic})
    prepare_pipeline(wrong, 3)
    _publish(wrong, _wrong_runs(namespace))
    lineage("replay", env=wrong_topic)  # what the graph once held on top
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) != corrected
        assert driver.execute_query("MATCH (p:Partition {name: $name}) RETURN count(p)",
                                    name=f"{namespace}/daily").records[0][0] == 1
    plain = lineage("replay", "--from", "2024-05-01T11:00:00Z", "--to", "2024-05-01T13:00:00Z", env=replay_topic)
    assert "repaired" not in plain.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) != corrected  # a plain replay only adds
    repair = lineage("replay", "--from", "2024-05-01T11:00:00Z", "--to", "2024-05-01T13:00:00Z", "--repair",
                     env=replay_topic)
    assert "repaired: removed 2 runs" in repair.stdout, repair.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == corrected
    refused = lineage("replay", "--repair", env=replay_topic, check=False)
    assert refused.returncode != 0 and "--repair" in refused.stderr


def test_replay_on_spark_rebuilds_the_graph_the_local_replay_builds(clients: ClientSettings,
                                                                   replay_topic: dict) -> None:
    settings = ClientSettings.from_env({**os.environ, **replay_topic})
    namespace = f"spark-replay-{uuid.uuid4().hex[:6]}"
    events = _runs(namespace, 60, 0)
    random.Random(7).shuffle(events)
    _publish(settings, events)
    local = lineage("replay", "--fresh", "--yes", env=replay_topic)
    assert f"replayed {len(events)} records" in local.stdout, local.stdout
    with driver_for(settings) as driver:
        expected = graph_fingerprint(driver)
        with driver.session() as session:
            assert session.run("MATCH (:Job {namespace: $ns}) RETURN count(*)", ns=namespace).single()[0] == 60
    on_spark = lineage("replay", "--engine", "spark", "--spark-master", "local[2]", "--fresh", "--yes",
                       env=replay_topic)
    assert f"replayed {len(events)} records" in on_spark.stdout, on_spark.stdout + on_spark.stderr[-3000:]
    assert f"{len(events)} events written" in on_spark.stdout
    with driver_for(settings) as driver:
        assert graph_fingerprint(driver) == expected


def _graph_size(settings: ClientSettings) -> int:
    with driver_for(settings) as driver:
        return driver.execute_query("MATCH (n) RETURN count(n)").records[0][0]


def test_a_fresh_rebuild_asks_first_and_refuses_when_history_is_gone(clients: ClientSettings,
                                                                      replay_topic: dict) -> None:
    settings = ClientSettings.from_env({**os.environ, **replay_topic})
    namespace = f"replay-guard-{uuid.uuid4().hex[:6]}"
    _publish(settings, _runs(namespace, 3, 0))
    size = _graph_size(settings)
    unconfirmed = subprocess.run([sys.executable, "-m", "kafka_lineage.app.cli", "replay", "--fresh"],
                                 capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                                 env={**os.environ, **replay_topic})
    assert unconfirmed.returncode == 1 and "add --yes to confirm" in unconfirmed.stderr
    # the topic's first records deleted (as retention would): a fresh rebuild would lose their lineage
    consumer = Consumer({**settings.kafka_config(), "group.id": f"test-{uuid.uuid4()}"})
    partition = max(range(3), key=lambda p: consumer.get_watermark_offsets(
        TopicPartition(settings.events_topic, p), timeout=10)[1])
    consumer.close()
    admin = AdminClient(settings.kafka_config())
    for future in admin.delete_records([TopicPartition(settings.events_topic, partition, 1)]).values():
        future.result(timeout=30)
    refused = lineage("replay", "--fresh", "--yes", env=replay_topic, check=False)
    assert refused.returncode == 1 and f"partition {partition} from offset 1" in refused.stderr, refused.stderr
    assert "--allow-partial-history" in refused.stderr and "Traceback" not in refused.stderr
    assert _graph_size(settings) >= size  # neither refusal emptied the graph
    assert missing_history({0: 0, 1: 5, 2: -2}) == {1: 5}
