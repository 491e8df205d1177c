"""The graph sink's settings (`lineage sink`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_lineage.runtime.config import (
    count_setting,
    merged_environment,
    positive_setting,
)


@dataclass(frozen=True)
class SinkSettings:
    """The Neo4j graph sink (``lineage sink``)."""

    group_id: str = "lineage-graph-sink"
    partitions: int = 6
    batch_size: int = 2000
    poll_seconds: float = 0.5
    report_seconds: float = 30.0
    known_rows: int = 100_000  # rows the sink remembers the graph holds (graph.known: ~1 KB each with their names)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SinkSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        return cls(
            group_id=values.get("LINEAGE_SINK_GROUP", default.group_id),
            partitions=count_setting(values, "LINEAGE_PARTITIONS", default.partitions),
            batch_size=count_setting(values, "LINEAGE_SINK_BATCH", default.batch_size),
            poll_seconds=positive_setting(values, "LINEAGE_SINK_POLL_SECONDS", default.poll_seconds),
            report_seconds=positive_setting(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            known_rows=count_setting(values, "LINEAGE_SINK_KNOWN_ROWS", default.known_rows),
        )
