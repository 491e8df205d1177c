"""Each stage's consumer group as the pipeline's own settings name it: what `lineage status` and the server's status
view ask Kafka about."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.sinks.alerts.settings import AlertSettings
from kafka_lineage.sinks.graph.settings import SinkSettings


def default_groups(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Stage -> consumer group id as the pipeline's own settings name them (LINEAGE_*_GROUP or the defaults)."""
    return {
        "processor": ProcessorSettings.from_env(env).group_id,
        "graph-sink": SinkSettings.from_env(env).group_id,
        "alert-sink": AlertSettings.from_env(env).group_id,
    }
