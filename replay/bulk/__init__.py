"""``lineage replay --fresh --bulk``: the graph rebuilt by an offline ``neo4j-admin database import full``.

``tables`` (pure) turns one ``GraphBatch`` of the whole topic into neo4j-admin CSV files; ``importer`` reads the
topic, stops the local Neo4j, imports, starts it and recreates the constraints.
"""
