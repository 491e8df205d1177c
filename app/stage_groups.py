"""Each stage's consumer group as the pipeline's own settings name it: what `lineage status` and the server's status
view ask Kafka about."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.runtime.config import merged_environment
from kafka_lineage.sinks.alerts.settings import AlertSettings
from kafka_lineage.sinks.graph.settings import SinkSettings


def default_groups(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Stage -> consumer group id as the pipeline's own settings name them (LINEAGE_*_GROUP or the defaults); the
    alert router only where it is configured (LINEAGE_ALERT_ROUTES): it is optional, and one never deployed is no
    stage without a consumer."""
    groups = {
        "processor": ProcessorSettings.from_env(env).group_id,
        "graph-sink": SinkSettings.from_env(env).group_id,
        "alert-sink": AlertSettings.from_env(env).group_id,
    }
    values = merged_environment(env)
    if values.get("LINEAGE_ALERT_ROUTES", "").strip():
        groups["alert-router"] = values.get("LINEAGE_ROUTER_GROUP", "lineage-alert-router")
    return groups
