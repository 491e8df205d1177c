"""A sink's member rebuilds its consumer when it stalls: partitions that do not move, or a group whose progress it
cannot read twice in a row while no records come (sinks/consumer.py)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.sinks import consumer as sink_consumer_module
from kafka_lineage.sinks.consumer import SinkMember


class _SilentConsumer:
    """A consumer whose queries to its group time out (its coordinator link broken)."""

    def __init__(self) -> None:
        self.closed = False
        self.subscribed: list[str] = []

    def assignment(self) -> list[Any]:
        return []

    def list_topics(self, topic: str, timeout: float) -> Any:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def subscribe(self, topics: list[str], **_: Any) -> None:
        self.subscribed += topics

    def close(self) -> None:
        self.closed = True


def test_a_member_whose_group_progress_stays_unreadable_gets_a_new_consumer(monkeypatch) -> None:
    made: list[_SilentConsumer] = []

    def new_consumer(*_: Any, **__: Any) -> _SilentConsumer:
        made.append(_SilentConsumer())
        return made[-1]

    monkeypatch.setattr(sink_consumer_module, "sink_consumer", new_consumer)
    now = [0.0]
    monkeypatch.setattr(sink_consumer_module.time, "monotonic", lambda: now[0])
    member = SinkMember(ClientSettings.from_values({}, neo4j=False), "g", "t", stall_seconds=60.0)
    member.watch.clock = lambda: now[0]
    member.subscribe()
    now[0] = 61.0
    member.check("graph-sink")
    assert member.rebuilt == 0  # one unreadable look: the broker may be restarting
    now[0] = 122.0
    member.check("graph-sink")
    assert member.rebuilt == 1 and made[0].closed and made[1].subscribed == ["t"]
