"""Schema-drift alert sink (``lineage alerts``): normalized events' schema changes → SchemaDriftAlerts.

Each ``schemaChanges`` item of a normalized event becomes a SchemaDriftAlert on ``lineage.schema-drift`` (Avro, key
``{namespace}/{name}`` of the dataset) with the downstream jobs and datasets impacted, from the graph (depth-limited).
The alert id is a hash of (dataset, old version, new version): a finding repeated by a replay or by two processor
workers gets the same id, and this sink drops ids it has already published recently. Offsets are committed after
Kafka acknowledged the alerts.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from kafka_lineage.config import AlertSettings, ClientSettings
from kafka_lineage.kafka_io import AckingProducer, commit_offsets, prepare_pipeline
from kafka_lineage.logs import problem
from kafka_lineage.metrics import Metrics
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import record_to_event
from kafka_lineage.schemas.wire import AvroCodec, WireFormatError
from kafka_lineage.sinks.graph_sink import driver_for
from kafka_lineage.sinks.queries import Reached, impact
from kafka_lineage.sinks.tail import tail
from neo4j.exceptions import DriverError, TransientError

log = logging.getLogger(__name__)
STAGE = "alert-sink"
RECENT_ALERTS = 100_000  # alert ids remembered to drop repeats (also read back from the topic at start)


def alert_id(change: dict[str, Any]) -> str:
    identity = "\x1f".join((change["namespace"], change["name"], change["previousVersion"], change["newVersion"]))
    return hashlib.sha256(identity.encode()).hexdigest()


def build_alert(change: dict[str, Any], event: dict[str, Any], impacted: list[Reached], depth: int, limit: int,
                detected_at: datetime) -> dict[str, Any]:
    """The SchemaDriftAlert record of one finding (``schemas/avro/schema_drift_alert.avsc``)."""
    job = event.get("job") or {}
    listed = impacted[:limit]
    return {
        "alertId": alert_id(change),
        "dataset": {"namespace": change["namespace"], "name": change["name"]},
        "job": {"namespace": job.get("namespace", ""), "name": job.get("name", "")},
        "runId": (event.get("run") or {}).get("runId", ""),
        "previousVersion": change["previousVersion"], "newVersion": change["newVersion"],
        "previousSchema": change["previousSchema"], "newSchema": change["newSchema"],
        "changes": change["changes"], "severity": change["severity"],
        "eventTime": event.get("eventTime", ""), "detectedAt": detected_at, "impactDepth": depth,
        "impactedJobs": [{"namespace": r.namespace, "name": r.name, "depth": r.depth}
                         for r in listed if r.kind == "job"],
        "impactedDatasets": [{"namespace": r.namespace, "name": r.name, "depth": r.depth}
                             for r in listed if r.kind == "dataset"],
        "impactTruncated": len(impacted) > limit,
    }


class AlertSink:
    def __init__(self, clients: ClientSettings, settings: AlertSettings, metrics: Metrics | None = None) -> None:
        prepare_pipeline(clients, settings.partitions)
        self.clients, self.settings = clients, settings
        self.metrics = metrics or Metrics(process_metrics=False)
        client = SchemaRegistryClient(clients.registry_config())
        self.normalized = AvroCodec("normalized_event", registry.schema_fetcher(client))
        self.alerts = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
        self.alert_schema_id = registry.registered_id(client, clients.drift_topic, "schema_drift_alert")
        self.driver = driver_for(clients)
        self.producer = AckingProducer(clients.kafka_config())
        self.consumer = Consumer(clients.kafka_config({
            "group.id": settings.group_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "session.timeout.ms": "10000",
        }))
        self.recent: OrderedDict[str, None] = OrderedDict()  # alert ids published lately, to drop repeats
        self.published = 0

    def run(self, stop: threading.Event) -> None:
        # Alerts this sink (or its predecessor) already published: a finding repeated after a restart — records
        # redelivered past the last commit, a processor's repeated batch — must not alert twice.
        for alert in tail(self.clients, self.clients.drift_topic, "schema_drift_alert", RECENT_ALERTS, False):
            self.recent[alert["alertId"]] = None
        self.consumer.subscribe([self.clients.normalized_topic])
        print(f"alert sink ready: {self.clients.normalized_topic} → {self.clients.drift_topic}", flush=True)
        last_lag = time.monotonic()
        try:
            while not stop.is_set():
                if time.monotonic() - last_lag >= 5.0:
                    last_lag = time.monotonic()
                    self.metrics.update_lag(STAGE, self.consumer)
                messages = [m for m in self.consumer.consume(500, self.settings.poll_seconds) if m.error() is None]
                if not messages:
                    continue
                self.metrics.events_in(STAGE, len(messages))
                alerts, produced = [], []
                for message in messages:
                    try:
                        record = self.normalized.decode(message.value())
                    except WireFormatError:
                        continue  # the graph sink dead-letters undecodable records; one DLQ record is enough
                    if record["schemaChanges"] and (found := self._alerts(record)):
                        alerts += found
                        produced += [record["processing"]["producedAt"]] * len(found)
                if alerts:
                    # librdkafka retries through a broker restart (message.timeout.ms): wait as long
                    self.producer.send(self.clients.drift_topic, alerts).result(600)
                    self.published += len(alerts)
                    self.metrics.events_out(STAGE, len(alerts))
                    published = time.time()
                    for moment in produced:  # event produced (raw topic timestamp) → its alert acknowledged
                        if moment is not None:
                            self.metrics.latency_since("alert", moment.timestamp(), published)
                self.metrics.seen(STAGE)
                commit_offsets(self.consumer, stop, log, STAGE)
        finally:
            self.consumer.close()
            self.producer.close()
            self.driver.close()
            print(f"alert sink stopped: {self.published} alerts published", flush=True)

    def _alerts(self, record: dict[str, Any]) -> list[tuple[bytes, bytes]]:
        event = record_to_event(record["event"])
        out = []
        for change in record["schemaChanges"]:
            identity = alert_id(change)
            if identity in self.recent:
                continue
            impacted = self._impact(change)
            alert = build_alert(change, event, impacted, self.settings.depth, self.settings.max_impacted,
                                datetime.now(UTC))
            out.append((f"{change['namespace']}/{change['name']}".encode(), self.alerts.encode(alert,
                                                                                              self.alert_schema_id)))
            self.recent[identity] = None
            if len(self.recent) > RECENT_ALERTS:
                self.recent.popitem(last=False)
            log.warning("schema drift (%s) on %s/%s by %s: %d changes, %d jobs downstream", change["severity"],
                        change["namespace"], change["name"], (event.get("job") or {}).get("name"),
                        len(change["changes"]), len(alert["impactedJobs"]),
                        extra={"stage": STAGE, "dataset": f"{change['namespace']}/{change['name']}",
                               "job": (event.get("job") or {}).get("name"),
                               "run_id": (event.get("run") or {}).get("runId")})
        return out

    def _impact(self, change: dict[str, Any]) -> list[Reached]:
        delay = 0.5
        while True:
            try:
                return impact(self.driver, change["namespace"], change["name"], self.settings.depth,
                              self.settings.max_impacted + 1)
            except (DriverError, TransientError, OSError) as exc:  # Neo4j unreachable: the alert waits for its impact
                problem(log, "impact query failed, the alert waits for its downstream list",
                        "check NEO4J_URI and that Neo4j runs", error=exc, retry_in=delay, stage=STAGE,
                        dataset=f"{change['namespace']}/{change['name']}")
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
