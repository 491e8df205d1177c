"""Alert-sink faults (`make faults`): SIGTERM while Neo4j is down ends the sink promptly and loses nothing.

This stops the session stack's Neo4j, like the fault suite: run it on a stack of its own, never a shared one.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import alert_sink_process, pipeline_env
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from tests.integration.conftest import consume_all

from .test_alert_sink import normalized_with_finding
from .test_graph_sink import _settings

pytestmark = [pytest.mark.integration, pytest.mark.fault]


def _committed(settings: ClientSettings, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": group})
    try:
        partitions = [TopicPartition(settings.normalized_topic, p) for p in (0, 1)]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def test_sigterm_during_a_neo4j_outage_exits_within_10s_and_a_restart_publishes_the_alert(
        stack_settings: StackSettings, clients: ClientSettings, tmp_path: Path) -> None:
    prefix = f"test.alertfault.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 2, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2",
           "LINEAGE_ALERT_GRAPH_WAIT": "1"}  # no graph sink in this test
    settings = _settings(env)
    prepare_pipeline(settings, 2)
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    record = normalized_with_finding("alertfault", f"{prefix}/orders")
    stack = Stack(stack_settings)
    stack.down(["neo4j"])
    try:
        with alert_sink_process(env) as sink:
            producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
            value = codec.encode(record, registry.registered_id(client, settings.normalized_topic, "normalized_event"))
            producer.produce(settings.normalized_topic, key=b"k", value=value)
            assert producer.flush(30) == 0
            deadline = time.monotonic() + 60
            while "impact query failed" not in sink.output_so_far():  # the alert waits for Neo4j
                assert time.monotonic() < deadline, f"the sink never tried Neo4j:\n{sink.output_so_far()}"
                time.sleep(0.3)
            time.sleep(3)  # into its backoff
            asked = time.monotonic()
            sink.process.send_signal(signal.SIGTERM)
            sink.process.wait(10)  # raises TimeoutExpired if it hangs
            took = time.monotonic() - asked
            output = sink.output_so_far()
        assert took < 10, f"the alert sink took {took:.1f}s to stop"
        assert "alert sink stopped: 0 alerts published" in output, output
        assert not consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)
        # the batch holding the finding was not committed: the next start reads it again
        assert all(offset < 1 for offset in _committed(settings, env["LINEAGE_ALERT_GROUP"]).values())
    finally:
        stack.up(["neo4j"])
    with alert_sink_process(env):
        deadline = time.monotonic() + 60
        while not (alerts := consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)):
            assert time.monotonic() < deadline, "the restarted sink did not publish the pending alert"
            time.sleep(0.5)
        time.sleep(2)
    assert len(consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)) == len(alerts) == 1
