"""Local real stack: Kafka (KRaft), Apicurio Registry, Neo4j and Kafka Connect from Maven Central."""
