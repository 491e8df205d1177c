"""Faust's Kafka transport with four fixes that each lost records, and the pipeline's Kafka security settings as
Faust credentials.

1. A partition without a committed offset restarts from its beginning. During table recovery Faust resumes the
   stream partitions early, discards what the consumer fetches for them, and afterwards seeks every partition back
   to its committed offset. aiokafka only seeks when that offset is above 0, so a partition the group never
   committed — a worker killed within its first commit interval — kept the position past the discarded records: a
   restarted worker silently skipped them (reproduced: 0 of 1,600 backlog records consumed). Here such partitions
   (never the tables' changelogs, which recovery positions itself) are sought to their beginning, which is what
   ``consumer_auto_offset_reset="earliest"`` promises; dedupe state absorbs what is read again.
2. Resuming flow control that is already active does not clear the streams' queues. At the end of recovery Faust
   seeks the stream partitions to their committed offsets, the fetcher (running since recovery began) puts the next
   records into the agent's queue, and only then "resumes" flow control, which empties every queue: the records in
   it were never processed, and the consumer's read position had already passed them (reproduced: a restarted
   worker skipped offsets 474-576 of all three partitions, or the one record at a partition's committed offset).
   Clearing is right only after a suspension, when the queued records belong to a revoked assignment.
3. No commit past an unacknowledged record at the committed offset. Faust commits the run of acknowledged offsets
   that starts *one past* the committed offset as if it started at it (the committed offset is the next record to
   read, not the last one read), so the record at the committed offset, when fix 2's race dropped it, was
   committed as done. Here the run must start at the committed offset, or at the offset a partition without a
   commit was sought to.
4. No records are taken from the fetcher that Faust then throws away. Faust's fetch call (in the consumer thread)
   can outlive a rebalance: it waits for the new assignment, then takes what the fetcher holds for every partition
   in the consumer's live set of active partitions -- every assigned partition when that set is empty, as it is
   while recovery pauses them all. Faust drops records that arrive while flow is stopped and seeks only the stream
   partitions back, so a changelog partition fetched from the offset recovery had just sought it to lost all its
   records up to the end, and recovery waited for them forever (CI's join/leave test: "need 1329, have -1";
   reproduced every time by delaying the recovery task 0.5 s after its seek). Here the fetcher hands out a
   partition's records only while flow runs and the partition is active; the others stay in the fetcher for a
   later call, or are dropped by the next seek.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from importlib.metadata import version
from typing import Any

# The fixes replace internals of these exact releases (pinned in the `processor` extra): any other one fails here
# with one clear error rather than somewhere inside Faust, possibly losing records.
TESTED_WITH = {"faust-streaming": "0.15.3", "mode-streaming": "0.7.1"}
_installed = {name: version(name) for name in TESTED_WITH}
if _installed != TESTED_WITH:
    raise ImportError(f"kafka_lineage.processors.faust_transport patches {TESTED_WITH} and cannot run with "
                      f"{_installed}: install the versions in constraints.txt (pip install 'kafka-lineage[processor]')")

import faust  # noqa: E402 (after the version check)
from aiokafka import TopicPartition  # noqa: E402
from aiokafka.helpers import create_ssl_context  # noqa: E402
from faust.transport.drivers import aiokafka as faust_aiokafka  # noqa: E402
from faust.types import TP  # noqa: E402
from mode.utils.objects import cached_property  # noqa: E402
from mode.utils.queues import FlowControlEvent  # noqa: E402

# The transport is a Faust driver registered under this URL scheme (the ``faust.transports`` entry point in
# pyproject.toml): ``broker=f"{BROKER_SCHEME}://host:9092"`` selects it.
BROKER_SCHEME = "lineage-kafka"


class _Drainable:
    """The partitions whose fetched records a fetch may take now (fix 4): active ones, while flow runs. aiokafka
    takes this for the partition set of ``fetched_records``, which drains everything when the set is empty."""

    def __init__(self, consumer: faust_aiokafka.Consumer, active: Collection[TP]) -> None:
        self._consumer, self._active = consumer, active  # the consumer's live set, changed by the event loop

    def __bool__(self) -> bool:
        return True

    def __contains__(self, tp: object) -> bool:
        return self._consumer.flow_active and tp in self._active


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    async def _fetch_records(self, consumer: Any, active_partitions: Any, timeout: float | None = None,
                             max_records: int | None = None) -> Any:
        drainable = None if active_partitions is None else _Drainable(self.consumer, active_partitions)
        return await super()._fetch_records(consumer, drainable, timeout=timeout, max_records=max_records)

    async def seek_to_committed(self) -> Mapping[TP, int]:
        return await self.call_thread(self._seek_to_committed_or_beginning)

    async def _seek_to_committed_or_beginning(self) -> Mapping[TP, int]:
        consumer = self._ensure_consumer()
        committed = await consumer.seek_to_committed()
        changelogs = self.app.tables.changelog_topics
        uncommitted = [TopicPartition(tp.topic, tp.partition) for tp, offset in committed.items()
                       if not offset and tp.topic not in changelogs]
        beginnings = {}
        if uncommitted:
            await consumer.seek_to_beginning(*uncommitted)
            beginnings = await consumer.beginning_offsets(uncommitted)
        self.consumer.start_offsets.update(
            {TP(tp.topic, tp.partition): offset for tp, offset in {**committed, **beginnings}.items()})
        return committed


class _Consumer(faust_aiokafka.Consumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_offsets: dict[TP, int | None] = {}  # where the last seek positioned each partition (fix 3)

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def _new_offset(self, tp: TP) -> int | None:
        if self._waiting_at_start(tp) is not None:  # the record at the start is not done: commit nothing yet (fix 3)
            return None
        return super()._new_offset(tp)

    def _waiting_at_start(self, tp: TP) -> tuple[int, int] | None:
        """(the committed or start offset, the lowest offset done past it) when the record there is not done."""
        committed = self._committed_offset[tp]
        start = committed if committed is not None else self.start_offsets.get(tp)
        acked, gaps = self._acked[tp], self._gap[tp]
        if acked and start is not None:
            lowest = min(min(acked), gaps.begin()) if gaps else min(acked)
            if lowest > start:
                return start, lowest
        return None

    def held_commits(self, topic: str) -> dict[int, tuple[int, int, int]]:
        """Partitions of ``topic`` whose commit waits on the record at the committed offset (fix 3): partition →
        (the offset waited on, the lowest and the highest offset processed past it). Empty when commits flow."""
        held = {}
        for tp in [tp for tp in self._acked if tp.topic == topic]:
            if (waiting := self._waiting_at_start(tp)) is not None:
                held[tp.partition] = (*waiting, max(self._acked[tp]))
        return held


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka driver with the consumer of fixes 1, 3 and 4."""

    Consumer = _Consumer


