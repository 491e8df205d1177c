"""kafka_lineage: event-streaming OpenLineage pipeline on Kafka (app shell: CLI, configuration, local stack)."""
