"""Faust's Kafka transport with four fixes that each lost records, a fifth for a crash, a sixth in table recovery
that lost a held event, and the pipeline's Kafka security settings as Faust credentials.

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
3. Faust commits no offset. Its bookkeeping of acknowledged offsets folds "gaps" (records its consumer passed
   over) into what counts as processed, and is not reset by a seek: a simulation committed records 761-800 that
   nobody processed. The processor commits its input offsets itself, inside each batch's Kafka transaction, from
   the records it really processed (``processors/offsets.py``); here every commit of Faust's is a no-op, the
   consumer reads ``read_committed`` (the tables' changelogs are written in transactions: an aborted batch's state
   must never be recovered), and the consumer's group generation and member id are exposed for the transaction's
   offsets (KIP-447: a member the group has moved on from is refused).
4. No records are taken from the fetcher that Faust then throws away. Faust's fetch call (in the consumer thread)
   can outlive a rebalance: it waits for the new assignment, then takes what the fetcher holds for every partition
   in the consumer's live set of active partitions -- every assigned partition when that set is empty, as it is
   while recovery pauses them all. Faust drops records that arrive while flow is stopped and seeks only the stream
   partitions back, so a changelog partition fetched from the offset recovery had just sought it to lost all its
   records up to the end, and recovery waited for them forever (CI's join/leave test: "need 1329, have -1";
   reproduced every time by delaying the recovery task 0.5 s after its seek). Here the fetcher hands out a
   partition's records only while flow runs and the partition is active; the others stay in the fetcher for a
   later call, or are dropped by the next seek.
5. A recovery seek below -1 starts at 0 (see ``_ConsumerThread._seek_wait``).
6. A recovery that a new rebalance overtook does not end that rebalance. Recovery checks the group generation before
   its last step (seeking the stream partitions) but not after it: a worker stopped during that seek (SIGSTOP in
   the fault campaign, seed 13) came back, its session had expired, the rejoin revoked everything, and then the old
   recovery finished -- "Worker ready", ``app.rebalancing`` false -- while the new assignment's changelogs had not
   been read. The processor's release timer, trusting that flag, adopted the runs of its partitions from tables
   still missing three of them, and a run's held event was never released. Here every wait of recovery ends its
   pass (``RebalanceAgain``, as Faust does when the next assignment arrives first) once a rebalance has begun since
   the assignment the pass serves, so only the newest assignment's recovery ends a rebalance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from importlib.metadata import version
from time import monotonic
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
from faust.tables import TableManager  # noqa: E402
from faust.tables.recovery import RebalanceAgain, Recovery  # noqa: E402
from faust.transport.drivers import aiokafka as faust_aiokafka  # noqa: E402
from faust.types import TP  # noqa: E402
from mode.utils.objects import cached_property  # noqa: E402
from mode.utils.queues import FlowControlEvent  # noqa: E402

from kafka_lineage.runtime.transactions import readable_ends  # noqa: E402

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
    async def _seek_wait(self, consumer: Any, partitions: Mapping[TP, int]) -> None:
        """Fix 5: recovery seeks each changelog partition to its first offset less one, and Faust turns only -1 into
        0: a first offset the broker did not know yet (a worker recovering just after a broker restart) came out
        below -1, and aiokafka's ``seek`` raised -- the worker crashed (the long campaign's run 177). An offset
        below 0 is where reading starts: 0, as Faust does for -1."""
        await super()._seek_wait(consumer, {tp: max(offset, 0) for tp, offset in partitions.items()})

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
        return {**committed, **{TP(tp.topic, tp.partition): offset for tp, offset in beginnings.items()}}

    async def commit(self, offsets: Mapping[TP, int]) -> bool:
        return False  # fix 3: not even a direct call commits

    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:
        """For the tables' changelogs, one past the last record a read_committed reader gets (fix 3): their tails
        are transaction markers and aborted records, which recovery, counting the records it was handed, would
        wait for forever."""
        changelogs = self.app.tables.changelog_topics
        tables = [tp for tp in partitions if tp.topic in changelogs]
        others = [tp for tp in partitions if tp.topic not in changelogs]
        found = dict(await super()._highwaters(others)) if others else {}
        if tables:
            ends = await asyncio.to_thread(readable_ends, self.app.librdkafka_config,
                                           [(tp.topic, tp.partition) for tp in tables])
            found.update({tp: ends[(tp.topic, tp.partition)] for tp in tables})
        return found

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._isolation_level = "read_committed"  # handed to its fetcher when it starts (fix 3)
        return consumer

    def group_member(self) -> tuple[int, str]:
        """(generation, member id) of this consumer in its group; generation -1 while it has none."""
        coordinator = getattr(self._ensure_consumer(), "_coordinator", None)
        if coordinator is None:
            return -1, ""
        return coordinator.generation, coordinator.member_id

    def committed_now(self, tps: Iterable[TP]) -> None:
        """Offsets of ``tps`` were committed (by a transaction): Faust's livelock check must not warn about them."""
        now = monotonic()
        self.tp_last_committed_at.update({tp: now for tp in tps})


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        return False  # offsets are committed by the processor's transactions only (fix 3)

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        return False

    def group_member(self) -> tuple[int, str]:
        return self._thread.group_member()

    def committed_now(self, topic: str, partitions: Iterable[int]) -> None:
        self._thread.committed_now(TP(topic, partition) for partition in partitions)


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


class _Recovery(Recovery):
    # app.rebalancing_count (one more at every rebalance's start, when partitions are revoked) when the assignment
    # this recovery pass serves arrived
    _serving: int = 0

    async def on_rebalance(self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP],
                           generation_id: int = 0) -> None:
        self._serving = self.app.rebalancing_count
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    async def _wait(self, coro: Any, timeout: Any = None) -> None:
        """Fix 6: a pass that a newer rebalance overtook ends at its next wait, before or after it."""
        if self.app.rebalancing_count != self._serving and asyncio.iscoroutine(coro):
            coro.close()  # never to run
        self._raise_if_overtaken()
        await super()._wait(coro, timeout)
        self._raise_if_overtaken()

    def _raise_if_overtaken(self) -> None:
        if self.app.rebalancing_count != self._serving:
            self.log.info("Recovery of rebalance #%d overtaken by rebalance #%d", self._serving,
                          self.app.rebalancing_count)
            raise RebalanceAgain()


class _TableManager(TableManager):
    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = _Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery


class App(faust.App):
    """``faust.App`` whose queued records survive a redundant flow-control resume (fix 2) and whose table recovery
    ends only the newest rebalance (fix 6); give it ``broker=broker_url(...)`` for the transport of fixes 1, 3 and 4,
    and ``librdkafka_config`` (the same Kafka's librdkafka settings) for fix 3's reads of where changelogs end."""

    librdkafka_config: Mapping[str, str] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, TableManager=_TableManager, **kwargs)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return _FlowControl(loop=self.loop)

    def leader_partition(self) -> tuple[str, int]:
        """(topic, partition) of Faust's leader-election topic: the group's own, never written nor committed, so an
        offset committed for it (``TransactionalProducer.settle``) changes nothing a reader sees."""
        leader: TP = self._leader_assignor._leader_tp
        return leader.topic, leader.partition
