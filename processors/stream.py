"""Streaming shell of the processor on faust-streaming: the Faust app is the composition root.

- agent ``process`` reads ``openlineage.events`` in batches (raw bytes; decoding is ``ProcessorCore``'s, with
  fastavro and writer schemas cached by id) and publishes NormalizedEvents (same key) and DeadLetters;
- tables ``dedupe`` (one entry per accepted event's dedupe id) and ``runs`` (each run's lifecycle position and
  held-back events), changelog-backed and co-partitioned with the events topic; global table ``dataset-schemas``
  keeps each dataset's last schema, readable by every worker because a dataset is written by jobs on any partition
  (each dataset's entries in one changelog partition, chosen here so that no write waits on Faust's partitioner);
  Faust reads the changelogs back (recovery), but the writes go through librdkafka (``state_writer``);
- timer ``release`` lets held events go when their window passes and sweeps state past the dedupe TTL.

Exactly once: each batch's outputs (normalized events, dead letters), its tables' changelog records and its input
offsets commit in one Kafka transaction (``runtime/transactions``), with the group generation of the consumer that
fetched the records, so a crash anywhere leaves all of a batch or none of it, and a worker the group has moved on
from cannot commit. Faust commits nothing (``faust_transport`` fix 3); which records a batch may process and commit
is decided by ``offsets.OffsetLedger``. A transaction that had to be aborted leaves this worker's memory ahead of
Kafka: the worker then starts over in the same process (``_start_over``) from what Kafka committed.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import faust
import mode
from aiokafka.partitioner import murmur2
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.processors.core import STAGE, Incoming, Output, ProcessorCore
from kafka_lineage.processors.faust_transport import App, broker_credentials, broker_url
from kafka_lineage.processors.normalize import parse_aliases
from kafka_lineage.processors.offsets import Gap, OffsetLedger, RecordsSkipped, membership_problem
from kafka_lineage.processors.settings import PROCESSOR_CRASH_POINTS, ProcessorSettings
from kafka_lineage.processors.state_writer import ChangelogWriter
from kafka_lineage.runtime.config import ClientSettings, OperationsSettings
from kafka_lineage.runtime.crash_points import CrashPoints, parse_crash_points
from kafka_lineage.runtime.kafka_io import (
    RECORD_MAX_BYTES,
    ensure_topic,
    prepare_pipeline,
    replication_factor,
)
from kafka_lineage.runtime.logs import bootstrap_logging
from kafka_lineage.runtime.metrics import Metrics, pipeline_checks, start_endpoint
from kafka_lineage.runtime.retry import Backoff
from kafka_lineage.runtime.stall import StallWatch
from kafka_lineage.runtime.transactions import (
    SETTLE_KEY,
    TransactionAborted,
    TransactionalProducer,
    TransactionFatal,
    fenced,
    group_metadata,
)
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.dead_letters import dead_letter
from kafka_lineage.schemas.partitions import parse_patterns
from kafka_lineage.schemas.validation_stamp import is_stamped
from kafka_lineage.schemas.wire import AvroCodec

log = logging.getLogger(__name__)
# Records larger than this go to the DLQ instead of the normalized topic: the pipeline's one record limit
# (uncompressed; JSON lineage compresses well).
MAX_OUTPUT_BYTES = RECORD_MAX_BYTES
# The largest state record (table changelog) the producer sends and the changelog topics accept: the broker's default
# record limit, stated here for both sides. The core keeps every state entry well below it (ProcessorCore's bounds).
STATE_RECORD_MAX_BYTES = 1_048_576
# A worker that got no record for this long looks whether its partitions move; a second look that finds them stuck
# starts it over (as the sinks' members, decision 70).
STALL_SECONDS = 45.0
# Reading the group's committed offsets is retried this long (a broker restart moves the group coordinator).
POSITIONS_PATIENCE_SECONDS = 120.0
# A transaction still in work this long after its timeout (which the broker enforces) has hung in the client.
TRANSACTION_MARGIN_SECONDS = 10.0
T = TypeVar("T")
_CHANGELOG_CONFIG = {"max.message.bytes": str(STATE_RECORD_MAX_BYTES + 12)}  # + the record batch overhead


def _changelog_config(clients: ClientSettings) -> dict[str, str]:
    """The tables' changelog topic settings: the record limit, and the pipeline's ``min.insync.replicas``."""
    replicas = clients.topics.min_insync_replicas
    return {**_CHANGELOG_CONFIG, **({"min.insync.replicas": str(replicas)} if replicas and replicas > 0 else {})}


class _WriterChosenPartition:
    """Tables written only through ``ChangelogWriter`` (processors/state_writer.py), which sends each record to the
    partition the core chose. Faust would find it through the current event, which batch iteration does not
    provide, or (``use_partitioner``) ask the producer's metadata for the changelog topic, which crashed a fresh
    pipeline's first write before that metadata was loaded: a write through ``table[key] = value`` is a bug."""

    def partition_for_key(self, key: Any) -> int | None:
        raise TypeError(f"{type(self).__name__} is written through ChangelogWriter, with the partition the core chose")


