"""A sink member that stalls (here: a consumer whose partitions were paused, so it gets nothing while records wait)
is rebuilt with a new consumer and reads on, against the real broker."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Producer

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import ensure_topic
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.sinks.consumer import SinkMember, consume_batch, consume_loop


def test_a_member_that_gets_nothing_while_its_partitions_wait_is_rebuilt_and_reads_on(clients: ClientSettings) -> None:
    topic = f"test.stall.{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.kafka_config(), topic, partitions=2)
    member = SinkMember(clients, f"{topic}.group", topic, stall_seconds=1.0)
    member.subscribe()
    deadline = time.monotonic() + 30
    while not member.consumer.assignment():  # joined, nothing to read yet
        assert time.monotonic() < deadline, "the member never got its partitions"
        assert not consume_batch(member.consumer, 10, 0.2, "test")
    member.consumer.pause(member.consumer.assignment())  # from here on it polls and gets nothing: a stall
    producer = Producer(clients.kafka_config())
    for number in range(20):
        producer.produce(topic, key=str(number).encode(), value=b"record")
    assert producer.flush(30) == 0

    read: list[bytes] = []
    stop = threading.Event()

    def handle(messages: list) -> None:
        read.extend(message.value() for message in messages)
        if len(read) >= 20:
            stop.set()

    loop = threading.Thread(target=consume_loop, args=(member, stop, handle), daemon=True,
                            kwargs={"stage": "test", "metrics": Metrics(process_metrics=False), "batch_size": 100,
                                    "poll_seconds": 0.2})
    loop.start()
    loop.join(60)
    stop.set()
    member.consumer.close()
    assert len(read) == 20, f"read {len(read)} of 20 records; consumer rebuilt {member.rebuilt} times"
    assert member.rebuilt == 1
