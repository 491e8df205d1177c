"""The local stack's settings: where it keeps its state, which versions of the servers it runs, on which ports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_lineage.runtime.config import (
    NEO4J_PASSWORD_FILE_IN_STATE,
    ConfigError,
    merged_environment,
    path_setting,
    port_setting,
    state_dir,
)


def _memory(values: Mapping[str, str], key: str, default: str) -> str:
    raw = values.get(key) or default
    if not (raw[:-1].isdigit() and raw[-1].lower() in "mg"):
        raise ConfigError(f"{key}: expected a JVM memory size such as 512m or 2g, got {raw!r}")
    return raw


@dataclass(frozen=True)
class StackSettings:
    """Where and how the local stack runs. Defaults fit a 2-core, 24 GiB machine with every service up."""

    state_dir: Path
    cache_dir: Path
    java_homes: tuple[str, ...]
    kafka_version: str
    apicurio_version: str
    apicurio_converter_version: str
    neo4j_version: str
    kafka_port: int
    kafka_controller_port: int
    kafka_sasl_port: int
    registry_port: int
    registry_management_port: int
    neo4j_bolt_port: int
    neo4j_http_port: int
    connect_port: int
    kafka_heap: str
    registry_heap: str
    neo4j_heap: str
    neo4j_pagecache: str
    connect_heap: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackSettings:
        values = merged_environment(env)
        home = Path.home()
        return cls(
            state_dir=state_dir(values),
            cache_dir=path_setting(values, "LINEAGE_CACHE_DIR", home / ".cache/kafka-lineage"),
            java_homes=tuple(values.get(key, "") for key in ("LINEAGE_JAVA_HOME", "JAVA_HOME")),
            kafka_version=values.get("LINEAGE_KAFKA_VERSION", "4.3.1"),
            apicurio_version=values.get("LINEAGE_APICURIO_VERSION", "3.3.3"),
            # Apicurio's Kafka Connect converter: its 3.x jars are not on Maven Central; the 2.6 line talks to the
            # 3.x server through the v2 REST API, which the server keeps.
            apicurio_converter_version=values.get("LINEAGE_APICURIO_CONVERTER_VERSION", "2.6.13.Final"),
            neo4j_version=values.get("LINEAGE_NEO4J_VERSION", "5.26.30"),
            kafka_port=port_setting(values, "LINEAGE_KAFKA_PORT", 9092),
            kafka_controller_port=port_setting(values, "LINEAGE_KAFKA_CONTROLLER_PORT", 9093),
            kafka_sasl_port=port_setting(values, "LINEAGE_KAFKA_SASL_PORT", 9094),
            registry_port=port_setting(values, "LINEAGE_REGISTRY_PORT", 8081),
            registry_management_port=port_setting(values, "LINEAGE_REGISTRY_MANAGEMENT_PORT", 8091),
            neo4j_bolt_port=port_setting(values, "LINEAGE_NEO4J_BOLT_PORT", 7687),
            neo4j_http_port=port_setting(values, "LINEAGE_NEO4J_HTTP_PORT", 7474),
            connect_port=port_setting(values, "LINEAGE_CONNECT_PORT", 8083),
            kafka_heap=_memory(values, "LINEAGE_KAFKA_HEAP", "1g"),
            registry_heap=_memory(values, "LINEAGE_REGISTRY_HEAP", "768m"),
            neo4j_heap=_memory(values, "LINEAGE_NEO4J_HEAP", "1g"),
            neo4j_pagecache=_memory(values, "LINEAGE_NEO4J_PAGECACHE", "512m"),
            connect_heap=_memory(values, "LINEAGE_CONNECT_HEAP", "768m"),
        )

    @property
    def neo4j_password_file(self) -> Path:
        return self.state_dir / NEO4J_PASSWORD_FILE_IN_STATE

    @property
    def kafka_sasl_password_file(self) -> Path:
        """The local broker's SASL/PLAIN listener password for user ``lineage`` (generated on first start)."""
        return self.state_dir / "kafka" / "sasl-password"