class PartitionedTable(_WriterChosenPartition, faust.Table):
    """A table written from batches, each key in its source record's partition."""


class PartitionedGlobalTable(_WriterChosenPartition, faust.GlobalTable):
    """A global table written from batches, each key in the partition the writer computes (``key_partition``)."""


def key_partition(serialized_key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (murmur2 of the key): where Faust's partitioner put the key before."""
    return (murmur2(serialized_key) & 0x7FFFFFFF) % partitions


def build_app(clients: ClientSettings, settings: ProcessorSettings, metrics: Metrics | None = None) -> faust.App:
    prepare_pipeline(clients, settings.partitions)
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # Faust creates only the last level
    registry_client = SchemaRegistryClient(clients.registry_config())
    normalized_id = registry.registered_id(registry_client, clients.normalized_topic, "normalized_event")
    dead_letter_id = registry.registered_id(registry_client, clients.dlq_topic, "dead_letter")
    fetch = registry.schema_fetcher(registry_client)
    replication = replication_factor(clients)

    app = App(
        settings.group_id,
        broker=broker_url(clients.kafka_bootstrap_servers),
        store="memory://",
        value_serializer="raw",
        key_serializer="raw",
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        web_enabled=False,
        datadir=str(settings.data_dir),
        table_cleanup_interval=60.0,
        stream_buffer_maxsize=max(4096, settings.batch_size * 4),
        # A bug in a batch must stop the worker (it restarts from the committed offsets), never skip the batch.
        agent_supervisor=mode.CrashingSupervisor,
        # A worker that died holds its partitions until its session times out: keep that short so a restarted or
        # surviving worker takes over within seconds, not Faust's default minute.
        broker_session_timeout=10.0,
        broker_credentials=broker_credentials(clients.kafka_security),
        broker_heartbeat_interval=2.0,
        producer_max_request_size=STATE_RECORD_MAX_BYTES,
        # No standby copies of the partitioned tables: a partition that moves is read from its changelog, which is
        # compacted and bounded (ARCHITECTURE 32). (The recovery hang once blamed on standbys becoming actives was
        # most likely the fetch-after-rebalance drop that faust_transport's fix 4 closes.)
        table_standby_replicas=0,
        topic_replication_factor=replication,  # its changelogs, as the pipeline's own topics
    )
    app.librdkafka_config = clients.kafka_config()
    events = app.topic(clients.events_topic, value_serializer="raw", key_serializer="raw")
    changelog_config = _changelog_config(clients)
    transactional_id = settings.transactional_id or worker_slot_id(settings.group_id, settings.data_dir)
    producer = TransactionalProducer(clients.kafka_config({"linger.ms": "5"}), transactional_id,
                                     timeout_ms=settings.transaction_timeout_ms)
    # The tables' changelog records go through the same transactions (processors/state_writer.py), each to the
    # partition the core chose; Faust's producer writes none of them.
    state = ChangelogWriter()
    ledger = OffsetLedger()
    crash = CrashPoints(parse_crash_points(settings.crash_points, PROCESSOR_CRASH_POINTS), "worker")
    runs = app.tables.add(PartitionedTable(app, name="runs", default=None, beacon=app.tables.beacon,
                                           partitions=settings.partitions, extra_topic_configs=changelog_config))
    dedupe = app.tables.add(PartitionedTable(app, name="dedupe", default=None, beacon=app.tables.beacon,
                                             partitions=settings.partitions, extra_topic_configs=changelog_config))
    schemas = app.tables.add(PartitionedGlobalTable(
        app, name="dataset-schemas", default=None, beacon=app.tables.beacon, partitions=settings.partitions,
        standby_buffer_size=1, is_global=True, extra_topic_configs=changelog_config))  # as app.GlobalTable sets

    # The changelog topics exist before the worker joins its group. Created by Faust at start-up, a topic was once
    # not yet in the metadata when the group assigned partitions ("Ignoring missing topic"): the global table stayed
    # unassigned until the consumer's next metadata refresh (minutes), and the worker was not ready (CI fault run).
    for table in (runs, dedupe, schemas):
        ensure_topic(clients.kafka_config(), table.changelog_topic.get_topic_name(), partitions=settings.partitions,
                     replication_factor=replication, config={"cleanup.policy": "compact", **changelog_config})
    # Before recovery reads the changelogs: a transaction of this slot's transactional id that a broker restart left
    # hanging there would hide its batch's state from recovery (the outputs it accounts for are committed), and would
    # hold back every later record of that partition (TransactionalProducer.settle).
    producer.settle([(table.changelog_topic.get_topic_name(), partition,
                      table.changelog_topic.prepare_key(SETTLE_KEY, table.key_serializer)[0])
                     for table in (runs, dedupe, schemas) for partition in range(settings.partitions)])

    def schema_partition(dataset: str) -> int:  # schema writes are rare: only when a dataset's version changes
        key = app.serializers.dumps_key(None, dataset, serializer=schemas.key_serializer)
        return key_partition(key, settings.partitions)

    core = ProcessorCore(AvroCodec("openlineage_event", fetch), runs, schemas, dedupe=dedupe,
                         window_seconds=settings.window_seconds, dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
                         max_event_time_ahead_seconds=settings.max_event_time_ahead_seconds,
                         aliases=parse_aliases(settings.aliases) if settings.aliases else None,
                         partition_patterns=parse_patterns(settings.partition_patterns),
                         schema_history_limit=settings.schema_history_limit)
    normalized_codec = AvroCodec("normalized_event", fetch)
    dead_letter_codec = AvroCodec("dead_letter", fetch)
    stats = {"in": 0, "out": 0, "dead": 0, "duplicates": 0, "late": 0, "drift": 0, "redelivered": 0,
             "transactions": 0}
    metrics = metrics or Metrics(process_metrics=False)
    lag_reader = Consumer(clients.kafka_config({"group.id": settings.group_id}))  # reads the group's commits only

    # The group's committed offsets (where the ledger starts after an assignment) and gap checks: a consumer of its
    # own, never the lag reader, which another thread uses (one confluent-kafka consumer, one thread).
    positions_reader = Consumer(clients.kafka_config({"group.id": settings.group_id,
                                                      "isolation.level": "read_committed"}))
    in_order = asyncio.Lock()

    async def publish(output: Output, offsets: dict[int, int] | None, epoch: int) -> None:
        """Commit ``output`` with the input ``offsets``; None (the release timer's): the owned partitions' offsets
        as last committed, sent again unchanged only so that the broker checks the group generation, and nothing to
        commit when ``output`` has nothing to write."""
        # A batch and the release timer publish concurrently; their transactions go one at a time, in the order the
        # core computed them (each publish task asks for the lock first thing, and the tasks start in that order).
        async with in_order:
            fence_only = offsets is None
            if offsets is None:  # read here, under the lock: a batch committed just before has moved them on
                offsets = {partition: committed[partition] for partition in owned() if partition in committed}
            await _publish(output, offsets, epoch, fence_only)

    async def _publish(output: Output, offsets: dict[int, int], epoch: int, fence_only: bool) -> None:
        normalized, letters = [], list(output.dead_letters)
        for key, record in output.normalized:
            value = normalized_codec.encode(record, normalized_id)
            if len(value) <= MAX_OUTPUT_BYTES:
                normalized.append((key, value))
            else:
                letters.append((key, _too_large(record, len(value))))
        for name, key, where, value in output.state_writes():  # in order: a wide schema's chunks before its head
            if name == "schemas":
                state.write(schemas, key, schema_partition(where), value)
            else:
                state.write(dedupe if name == "dedupe" else runs, key, where, value)
        records = [(clients.normalized_topic, key, value) for key, value in normalized]
        records += [(clients.dlq_topic, key, dead_letter_codec.encode(record, dead_letter_id))
                    for key, record in letters]
        changelog = state.take()
        if not (records or changelog or (offsets and not fence_only)):
            return
        member = None
        if offsets:
            if epoch != ledger.epoch:  # a rebalance since the batch was read: its records may be another's now
                _start_over("a rebalance came between reading a batch and committing it")
            member = app.consumer.group_member()
            # The consumer (its own thread) may have left or rejoined the group before this worker's rebalance
            # callbacks ran: a session that expired while the process was stopped (seen in the campaign: a zombie's
            # commit moved the group's offsets back)
            if problem := membership_problem(membership[0], member):
                _start_over(f"a batch's offsets cannot be committed: {problem}")
        try:
            # Bounded: past its timeout the broker aborts the transaction anyway, and a call that hangs (seen: adding
            # the offsets in the seconds after a broker restart, the group coordinator still loading, while Faust's
            # revocation waited for this batch) must not hold the worker; starting over aborts what is open.
            await asyncio.wait_for(asyncio.to_thread(_transact, records, changelog, offsets, member),
                                   settings.transaction_timeout_ms / 1000 + TRANSACTION_MARGIN_SECONDS)
        except TimeoutError:
            _start_over(f"a transaction did not finish within {settings.transaction_timeout_ms} ms (hung in "
                        f"{transaction_step[0]}, {len(records)} records, {len(changelog)} state records, offsets "
                        f"{offsets} of member {member})")
        except (TransactionAborted, TransactionFatal) as exc:
            if fenced(exc) and settings.transactional_id:
                log.critical("processor: another worker took over transactional id %s: %s", transactional_id, exc)
                logging.shutdown()
                os._exit(70)
            # A slot's id is held under this process's lock: a fence came from the broker itself (the transaction
            # outlived its timeout while the broker was away, the long campaign's run 181), not from another worker.
            _start_over(str(exc))
        stats["transactions"] += 1
        if offsets:
            committed.update(offsets)
            app.consumer.committed_now(clients.events_topic, offsets)
        if output.drift_findings:  # rare, and what an operator looks for when an alert seems missing
            for _key, record in output.normalized:
                for change in record["schemaChanges"]:
                    log.info("schema change on %s/%s: %s → %s (%s), from %s[%s]@%s", change["namespace"],
                             change["name"], change["previousVersion"][:12], change["newVersion"][:12],
                             change["severity"], *(record["processing"][field] for field in
                                                   ("sourceTopic", "sourcePartition", "sourceOffset")))
        core.written(output)
        stats["out"] += len(normalized)
        stats["dead"] += len(letters)
        stats["duplicates"] += output.duplicates
        stats["late"] += output.late
        stats["drift"] += output.drift_findings
        metrics.events_out(STAGE, len(normalized))
        metrics.duplicate(STAGE, output.duplicates)
        metrics.late(STAGE, output.late)
        metrics.schema_change(STAGE, output.drift_findings)
        for _key, record in letters:
            metrics.dead_letter(STAGE, record["errorClass"])

    def _transact(records: list[tuple[str, bytes | None, bytes]],
                  changelog: list[tuple[str, int, bytes | None, bytes | None]],
                  offsets: dict[int, int] | None, member: tuple[int, str] | None) -> None:
        """One transaction (in a thread: librdkafka's calls block): outputs, state, input offsets, commit."""
        transaction_step[0] = "begin"
        producer.begin()
        transaction_step[0] = "produce"
        for topic, key, value in records:
            producer.produce(topic, key, value)
        crash.reach("outputs-sent", producer.flush)
        for topic, partition, key, value in changelog:
            producer.produce(topic, key, value, partition)
        crash.reach("state-sent", producer.flush)
        if offsets and member is not None:
            transaction_step[0] = "send_offsets"
            producer.send_offsets({(clients.events_topic, partition): offset for partition, offset in offsets.items()},
                                  group_metadata(settings.group_id, *member))
        crash.reach("before-commit", producer.flush)
        transaction_step[0] = "commit"
        producer.commit()
        transaction_step[0] = "committed"
        crash.reach("after-commit")

    committed: dict[int, int] = {}  # partition → offset committed by the last transaction (or read after assignment)
    transaction_step = ["none"]  # the step the transaction in work is at: what a hang report names
    # (generation, member id) the current assignment came with: the only membership this worker commits offsets under
    membership: list[tuple[int, str] | None] = [None]
    watch = StallWatch(STALL_SECONDS)  # a worker that gets no records looks whether its partitions move
    positions_lock = threading.Lock()

    async def ensure_positions(partitions: set[int]) -> None:
        epoch = ledger.epoch
        try:
            found = await asyncio.to_thread(committed_positions, partitions, 0.0)
        except KafkaException as exc:  # asked again below, patiently (e.g. a broker that is restarting)
            if exc.args[0].code() == KafkaError._TIMED_OUT:
                # Offsets a transaction still carries stay unreadable (KIP-447's stable read) until it ends: another
                # member's ends within its timeout, but one of this slot's own that a broker restart left hanging
                # never does -- the worker waited for it until it gave up (the long campaign's run 101). Settling
                # ends that one.
                log.warning("processor: committed offsets of partitions %s not readable (%s): settling what this "
                            "worker's transactional id may have left open on the group's offsets",
                            sorted(partitions), exc)
                async with in_order:
                    await asyncio.to_thread(settle_offsets)
            found = await asyncio.to_thread(committed_positions, partitions, POSITIONS_PATIENCE_SECONDS)
        if epoch == ledger.epoch:  # else a rebalance came meanwhile: read again when next needed
            ledger.start(found)
            for partition, offset in found.items():
                committed.setdefault(partition, offset)

    def settle_offsets() -> None:
        """Commit the leader-election partition's offset unchanged under this worker's membership: a transaction
        whose marker reaches the group's offsets partition (TransactionalProducer.settle)."""
        member = app.consumer.group_member()
        if membership_problem(membership[0], member):
            return  # not the group's member it was assigned as: nothing may be committed under it
        leader = TopicPartition(*app.leader_partition())
        found = ask_kafka("committed offsets", lambda: positions_reader.committed([leader], timeout=30))[0].offset
        if found < 0:  # never committed: where reading it starts
            found = ask_kafka("first offsets", lambda: positions_reader.get_watermark_offsets(leader, timeout=30)[0])
        try:
            producer.settle([], {(leader.topic, leader.partition): found}, group_metadata(settings.group_id, *member))
        except TransactionAborted as exc:  # the read that follows waits as before
            log.warning("processor: settling the group's offsets did not commit: %s", exc)

    def ask_kafka(what: str, call: Callable[[], T], patience: float = POSITIONS_PATIENCE_SECONDS) -> T:
        """``call`` on the positions reader, retried while Kafka cannot answer (e.g. its group coordinator moving
        during a broker restart), for at most ``patience`` seconds."""
        backoff, deadline = Backoff(cap=5.0), time.monotonic() + patience
        while True:
            try:
                with positions_lock:
                    return call()
            except KafkaException as exc:
                if time.monotonic() + backoff.delay > deadline:
                    raise
                log.warning("processor: %s not read yet (%s); retrying in %.1fs", what, exc, backoff.delay)
                backoff.wait()

    def committed_positions(partitions: set[int], patience: float = POSITIONS_PATIENCE_SECONDS) -> dict[int, int]:
        """Each partition's committed offset (waiting out a transaction that is still committing offsets, asking
        again for ``patience`` seconds), or where reading starts without one: the partition's first offset
        (faust_transport fix 1)."""
        wanted = [TopicPartition(clients.events_topic, partition) for partition in sorted(partitions)]
        found = {}
        for tp in ask_kafka("committed offsets", lambda: positions_reader.committed(wanted, timeout=30), patience):
            if tp.error is not None:
                raise RuntimeError(f"committed offset of {tp.topic}[{tp.partition}]: {tp.error}")
            found[tp.partition] = tp.offset if tp.offset >= 0 else ask_kafka(
                "first offsets", lambda tp=tp: positions_reader.get_watermark_offsets(tp, timeout=30)[0])
        return found

    def stuck_partitions() -> list[int]:
        """A look of the stall watch: owned partitions with records past their committed offset that did not move
        since the previous look."""
        mine = sorted(owned())
        if not mine:
            return []
        ends = {partition: ask_kafka("end offsets", lambda partition=partition: positions_reader.get_watermark_offsets(
            TopicPartition(clients.events_topic, partition), timeout=30)[1]) for partition in mine}
        return watch.stuck(ends, committed_positions(set(mine)))

    def gap_is_real(gap: Gap) -> bool:
        """Whether Kafka has no readable record between the gap's ends (read afresh from its start)."""
        reader = Consumer(clients.kafka_config({"group.id": f"{settings.group_id}.gap-check",
                                                "enable.auto.commit": "false", "auto.offset.reset": "earliest",
                                                "isolation.level": "read_committed"}))
        try:
            reader.assign([TopicPartition(clients.events_topic, gap.partition, gap.expected)])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                message = reader.poll(1.0)
                if message is not None and message.error() is None:
                    log.warning("processor: partition %d: offsets %d..%d hold no readable record (first readable: "
                                "%d); going on from %d", gap.partition, gap.expected, gap.found - 1,
                                message.offset(), gap.found)
                    return message.offset() >= gap.found
            return False  # nothing readable within the bound: not known to be empty
        finally:
            reader.close()

    def _start_over(reason: str) -> NoReturn:
        """This worker's memory is ahead of what Kafka committed: start again from Kafka, in the same process (a
        supervisor need not notice). Its slot's lock goes with the old image, so the new one takes the slot again and
        its producer, with the same transactional id, aborts anything the old one left open."""
        log.critical("processor: %s; starting this worker over from the state and offsets Kafka committed", reason)
        logging.shutdown()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])

    def owned() -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == clients.events_topic}

    @app.agent(events)
    async def process(stream: faust.Stream) -> None:
        async for batch in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            incoming = [Incoming(e.message.key, e.message.value, e.message.partition, e.message.offset,
                                 int(e.message.timestamp * 1000) if e.message.timestamp else None,
                                 e.message.topic, is_stamped(e.message.headers)) for e in batch]
            stats["in"] += len(incoming)
            metrics.events_in(STAGE, len(incoming))
            metrics.batch(STAGE, len(incoming))
            watch.busy()
            partitions = {record.partition for record in incoming}
            while unknown := ledger.unknown(partitions & owned()):  # again if a rebalance came while reading
                await ensure_positions(unknown)
            mine, epoch = owned(), ledger.epoch
            try:
                admitted = ledger.admit_checked(incoming, mine, gap_is_real)
            except RecordsSkipped as exc:
                _start_over(str(exc))
            stats["redelivered"] += admitted.redelivered
            offsets = {record.partition: record.offset + 1 for record in admitted.records}
            await _completed_or_exit(lambda batch=admitted.records, offsets=offsets, epoch=epoch:
                                     publish(core.process(batch, time.time()), offsets, epoch))
            metrics.seen(STAGE)

    @app.timer(min(0.25, settings.window_seconds / 4 or 0.25))
    async def release() -> None:
        # Not while the group rebalances: the first expire after an assignment adopts the owned partitions' dedupe
        # ids from the table and from then on trusts only them, and before recovery has read the changelogs that set
        # was incomplete (the events a departed worker processed just before leaving came out again).
        if app.rebalancing:
            return
        mine, epoch = owned(), ledger.epoch
        if unknown := ledger.unknown(mine):
            await ensure_positions(unknown)
            return  # the next tick (the rebalance that may have come meanwhile is seen by then)
        # The release's transaction carries the owned partitions' committed offsets unchanged: the broker then checks
        # the group generation, so a worker the group has moved on from cannot release a run's held events too.
        await _completed_or_exit(lambda: publish(core.expire(time.time(), mine), None, epoch))

    @app.timer(5.0)
    async def measure_lag() -> None:  # end offset - the group's committed offset, per partition of the events topic
        assigned = [TopicPartition(tp.topic, tp.partition) for tp in app.assignor.assigned_actives()
                    if tp.topic == clients.events_topic]
        if assigned:
            await asyncio.to_thread(metrics.update_lag, STAGE, lag_reader, assigned, committed=True)

    @app.timer(5.0)
    async def stall_watch() -> None:
        # A worker that gets no records although its partitions have some past their committed offsets is stuck
        # somewhere in its consumer (seen once after a rebalance: Faust handed the agent nothing for minutes);
        # starting over in place joins the group again and reads from the committed offsets.
        if app.rebalancing or not watch.due():
            return
        if in_order.locked():  # a transaction in work (a commit waiting out a broker restart) is not a stall
            watch.postpone()
            return
        try:
            stuck = await asyncio.to_thread(stuck_partitions)
        except KafkaException as exc:  # asked through a consumer of its own: Faust's consumer may be fine
            if watch.unreadable():
                log.warning("processor: no records for %.0fs and the group's progress not readable (%s)",
                            2 * STALL_SECONDS, exc)
            return
        if stuck:
            _start_over(f"no records for {STALL_SECONDS:.0f}s although partitions {stuck} of {clients.events_topic} "
                        "have records past their committed offsets, which did not move")

    @app.timer(settings.report_seconds)
    async def report() -> None:
        log.info("processor: %(in)d in, %(out)d normalized, %(duplicates)d duplicates, %(late)d late, "
                 "%(drift)d schema changes, %(dead)d dead letters, %(redelivered)d redelivered (committed before); "
                 "state: %(ids)d dedupe ids, %(runs)d runs, %(held)d held events; transactions: %(transactions)d",
                 {**stats, **core.state_sizes()})

    async def rebalanced(member: tuple[int, str] | None) -> None:
        async with in_order:  # a release in flight commits (or fails) with the generation it was computed in
            ledger.reset()
            committed.clear()
            membership[0] = member

    @app.on_partitions_revoked.connect
    async def on_revoked(app: faust.App, revoked: set, **_: Any) -> None:
        await rebalanced(None)
        core.forget_partitions({tp.partition for tp in revoked if tp.topic == clients.events_topic})

    @app.on_partitions_assigned.connect
    async def on_assigned(app: faust.App, assigned: set, **_: Any) -> None:
        await rebalanced(app.consumer.group_member())  # set by the join that brought this assignment
        core.on_assigned()

    return app


