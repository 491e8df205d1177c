"""The jobs of the streaming-engines scenario (``kafka_lineage_devtools.engines``), each run as ``python -m``."""
