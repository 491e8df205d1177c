"""Group metadata for transactions (runtime/transactions.py), built by librdkafka without a broker."""

from __future__ import annotations

from confluent_kafka import Consumer

from kafka_lineage.runtime.transactions import group_metadata, unchecked_by_the_group


def test_group_metadata_is_what_librdkafka_s_own_consumer_gives_for_the_same_member() -> None:
    consumer = Consumer({"group.id": "lineage-processor", "bootstrap.servers": "127.0.0.1:1"})
    try:
        assert group_metadata("lineage-processor", -1, "") == consumer.consumer_group_metadata()  # not joined yet
    finally:
        consumer.close()


def test_group_metadata_carries_the_generation_and_member_id() -> None:
    joined = group_metadata("lineage-processor", 7, "faust-0.15.3-abc")
    assert joined != group_metadata("lineage-processor", 8, "faust-0.15.3-abc")
    assert b"lineage-processor\x00faust-0.15.3-abc\x00" in joined


def test_a_consumer_without_generation_and_member_is_recognised_as_unchecked_by_its_group() -> None:
    consumer = Consumer({"group.id": "lineage-alerts", "bootstrap.servers": "127.0.0.1:1"})
    try:  # what librdkafka's consumer gives before its first join and right after its session expired
        assert unchecked_by_the_group(consumer.consumer_group_metadata(), "lineage-alerts")
    finally:
        consumer.close()
    assert not unchecked_by_the_group(group_metadata("lineage-alerts", 3, "rdkafka-1"), "lineage-alerts")
