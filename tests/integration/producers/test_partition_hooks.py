"""Partition facets and completion markers from the hooks, through the Kafka Avro transport to the real Kafka and
registry, and through the processor's normalization."""

from __future__ import annotations

import uuid

import pytest
from openlineage.client import OpenLineageClient

from kafka_lineage.processors.normalize import normalize_event
from kafka_lineage.producers.client.hooks import load_task, report_marker
from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.openlineage import partition_key
from kafka_lineage.schemas.partitions import FACET_KEY, partition_keys
from tests.integration.conftest import decoded_events

pytestmark = pytest.mark.integration


def test_partitions_and_markers_arrive_on_the_topic(clients: ClientSettings, events_topic: str) -> None:
    transport = KafkaAvroTransport(KafkaAvroConfig.from_dict({"topic": events_topic}))
    client = OpenLineageClient(transport=transport)
    namespace = f"partitions-{uuid.uuid4().hex[:6]}"
    with load_task("load-orders", "s3a://raw/orders/date=2025-12-24/orders.csv", "hive://metastore:9083",
                   "mart.orders", partition={"date": "2025-12-24", "region": "eu"}, required_marker="_SUCCESS",
                   job_namespace=namespace, client=client) as task:
        task.set_output_statistics(row_count=5)
    marker = report_marker(("hive://metastore:9083", "mart.orders"), "date=2025-12-24/region=eu", client=client)
    assert transport.close() is True

    received = decoded_events(clients, events_topic, 3)
    runs = [(key, event) for key, event in received if "run" in event]
    (marker_key, marker_json), = [(key, event) for key, event in received if "run" not in event]
    assert {event["eventType"] for _, event in runs} == {"START", "COMPLETE"}
    for key, event in runs:
        assert key == f"run:{namespace}/load-orders" and event["run"]["runId"] == task.run_id
        (read,), (wrote,) = event["inputs"], event["outputs"]
        assert (read["namespace"], read["name"]) == ("s3://raw", "orders")
        assert partition_keys(read["inputFacets"][FACET_KEY]) == (("date", "2025-12-24"),)
        facet = wrote["outputFacets"][FACET_KEY]
        assert partition_keys(facet) == (("date", "2025-12-24"), ("region", "eu"))
        assert (facet["source"], facet["requiredMarker"]) == ("hook", "_SUCCESS")
        assert normalize_event(event) == (event, [])  # the hooks name roots already: nothing left to split
    assert marker_key == partition_key(marker_json)
    assert marker_json["dataset"]["name"] == marker.dataset.name == "mart.orders"
    assert marker_json["dataset"]["facets"][FACET_KEY]["marker"] == "_SUCCESS"
