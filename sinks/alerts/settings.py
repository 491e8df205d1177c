"""The schema-drift alert sink's settings (`lineage alerts run`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_lineage.runtime.config import (
    aggregation_stops_setting,
    count_setting,
    crash_points_setting,
    flag_setting,
    merged_environment,
    positive_setting,
    sensitive_tags_setting,
)


@dataclass(frozen=True)
class AlertSettings:
    """The schema-drift alert sink (``lineage alerts run``)."""

    group_id: str = "lineage-alert-sink"
    partitions: int = 6
    depth: int = 5
    max_impacted: int = 200  # jobs, datasets and columns each listed in an alert (decision 89)
    poll_seconds: float = 0.5
    graph_group_id: str = "lineage-graph-sink"  # the graph sink's group: impact waits for its committed offsets
    graph_wait_seconds: float = 30.0  # at most this long per batch; then the alert says impactComplete=false
    query_timeout: float = 15.0  # an impact query's transaction timeout, and (plus a margin) its client-side bound
    report_seconds: float = 30.0
    # Sensitive-tag exposures (``exposure_watch.py``): a tag newly reaching a column of a dataset not cleared for it
    sensitive_alerts: bool = True
    sensitive_tags: tuple[str, ...] = ("pii",)
    sensitive_stop_at_aggregation: bool = False
    sensitive_check_seconds: float = 30.0  # how often the graph is compared with the exposures already alerted
    crash_points: str = ""  # tests and fault campaigns only: see runtime/crash_points.py and ALERT_CRASH_POINTS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AlertSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        return cls(
            group_id=values.get("LINEAGE_ALERT_GROUP", default.group_id),
            partitions=count_setting(values, "LINEAGE_PARTITIONS", default.partitions),
            depth=count_setting(values, "LINEAGE_IMPACT_DEPTH", default.depth),
            max_impacted=count_setting(values, "LINEAGE_IMPACT_MAX", default.max_impacted),
            poll_seconds=positive_setting(values, "LINEAGE_SINK_POLL_SECONDS", default.poll_seconds),
            graph_group_id=values.get("LINEAGE_SINK_GROUP", default.graph_group_id),
            graph_wait_seconds=positive_setting(values, "LINEAGE_ALERT_GRAPH_WAIT", default.graph_wait_seconds),
            query_timeout=positive_setting(values, "LINEAGE_ALERT_QUERY_TIMEOUT", default.query_timeout),
            report_seconds=positive_setting(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            sensitive_alerts=flag_setting(values, "LINEAGE_SENSITIVE_ALERTS", default.sensitive_alerts),
            sensitive_tags=sensitive_tags_setting(values, default.sensitive_tags),
            sensitive_stop_at_aggregation=aggregation_stops_setting(values),
            sensitive_check_seconds=positive_setting(values, "LINEAGE_SENSITIVE_CHECK_SECONDS",
                                                     default.sensitive_check_seconds),
            crash_points=crash_points_setting(values, "LINEAGE_ALERT_CRASH_POINTS", ALERT_CRASH_POINTS),
        )


# Where the alert sink can be made to die on purpose, the transaction open: a batch's alerts and offsets sent
# (before-commit), an exposure check's alerts and remembered exposures sent (exposure-before-commit).
ALERT_CRASH_POINTS = ("before-commit", "exposure-before-commit")
