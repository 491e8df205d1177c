"""Thin I/O shell of the Kafka Connect hook: poll the Connect REST API, emit OpenLineage run events per connector.

``watch(connect_url, interval=10, once=False)`` is what ``lineage connect watch`` calls. The pure state machine is
in ``connect_lineage``; this module only fetches snapshots, lists topics when a sink uses ``topics.regex``, reads the
latest version of each connector topic's ``<topic>-value`` subject through the registry's Confluent-compatible API
(the columns), and hands events to an ``OpenLineageClient`` (by default the pipeline's Kafka Avro transport).
A registry that does not answer keeps the subjects last read (one log line), so it never looks like a schema
change. Heartbeats: ``heartbeat`` seconds (``LINEAGE_CONNECT_HEARTBEAT``, default 60; 0 turns them off). A worker
that is down is one log line (and one more when it answers again); polling goes on and no state is lost, so nothing
is reported as deleted because the worker was unreachable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent

from kafka_lineage.producers.service import connect_lineage as core
from kafka_lineage.runtime.config import ClientSettings

log = logging.getLogger(__name__)

CONNECTORS_PATH = "/connectors?expand=status&expand=info"
DEFAULT_HEARTBEAT = 60.0


@dataclass(frozen=True)
class WatchSettings:
    """``lineage connect watch``'s own setting: seconds between RUNNING heartbeats of an open run (None: none)."""

    heartbeat: float | None = DEFAULT_HEARTBEAT

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WatchSettings:
        """``LINEAGE_CONNECT_HEARTBEAT`` seconds (default 60); 0 or less: no heartbeats."""
        raw = env.get("LINEAGE_CONNECT_HEARTBEAT", "")
        try:
            seconds = float(raw) if raw.strip() else DEFAULT_HEARTBEAT
        except ValueError:
            raise ValueError(f"LINEAGE_CONNECT_HEARTBEAT: expected seconds, got {raw!r}") from None
        return cls(seconds if seconds > 0 else None)


class SubjectReader:
    """Latest versions of value subjects through the registry's Confluent-compatible API (always read fresh)."""

    def __init__(self, registry_config: Mapping[str, object]) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        # The client caches "latest" forever by default: a new version would never be seen.
        self.client = SchemaRegistryClient({**registry_config, "cache.latest.ttl.sec": 0.001})
        self.known: dict[str, core.SubjectSchema] = {}
        self._failing = False

    def read(self, topics: Collection[str]) -> dict[str, core.SubjectSchema]:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        found: dict[str, core.SubjectSchema] = {}
        for topic in sorted(topics):
            try:
                latest = self.client.get_latest_version(core.value_subject(topic))
            except SchemaRegistryError as error:
                if error.http_status_code == 404:  # no subject (yet): no columns for this topic
                    self.known.pop(topic, None)
                    continue
                self._warn(error)
            except Exception as error:  # connection refused, timeouts: keep what was read before
                self._warn(error)
            else:
                self._failing = False
                if latest.schema.schema_type not in (None, "AVRO"):
                    continue  # JSON Schema / Protobuf subjects are not read as columns (yet)
                self.known[topic] = core.SubjectSchema(version=int(latest.version), schema=latest.schema.schema_str,
                                                       schema_id=latest.schema_id)
            if topic in self.known:
                found[topic] = self.known[topic]
        return found

    def _warn(self, error: Exception) -> None:
        if not self._failing:
            log.warning("the schema registry does not answer (%s); connector columns stay as last read",
                        type(error).__name__)
        self._failing = True


class Emitter(Protocol):
    """What the watcher needs of an ``OpenLineageClient`` (tests and filters can stand in)."""

    def emit(self, event: RunEvent) -> None: ...


def fetch_snapshot(session: requests.Session, connect_url: str, timeout: float) -> dict[str, core.ConnectorStatus]:
    response = session.get(connect_url.rstrip("/") + CONNECTORS_PATH, timeout=timeout)
    response.raise_for_status()
    return core.parse_connectors(response.json())


def kafka_topic_names(kafka_config: Mapping[str, object], timeout: float = 10.0) -> Collection[str] | None:
    """The cluster's topic names (to expand ``topics.regex``); None when Kafka does not answer."""
    from confluent_kafka.admin import AdminClient  # only needed when some sink subscribes by pattern

    try:
        return set(AdminClient(dict(kafka_config)).list_topics(timeout=timeout).topics)
    except Exception as error:  # KafkaException on timeouts; lineage then records the pattern only
        log.warning("could not list Kafka topics to expand topics.regex: %s", error)
        return None


