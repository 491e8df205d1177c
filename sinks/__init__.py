"""Sinks: Neo4j lineage graph and schema-drift alerts."""
