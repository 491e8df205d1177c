"""Fault suite (`make faults`): production shapes that once stopped the processor (issue 16, items 1-3).

Faust's producer refuses state records over 1,000,000 bytes; a worker that wrote one died, and its successor died on
the same batch. Each scenario runs a real worker on its own fresh topics and tables (so the first schema write also
meets changelog topics the producer has no metadata for yet) and checks that every event came out exactly once, the
worker stayed up, and no state record on the changelog topics grew with the stream.
"""

from __future__ import annotations

import random
import signal
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import processor_process
from tests.openlineage_samples import PRODUCER

from . import test_processor
from .test_processor import SCHEMA_URL, _exactly, _publish

pytestmark = [pytest.mark.integration, pytest.mark.fault]
FAUST_RECORD_LIMIT = 1_000_000
pipeline = test_processor.pipeline  # the processor tests' fixture: topics, group and data dir of their own


def _event(run_id: str, event_type: str, moment: datetime, job: str = "stream", run_facets: dict | None = None,
           **extra: object) -> dict:
    return {"eventType": event_type, "eventTime": moment.isoformat().replace("+00:00", "Z"), "producer": PRODUCER,
            "schemaURL": SCHEMA_URL, "run": {"runId": run_id, **({"facets": run_facets} if run_facets else {})},
            "job": {"namespace": "state-test", "name": job}, "inputs": [], "outputs": [], **extra}


def _changelog_records(clients: ClientSettings, group: str) -> dict[str, list[int]]:
    """Each of the worker's changelog topics → the sizes of its record values (tombstones count 0)."""
    consumer = Consumer({**clients.kafka_config(), "group.id": f"test-{uuid.uuid4()}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(group) and "changelog" in t]
        sizes: dict[str, list[int]] = {}
        for topic in topics:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            watermarks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
            ends = {p: high for p, (low, high) in watermarks.items() if high > low}
            assigned = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends]
            consumer.assign(assigned)
            sizes[topic] = []
            # positions, not records counted: each transaction leaves a commit marker no reader is handed
            def short(ends: dict[int, int] = ends, assigned: list[TopicPartition] = assigned) -> bool:
                return any(tp.offset < ends[tp.partition] for tp in consumer.position(assigned))

            while short():
                message = consumer.poll(5)
                if message is None:  # a poll that stepped over the last marker hands nothing
                    assert not short(), f"{topic}: {len(sizes[topic])} records read, positions " \
                                        f"{consumer.position(assigned)} short of {ends}"
                elif not message.error():
                    sizes[topic].append(len(message.value() or b""))
            consumer.unassign()
        return sizes
    finally:
        consumer.close()


def test_a_streaming_run_of_30000_running_events_keeps_its_state_small(clients: ClientSettings,
                                                                       pipeline: dict[str, str]) -> None:
    run = str(uuid.uuid4())
    begin = datetime.now(UTC) - timedelta(days=3)  # a compressed clock: one RUNNING event every 7 s of event time
    events = [_event(run, "START", begin)] + [
        _event(run, "RUNNING", begin + timedelta(seconds=7 * i),
               run_facets={"processing": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "records": i}})
        for i in range(1, 30_001)]
    with processor_process(pipeline) as worker:
        for start in range(0, len(events), 5_000):
            _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], events[start:start + 5_000])
        out = _exactly(clients, pipeline, len(events), timeout=600)
        worker.check()
    assert Counter(r["event"]["eventType"] for r in out) == {"START": 1, "RUNNING": 30_000}
    sizes = _changelog_records(clients, pipeline["LINEAGE_PROCESSOR_GROUP"])
    runs = next(v for k, v in sizes.items() if "-runs-" in k)
    dedupe = next(v for k, v in sizes.items() if "-dedupe-" in k)
    assert max(runs, default=0) < 1_000, f"the run's state grew to {max(runs)} bytes"  # written only while held
    assert len(dedupe) >= len(events) and max(dedupe) < 200  # one small entry per event


def test_a_12000_column_schema_and_its_change_across_a_restart(clients: ClientSettings,
                                                               pipeline: dict[str, str]) -> None:
    def wide(changed: int | None = None) -> list[dict]:
        fields = [{"name": f"feature_{i:05d}", "type": "double" if i != changed else "string",
                   "description": f"model feature number {i}"} for i in range(12_000)]
        return [{"namespace": "s3://features", "name": "wide_table", "facets": {"schema": {
            "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": fields}}}]

    now = datetime.now(UTC) - timedelta(hours=1)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    with processor_process(pipeline) as worker:  # the fresh pipeline's first schema write is a 12,000-column one
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"],
                 [_event(first, "START", now, "features"), _event(first, "COMPLETE", now, "features", outputs=wide())])
        _exactly(clients, pipeline, 2, timeout=120)
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(60) == 0, worker.output[-3000:]
    with processor_process(pipeline) as restarted:  # reads the wide schema back from the changelog
        later = now + timedelta(minutes=5)
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"],
                 [_event(second, "START", later, "features"),
                  _event(second, "COMPLETE", later, "features", outputs=wide(changed=4_321))])
        out = _exactly(clients, pipeline, 4, timeout=120)
        restarted.check()
    findings = [change for record in out for change in record["schemaChanges"]]
    assert len(findings) == 1, findings
    assert [(c["path"], c["kind"], c["severity"]) for c in findings[0]["changes"]] == \
        [("feature_04321", "TYPE_CHANGED", "BREAKING")]
    sizes = _changelog_records(clients, pipeline["LINEAGE_PROCESSOR_GROUP"])
    assert max(max(v, default=0) for v in sizes.values()) < FAUST_RECORD_LIMIT // 2


def test_5000_events_of_one_run_in_one_burst_all_come_out_once(clients: ClientSettings,
                                                               pipeline: dict[str, str]) -> None:
    run = str(uuid.uuid4())
    begin = datetime.now(UTC) - timedelta(hours=2)
    payload = {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "note": "x" * 600}
    burst = [_event(run, "RUNNING", begin + timedelta(seconds=i + 1),
                    run_facets={"progress": {**payload, "step": i}}) for i in range(4_998)]
    burst += [_event(run, "START", begin), _event(run, "COMPLETE", begin + timedelta(hours=1))]
    random.Random(16).shuffle(burst)
    with processor_process(pipeline) as worker:
        _publish(clients, pipeline["LINEAGE_EVENTS_TOPIC"], burst)
        out = _exactly(clients, pipeline, len(burst), timeout=300)
        worker.check()
    assert len({r["processing"]["dedupeId"] for r in out}) == len(burst)
    sizes = _changelog_records(clients, pipeline["LINEAGE_PROCESSOR_GROUP"])
    assert max(max(v, default=0) for v in sizes.values()) < FAUST_RECORD_LIMIT