def worker_slot_id(group_id: str, data_dir: Path) -> str:
    """A transactional id that a worker restarted on the same host and data directory gets again: the lowest slot
    whose lock file no live worker holds (the lock goes with its process, even a SIGKILLed one). The next holder of
    an id aborts at once whatever the last one left open; with an id of its own, a killed worker's open transaction
    would hold back every read_committed reader of the partitions it wrote (the schema table's changelog included:
    another worker would then find a schema change already reported) until the broker's transaction timeout."""
    host = socket.gethostname()
    place = hashlib.sha256(f"{host}\0{data_dir.resolve()}".encode()).hexdigest()[:10]
    for slot in range(1024):
        lock = open(data_dir / f"worker-slot-{slot}.lock", "a")  # noqa: SIM115 (held for the process's life)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _slot_locks.append(lock)
        return f"{group_id}-{host}-{place}-{slot}"
    raise RuntimeError(f"1024 workers already hold slots in {data_dir}")


_slot_locks: list = []  # open lock files: closing one would free its slot


def _too_large(record: dict[str, Any], size: int) -> dict[str, Any]:
    """A dead letter for a normalized record too large to publish; the raw event stays where the DLQ record says."""
    processing = record["processing"]
    return dead_letter(stage=STAGE, error_class="too-large",
                       error_message=f"the normalized event is {size} bytes, over the {MAX_OUTPUT_BYTES}-byte limit "
                                     "of the pipeline's topics; the raw event is kept at its source offset",
                       source_topic=processing["sourceTopic"], source_partition=processing["sourcePartition"],
                       source_offset=processing["sourceOffset"])


