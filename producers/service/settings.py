"""The HTTP collector's settings (`lineage collector`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_lineage.runtime.config import (
    ConfigError,
    count_setting,
    existing_file_setting,
    finite_setting,
    flag_setting,
    merged_environment,
    port_setting,
    positive_setting,
)

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
            max_body_bytes=count_setting(values, "LINEAGE_COLLECTOR_MAX_BYTES", default.max_body_bytes),
            ack_timeout=positive_setting(values, "LINEAGE_COLLECTOR_ACK_TIMEOUT", default.ack_timeout),
            max_events=count_setting(values, "LINEAGE_COLLECTOR_MAX_EVENTS", default.max_events),
            max_concurrent=count_setting(values, "LINEAGE_COLLECTOR_MAX_CONCURRENT", default.max_concurrent),
            read_timeout=positive_setting(values, "LINEAGE_COLLECTOR_READ_TIMEOUT", default.read_timeout),
            queue_bytes=count_setting(values, "LINEAGE_COLLECTOR_QUEUE_BYTES", default.queue_bytes),
            tls_cert=existing_file_setting(values, "LINEAGE_COLLECTOR_TLS_CERT"),
            tls_key=existing_file_setting(values, "LINEAGE_COLLECTOR_TLS_KEY"),
            linger_ms=cls._linger(values, "LINEAGE_COLLECTOR_LINGER_MS", default.linger_ms),
            access_log=flag_setting(values, "LINEAGE_COLLECTOR_ACCESS_LOG", default.access_log),
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
        value = count_setting(values, key, 1)
        if value > MAX_COLLECTOR_PROCESSES:
            raise ConfigError(f"{key}: at most {MAX_COLLECTOR_PROCESSES} processes, got {values[key]!r}")
        return value

    @staticmethod
    def _linger(values: Mapping[str, str], key: str, default: float) -> float:
        """A producer linger in milliseconds: 0 (send at once) up to librdkafka's 900,000."""
        value = finite_setting(values, key, default)
        if not 0 <= value <= 900_000:
            raise ConfigError(f"{key}: must be between 0 and 900000 ms, got {values[key]!r}")
        return value
