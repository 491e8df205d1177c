"""Kafka transactions (KIP-98, with KIP-447's group fencing): a stage's outputs, its state changelog records and its
input offsets become visible together, or not at all.

A stage opens a transaction, produces every record of a batch, adds its source offsets with the consumer group's
metadata (generation and member id: a member the group has moved on from is refused), and commits. Consumers read
``read_committed``: an aborted or never-committed transaction (a worker killed in the middle) is invisible to them, so
a crash at any step leaves either the whole batch or nothing of it.

Errors come out in three kinds, as librdkafka classifies them: a retriable one is retried here (bounded); one that
needs an abort is aborted here and raised as ``TransactionAborted`` (nothing of the batch is visible; the caller's
in-memory state since ``begin`` is not backed by Kafka and must be rebuilt); anything else is ``TransactionFatal``
(fenced by a newer producer with the same transactional id, or misconfigured): the producer is unusable.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import logging
import os
import time
from collections.abc import Iterable, Mapping

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from kafka_lineage.runtime.kafka_io import PRODUCER_DEFAULTS, while_unreachable

log = logging.getLogger(__name__)
# How long a transaction may stay open before the broker aborts it: also how long a killed worker's open transaction
# holds back read_committed readers of the partitions it wrote (its successor with the same transactional id aborts
# it at once). Kafka Streams' exactly-once default is 10 s; a batch here commits within a second on a healthy
# cluster, and 30 s leaves room for a broker restart's leader elections before the broker gives up on it.
TRANSACTION_TIMEOUT_MS = 30_000
# A retriable commit (coordinator moving, request timed out) is retried for this long, then taken as fatal.
COMMIT_PATIENCE_SECONDS = 120.0
# Another call (adding the offsets) with a retriable error is retried for this long: a broker restart's coordinator
# loading takes seconds, and giving up restarted a processor worker for nothing (the long fault campaign).
CALL_PATIENCE_SECONDS = 20.0
# The key of ``TransactionalProducer.settle``'s tombstones (serialized as each table serializes its keys): no key
# of a table starts with NUL.
SETTLE_KEY = "\x00lineage.settle"


class TransactionAborted(Exception):
    """The transaction was rolled back: none of its records or offsets are visible."""


class TransactionFatal(Exception):
    """The transactional producer cannot continue (fenced by a newer instance, or a fatal client error)."""


class TransactionalProducer:
    """One librdkafka transactional producer; one transaction at a time, driven from one thread at a time."""

    def __init__(self, config: Mapping[str, str], transactional_id: str, *,
                 timeout_ms: int = TRANSACTION_TIMEOUT_MS, init_timeout: float = 120.0) -> None:
        self.transactional_id = transactional_id
        self.producer = Producer({**PRODUCER_DEFAULTS, **config, "transactional.id": transactional_id,
                                  "transaction.timeout.ms": str(timeout_ms),
                                  # a record's delivery must finish inside its transaction
                                  "message.timeout.ms": str(timeout_ms)})
        self.open = False
        deadline = time.monotonic() + init_timeout
        while True:  # fences (and aborts) what an earlier producer with this id left open
            try:
                self.producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or time.monotonic() >= deadline:
                    raise TransactionFatal(f"init_transactions({transactional_id}): {error.str()}") from exc
                log.warning("transactions not initialised yet (%s); retrying", error.str())

    def begin(self) -> None:
        if not self.open:
            self._call("begin_transaction")
            self.open = True

    def produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None) -> None:
        """Add one record to the open transaction (a full local queue is waited out)."""
        while True:
            try:
                if partition is None:
                    self.producer.produce(topic, value, key)
                else:
                    self.producer.produce(topic, value, key, partition)
                return
            except BufferError:
                self.producer.poll(0.05)

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_metadata: bytes,
                     timeout: float = 60.0) -> None:
        """Add the consumer group's next offsets (topic, partition) → offset to the open transaction."""
        if offsets:
            positions = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
            self._call("send_offsets_to_transaction", positions, group_metadata, timeout)

    def commit(self) -> None:
        """Commit the open transaction; ``TransactionAborted`` when it had to be rolled back instead."""
        deadline = time.monotonic() + COMMIT_PATIENCE_SECONDS
        while True:
            try:
                self.producer.commit_transaction(max(1.0, min(30.0, deadline - time.monotonic())))
                self.open = False
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.retriable() and time.monotonic() < deadline:
                    log.warning("transaction commit not confirmed yet (%s); retrying", error.str())
                    continue
                self._abort_or_fatal(error, exc)

    def settle(self, tombstones: Iterable[tuple[str, int, bytes]], offsets: Mapping[tuple[str, int], int] | None = None,
               group_metadata: bytes | None = None) -> None:
        """Commit one transaction that touches each (topic, partition) of ``tombstones`` -- a tombstone of the key
        given, ``SETTLE_KEY`` serialized as the reader of that topic reads keys: a key it never holds -- and, given,
        the group's ``offsets``: it ends a *hanging* transaction of this transactional id there.

        A broker restart once completed a transaction in its coordinator but skipped the commit markers for the
        partitions its just-loaded metadata did not know yet ("likely deleted already"): read_committed readers of
        those partitions stopped at the transaction's first record for good, and the group's offsets it carried
        stayed pending, so reading them waited forever. Only a marker of the same producer id ends such a
        transaction; this producer has that id (``init_transactions`` bumped its epoch), and its marker completes,
        with its own records, every record the producer left open on a partition (Kafka keeps an open transaction's
        first offset across an epoch bump, takes a marker of a newer epoch, and resolves a group's pending offsets
        by producer id). The transaction seen hanging had been committed by its coordinator, so this completes what was
        meant; a hanging abort would become visible instead -- its outputs, state and offsets alike, the one batch it
        was, so no input is lost or repeated by it."""
        self.begin()
        for topic, partition, key in tombstones:
            self.produce(topic, key, None, partition)
        if offsets and group_metadata is not None:
            self.send_offsets(offsets, group_metadata)
        self.commit()

    def flush(self, timeout: float = 30.0) -> None:
        """Put what was produced on the broker (still invisible to read_committed readers until the commit)."""
        self.producer.flush(timeout)

    def abort(self) -> None:
        if self.open:
            try:
                self.producer.abort_transaction(60.0)
            except KafkaException as exc:
                raise TransactionFatal(f"abort_transaction: {exc.args[0].str()}") from exc
            finally:
                self.open = False

    def close(self) -> None:
        """Abort what is open (its records must not become visible) and release the producer."""
        with contextlib.suppress(TransactionFatal):
            self.abort()
        self.producer.flush(5.0)

    def _call(self, name: str, *args: object) -> None:
        """A transactional API call; one that failed with a retriable error (the coordinator loading or moving after
        a broker restart: librdkafka says such a call may be made again) is retried for ``CALL_PATIENCE_SECONDS``."""
        deadline = time.monotonic() + CALL_PATIENCE_SECONDS
        while True:
            try:
                getattr(self.producer, name)(*args)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.retriable() and not error.txn_requires_abort() and time.monotonic() < deadline:
                    log.warning("%s not done yet (%s); retrying", name, error.str())
                    time.sleep(0.5)
                    continue
                self._abort_or_fatal(error, exc)

    def _abort_or_fatal(self, error: KafkaError, exc: Exception) -> None:
        if error.txn_requires_abort():
            self.abort()
            raise TransactionAborted(f"transaction {self.transactional_id} aborted: {error.str()}") from exc
        self.open = False
        raise TransactionFatal(f"transaction {self.transactional_id}: {error.str()}") from exc