class ConnectWatcher:
    """Polls one Connect cluster and emits the run events of its connectors through ``client``."""

    def __init__(self, connect_url: str, client: Emitter, *, clients: ClientSettings, interval: float = 10.0,
                 job_namespace: str | None = None, timeout: float = 10.0, session: requests.Session | None = None,
                 topic_names: Callable[[Mapping[str, object]], Collection[str] | None] = kafka_topic_names,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), heartbeat: float | None = None,
                 subjects: SubjectReader | None = None) -> None:
        self.connect_url = connect_url
        self.client = client
        self.interval = interval
        self.timeout = timeout
        self.bootstrap_servers = clients.kafka_bootstrap_servers  # the cluster the connectors' topics are on
        self.kafka_config = clients.kafka_config()
        self.job_namespace = job_namespace or core.default_job_namespace(connect_url)
        self.session = session or requests.Session()
        self._topic_names = topic_names
        self._clock = clock
        self.heartbeat = heartbeat
        self.subjects = subjects if subjects is not None else SubjectReader(clients.registry_config())
        self.tracked: dict[str, core.Tracked] = {}
        self.emitted = 0
        self._reachable: bool | None = None  # log reachability changes, not every failed poll

    def poll_once(self) -> list[RunEvent]:
        """Fetch one snapshot, advance the state machine, emit; [] when the worker does not answer."""
        try:
            snapshot = fetch_snapshot(self.session, self.connect_url, self.timeout)
        except (requests.RequestException, ValueError) as error:  # ValueError: a body that is not JSON
            if self._reachable is not False:
                log.warning("Kafka Connect at %s is not answering (%s); polling goes on",
                            self.connect_url, type(error).__name__)
            self._reachable = False
            return []
        if self._reachable is False:
            log.info("Kafka Connect at %s answers again", self.connect_url)
        self._reachable = True
        statuses = [*snapshot.values(), *(t.status for t in self.tracked.values())]
        topics = self._topic_names(self.kafka_config) if core.uses_topic_regex(statuses) else None
        context = core.HookContext(job_namespace=self.job_namespace, bootstrap_servers=self.bootstrap_servers,
                                   topic_names=topics, heartbeat_seconds=self.heartbeat)
        connector_topics = {topic for status in statuses if status.known
                            for topic in core.connector_topics(status, context)}
        context = replace(context, value_schemas=self.subjects.read(connector_topics))
        self.tracked, events = core.step(self.tracked, snapshot, context, self._clock())
        for event in events:
            try:
                self.client.emit(event)
                self.emitted += 1
            except Exception:  # a client with a failing transport must not stop the watcher
                log.exception("could not emit %s for connector %s", event.eventType, event.job.name)
        return events

    def run_forever(self, stop_event: threading.Event) -> None:
        """Poll every ``interval`` seconds until ``stop_event`` is set."""
        while not stop_event.is_set():
            self.poll_once()
            stop_event.wait(self.interval)


def _default_client(clients: ClientSettings) -> tuple[Emitter, Any]:
    from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig, KafkaAvroTransport

    transport = KafkaAvroTransport(KafkaAvroConfig.from_settings(clients))
    return OpenLineageClient(transport=transport), transport


def watch(clients: ClientSettings, connect_url: str | None = None, *, interval: float = 10.0, once: bool = False,
          client: Emitter | None = None, job_namespace: str | None = None,
          stop_event: threading.Event | None = None, heartbeat: float | None = DEFAULT_HEARTBEAT) -> int:
    """Watch a Connect cluster (default ``clients.connect_url``); returns how many events were emitted.

    Without ``client`` the events go to the pipeline's events topic through the Kafka Avro transport, which is
    flushed before returning. ``once`` polls a single time (cron, tests); otherwise until ``stop_event`` or Ctrl-C.
    ``heartbeat``: seconds between RUNNING heartbeats of an open run (None: none).
    """
    transport = None
    if client is None:
        client, transport = _default_client(clients)
    watcher = ConnectWatcher(connect_url or clients.connect_url, client, clients=clients, interval=interval,
                             job_namespace=job_namespace, heartbeat=heartbeat)
    try:
        if once:
            watcher.poll_once()
        else:
            watcher.run_forever(stop_event or threading.Event())
    except KeyboardInterrupt:
        pass
    finally:
        if transport is not None:
            transport.close()
    return watcher.emitted
