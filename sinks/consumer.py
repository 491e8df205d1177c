"""The sinks' consumer loop: one member of the sink's group reads the normalized topic in batches, hands each batch
to the sink, and commits its offsets only after the sink is done with it (at-least-once; the sinks are idempotent).
A stop while a batch waits (``Stopped``) leaves the batch uncommitted for the next start.

A member that stalls is rebuilt: once, after a broker restart cost the alert sink its assignment while it waited on
a batch, its librdkafka consumer went on polling for 15 minutes without a record although thousands waited, and
three alerts were never sent. ``SinkMember`` looks at the group's committed offsets whenever it got nothing for
``STALL_SECONDS``; a partition it holds (or any, when it holds none) that has records past the committed offset and
did not move between two such looks makes it close its consumer and join the group again with a new one.

The normalized topic is written in Kafka transactions: each one ends with a commit marker, a record the consumer
never delivers but steps over (its position moves past it). Offsets are therefore committed from positions, never as
"last record + 1": a group committed one marker short of the end would look behind forever (to the stall watch, and
to the alert sink waiting for the graph sink), so a member also commits positions that moved past markers alone
whenever a poll brought nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import commit_offsets, rebalance_callback
from kafka_lineage.runtime.logs import problem
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.stall import StallWatch
from kafka_lineage.runtime.transactions import next_offsets as processed_offsets

log = logging.getLogger(__name__)
LAG_SECONDS = 5.0  # the lag gauge needs broker round trips: not every batch
STALL_SECONDS = 60.0  # a member that got no record this long looks whether its partitions move (see the module doc)
CLOSE_SECONDS = 10.0  # a stalled consumer's close is waited for this long, then left to finish in its thread


def sink_consumer(clients: ClientSettings, group_id: str, extra: Mapping[str, Any] | None = None) -> Consumer:
    """A member of ``group_id`` that commits by hand and reads committed records only; ``extra``: further consumer
    settings (the graph sink stores the offsets it wrote itself)."""
    return Consumer(clients.kafka_config({
        "group.id": group_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        # Said, not left to librdkafka's default: the processor writes the normalized topic in transactions, and a
        # sink must never act on records of an aborted one (a worker killed mid-batch) or of one still open.
        "isolation.level": "read_committed",
        "session.timeout.ms": "10000", **(extra or {}),
    }))


def throttled(seconds: float, action: Callable[[], None]) -> Callable[[], None]:
    """``action`` as a callable that runs it at most every ``seconds``, the first time ``seconds`` after this call
    (the sinks' lag gauge and their periodic reports, called on every turn of their loops)."""
    last = time.monotonic()

    def maybe() -> None:
        nonlocal last
        if time.monotonic() - last >= seconds:
            last = time.monotonic()
            action()

    return maybe


def next_offsets(messages: list[Message]) -> dict[tuple[str, int], int]:
    """(topic, partition) → the offset after the last of ``messages`` there."""
    return processed_offsets((message.topic(), message.partition(), message.offset()) for message in messages)


def batch_offsets(consumer: Consumer, messages: list[Message]) -> dict[tuple[str, int], int]:
    """What commits a handled batch: per partition its position (past the batch and the transaction markers stepped
    over with it), never less than past the batch's last record (a position librdkafka does not know yet, e.g.
    right after a seek, is left out). Call it right after the poll that read ``messages``."""
    offsets = next_offsets(messages)
    assigned = list(consumer.assignment())
    for tp in consumer.position(assigned) if assigned else []:
        if tp.offset >= 0:
            key = (tp.topic, tp.partition)
            offsets[key] = max(offsets.get(key, 0), tp.offset)
    return offsets


class SinkMember:
    """A sink's member of its group (``sink_consumer``) on one topic, rebuilt with a new consumer when it stalls."""

    def __init__(self, clients: ClientSettings, group_id: str, topic: str, extra: Mapping[str, Any] | None = None,
                 *, stall_seconds: float = STALL_SECONDS, timeout: float = 5.0) -> None:
        self._new = lambda: sink_consumer(clients, group_id, extra)
        self.group_id, self.topic, self.timeout = group_id, topic, timeout
        self.consumer = self._new()
        self.watch = StallWatch(stall_seconds)
        self.rebuilt = 0
        self._on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None
        self._idle_positions: dict[tuple[str, int], int] = {}  # what the last quiet poll committed

    def subscribe(self, on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None) -> None:
        """Join the group (``on_revoke``: called, as librdkafka's callback, before partitions leave this member)."""
        self._on_revoke = on_revoke or self._on_revoke
        if self._on_revoke is None:
            self.consumer.subscribe([self.topic])
        else:
            self.consumer.subscribe([self.topic], on_revoke=self._revoking)
        self.watch.busy()

    def _revoking(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._on_revoke is not None
        with rebalance_callback(consumer):  # its commits are made right here (``commit_bounded``)
            self._on_revoke(consumer, partitions)

    def check(self, stage: str) -> None:
        """Between polls that brought nothing: rebuild the consumer if it stalled (see the module doc)."""
        if not self.watch.due():
            return
        try:
            held = {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}
            ends, committed = self._progress()
        except KafkaException as exc:  # the broker away, or this consumer's link to its group broken
            if not self.watch.unreadable():
                log.debug("%s: group progress not read: %s", stage, exc)
                return
            problem(log, f"{stage}: no records for {2 * self.watch.stall_seconds:.0f}s and the group's progress not "
                    f"readable ({exc}); closing this consumer and joining the group again",
                    "nothing to do if it recovers; otherwise check the broker", stage=stage)
            self.rebuild()
            return
        stuck = [partition for partition in self.watch.stuck(ends, committed) if not held or partition in held]
        if not stuck:
            return
        behind = {partition: ends[partition] - max(committed.get(partition, 0), 0) for partition in stuck}
        problem(log, f"{stage}: no records for {2 * self.watch.stall_seconds:.0f}s although partitions "
                f"{behind} (records behind) did not move; closing this consumer and joining the group again",
                "nothing to do if it recovers; otherwise check the broker and the group "
                f"({self.group_id})", stage=stage)
        self.rebuild()

    def commit_idle_positions(self, stage: str) -> None:
        """After a poll that brought nothing, with no batch in flight: commit positions that moved since the last
        such commit (past transaction markers read after the last batch; see the module doc). Best effort: a
        failure only leaves the group a marker short until the next quiet poll."""
        assigned = list(self.consumer.assignment())
        positions = {(tp.topic, tp.partition): tp.offset
                     for tp in (self.consumer.position(assigned) if assigned else []) if tp.offset >= 0}
        if not positions or positions == self._idle_positions:
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(topic, partition, offset)
                                          for (topic, partition), offset in positions.items()], asynchronous=False)
        except KafkaException as exc:
            log.debug("%s: positions of a quiet member not committed: %s", stage, exc)
            return
        self._idle_positions = positions

    def rewind(self, stage: str, messages: list[Message]) -> None:
        """Read again what was not committed: every assigned partition goes back to the group's committed offset
        (one never committed: to its beginning, as ``auto.offset.reset``), or, when the coordinator does not
        answer, to the first record ``messages`` (the batch given up) had there."""
        assigned = list(self.consumer.assignment())
        try:
            targets = {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                       for tp in self.consumer.committed(assigned, timeout=self.timeout)}
        except KafkaException as exc:
            log.warning("%s: committed offsets not read (%s); going back to the batch's first records", stage, exc)
            targets = {}
            for message in messages:
                at = (message.topic(), message.partition())
                targets[at] = min(targets.get(at, message.offset()), message.offset())
        for (topic, partition), offset in targets.items():
            try:
                self.consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:  # no longer ours: its next owner starts at the committed offset
                log.warning("%s: %s [%d] not rewound: %s", stage, topic, partition, exc)
        self._idle_positions = {}
        self.watch.busy()

    def rebuild(self) -> None:
        """Close the consumer (bounded: a stalled one may not answer) and subscribe with a new one."""
        closing = threading.Thread(target=self.consumer.close, name="stalled-consumer-close", daemon=True)
        closing.start()
        closing.join(CLOSE_SECONDS)
        self.consumer = self._new()
        self.rebuilt += 1
        self.subscribe()

    def _progress(self) -> tuple[dict[int, int], dict[int, int]]:
        """The topic's end offsets and the group's committed offsets, per partition."""
        metadata = self.consumer.list_topics(self.topic, timeout=self.timeout).topics[self.topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        partitions = [TopicPartition(self.topic, partition) for partition in sorted(metadata.partitions)]
        ends = {tp.partition: self.consumer.get_watermark_offsets(tp, timeout=self.timeout)[1] for tp in partitions}
        committed = {tp.partition: tp.offset for tp in self.consumer.committed(partitions, timeout=self.timeout)
                     if tp.error is None}
        return ends, committed


def consume_batch(consumer: Consumer, size: int, timeout: float, stage: str) -> list[Message]:
    """Up to ``size`` records; errors the consumer reports are logged (a partition's end is not one)."""
    messages = []
    for message in consumer.consume(size, timeout):
        error = message.error()
        if error is None:
            messages.append(message)
        elif error.code() != KafkaError._PARTITION_EOF:
            problem(log, f"Kafka consumer error: {error}", "check the broker and the topic", stage=stage)
    return messages


def consume_loop(member: SinkMember, stop: threading.Event, handle: Callable[[list[Message]], None], *,
                 stage: str, metrics: Metrics, batch_size: int, poll_seconds: float,
                 every: Callable[[], None] | None = None, commits: bool = True) -> None:
    """Batches to ``handle`` until ``stop``, each committed after it was handled (``commits`` False: ``handle``
    commits them itself); ``every`` runs after each poll."""
    update_lag = throttled(LAG_SECONDS, lambda: metrics.update_lag(stage, member.consumer))
    while not stop.is_set():
        update_lag()
        messages = consume_batch(member.consumer, batch_size, poll_seconds, stage)
        if messages:
            handle(messages)
            if commits:
                commit_offsets(member.consumer, stop, log, stage)
            member.watch.busy()  # after the batch: a handler that waited long is not a stall
        else:
            member.commit_idle_positions(stage)
            member.check(stage)
        if every is not None:
            every()
