"""Configuration: environment first (12-factor), then an optional YAML file, then defaults.

The YAML file (``LINEAGE_CONFIG``, else ``./lineage.yaml`` if present) holds the same keys as the environment,
e.g. ``KAFKA_BOOTSTRAP_SERVERS: 127.0.0.1:9092``. A bad value fails at start with a message naming the setting.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from kafka_lineage.runtime.crash_points import parse_crash_points

REGISTRY_TIMEOUT_SECONDS = 10
LOG_LEVEL_NAMES = ("crit", "error", "warn", "info", "debug")  # LINEAGE_LOG_LEVEL's values (Faust's names)


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it."""


def _load_yaml(path: Path) -> dict[str, str]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"LINEAGE_CONFIG: cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"LINEAGE_CONFIG: {path} is not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"LINEAGE_CONFIG: {path} must hold a mapping of setting names to values")
    return {str(k): str(v) for k, v in data.items()}


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's error on one line: its str() is several lines quoting the document around the problem."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def merged_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The effective settings: the YAML file's values overridden by the environment."""
    env = dict(os.environ if env is None else env)
    path = env.get("LINEAGE_CONFIG")
    if path:
        file_values = _load_yaml(Path(path))
    elif Path("lineage.yaml").is_file():
        file_values = _load_yaml(Path("lineage.yaml"))
    else:
        file_values = {}
    return {**file_values, **env}


def port_setting(values: Mapping[str, str], key: str, default: int) -> int:
    """The TCP port setting ``key``, or ``default`` when unset."""
    raw = values.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {raw!r}") from None
    return port_number(key, value)


def port_number(key: str, value: int) -> int:
    """``value`` if it is a TCP port (1-65535), else a ConfigError naming ``key`` (a setting or an option)."""
    if not 0 < value < 65536:
        raise ConfigError(f"{key}: {value} is not a valid TCP port")
    return value


def path_setting(values: Mapping[str, str], key: str, default: Path) -> Path:
    """The path setting ``key`` (user-expanded, absolute), or ``default`` when unset."""
    raw = values.get(key)
    return Path(raw).expanduser().resolve() if raw else default


def state_dir(values: Mapping[str, str]) -> Path:
    """Where this machine keeps the pipeline's local state (LINEAGE_STATE_DIR): the processor's table data, and the
    secrets a local stack generates (``NEO4J_PASSWORD_FILE_IN_STATE``)."""
    return path_setting(values, "LINEAGE_STATE_DIR", Path.home() / ".local/state/kafka-lineage")


# The Neo4j password a local stack generated, under the state dir: the default when no NEO4J_PASSWORD[_FILE] is set.
NEO4J_PASSWORD_FILE_IN_STATE = Path("neo4j") / "password"


def _neo4j_password(values: Mapping[str, str]) -> str:
    """NEO4J_PASSWORD, else the file NEO4J_PASSWORD_FILE names (a mounted secret), else a local stack's own."""
    if "NEO4J_PASSWORD" in values:
        return values["NEO4J_PASSWORD"]
    named = values.get("NEO4J_PASSWORD_FILE")
    path = Path(named).expanduser() if named else state_dir(values) / NEO4J_PASSWORD_FILE_IN_STATE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"NEO4J_PASSWORD_FILE: no such file {path}") from None
        return ""
    except OSError as exc:
        raise ConfigError(f"NEO4J_PASSWORD_FILE: cannot read {path}: {exc}") from None


@dataclass(frozen=True)
class TopicSettings:
    """How the pipeline's topics are created when they are missing. ``replication_factor`` -1 and ``None`` mean the
    broker's own defaults (`default.replication.factor`, `min.insync.replicas`, `log.retention.*`). The raw events
    topic keeps everything unless told otherwise: replay rebuilds the graph from it. ``create``: whether components
    may create missing topics and register missing schemas at start (default: only against a broker on this
    machine, i.e. the local stack; elsewhere topics are an operator's decision)."""

    replication_factor: int = -1
    min_insync_replicas: int | None = None
    events_retention_ms: int = -1
    retention_ms: int | None = None
    create: bool = True

    @classmethod
    def from_env(cls, values: Mapping[str, str], bootstrap: str) -> TopicSettings:
        return cls(
            replication_factor=_count_or_minus_one(values, "LINEAGE_TOPIC_REPLICATION_FACTOR", -1) or -1,
            min_insync_replicas=_count_or_minus_one(values, "LINEAGE_TOPIC_MIN_INSYNC_REPLICAS", None),
            events_retention_ms=_count_or_minus_one(values, "LINEAGE_EVENTS_RETENTION_MS", -1),
            retention_ms=_count_or_minus_one(values, "LINEAGE_TOPIC_RETENTION_MS", None),
            create=flag_setting(values, "LINEAGE_CREATE_TOPICS",
                                all(_loopback(server) for server in bootstrap.split(","))),
        )


