"""Validate once, against the real Kafka and a real ``lineage processor``: the publisher stamps what it validated, and
the processor validates again only what carries no stamp of its own rules."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import AckingProducer
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from kafka_lineage.schemas.validation_stamp import HEADER, STAMP
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import pipeline_env, processor_process
from tests.openlineage_samples import PRODUCER

from .conftest import consume_all

pytestmark = pytest.mark.integration


def _event(job: str, run_id: str) -> dict:
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id}, "job": {"namespace": "validate-once", "name": job}}


def test_the_processor_validates_again_only_what_its_own_rules_did_not_stamp(clients: ClientSettings,
                                                                           tmp_path: Path) -> None:
    prefix = f"test.validate-once.{uuid.uuid4().hex[:8]}"
    env = pipeline_env(prefix, 1, tmp_path / "processor")
    settings = ClientSettings.from_env({**os.environ, **env})
    client = SchemaRegistryClient(settings.registry_config())
    with processor_process(env):
        publisher = EventPublisher.from_settings(settings)
        publisher.send([publisher.encode(_event("published", str(uuid.uuid4())))]).result(30)
        publisher.close()
        codec = AvroCodec("openlineage_event", registry.schema_fetcher(client))
        schema_id = registry.registered_id(client, settings.events_topic, "openlineage_event")
        invalid = {job: codec.encode(event_to_record(_event(job, "not-a-uuid")), schema_id)
                   for job in ("unstamped", "stale-stamp", "our-stamp")}
        raw = AckingProducer(settings.kafka_config())
        raw.send(settings.events_topic, [(b"unstamped", invalid["unstamped"])]).result(30)
        raw.send(settings.events_topic, [(b"stale", invalid["stale-stamp"])], headers=[(HEADER, b"v1:other-rules")]
                 ).result(30)
        raw.send(settings.events_topic, [(b"ours", invalid["our-stamp"])], headers=[(HEADER, STAMP)]).result(30)
        raw.close()
        deadline = time.monotonic() + 60
        normalized: list = []
        dead: list = []
        while time.monotonic() < deadline and (len(normalized) < 2 or len(dead) < 2):
            time.sleep(0.5)
            normalized = consume_all(settings.kafka_bootstrap_servers, settings.normalized_topic)
            dead = consume_all(settings.kafka_bootstrap_servers, settings.dlq_topic)
    published = consume_all(settings.kafka_bootstrap_servers, settings.events_topic)[0]
    assert (HEADER, STAMP) in (published.headers() or []), published.headers()
    normalized_codec = AvroCodec("normalized_event", registry.schema_fetcher(client))
    jobs = sorted(record_to_event(normalized_codec.decode(m.value())["event"])["job"]["name"] for m in normalized)
    # the publisher's record and the one stamped with this processor's rules were trusted (the latter is invalid:
    # the stamp is a claim the project's own producers make); the others were validated and refused
    assert jobs == ["our-stamp", "published"], jobs
    letters = [AvroCodec("dead_letter", registry.schema_fetcher(client)).decode(m.value()) for m in dead]
    assert sorted(letter["key"] for letter in letters) == [b"stale", b"unstamped"]
    assert all(letter["errorClass"] == "invalid-event" and "run.runId" in letter["errorMessage"]
               for letter in letters), letters
