"""Emitters that put OpenLineage events on `openlineage.events` (Avro): Python transport, Spark, HTTP, hooks."""