def fenced(error: BaseException) -> bool:
    """Whether ``error`` came from a newer producer with the same transactional id (this one is a zombie)."""
    cause = error.__cause__
    return isinstance(cause, KafkaException) and cause.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


class _GroupMetadataLib:
    """librdkafka's own constructor of consumer group metadata, from the library confluent-kafka ships.

    confluent-kafka takes the group metadata of ``send_offsets_to_transaction`` as librdkafka's serialized form but
    builds it only from its own consumer; a group whose member is another client (Faust's aiokafka consumer) needs
    ``rd_kafka_consumer_group_metadata_new_with_genid``, the C API librdkafka provides for such bindings."""

    def __init__(self) -> None:
        libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
        found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
        lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
        self.new = lib.rd_kafka_consumer_group_metadata_new_with_genid
        self.new.restype = ctypes.c_void_p
        self.new.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p]
        self.write = lib.rd_kafka_consumer_group_metadata_write
        self.write.restype = ctypes.c_void_p  # rd_kafka_error_t *, NULL on success
        self.write.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
        self.destroy = lib.rd_kafka_consumer_group_metadata_destroy
        self.destroy.argtypes = [ctypes.c_void_p]
        self.free = lib.rd_kafka_mem_free
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


_lib: _GroupMetadataLib | None = None


