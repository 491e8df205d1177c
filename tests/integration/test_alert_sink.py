"""The alert sink against the real stack: a schema finding seen again after a restart does not alert twice."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from kafka_lineage.config import ClientSettings
from kafka_lineage.kafka_io import prepare_pipeline
from kafka_lineage.processes import alert_sink_process
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record
from kafka_lineage.schemas.wire import AvroCodec

from .conftest import consume_all
from .test_graph_sink import _event, _settings

pytestmark = pytest.mark.integration


def _finding(namespace: str, name: str) -> dict:
    return {"namespace": namespace, "name": name, "previousVersion": "v1", "newVersion": "v2",
            "previousSchema": '[{"name":"id","type":"bigint"}]', "newSchema": '[{"name":"id","type":"string"}]',
            "previousEventTime": "2024-05-01T12:00:00Z", "severity": "BREAKING",
            "changes": [{"path": "id", "kind": "TYPE_CHANGED", "oldType": "bigint", "newType": "string",
                         "severity": "BREAKING"}]}


def test_a_finding_redelivered_after_a_restart_alerts_once(clients: ClientSettings) -> None:
    prefix = f"test.alerts.{uuid.uuid4().hex[:8]}"
    env = {"LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
           "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq",
           "LINEAGE_ALERT_GROUP": f"{prefix}.first", "LINEAGE_PARTITIONS": "2", "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = _settings(env)
    prepare_pipeline(settings, 2)
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    event = _event("alerts", str(uuid.uuid4()), "ingest", "COMPLETE", 1)
    record = {"event": event_to_record(event), "schemaChanges": [_finding("s3://lake", f"{prefix}/orders")],
              "processing": {"dedupeId": uuid.uuid4().hex, "processedAt": datetime.now(UTC), "late": False,
                             "sourceTopic": None, "sourcePartition": None, "sourceOffset": None,
                             "producedAt": datetime.now(UTC), "renamedDatasets": []}}
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers})
    value = codec.encode(record, registry.registered_id(client, settings.normalized_topic, "normalized_event"))
    producer.produce(settings.normalized_topic, key=b"k", value=value)
    assert producer.flush(30) == 0

    def alerts_after(group: str) -> list:
        with alert_sink_process({**env, "LINEAGE_ALERT_GROUP": group}):
            deadline = time.monotonic() + 30
            while not consume_all(settings.kafka_bootstrap_servers, settings.drift_topic):
                assert time.monotonic() < deadline, "no alert"
                time.sleep(0.3)
            time.sleep(2)  # a repeat would be published by now
            return consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)

    assert len(alerts_after(f"{prefix}.first")) == 1
    # A new group re-reads the finding from the beginning, as a sink restarted before its commit would.
    assert len(alerts_after(f"{prefix}.second")) == 1