def broker_url(bootstrap_servers: str) -> str:
    """Faust's broker setting for ``bootstrap_servers`` (host:port[,host:port]) through this module's transport."""
    return f"{BROKER_SCHEME}://{bootstrap_servers}"


def broker_credentials(kafka_security: Iterable[tuple[str, str]]) -> faust.types.auth.CredentialsT | None:
    """The pipeline's librdkafka security settings (``ClientSettings.kafka_security``) as Faust credentials."""
    settings = dict(kafka_security)
    protocol = settings.get("security.protocol", "PLAINTEXT")
    context = None
    if protocol.endswith("SSL"):
        context = create_ssl_context(cafile=settings.get("ssl.ca.location"),
                                     certfile=settings.get("ssl.certificate.location"),
                                     keyfile=settings.get("ssl.key.location"),
                                     password=settings.get("ssl.key.password"))
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(username=settings["sasl.username"], password=settings["sasl.password"],
                                     mechanism=settings["sasl.mechanism"], ssl_context=context)
    return faust.SSLCredentials(context) if context is not None else None


class _FlowControl(FlowControlEvent):
    def resume(self) -> None:
        """Resume flow into the streams' queues; empty them only if flow was suspended (fix 2)."""
        was_suspended = not self.is_active()
        self._suspend.clear()
        self._resume.set()
        if was_suspended:
            self.clear()


class App(faust.App):
    """``faust.App`` whose queued records survive a redundant flow-control resume (fix 2); give it
    ``broker=broker_url(...)`` for the transport of fixes 1, 3 and 4."""

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return _FlowControl(loop=self.loop)