def group_metadata(group_id: str, generation: int, member_id: str, instance_id: str | None = None) -> bytes:
    """The consumer group metadata ``send_offsets_to_transaction`` takes, for a member known by its generation and
    member id (the broker refuses the offsets, aborting the transaction, once the group has a newer generation)."""
    global _lib
    if _lib is None:
        _lib = _GroupMetadataLib()
    handle = _lib.new(group_id.encode(), generation, member_id.encode(),
                      instance_id.encode() if instance_id is not None else None)
    if not handle:
        raise ValueError("librdkafka could not build the consumer group metadata")
    buffer, size = ctypes.c_void_p(), ctypes.c_size_t()
    try:
        if _lib.write(handle, ctypes.byref(buffer), ctypes.byref(size)):
            raise ValueError("librdkafka could not serialize the consumer group metadata")
        try:
            return ctypes.string_at(buffer, size.value)
        finally:
            _lib.free(None, buffer)
    finally:
        _lib.destroy(handle)


def unchecked_by_the_group(metadata: bytes, group_id: str) -> bool:
    """Whether ``metadata`` is that of a consumer with no generation and no member id (before its first join, or
    right after its session expired): the broker takes transactional offsets under it without checking them
    against the group, even into a group with live members, so a zombie's stale offsets would overwrite its
    successor's. Offsets must never be sent under it."""
    return metadata == group_metadata(group_id, -1, "")


def next_offsets(records: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition, offset) of processed records → the offsets to commit: one past the highest per partition."""
    offsets: dict[tuple[str, int], int] = {}
    for topic, partition, offset in records:
        key = (topic, partition)
        if offset + 1 > offsets.get(key, -1):
            offsets[key] = offset + 1
    return offsets


def readable_ends(config: Mapping[str, str], partitions: Iterable[tuple[str, int]], *, timeout: float = 60.0
                  ) -> dict[tuple[str, int], int]:
    """(topic, partition) → one past its last record a ``read_committed`` reader gets (its first offset when it has
    none). A partition written in transactions ends with commit markers, and possibly with aborted records: offsets
    no reader is ever handed, so a reader waiting for the end offset itself would wait forever. Read backwards from
    the end in growing windows until a record turns up (a reader gets its end-of-partition at the last stable
    offset: an open transaction's records are not waited for)."""
    reader = confluent_kafka.Consumer({**config, "group.id": "lineage-readable-ends", "enable.auto.commit": "false",
                                       "isolation.level": "read_committed", "enable.partition.eof": "true"})
    deadline = time.monotonic() + timeout
    try:
        bounds = {(topic, partition): _watermarks(reader, TopicPartition(topic, partition), deadline)
                  for topic, partition in partitions}
        found: dict[tuple[str, int], int] = {}
        window = 64
        pending = {key: end for key, (low, end) in bounds.items() if end > low}
        found.update({key: low for key, (low, end) in bounds.items() if end <= low})
        while pending:
            starts = {key: max(bounds[key][0], end - window) for key, end in pending.items()}
            reader.assign([TopicPartition(topic, partition, starts[(topic, partition)])
                           for topic, partition in pending])
            last: dict[tuple[str, int], int] = {}
            done: set[tuple[str, int]] = set()
            while len(done) < len(pending):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading the ends of {sorted(pending)} took over {timeout:.0f}s")
                message = reader.poll(1.0)
                if message is None:
                    continue
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        done.add(key)
                    continue
                if message.offset() < pending[key]:
                    last[key] = message.offset()
                if message.offset() >= pending[key] - 1:
                    done.add(key)
            reader.unassign()
            for key in list(pending):
                if key in last:
                    found[key] = last[key] + 1
                    del pending[key]
                elif starts[key] <= bounds[key][0]:  # read from its first offset: nothing readable at all
                    found[key] = bounds[key][0]
                    del pending[key]
            window *= 16
        return found
    finally:
        reader.close()


def _watermarks(reader: confluent_kafka.Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """(low, high) of ``tp``, asked again until ``deadline`` while the broker answers with a retriable error (a
    restarting broker that is not yet the partition's leader: once a recovering worker's crash, the long campaign's
    run 153)."""
    return while_unreachable(
        lambda: reader.get_watermark_offsets(tp, timeout=max(1.0, deadline - time.monotonic())),
        wait_seconds=deadline - time.monotonic(),
        also=lambda error: error.retriable() or error.code() == KafkaError.NOT_LEADER_FOR_PARTITION)
