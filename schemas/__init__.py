"""Shared event contract: Avro schemas, event models and registry helpers."""