async def _completed_or_exit(work: Callable[[], Awaitable[None]]) -> None:
    """Run one batch's work to its end, or end the process with its transaction uncommitted.

    A batch that failed leaves the worker's memory (dedupe ids, held runs, tables' local data) ahead of what Kafka
    committed, so the worker must not go on: any failure ends the process at once with code 70 and the next worker
    starts from the last committed transaction. Cancellation (a shutdown) waits for the batch in flight to finish.
    """
    try:
        task = asyncio.ensure_future(work())  # inside: the batch's synchronous part runs in this call
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # a shutdown: finish publishing before the batch is acknowledged
        raise
    except Exception:
        log.critical("processor: a batch failed; exiting without committing it (the next worker repeats it)",
                     exc_info=True)
        logging.shutdown()
        os._exit(70)


def run_worker(clients: ClientSettings, settings: ProcessorSettings, operations: OperationsSettings) -> None:
    """Run one worker until SIGTERM/SIGINT (Faust stops consuming, flushes the producer, commits, leaves), with its
    metrics/health endpoint."""
    metrics = Metrics()
    app = build_app(clients, settings, metrics)

    @app.task
    async def use_pipeline_logging() -> None:  # after Faust set up its own handlers: ours (format, redaction) instead
        # sys.__stderr__: the worker redirected sys.stderr into logging itself
        bootstrap_logging(operations, clients.secrets, stream=sys.__stderr__)

    endpoint = start_endpoint("processor", "LINEAGE_PROCESSOR_METRICS_PORT", operations.metrics_host,
                              operations.processor_metrics_port, metrics,
                              pipeline_checks(clients))
    try:
        faust.Worker(app, loglevel=settings.log_level, quiet=True).execute_from_commandline()
    finally:
        endpoint.close()
