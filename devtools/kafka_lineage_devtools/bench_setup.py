"""What every bench that publishes needs first: a topic of its own (light: no bench imports another for it)."""

from __future__ import annotations

from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas import registry
from kafka_lineage_devtools.stack.smoke import ensure_topic


def bench_topic(settings: ClientSettings) -> str:
    """A topic of its own with the event schema registered, so benchmarks never mix into real lineage."""
    topic = "lineage.bench.events"
    ensure_topic(settings.kafka_bootstrap_servers, topic, partitions=3)
    client = SchemaRegistryClient(settings.registry_config())
    reports = registry.register(client, {topic: "openlineage_event"})
    if not all(report.ok for report in reports):
        raise RuntimeError(f"cannot register the bench topic's schema: {reports}")
    return topic
