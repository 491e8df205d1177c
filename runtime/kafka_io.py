"""Kafka I/O shared by the stages: a producer whose batches complete only when Kafka acknowledged every record."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kafka_lineage.runtime.config import ClientSettings, TopicSettings
from kafka_lineage.runtime.retry import Backoff, Stopped

# The largest record (key + value + framing, uncompressed) any pipeline producer sends: the one record-size limit.
log = logging.getLogger(__name__)
T = TypeVar("T")
RECORD_MAX_BYTES = 8 * 1024 * 1024
PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "20",
    "compression.type": "zstd",
    "message.timeout.ms": "300000",  # librdkafka keeps retrying through a broker outage for five minutes
    "partitioner": "murmur2_random",  # the Java clients' partitioner: Spark, Connect and Faust put a key where we do
    # librdkafka refuses a record above this (uncompressed) before sending; the pipeline's topics take a compressed
    # batch of the same size (TOPIC_MAX_MESSAGE_BYTES): one limit on both sides, so a record the producer accepts is
    # one its topic accepts.
    "message.max.bytes": str(RECORD_MAX_BYTES),
}
# The pipeline's topics' max.message.bytes at creation: the producer's limit plus the record batch overhead.
TOPIC_MAX_MESSAGE_BYTES = RECORD_MAX_BYTES + 1024
# Delivery errors that no retry can fix: the record is too large or malformed for the broker or the topic.
_TOO_LARGE = frozenset((KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_MSG_SIZE))
_MALFORMED = frozenset((KafkaError.INVALID_RECORD, KafkaError.INVALID_MSG))

DeliveryCallback = Callable[[KafkaError | None, Message], None]
Headers = list[tuple[str, bytes]] | None  # a record's headers, as librdkafka takes them


def prepare_pipeline(clients: ClientSettings, partitions: int) -> None:
    """Check (and where allowed, create) the pipeline's topics and value schemas before a component starts.

    Missing topics are created only when ``clients.topics.create`` allows it (the local stack by default), with the
    configured replication, ``min.insync.replicas`` and retention. A subject's compatibility level is never changed
    here (an operator's ``lineage schemas register --compatibility`` stands): an existing subject must hold the
    project's schema or accept it under its own level; a missing one is registered only when creation is allowed.
    Anything else stops the component with one line naming what is missing and how to fix it.
    """
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from kafka_lineage.schemas import registry

    topics = clients.value_schemas()
    missing = missing_topics(clients.kafka_config(), list(topics))
    if missing and not clients.topics.create:
        raise PublishError(f"missing topics: {', '.join(missing)}; create them (see the README's topic settings) or "
                           "set LINEAGE_CREATE_TOPICS=true to let the pipeline create them")
    for topic in missing:
        ensure_topic(clients.kafka_config(), topic, partitions=partitions,
                     replication_factor=clients.topics.replication_factor,
                     config=topic_config(clients.topics, raw=topic == clients.events_topic))
    reports = registry.ensure_registered(SchemaRegistryClient(clients.registry_config()), topics,
                                         register_missing=clients.topics.create)
    if not all(report.ok for report in reports):
        raise PublishError("; ".join(f"{r.subject}: {r.detail}" for r in reports if not r.ok))


def topic_config(topics: TopicSettings, raw: bool) -> dict[str, str]:
    """Topic-level settings of a pipeline topic at creation: its record limit (the producer's), the raw events
    topic's retention (keep everything by default: replay rebuilds the graph from it) or the others', and
    ``min.insync.replicas``; unset = the broker's."""
    config = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
    retention = topics.events_retention_ms if raw else topics.retention_ms
    if retention is not None:
        config["retention.ms"] = str(retention)
        if retention == -1:
            config["retention.bytes"] = "-1"
    if topics.min_insync_replicas is not None and topics.min_insync_replicas > 0:
        config["min.insync.replicas"] = str(topics.min_insync_replicas)
    return config


# Errors of a cluster that does not answer now (restarting, unreachable for a while) rather than refusing
_UNREACHABLE = frozenset((KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                          KafkaError._RESOLVE))
# How long a component starting while Kafka does not answer waits for it before it gives up, naming the cause
KAFKA_WAIT_SECONDS = 300.0


def listed_topics(admin: AdminClient, wait_seconds: float = KAFKA_WAIT_SECONDS) -> set[str]:
    """The cluster's topic names, asked again while the cluster does not answer (``while_unreachable``)."""
    return while_unreachable(lambda: set(admin.list_topics(timeout=10).topics), wait_seconds)


def while_unreachable(ask: Callable[[], T], wait_seconds: float = KAFKA_WAIT_SECONDS, *,
                      also: Callable[[KafkaError], bool] = lambda _error: False) -> T:
    """``ask()``, asked again with backoff for ``wait_seconds`` while the cluster does not answer (a broker
    restarting), or while ``also(error)`` holds: a worker starting over during a broker restart, or a sink restarted
    then, waits for Kafka instead of exiting. Any other error is raised at once."""
    deadline, backoff = time.monotonic() + wait_seconds, Backoff(cap=10.0)
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.code() in _UNREACHABLE or also(error)) or time.monotonic() + backoff.delay > deadline:
                raise
            log.warning("Kafka does not answer (%s); asking again in %.1fs", error.str(), backoff.delay)
            backoff.wait()


def missing_topics(config: Mapping[str, object], topics: Sequence[str]) -> list[str]:
    existing = listed_topics(AdminClient(dict(config)))
    return [topic for topic in topics if topic not in existing]


def ensure_topic(bootstrap: str | Mapping[str, object], topic: str, partitions: int = 1, replication_factor: int = -1,
                 config: Mapping[str, str] | None = None) -> None:
    """Create ``topic`` unless it exists. ``bootstrap``: servers, or a whole client config (security settings
    included); ``replication_factor`` -1: the broker's ``default.replication.factor``."""
    admin = AdminClient(dict(bootstrap) if isinstance(bootstrap, Mapping) else {"bootstrap.servers": bootstrap})
    if topic in listed_topics(admin):
        return
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                                            config=dict(config or {}))])
    for future in futures.values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:  # a concurrent creator is fine
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def replication_factor(clients: ClientSettings) -> int:
    """The configured replication factor, or the broker's ``default.replication.factor`` when it is -1 (for clients
    that need a number: Faust creates its changelog topics itself)."""
    if clients.topics.replication_factor > 0:
        return clients.topics.replication_factor
    admin = AdminClient(clients.kafka_config())

    def ask() -> int:
        broker = next(iter(admin.list_topics(timeout=10).brokers))
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        return int(configs["default.replication.factor"].value)

    return while_unreachable(ask)