def _loopback(server: str) -> bool:
    host = server.strip().rsplit(":", 1)[0].strip("[]").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def flag_setting(values: Mapping[str, str], key: str, default: bool) -> bool:
    raw = values.get(key, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {values[key]!r}")


def _count_or_minus_one(values: Mapping[str, str], key: str, default: int | None) -> int | None:
    """A positive integer, or -1 (Kafka's "unlimited" retention, "the broker's default" replication factor)."""
    raw = values.get(key, "").strip()
    if not raw:
        return default
    if raw == "-1":
        return -1
    return count_setting(values, key, 1)


@dataclass(frozen=True)
class ClientSettings:
    """How pipeline components reach Kafka, the registry and Neo4j (the local stack unless overridden)."""

    kafka_bootstrap_servers: str
    schema_registry_url: str
    neo4j_uri: str
    neo4j_user: str
    neo4j_password: str
    connect_url: str
    # The Neo4j installation (home with bin/neo4j and bin/neo4j-admin) serving neo4j_uri on this machine: only
    # `lineage replay --fresh --bulk` needs it (an offline import into the stopped database); "" = not local.
    neo4j_home: str = ""
    kafka_security: tuple[tuple[str, str], ...] = ()  # librdkafka security settings (SASL/SSL), see kafka_config
    kafka_debug: str = ""  # librdkafka debug contexts for every client ("eos,protocol"): a diagnosis, logged to stderr
    registry_auth: str = ""  # "user:password" (HTTP basic auth)
    registry_ca_location: str = ""
    events_topic: str = "openlineage.events"
    normalized_topic: str = "lineage.events.normalized"
    drift_topic: str = "lineage.schema-drift"
    dlq_topic: str = "lineage.dlq"
    topics: TopicSettings = TopicSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientSettings:
        """A component's settings: the environment over the YAML file, the Neo4j password read where it is kept."""
        return cls.from_values(merged_environment(env))

    @classmethod
    def from_values(cls, values: Mapping[str, str], *, neo4j: bool = True) -> ClientSettings:
        """Settings from ``values`` alone. ``neo4j=False`` (the emitter inside a user's job): no Neo4j secret is
        looked for, no file read."""
        # Unset addresses are this machine's, at the ports a local stack listens on (LINEAGE_*_PORT).
        def local(key: str, port: int) -> str:
            return f"127.0.0.1:{port_setting(values, key, port)}"

        bootstrap = values.get("KAFKA_BOOTSTRAP_SERVERS", local("LINEAGE_KAFKA_PORT", 9092))
        return cls(
            kafka_bootstrap_servers=bootstrap,
            schema_registry_url=values.get(
                "SCHEMA_REGISTRY_URL", f"http://{local('LINEAGE_REGISTRY_PORT', 8081)}/apis/ccompat/v7"),
            neo4j_uri=_neo4j_uri(values, f"bolt://{local('LINEAGE_NEO4J_BOLT_PORT', 7687)}"),
            neo4j_user=values.get("NEO4J_USER", "neo4j"),
            neo4j_password=_neo4j_password(values) if neo4j else "",
            connect_url=values.get("LINEAGE_CONNECT_URL", f"http://{local('LINEAGE_CONNECT_PORT', 8083)}"),
            neo4j_home=values.get("LINEAGE_NEO4J_HOME", "").strip(),
            kafka_security=_kafka_security(values),
            kafka_debug=values.get("LINEAGE_KAFKA_DEBUG", "").strip(),
            registry_auth=_registry_auth(values),
            registry_ca_location=existing_file_setting(values, "SCHEMA_REGISTRY_CA_LOCATION"),
            events_topic=values.get("LINEAGE_EVENTS_TOPIC", cls.events_topic),
            normalized_topic=values.get("LINEAGE_NORMALIZED_TOPIC", cls.normalized_topic),
            drift_topic=values.get("LINEAGE_DRIFT_TOPIC", cls.drift_topic),
            dlq_topic=values.get("LINEAGE_DLQ_TOPIC", cls.dlq_topic),
            topics=TopicSettings.from_env(values, bootstrap),
        )

    def registry_config(self) -> dict[str, object]:
        """SchemaRegistryClient settings. Always a timeout: without one a registry that stops answering mid-request
        hangs the caller forever."""
        config: dict[str, object] = {"url": self.schema_registry_url, "timeout": REGISTRY_TIMEOUT_SECONDS}
        if self.registry_auth:
            config["basic.auth.user.info"] = self.registry_auth
        if self.registry_ca_location:
            config["ssl.ca.location"] = self.registry_ca_location
        return config

    def kafka_config(self, extra: Mapping[str, object] | None = None) -> dict[str, object]:
        """A confluent-kafka (librdkafka) client config: bootstrap servers, the security settings, then ``extra``."""
        debug = {"debug": self.kafka_debug} if self.kafka_debug else {}
        return {"bootstrap.servers": self.kafka_bootstrap_servers, **dict(self.kafka_security), **debug,
                **(extra or {})}

    @property
    def secrets(self) -> tuple[str, ...]:
        """Configured secret values, for the log redactor."""
        kafka_secrets = tuple(value for key, value in self.kafka_security if "password" in key)
        return (self.neo4j_password, self.registry_auth.partition(":")[2], *kafka_secrets)

    def value_schemas(self) -> dict[str, str]:
        """Topic -> name of its value schema in schemas/avro."""
        return {
            self.events_topic: "openlineage_event",
            self.normalized_topic: "normalized_event",
            self.drift_topic: "schema_drift_alert",
            self.dlq_topic: "dead_letter",
        }


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def existing_file_setting(values: Mapping[str, str], key: str) -> str:
    raw = values.get(key, "")
    if raw and not Path(raw).expanduser().is_file():
        raise ConfigError(f"{key}: no such file: {raw}")
    return str(Path(raw).expanduser()) if raw else ""


def _kafka_security(values: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_* and KAFKA_SSL_* → librdkafka settings, checked together at start."""
    protocol = values.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL: one of {', '.join(_PROTOCOLS)}; got {protocol!r}")
    settings = {"security.protocol": protocol} if protocol != "PLAINTEXT" else {}
    if protocol.startswith("SASL_"):
        mechanism = values.get("KAFKA_SASL_MECHANISM", "PLAIN").upper()
        if mechanism not in _MECHANISMS:
            raise ConfigError(f"KAFKA_SASL_MECHANISM: one of {', '.join(_MECHANISMS)}; got {mechanism!r}")
        for key in ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
            if not values.get(key):
                raise ConfigError(f"{key}: required with KAFKA_SECURITY_PROTOCOL={protocol}")
        settings |= {"sasl.mechanism": mechanism, "sasl.username": values["KAFKA_SASL_USERNAME"],
                     "sasl.password": values["KAFKA_SASL_PASSWORD"]}
    elif values.get("KAFKA_SASL_USERNAME") or values.get("KAFKA_SASL_MECHANISM"):
        raise ConfigError(f"KAFKA_SASL_*: set, but KAFKA_SECURITY_PROTOCOL={protocol} uses no SASL "
                          "(SASL_PLAINTEXT or SASL_SSL)")
    for key, setting in (("KAFKA_SSL_CA_LOCATION", "ssl.ca.location"),
                         ("KAFKA_SSL_CERTIFICATE_LOCATION", "ssl.certificate.location"),
                         ("KAFKA_SSL_KEY_LOCATION", "ssl.key.location")):
        if path := existing_file_setting(values, key):
            if not protocol.endswith("SSL"):
                raise ConfigError(f"{key}: set, but KAFKA_SECURITY_PROTOCOL={protocol} uses no TLS")
            settings[setting] = path
    if values.get("KAFKA_SSL_KEY_PASSWORD"):
        settings["ssl.key.password"] = values["KAFKA_SSL_KEY_PASSWORD"]
    return tuple(settings.items())


def _neo4j_uri(values: Mapping[str, str], default: str) -> str:
    """bolt/neo4j, with +s (TLS, verified) or +ssc (TLS, self-signed) — the driver's URI schemes."""
    uri = values.get("NEO4J_URI", default)
    scheme = uri.partition("://")[0]
    if scheme not in ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc") or "://" not in uri:
        raise ConfigError(f"NEO4J_URI: expected bolt[+s|+ssc]:// or neo4j[+s|+ssc]://host:port, got {uri!r}")
    return uri


def _registry_auth(values: Mapping[str, str]) -> str:
    raw = values.get("SCHEMA_REGISTRY_BASIC_AUTH", "")
    if raw and ":" not in raw:
        raise ConfigError("SCHEMA_REGISTRY_BASIC_AUTH: expected user:password")
    return raw


def finite_setting(values: Mapping[str, str], key: str, default: float) -> float:
    """A number setting, or ``default`` when unset; "nan", "inf" and words are refused."""
    raw = values.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}: expected a number, got {raw!r}") from None
    if not math.isfinite(value):  # float() takes "nan" and "inf", and nan <= 0 is False
        raise ConfigError(f"{key}: expected a finite number, got {raw!r}")
    return value


def positive_setting(values: Mapping[str, str], key: str, default: float) -> float:
    value = finite_setting(values, key, default)
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {values[key]!r}")
    return value


def count_setting(values: Mapping[str, str], key: str, default: int) -> int:
    """A positive integer setting (partitions, batch sizes, byte limits): "0.5", "nan" or "1e3" are refused rather
    than truncated by int() or failing later."""
    raw = values.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}: expected a number (a positive integer), got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {raw!r}")
    return value


