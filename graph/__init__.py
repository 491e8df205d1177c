"""The lineage graph: its model (events → rows → Cypher statements), its Neo4j driver and write transaction, and
the read queries (traversals, partitions, backfill plans). The graph sink writes through it; the server, the CLI,
replay and the development tools read through it."""