def reading_consumer(clients: ClientSettings, purpose: str) -> Consumer:
    """A consumer of a group of its own (nothing committed, nothing shared) that sees committed records only."""
    return Consumer(clients.kafka_config({"group.id": f"{purpose}-{uuid.uuid4()}", "enable.auto.commit": False,
                                          "isolation.level": "read_committed"}))


def ensure_compacted(clients: ClientSettings, topic: str) -> None:
    """A component's compacted state topic (one partition), created when missing if creation is allowed; else
    PublishError naming it."""
    if not missing_topics(clients.kafka_config(), [topic]):
        return
    if not clients.topics.create:
        raise PublishError(f"missing topic {topic} (compacted, one partition); create it or set "
                           "LINEAGE_CREATE_TOPICS=true")
    ensure_topic(clients.kafka_config(), topic, partitions=1, replication_factor=clients.topics.replication_factor,
                 config={**topic_config(clients.topics, raw=False), "cleanup.policy": "compact"})


class TopicUnread(Exception):
    """A topic could not be read to its end: the broker reported an error, or the end was not reached in time."""


def compacted_contents(clients: ClientSettings, topic: str, seconds: float = 120.0) -> dict[bytes, bytes]:
    """Partition 0 of a compacted topic (a component's remembered state: exposures alerted, deliveries made) read to
    its end now: each key's latest value, tombstoned keys left out. TopicUnread if that cannot be done in
    ``seconds``."""
    consumer = Consumer(clients.kafka_config({"group.id": f"{topic}.reader-{uuid.uuid4()}",
                                              "enable.auto.commit": False, "isolation.level": "read_committed",
                                              "enable.partition.eof": True}))
    contents: dict[bytes, bytes] = {}
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high <= low:
            return contents
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return contents
                raise TopicUnread(f"reading {topic}: {message.error()}")
            key, value = message.key() or b"", message.value()
            if value is None:
                contents.pop(key, None)
            else:
                contents[key] = value
        raise TopicUnread(f"reading {topic} took over {seconds:.0f}s")
    finally:
        consumer.close()


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    """The partitions of ``topic`` ([] when the topic does not exist)."""
    metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
    return [] if metadata is None or metadata.error is not None else list(metadata.partitions)


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` → its end offset (high watermark)."""
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}


class PublishError(RuntimeError):
    """The registry or Kafka could not take a record. ``permanent``: no retry can succeed (``too_large``: the record
    exceeds a size limit of the broker or the topic); otherwise a retry later may succeed."""

    def __init__(self, message: str, *, permanent: bool = False, too_large: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent or too_large
        self.too_large = too_large


class QueueFull(PublishError):
    """The producer's local queue is full (Kafka is slow or away): refused at once rather than waited for."""


class AckingProducer:
    """An idempotent librdkafka producer with a background poll thread serving delivery callbacks."""

    def __init__(self, config: dict[str, str]) -> None:
        self.producer = Producer({**PRODUCER_DEFAULTS, **config, "error_cb": self._on_error})
        self.failure: PublishError | None = None  # set once Kafka refuses this client for good
        self.brokers_down = False  # librdkafka reported every broker unreachable, and nothing was delivered since
        self._pending: set[Future[int]] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll_forever, name="kafka-delivery-poll", daemon=True)
        self._poller.start()

    def produce(self, topic: str, key: bytes | None, value: bytes | None, on_delivery: DeliveryCallback,
                wait_for_room: bool = True, headers: Headers = None) -> None:
        """Queue one record. A full local queue (Kafka slow or away) is waited out, or with ``wait_for_room`` False
        refused at once with ``QueueFull``."""
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, on_delivery=on_delivery, headers=headers)
                return
            except BufferError:  # librdkafka's local queue is full: wait for deliveries to free room
                if not wait_for_room:
                    raise QueueFull("the producer's queue is full: Kafka is not taking records as fast as they come "
                                    "(or is unreachable); retry later") from None
                self.producer.poll(0.05)

    def send(self, topic: str, records: Sequence[tuple[bytes | None, bytes | None]], wait_for_room: bool = True,
             headers: Headers = None) -> Future[int]:
        """Produce every record; the future gives their count once all are acknowledged, or a PublishError.
        ``wait_for_room`` False: a full local queue fails the future at once with ``QueueFull`` (records produced
        before stay queued and may still be delivered: a retry of the request only repeats them)."""
        if self.failure is not None:
            raise self.failure
        done: Future[int] = Future()
        pending = [len(records)]
        lock = threading.Lock()
        with self._lock:
            self._pending.add(done)
        done.add_done_callback(self._forget)

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            with lock:
                pending[0] -= 1
                finished = pending[0] == 0
            if error is not None and not done.done():
                done.set_exception(PublishError(f"Kafka did not acknowledge a record: {error.str()}",
                                                permanent=error.code() in _MALFORMED,
                                                too_large=error.code() in _TOO_LARGE))
            elif finished and not done.done():
                done.set_result(len(records))
            if error is None:
                self.brokers_down = False

        if not records:
            done.set_result(0)
        for key, value in records:
            try:
                self.produce(topic, key, value, on_delivery, wait_for_room, headers)
            except QueueFull as full:
                if not done.done():
                    done.set_exception(full)
                break
        return done

    def _forget(self, done: Future[int]) -> None:
        with self._lock:
            self._pending.discard(done)

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka retries most errors by itself; wrong credentials and fatal errors it would retry forever."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = True  # until a delivery succeeds again (``send``'s callbacks clear it)
        if error.code() not in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) \
                and not error.fatal():
            return
        self.failure = PublishError(f"Kafka refused this client: {error.str()} (check KAFKA_SECURITY_PROTOCOL, "
                                    "KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD)")
        with self._lock:
            pending, self._pending = list(self._pending), set()
        for done in pending:
            if not done.done():
                done.set_exception(self.failure)

    def flush(self, timeout: float) -> int:
        """Wait for outstanding deliveries; the number still unacknowledged."""
        return self.producer.flush(timeout)

    def close(self, timeout: float = 30.0) -> int:
        if self.failure is not None:  # nothing queued can be delivered: do not wait for it
            self.producer.purge()
        remaining = self.flush(timeout)
        self._closed.set()
        self._poller.join(timeout)
        return remaining

    def _poll_forever(self) -> None:
        while not self._closed.is_set():
            try:
                self.producer.poll(0.1)
            except KafkaException:  # a fatal producer error surfaces through the delivery callbacks too
                self._closed.wait(0.5)


# Commit errors after which the offsets cannot be committed by this member: its partitions moved, its assignment
# was lost (it must poll to rejoin), or there was nothing to commit.
_PARTITIONS_MOVED = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                     KafkaError._ASSIGNMENT_LOST, KafkaError._NO_OFFSET)


# How long one synchronous offset commit is waited for. librdkafka keeps a commit queued until the group has a
# coordinator, without a bound of its own: after a broker restart an alert sink's consumer found none for 20 minutes,
# and the sink, blocked in its commit, stopped polling (the fault suite, session 19).
COMMIT_WAIT_SECONDS = 30.0
_commits_in_flight: dict[int, threading.Thread] = {}  # id(consumer) → the thread of its last commit


_in_rebalance_callback: set[int] = set()  # id(consumer) of consumers whose rebalance callback runs now


@contextlib.contextmanager
def rebalance_callback(consumer: Consumer) -> Iterator[None]:
    """Around a rebalance callback of ``consumer`` (in the thread that polls or closes it): ``commit_bounded`` then
    commits in that thread."""
    _in_rebalance_callback.add(id(consumer))
    try:
        yield
    finally:
        _in_rebalance_callback.discard(id(consumer))


def commit_bounded(consumer: Consumer, timeout: float, offsets: list[TopicPartition] | None = None) -> None:
    """``consumer.commit(asynchronous=False)`` (of ``offsets``, else the positions), waited for at most ``timeout``
    seconds; TimeoutError past it, the call going on in its thread (no other commit of the consumer starts until it
    returned).

    Within the consumer's rebalance callback (``rebalance_callback``) the commit is made in the callback's own thread:
    one from another thread waits for the callback to return, and so timed out on every rebalance and every close
    (the router's stop took 30 s more and committed nothing). librdkafka bounds that one itself: with the broker
    gone it failed with _WAIT_COORD after 45 s."""
    def commit_now() -> None:
        if offsets is None:
            consumer.commit(asynchronous=False)
        else:
            consumer.commit(offsets=offsets, asynchronous=False)

    if id(consumer) in _in_rebalance_callback:
        commit_now()
        return
    running = _commits_in_flight.get(id(consumer))
    if running is not None and running.is_alive():
        raise TimeoutError("an earlier offset commit has not returned yet")
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            commit_now()
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=commit, name="offset-commit", daemon=True)
    _commits_in_flight[id(consumer)] = thread
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the offset commit did not return within {timeout:.0f}s (no group coordinator?)")
    del _commits_in_flight[id(consumer)]
    if outcome[0] is not None:
        raise outcome[0]


def commit_offsets(consumer: Consumer, stop: threading.Event, log: logging.Logger, stage: str,
                   attempts: int = 5, wait: float = COMMIT_WAIT_SECONDS) -> None:
    """Commit the consumer's positions synchronously, waiting a little for a coordinator that is away (a broker
    restart answers NOT_COORDINATOR for a while), and otherwise give up: an uncommitted batch is only delivered
    again (to this member after it polls and rejoins, or to the partitions' next owner), which the idempotent
    sinks absorb. Blocking here instead would keep the consumer from polling, hence from ever rejoining: a commit
    that does not return within ``wait`` seconds is given up too."""
    backoff = Backoff(cap=8.0)
    for attempt in range(attempts):
        try:
            commit_bounded(consumer, wait)
            return
        except TimeoutError as exc:
            log.warning("%s: offsets not committed (%s); the batch will be delivered again", stage, exc)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal():
                raise
            if error.code() in _PARTITIONS_MOVED or stop.is_set() or attempt == attempts - 1:
                log.warning("%s: offsets not committed (%s); the batch will be delivered again", stage, error.str())
                return
            log.warning("%s: offset commit failed (%s); retrying in %.1fs", stage, error.str(), backoff.delay)
            with contextlib.suppress(Stopped):  # stopping: one more attempt, then the check above gives up
                backoff.wait(stop)