def sensitive_tags_setting(values: Mapping[str, str], default: tuple[str, ...] = ("pii",)) -> tuple[str, ...]:
    """LINEAGE_SENSITIVE_TAGS: the classification tags followed along column lineage, comma-separated (the server's
    answers, ``lineage tags``, the alert sink's exposure alerts)."""
    return tuple(t.strip() for t in values.get("LINEAGE_SENSITIVE_TAGS", "").split(",") if t.strip()) or default


def aggregation_stops_setting(values: Mapping[str, str]) -> bool:
    """LINEAGE_SENSITIVE_AGGREGATION: ``keep`` (an aggregate of a sensitive column stays sensitive) or ``stop``."""
    value = values.get("LINEAGE_SENSITIVE_AGGREGATION", "keep").strip().lower()
    if value not in ("keep", "stop"):
        raise ConfigError(f"LINEAGE_SENSITIVE_AGGREGATION: keep or stop, got {value!r}")
    return value == "stop"


def crash_points_setting(values: Mapping[str, str], key: str, known: tuple[str, ...]) -> str:
    text = values.get(key, "")
    try:
        parse_crash_points(text, known)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return text


def transaction_timeout_setting(values: Mapping[str, str], default: int) -> int:
    key = "LINEAGE_PROCESSOR_TRANSACTION_TIMEOUT_MS"
    value = count_setting(values, key, default)
    if not 1_000 <= value <= 900_000:  # the broker's transaction.max.timeout.ms is 15 minutes by default
        raise ConfigError(f"{key}: must be between 1000 and 900000 ms, got {value}")
    return value


