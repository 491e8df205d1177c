"""The collector's facet cache (facet_memo) against the real registry and Kafka: the records it publishes for
events whose facets repeat are the bytes EventPublisher.encode writes for them."""

from __future__ import annotations

import pytest
import requests

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.producers.service.facet_memo import VERIFY_EVENTS
from kafka_lineage.runtime.config import ClientSettings
from tests.integration.conftest import consume, running_collector
from tests.openlineage_samples import full_run_event

pytestmark = pytest.mark.integration


def test_events_with_repeated_facets_are_published_as_the_publisher_writes_them(
        clients: ClientSettings, events_topic: str) -> None:
    events = [full_run_event() for _ in range(VERIFY_EVENTS + 30)]  # each its own run; the same facets
    with running_collector(events_topic) as url:
        session = requests.Session()
        for event in events:
            answer = session.post(f"{url}/api/v1/lineage", json=event, timeout=30)
            assert answer.status_code == 200, answer.text
    publisher = EventPublisher.from_settings(clients, topic=events_topic)
    try:
        expected = sorted(publisher.encode(event) for event in events)
    finally:
        publisher.close(5)
    published = sorted((message.key(), message.value())
                       for message in consume(clients.kafka_bootstrap_servers, events_topic, len(events), 30))
    assert published == expected
