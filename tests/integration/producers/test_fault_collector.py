"""The collector under load while Kafka is stopped and started again: every request is answered within a second
(200, or 503 with Retry-After), and every event a 200 accepted is on the topic afterwards."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import requests
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.openlineage import record_to_event
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from tests.integration.conftest import consume_all, running_collector
from tests.openlineage_samples import PRODUCER

pytestmark = [pytest.mark.integration, pytest.mark.fault]
CLIENTS = 4
MAX_ANSWER_SECONDS = 1.0


def _batch(client: int, sequence: int) -> list[dict]:
    return [{"eventType": "START", "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "outage", "name": f"c{client}-{sequence}-{i}"}}
            for i in range(10)]


def test_a_kafka_outage_under_load_is_answered_fast_and_loses_nothing_accepted(
        stack_settings: StackSettings, clients: ClientSettings, events_topic: str) -> None:
    stop = threading.Event()
    answers: list[tuple[int, float, bool]] = []  # status, seconds, Retry-After present
    accepted: list[str] = []
    lock = threading.Lock()

    def client(url: str, number: int) -> None:
        session = requests.Session()
        sequence = 0
        while not stop.is_set():
            batch = _batch(number, sequence)
            sequence += 1
            started = time.monotonic()
            try:
                answer = session.post(f"{url}/api/v1/lineage", json=batch, timeout=30)
            except requests.RequestException:
                answer = None
            elapsed = time.monotonic() - started
            with lock:
                if answer is None:
                    answers.append((0, elapsed, False))
                    continue
                answers.append((answer.status_code, elapsed, "Retry-After" in answer.headers))
                if answer.status_code == 200:
                    accepted.extend(event["job"]["name"] for event in batch)
            if answer.status_code != 200:
                time.sleep(0.2)  # a client backing off a little, as Retry-After asks

    stack = Stack(stack_settings)
    with running_collector(events_topic) as url:
        threads = [threading.Thread(target=client, args=(url, n), daemon=True) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(3)
            stack.down(["kafka"])
            try:
                time.sleep(8)  # the outage, under load
            finally:
                stack.up(["kafka"])
            time.sleep(8)  # recovery, still under load
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
    statuses = {status for status, _, _ in answers}
    slow = [(status, round(seconds, 2)) for status, seconds, _ in answers if seconds > MAX_ANSWER_SECONDS]
    assert statuses <= {200, 503}, statuses
    assert not slow, f"{len(slow)} of {len(answers)} answers took over {MAX_ANSWER_SECONDS}s: {slow[:10]}"
    assert all(retry for status, _, retry in answers if status == 503)
    assert 503 in statuses and sum(1 for status, _, _ in answers if status == 200) > 10
    time.sleep(5)  # records of answered requests still queued in the collector's producer have been delivered
    deserializer = AvroDeserializer(SchemaRegistryClient(clients.registry_config()))
    context = SerializationContext(events_topic, MessageField.VALUE)
    received = {record_to_event(deserializer(message.value(), context))["job"]["name"]
                for message in consume_all(clients.kafka_bootstrap_servers, events_topic, timeout=120)}
    missing = set(accepted) - received
    assert not missing, f"{len(missing)} accepted events are not on the topic"