@dataclass(frozen=True)
class OperationsSettings:
    """What operators see: each long-running component's metrics/health endpoint, the log format and level."""

    metrics_host: str = "127.0.0.1"
    processor_metrics_port: int = 9101
    sink_metrics_port: int = 9102
    alert_metrics_port: int = 9103
    bridge_metrics_port: int = 9104
    router_metrics_port: int = 9105
    log_format: str = "text"
    log_level: str = ""  # one of LOG_LEVEL_NAMES; empty: the command's own default

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperationsSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        log_format = values.get("LINEAGE_LOG_FORMAT", default.log_format).lower()
        if log_format not in ("text", "json"):
            raise ConfigError(f"LINEAGE_LOG_FORMAT: text or json, got {log_format!r}")
        log_level = values.get("LINEAGE_LOG_LEVEL", "").strip().lower()
        if log_level and log_level not in LOG_LEVEL_NAMES:
            raise ConfigError(f"LINEAGE_LOG_LEVEL: one of {', '.join(LOG_LEVEL_NAMES)}; got {log_level!r}")
        return cls(
            metrics_host=values.get("LINEAGE_METRICS_HOST", default.metrics_host),
            processor_metrics_port=_listen_port(values, "LINEAGE_PROCESSOR_METRICS_PORT",
                                                default.processor_metrics_port),
            sink_metrics_port=_listen_port(values, "LINEAGE_SINK_METRICS_PORT", default.sink_metrics_port),
            alert_metrics_port=_listen_port(values, "LINEAGE_ALERT_METRICS_PORT", default.alert_metrics_port),
            bridge_metrics_port=_listen_port(values, "LINEAGE_BRIDGE_METRICS_PORT", default.bridge_metrics_port),
            router_metrics_port=_listen_port(values, "LINEAGE_ROUTER_METRICS_PORT", default.router_metrics_port),
            log_format=log_format,
            log_level=log_level,
        )


def _listen_port(values: Mapping[str, str], key: str, default: int) -> int:
    """A port to listen on; 0 = any free port (the component prints the one it got)."""
    return 0 if values.get(key) == "0" else port_setting(values, key, default)


