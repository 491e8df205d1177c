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
from kafka_lineage.schemas.partitions import parse_patterns

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
            create=_flag(values, "LINEAGE_CREATE_TOPICS", all(_loopback(server) for server in bootstrap.split(","))),
        )


def _loopback(server: str) -> bool:
    host = server.strip().rsplit(":", 1)[0].strip("[]").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def _flag(values: Mapping[str, str], key: str, default: bool) -> bool:
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
    return _count(values, key, 1)


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
            registry_ca_location=_existing_file(values, "SCHEMA_REGISTRY_CA_LOCATION"),
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


def _existing_file(values: Mapping[str, str], key: str) -> str:
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
        if path := _existing_file(values, key):
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


def _finite(values: Mapping[str, str], key: str, default: float) -> float:
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


def _positive(values: Mapping[str, str], key: str, default: float) -> float:
    value = _finite(values, key, default)
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {values[key]!r}")
    return value


def _count(values: Mapping[str, str], key: str, default: int) -> int:
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
    max_nodes: int = 2000  # nodes per lineage answer; more is cut to the nearest, flagged truncated
    max_results: int = 1000  # rows per list answer (limit above this is capped)
    query_timeout: float = 10.0  # seconds a question may keep Neo4j busy

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
            tls_cert=_existing_file(values, "LINEAGE_SERVER_TLS_CERT"),
            tls_key=_existing_file(values, "LINEAGE_SERVER_TLS_KEY"),
            max_depth=_count(values, "LINEAGE_SERVER_MAX_DEPTH", default.max_depth),
            max_nodes=_count(values, "LINEAGE_SERVER_MAX_NODES", default.max_nodes),
            max_results=_count(values, "LINEAGE_SERVER_MAX_RESULTS", default.max_results),
            query_timeout=_positive(values, "LINEAGE_SERVER_QUERY_TIMEOUT", default.query_timeout),
        )
        if bool(settings.tls_cert) != bool(settings.tls_key):
            raise ConfigError("LINEAGE_SERVER_TLS_CERT and LINEAGE_SERVER_TLS_KEY: set both (HTTPS) or neither")
        return settings


MAX_COLLECTOR_PROCESSES = 64  # each holds a producer's connections and threads: more is a typo, not a plan


