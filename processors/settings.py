"""The stream processor's settings (`lineage processor`; replay reads the same)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_lineage.runtime.config import (
    LOG_LEVEL_NAMES,
    ConfigError,
    count_setting,
    crash_points_setting,
    merged_environment,
    path_setting,
    positive_setting,
    state_dir,
    transaction_timeout_setting,
)
from kafka_lineage.runtime.transactions import TRANSACTION_TIMEOUT_MS
from kafka_lineage.schemas.partitions import parse_patterns


@dataclass(frozen=True)
class ProcessorSettings:
    """The stream processor (``lineage processor``); several workers with one group id share the partitions."""

    group_id: str = "lineage-processor"
    partitions: int = 6
    window_seconds: float = 2.0
    dedupe_ttl_seconds: float = 86_400.0
    max_event_time_ahead_seconds: float = 3600.0
    aliases: str = ""
    # Where partition keys are read from dataset paths (schemas.partitions.parse_patterns: `default` = `hive;date`,
    # `none`, or `;`-separated templates such as `<date:\d{8}>`); checked by the processor when it starts.
    partition_patterns: str = "default"
    batch_size: int = 1000
    batch_seconds: float = 0.05
    data_dir: Path = Path(".lineage/processor")
    log_level: str = "info"
    report_seconds: float = 30.0
    # Each worker's Kafka transactions (outputs, state and input offsets commit together). Unset, a worker takes the
    # lowest free slot of its host and data directory (processors/stream.worker_slot_id), so a restarted worker gets
    # its predecessor's id and aborts what it left open at once; set it where that does not hold (a pod name).
    transactional_id: str = ""
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
    crash_points: str = ""  # fault campaigns only: see runtime/crash_points.py
    # Observations (event time, version) of a dataset's schema kept to place late versions (schemas/schema_history)
    schema_history_limit: int = 64

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProcessorSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        level = values.get("LINEAGE_LOG_LEVEL", default.log_level).lower()
        if level not in LOG_LEVEL_NAMES:
            raise ConfigError(f"LINEAGE_LOG_LEVEL: one of {', '.join(LOG_LEVEL_NAMES)}; got {level!r}")
        return cls(
            group_id=values.get("LINEAGE_PROCESSOR_GROUP", default.group_id),
            partitions=count_setting(values, "LINEAGE_PARTITIONS", default.partitions),
            window_seconds=positive_setting(values, "LINEAGE_REORDER_WINDOW", default.window_seconds),
            dedupe_ttl_seconds=positive_setting(values, "LINEAGE_DEDUPE_TTL", default.dedupe_ttl_seconds),
            max_event_time_ahead_seconds=positive_setting(values, "LINEAGE_MAX_EVENT_TIME_AHEAD",
                                                   default.max_event_time_ahead_seconds),
            aliases=values.get("LINEAGE_NAMESPACE_ALIASES", default.aliases),
            partition_patterns=_partition_patterns(values, default.partition_patterns),
            batch_size=count_setting(values, "LINEAGE_PROCESSOR_BATCH", default.batch_size),
            batch_seconds=positive_setting(values, "LINEAGE_PROCESSOR_BATCH_SECONDS", default.batch_seconds),
            data_dir=path_setting(values, "LINEAGE_PROCESSOR_DATA_DIR", state_dir(values) / "processor"),
            log_level=level,
            report_seconds=positive_setting(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            transactional_id=values.get("LINEAGE_PROCESSOR_TRANSACTIONAL_ID", default.transactional_id),
            transaction_timeout_ms=transaction_timeout_setting(values, default.transaction_timeout_ms),
            crash_points=crash_points_setting(values, "LINEAGE_PROCESSOR_CRASH_POINTS", PROCESSOR_CRASH_POINTS),
            schema_history_limit=_schema_history_limit(values, default.schema_history_limit),
        )


def _schema_history_limit(values: Mapping[str, str], default: int) -> int:
    limit = count_setting(values, "LINEAGE_SCHEMA_HISTORY", default)
    if not 2 <= limit <= 4096:  # a change needs two observations; every one is kept in the dataset's state record
        raise ConfigError(f"LINEAGE_SCHEMA_HISTORY: observations of a dataset's schema kept, 2..4096; got {limit}")
    return limit


# Where a processor worker can be made to die on purpose, in the order a batch's transaction passes them.
PROCESSOR_CRASH_POINTS = ("outputs-sent", "state-sent", "before-commit", "after-commit")


def _partition_patterns(values: Mapping[str, str], default: str) -> str:
    """``LINEAGE_PARTITION_PATTERNS`` as given, refused at start (not per event) when it does not parse."""
    text = values.get("LINEAGE_PARTITION_PATTERNS", "").strip() or default
    try:
        parse_patterns(text)
    except ValueError as exc:
        raise ConfigError(f"LINEAGE_PARTITION_PATTERNS: {exc}") from None
    return text
