"""The lineage server's settings (`lineage serve`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_lineage.graph.queries import NODE_LIMIT
from kafka_lineage.runtime.config import (
    ConfigError,
    aggregation_stops_setting,
    count_setting,
    existing_file_setting,
    merged_environment,
    port_setting,
    positive_setting,
    sensitive_tags_setting,
)


@dataclass(frozen=True)
class ServerSettings:
    """The lineage server (`lineage serve`): the HTTP API and web UI over the graph. Reads only."""

    host: str = "127.0.0.1"
    port: int = 5050
    token: str = ""  # bearer token every /api request must carry (empty: none asked)
    cors_origins: tuple[str, ...] = ()  # origins allowed to call the API from a browser (empty: CORS off)
    tls_cert: str = ""
    tls_key: str = ""
    max_depth: int = 20  # lineage depth asked beyond this is capped (and the answer says so)
    max_nodes: int = NODE_LIMIT  # nodes per lineage answer; more is cut to the nearest, flagged truncated
    max_results: int = 1000  # rows per list answer (limit above this is capped)
    query_timeout: float = 10.0  # seconds a question may keep Neo4j busy
    sensitive_tags: tuple[str, ...] = ("pii",)  # classification tags followed along column lineage
    sensitive_stop_at_aggregation: bool = False  # whether an aggregated column still carries a sensitive tag

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        origins = tuple(o.strip() for o in values.get("LINEAGE_SERVER_CORS_ORIGINS", "").split(",") if o.strip())
        settings = cls(
            host=values.get("LINEAGE_SERVER_HOST", default.host),
            port=port_setting(values, "LINEAGE_SERVER_PORT", default.port),
            token=values.get("LINEAGE_SERVER_TOKEN", default.token),
            cors_origins=origins,
            tls_cert=existing_file_setting(values, "LINEAGE_SERVER_TLS_CERT"),
            tls_key=existing_file_setting(values, "LINEAGE_SERVER_TLS_KEY"),
            max_depth=count_setting(values, "LINEAGE_SERVER_MAX_DEPTH", default.max_depth),
            max_nodes=count_setting(values, "LINEAGE_SERVER_MAX_NODES", default.max_nodes),
            max_results=count_setting(values, "LINEAGE_SERVER_MAX_RESULTS", default.max_results),
            query_timeout=positive_setting(values, "LINEAGE_SERVER_QUERY_TIMEOUT", default.query_timeout),
            sensitive_tags=sensitive_tags_setting(values, default.sensitive_tags),
            sensitive_stop_at_aggregation=aggregation_stops_setting(values),
        )
        if bool(settings.tls_cert) != bool(settings.tls_key):
            raise ConfigError("LINEAGE_SERVER_TLS_CERT and LINEAGE_SERVER_TLS_KEY: set both (HTTPS) or neither")
        return settings