@dataclass(frozen=True)
class CollectorSettings:
    """The OpenLineage HTTP collector. Port 5000 is where OpenLineage clients look for Marquez by default."""

    host: str = "127.0.0.1"
    port: int = 5000
    token: str = ""
    max_body_bytes: int = 16 * 1024 * 1024
    ack_timeout: float = 30.0
    max_events: int = 10_000  # per request: more is 413 before any event is validated
    max_concurrent: int = 16  # requests being read, validated or published at once; more are 503 + Retry-After
    read_timeout: float = 30.0  # to receive a request's whole body (a slow or stalled upload is 408)
    queue_bytes: int = 256 * 1024 * 1024  # librdkafka's local queue: beyond it requests are 503 at once
    tls_cert: str = ""  # PEM certificate (chain) and key: with both, the collector serves HTTPS only
    tls_key: str = ""
    # librdkafka's linger.ms for the collector's records. The pipeline's 20 ms is paid in full by every request of
    # one event (its answer waits for the acknowledgement); records of concurrent requests are still batched while
    # a produce request is in flight, so a short linger costs little batching.
    linger_ms: float = 1.0
    # aiohttp's line per request (at INFO): ~15% of the collector's CPU on one-event requests. Refused requests are
    # logged as warnings either way, and the metrics count the accepted ones.
    access_log: bool = False
    # Worker processes sharing the port (SO_REUSEPORT) under one supervisor: one event loop answers at most
    # ~1,500-2,000 one-event requests/s. 1 by default: each worker holds its own producer, registry client and
    # caches, and a container's CPU quota is not what the machine's core count says; "auto" is one per usable core.
    processes: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CollectorSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        return cls(
            host=values.get("LINEAGE_COLLECTOR_HOST", default.host),
            port=port_setting(values, "LINEAGE_COLLECTOR_PORT", default.port),
            token=values.get("LINEAGE_COLLECTOR_TOKEN", default.token),
            max_body_bytes=_count(values, "LINEAGE_COLLECTOR_MAX_BYTES", default.max_body_bytes),
            ack_timeout=_positive(values, "LINEAGE_COLLECTOR_ACK_TIMEOUT", default.ack_timeout),
            max_events=_count(values, "LINEAGE_COLLECTOR_MAX_EVENTS", default.max_events),
            max_concurrent=_count(values, "LINEAGE_COLLECTOR_MAX_CONCURRENT", default.max_concurrent),
            read_timeout=_positive(values, "LINEAGE_COLLECTOR_READ_TIMEOUT", default.read_timeout),
            queue_bytes=_count(values, "LINEAGE_COLLECTOR_QUEUE_BYTES", default.queue_bytes),
            tls_cert=_existing_file(values, "LINEAGE_COLLECTOR_TLS_CERT"),
            tls_key=_existing_file(values, "LINEAGE_COLLECTOR_TLS_KEY"),
            linger_ms=cls._linger(values, "LINEAGE_COLLECTOR_LINGER_MS", default.linger_ms),
            access_log=_flag(values, "LINEAGE_COLLECTOR_ACCESS_LOG", default.access_log),
            processes=cls._processes(values, "LINEAGE_COLLECTOR_PROCESSES"),
        )._checked()

    def _checked(self) -> CollectorSettings:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("LINEAGE_COLLECTOR_TLS_CERT and LINEAGE_COLLECTOR_TLS_KEY: set both (HTTPS) or neither")
        return self

    def producer_config(self) -> dict[str, str]:
        """The collector's librdkafka settings: a bounded queue, and records of a request that was already answered
        503 (no acknowledgement within ``ack_timeout``) expire soon after it instead of holding the queue for five
        minutes."""
        return {"queue.buffering.max.kbytes": str(max(1, self.queue_bytes // 1024)),
                "message.timeout.ms": str(int(self.ack_timeout * 1000) + 5000),
                "linger.ms": f"{self.linger_ms:g}"}

    @staticmethod
    def _processes(values: Mapping[str, str], key: str) -> int:
        """A number of worker processes, 1 to MAX_COLLECTOR_PROCESSES, or "auto": the cores this process may run on
        (its CPU affinity, within the same bound)."""
        if values.get(key, "").strip().lower() == "auto":
            return max(1, min(MAX_COLLECTOR_PROCESSES, len(os.sched_getaffinity(0))))
        value = _count(values, key, 1)
        if value > MAX_COLLECTOR_PROCESSES:
            raise ConfigError(f"{key}: at most {MAX_COLLECTOR_PROCESSES} processes, got {values[key]!r}")
        return value

    @staticmethod
    def _linger(values: Mapping[str, str], key: str, default: float) -> float:
        """A producer linger in milliseconds: 0 (send at once) up to librdkafka's 900,000."""
        value = _finite(values, key, default)
        if not 0 <= value <= 900_000:
            raise ConfigError(f"{key}: must be between 0 and 900000 ms, got {values[key]!r}")
        return value


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
    transaction_timeout_ms: int = 30_000
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
            partitions=_count(values, "LINEAGE_PARTITIONS", default.partitions),
            window_seconds=_positive(values, "LINEAGE_REORDER_WINDOW", default.window_seconds),
            dedupe_ttl_seconds=_positive(values, "LINEAGE_DEDUPE_TTL", default.dedupe_ttl_seconds),
            max_event_time_ahead_seconds=_positive(values, "LINEAGE_MAX_EVENT_TIME_AHEAD",
                                                   default.max_event_time_ahead_seconds),
            aliases=values.get("LINEAGE_NAMESPACE_ALIASES", default.aliases),
            partition_patterns=_partition_patterns(values),
            batch_size=_count(values, "LINEAGE_PROCESSOR_BATCH", default.batch_size),
            batch_seconds=_positive(values, "LINEAGE_PROCESSOR_BATCH_SECONDS", default.batch_seconds),
            data_dir=path_setting(values, "LINEAGE_PROCESSOR_DATA_DIR", state_dir(values) / "processor"),
            log_level=level,
            report_seconds=_positive(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            transactional_id=values.get("LINEAGE_PROCESSOR_TRANSACTIONAL_ID", default.transactional_id),
            transaction_timeout_ms=_transaction_timeout(values),
            crash_points=_crash_points(values, "LINEAGE_PROCESSOR_CRASH_POINTS", PROCESSOR_CRASH_POINTS),
            schema_history_limit=_schema_history_limit(values, default.schema_history_limit),
        )


def _schema_history_limit(values: Mapping[str, str], default: int) -> int:
    limit = _count(values, "LINEAGE_SCHEMA_HISTORY", default)
    if not 2 <= limit <= 4096:  # a change needs two observations; every one is kept in the dataset's state record
        raise ConfigError(f"LINEAGE_SCHEMA_HISTORY: observations of a dataset's schema kept, 2..4096; got {limit}")
    return limit


# Where a processor worker can be made to die on purpose, in the order a batch's transaction passes them.
PROCESSOR_CRASH_POINTS = ("outputs-sent", "state-sent", "before-commit", "after-commit")


def _crash_points(values: Mapping[str, str], key: str, known: tuple[str, ...]) -> str:
    text = values.get(key, "")
    try:
        parse_crash_points(text, known)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return text


def _transaction_timeout(values: Mapping[str, str]) -> int:
    key = "LINEAGE_PROCESSOR_TRANSACTION_TIMEOUT_MS"
    value = _count(values, key, 30_000)
    if not 1_000 <= value <= 900_000:  # the broker's transaction.max.timeout.ms is 15 minutes by default
        raise ConfigError(f"{key}: must be between 1000 and 900000 ms, got {value}")
    return value


def _partition_patterns(values: Mapping[str, str]) -> str:
    """``LINEAGE_PARTITION_PATTERNS`` as given, refused at start (not per event) when it does not parse."""
    text = values.get("LINEAGE_PARTITION_PATTERNS", "").strip() or "default"
    try:
        parse_patterns(text)
    except ValueError as exc:
        raise ConfigError(f"LINEAGE_PARTITION_PATTERNS: {exc}") from None
    return text


@dataclass(frozen=True)
class OperationsSettings:
    """What operators see: each long-running component's metrics/health endpoint, the log format and level."""

    metrics_host: str = "127.0.0.1"
    processor_metrics_port: int = 9101
    sink_metrics_port: int = 9102
    alert_metrics_port: int = 9103
    bridge_metrics_port: int = 9104
    log_format: str = "text"
    log_level: str = ""  # one of LOG_LEVEL_NAMES; empty: the command's own default

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperationsSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        log_format = values.get("LINEAGE_LOG_FORMAT", "text").lower()
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
            log_format=log_format,
            log_level=log_level,
        )


def _listen_port(values: Mapping[str, str], key: str, default: int) -> int:
    """A port to listen on; 0 = any free port (the component prints the one it got)."""
    return 0 if values.get(key) == "0" else port_setting(values, key, default)


@dataclass(frozen=True)
class SinkSettings:
    """The Neo4j graph sink (``lineage sink``)."""

    group_id: str = "lineage-graph-sink"
    partitions: int = 6
    batch_size: int = 2000
    poll_seconds: float = 0.5
    report_seconds: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SinkSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        return cls(
            group_id=values.get("LINEAGE_SINK_GROUP", default.group_id),
            partitions=_count(values, "LINEAGE_PARTITIONS", default.partitions),
            batch_size=_count(values, "LINEAGE_SINK_BATCH", default.batch_size),
            poll_seconds=_positive(values, "LINEAGE_SINK_POLL_SECONDS", default.poll_seconds),
            report_seconds=_positive(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
        )


@dataclass(frozen=True)
class AlertSettings:
    """The schema-drift alert sink (``lineage alerts run``)."""

    group_id: str = "lineage-alert-sink"
    partitions: int = 6
    depth: int = 5
    max_impacted: int = 200
    poll_seconds: float = 0.5
    graph_group_id: str = "lineage-graph-sink"  # the graph sink's group: impact waits for its committed offsets
    graph_wait_seconds: float = 30.0  # at most this long per batch; then the alert says impactComplete=false
    query_timeout: float = 15.0  # an impact query's transaction timeout, and (plus a margin) its client-side bound
    report_seconds: float = 30.0
    crash_points: str = ""  # tests and fault campaigns only: see runtime/crash_points.py and ALERT_CRASH_POINTS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AlertSettings:
        default = cls()  # each default is written once, on its field
        values = merged_environment(env)
        return cls(
            group_id=values.get("LINEAGE_ALERT_GROUP", default.group_id),
            partitions=_count(values, "LINEAGE_PARTITIONS", default.partitions),
            depth=_count(values, "LINEAGE_IMPACT_DEPTH", default.depth),
            max_impacted=_count(values, "LINEAGE_IMPACT_MAX", default.max_impacted),
            poll_seconds=_positive(values, "LINEAGE_SINK_POLL_SECONDS", default.poll_seconds),
            graph_group_id=values.get("LINEAGE_SINK_GROUP", default.graph_group_id),
            graph_wait_seconds=_positive(values, "LINEAGE_ALERT_GRAPH_WAIT", default.graph_wait_seconds),
            query_timeout=_positive(values, "LINEAGE_ALERT_QUERY_TIMEOUT", default.query_timeout),
            report_seconds=_positive(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            crash_points=_crash_points(values, "LINEAGE_ALERT_CRASH_POINTS", ALERT_CRASH_POINTS),
        )


# Where the alert sink can be made to die on purpose: its batch's alerts and offsets sent, the transaction open.
ALERT_CRASH_POINTS = ("before-commit",)
