"""Faust's own exactly-once mode beside the processor's librdkafka transactions: events/s, CPU and a kill test.

Two bare Faust apps do the same minimal "pass-through with state" per input record (the processor's shape without
its core): one output record (``<partition>:<offset>|`` + the input value, to the input's partition of an output
topic of the same width) and one table entry (key: a hash of the input value, value: ``<partition>:<offset>``, both
JSON strings, as tables serialize; its changelog record in the input's partition), batches taken with ``take_events``
like the processor's. They differ only in the transaction path:

- ``faust-eos``: ``processing_guarantee="exactly_once"``: Faust's transaction manager, one aiokafka transactional
  producer per input partition; outputs by ``topic.send``, state by ``table[key] = value``, offsets committed by
  Faust's commit timer (``send_offsets_to_transaction`` + commit per partition's producer). Faust puts a send into
  a transaction only for topics its consumer reads (changelogs): the output records go out through its plain
  producer, outside every transaction;
- ``faust-eos-routed``: the same, with each output record put into the transaction of its input's partition
  (``_RoutedTransactions``): Faust's mode as it would have to be for outputs to be exactly once;
- ``librdkafka-txn``: the processor's path (``processors/stream.py``): outputs and changelog records produced by one
  ``TransactionalProducer`` (stable transactional id), one transaction per batch with the batch's input offsets and
  the Faust consumer's group metadata; Faust commits nothing; ``OffsetLedger`` admits records from the committed
  offsets (a gap in this untransactional input means records were skipped: the worker exits 70).

All use the project's Faust transport (``faust_transport`` fixes 1, 2, 4; read_committed; changelog ends for
recovery); for the ``faust-eos`` kinds Faust's own commits are put back, as they are its transaction path.

``python -m kafka_lineage_devtools.bench_eos speed|kill`` (``source`` a stack's env first): ``speed`` runs the apps
alternately on the same backlog (fresh topics and group each run), events/s from the first to the last committed
output (produce timestamps) and the child's CPU µs/event over the same span; ``kill`` SIGKILLs an app 3 times at
random instants, lets it finish, and counts lost and duplicated inputs in the committed outputs, and state entries
without their output. ``worker KIND PREFIX`` is the child.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import faust
import mode
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from faust.transport.consumer import TransactionManager
from faust.transport.drivers import aiokafka as faust_aiokafka

from kafka_lineage.processors import faust_transport
from kafka_lineage.processors.faust_transport import App, broker_credentials, broker_url
from kafka_lineage.processors.offsets import OffsetLedger
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.processors.state_writer import ChangelogWriter
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import PRODUCER_DEFAULTS, ensure_topic, replication_factor
from kafka_lineage.runtime.transactions import (
    TransactionAborted,
    TransactionalProducer,
    TransactionFatal,
    group_metadata,
    next_offsets,
)
from kafka_lineage_devtools.cpu_budget import process_cpu_seconds

log = logging.getLogger("bench_eos")
KINDS = ("faust-eos", "faust-eos-routed", "librdkafka-txn")
PARTITIONS = 6
TABLE = "dedupe"
STALL_SECONDS = 120.0  # a kill test gives up when the committed offsets do not move on for this long


@dataclass(frozen=True)
class Topics:
    prefix: str

    @property
    def input(self) -> str:
        return f"{self.prefix}input"

    @property
    def output(self) -> str:
        return f"{self.prefix}output"

    @property
    def group(self) -> str:  # also the Faust app id
        return f"{self.prefix}app"

    @property
    def changelog(self) -> str:  # Faust's name for the table's changelog
        return f"{self.group}-{TABLE}-changelog"


def identity(partition: int, offset: int) -> bytes:
    return b"%d:%d" % (partition, offset)


def state_key(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=16).hexdigest()


# ---------------------------------------------------------------------------------------------------- the child apps

class _EosConsumerThread(faust_transport._ConsumerThread):
    async def commit(self, offsets: Any) -> bool:  # Faust's own, undoing fix 3
        return await faust_aiokafka.AIOKafkaConsumerThread.commit(self, offsets)


class _EosConsumer(faust_transport._Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _EosConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        return await faust_aiokafka.Consumer.commit(self, topics, start_new_transaction)

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        return await faust_aiokafka.Consumer.force_commit(self, topics, start_new_transaction)


class _RoutedTransactions(TransactionManager):
    """Faust's transaction manager, with a send to a topic the app does not consume (an output) put in the
    transaction of the partition it names, as the source's partition. Stock Faust finds a send's transactional id
    through the consumer's metadata and the assignor's topic groups, which know consumed topics only: such a send
    goes through its plain producer, outside every transaction."""

    source_topic = ""

    async def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                   timestamp: float | None, headers: Any, *, transactional_id: str | None = None) -> Any:
        if partition is None or self.app.consumer.topic_partitions(topic) is not None:
            return await super().send(topic, key, value, partition, timestamp, headers)
        group = self.app.assignor.group_for_topic(self.source_topic)
        return await self.producer.send(topic, key, value, partition, timestamp, headers,
                                        transactional_id=f"{self.app.conf.id}-{group}-{partition}")


class _EosTransport(faust_aiokafka.Transport):
    Consumer = _EosConsumer


class _RoutedEosTransport(_EosTransport):
    TransactionManager = _RoutedTransactions


class _EosApp(App):
    """The project's app and transport fixes, with Faust committing (its exactly-once commits are its transactions)."""

    routed = False

    def _new_transport(self) -> Any:
        return (_RoutedEosTransport if self.routed else _EosTransport)(self.conf.broker_consumer, self)


class _BatchTable(faust.Table):
    """A table written from batches: each write's changelog partition is its input record's (``partition``, set by
    the loop; Faust would take the stream's current event, which batch iteration does not set per record)."""

    partition = 0

    def partition_for_key(self, key: Any) -> int | None:
        return self.partition


def build_app(kind: str, topics: Topics, clients: ClientSettings, settings: ProcessorSettings) -> faust.App:
    eos = kind.startswith("faust-eos")
    _EosApp.routed = kind == "faust-eos-routed"
    _RoutedTransactions.source_topic = topics.input
    app = (_EosApp if eos else App)(
        topics.group, broker=broker_url(clients.kafka_bootstrap_servers),
        broker_credentials=broker_credentials(clients.kafka_security),
        processing_guarantee="exactly_once" if eos else "at_least_once",
        store="memory://", value_serializer="raw", key_serializer="raw", topic_partitions=PARTITIONS,
        consumer_auto_offset_reset="earliest", producer_acks=-1, web_enabled=False,
        datadir=tempfile.mkdtemp(prefix="bench-eos-"), stream_buffer_maxsize=max(4096, settings.batch_size * 4),
        agent_supervisor=mode.CrashingSupervisor, broker_session_timeout=10.0, broker_heartbeat_interval=2.0,
        table_standby_replicas=0, topic_replication_factor=replication_factor(clients))
    app.librdkafka_config = clients.kafka_config()
    source = app.topic(topics.input, value_serializer="raw", key_serializer="raw")
    output = app.topic(topics.output, value_serializer="raw", key_serializer="raw")
    table = app.tables.add(_BatchTable(app, name=TABLE, default=None, beacon=app.tables.beacon,
                                       partitions=PARTITIONS))  # str keys and values, JSON (tables' default)
    if eos:
        @app.agent(source)
        async def pass_through(stream: faust.Stream) -> None:
            async for batch in stream.take_events(settings.batch_size, within=settings.batch_seconds):
                for event in batch:
                    message = event.message
                    me = identity(message.partition, message.offset)
                    await output.send(key=message.key, value=me + b"|" + message.value,
                                      partition=message.partition)
                    table.partition = message.partition
                    table[state_key(message.value)] = me.decode()

        if os.environ.get("BENCH_EOS_DEBUG"):
            @app.timer(5.0)
            async def bookkeeping() -> None:  # Faust's commit state per input partition (the kill test's stalls)
                consumer = app.consumer
                for tp in sorted(consumer.assignment()):
                    if tp.topic == topics.input:
                        acked = sorted(consumer._acked.get(tp, []))
                        log.warning("p%d committed=%s acked=%d head=%s tail=%s gaps=%s", tp.partition,
                                    consumer._committed_offset.get(tp), len(acked), acked[:4], acked[-2:],
                                    sorted(consumer._gap.get(tp, ()))[:3])
        return app

    producer = TransactionalProducer(clients.kafka_config({"linger.ms": "5"}), f"{topics.group}-worker")
    writer, ledger = ChangelogWriter(), OffsetLedger()
    positions = Consumer(clients.kafka_config({"group.id": topics.group, "isolation.level": "read_committed"}))

    def committed(partitions: set[int]) -> dict[int, int]:
        """The group's committed offsets (a partition without one: its first offset, faust_transport fix 1)."""
        found = {}
        for tp in positions.committed([TopicPartition(topics.input, p) for p in sorted(partitions)], timeout=60):
            found[tp.partition] = tp.offset if tp.offset >= 0 else positions.get_watermark_offsets(tp, 60)[0]
        return found

    def transact(records: list[tuple[bytes | None, bytes, int]], changelog: list[Any], offsets: dict[int, int],
                 member: tuple[int, str]) -> None:
        producer.begin()
        for key, value, partition in records:
            producer.produce(topics.output, key, value, partition)
        for topic, partition, key, value in changelog:
            producer.produce(topic, key, value, partition)
        producer.send_offsets({(topics.input, p): o for p, o in offsets.items()},
                              group_metadata(topics.group, *member))
        producer.commit()

    def start_over(reason: str) -> NoReturn:  # as stream.py's: memory ahead of Kafka, begin again from Kafka
        log.critical("bench_eos: %s; starting over", reason)
        logging.shutdown()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])

    @app.agent(source)
    async def pass_through_txn(stream: faust.Stream) -> None:
        async for batch in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            mine = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topics.input}
            epoch = ledger.epoch
            if unknown := ledger.unknown({event.message.partition for event in batch} & mine):
                found = await asyncio.to_thread(committed, unknown)
                if epoch != ledger.epoch:
                    continue  # a rebalance meanwhile: the consumer seeks again
                ledger.start(found)
            admitted = ledger.admit([event.message for event in batch], mine)
            if admitted.gaps:  # the input has no transaction markers: the consumer passed over records
                log.critical("bench_eos: records skipped: %s", admitted.gaps)
                logging.shutdown()
                os._exit(70)
            records = []
            for message in admitted.records:
                me = identity(message.partition, message.offset)
                records.append((message.key, me + b"|" + message.value, message.partition))
                writer.write(table, state_key(message.value), message.partition, me.decode())
            changelog = writer.take()
            if not records:
                continue
            offsets = {p: o for (_, p), o in next_offsets((topics.input, m.partition, m.offset)
                                                             for m in admitted.records).items()}
            if epoch != ledger.epoch:
                start_over("a rebalance came between reading a batch and committing it")
            try:
                await asyncio.to_thread(transact, records, changelog, offsets, app.consumer.group_member())
            except (TransactionAborted, TransactionFatal) as exc:
                start_over(str(exc))
            app.consumer.committed_now(topics.input, offsets)

    @app.on_partitions_revoked.connect
    async def on_revoked(app: faust.App, revoked: set, **_: Any) -> None:
        ledger.reset()

    @app.on_partitions_assigned.connect
    async def on_assigned(app: faust.App, assigned: set, **_: Any) -> None:
        ledger.reset()

    return app


def worker(kind: str, prefix: str) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = build_app(kind, Topics(prefix), ClientSettings.from_env(), ProcessorSettings.from_env())
    faust.Worker(app, loglevel=os.environ.get("BENCH_EOS_LOGLEVEL", "warning"), quiet=True).execute_from_commandline()


# ------------------------------------------------------------------------------------------------- the parent's side

def prepare(clients: ClientSettings, topics: Topics, records: list[tuple[bytes, bytes]]) -> None:
    """Fresh topics (the changelog compacted, as Faust declares it) and the backlog in the input topic."""
    config = clients.kafka_config()
    for name in (topics.input, topics.output):
        ensure_topic(config, name, PARTITIONS)
    ensure_topic(config, topics.changelog, PARTITIONS, config={"cleanup.policy": "compact"})
    producer = Producer({**config, **PRODUCER_DEFAULTS})
    for key, value in records:
        while True:
            try:
                producer.produce(topics.input, value, key)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300):
        raise RuntimeError("the backlog was not acknowledged")


def start(kind: str, topics: Topics, log_path: Path) -> subprocess.Popen:
    with log_path.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "kafka_lineage_devtools.bench_eos", "worker", kind,
                                 topics.prefix], stdout=out, stderr=subprocess.STDOUT)


def read_topic(clients: ClientSettings, topic: str, on_batch: Callable[[list[Any]], None] | None = None,
               until: int | None = None, timeout: float = 900.0, idle: Callable[[], None] | None = None) -> list[Any]:
    """The committed records of ``topic`` (read_committed, from its beginning): until ``until`` records, else to
    every partition's end (its last stable offset)."""
    consumer = Consumer(clients.kafka_config({"group.id": f"bench-eos-{uuid.uuid4()}", "enable.auto.commit": False,
                                              "isolation.level": "read_committed", "enable.partition.eof": True,
                                              "fetch.max.bytes": 64 * 1024 * 1024}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found: list[Any] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(2000, 0.2)
            batch = []
            for message in messages:
                if message.error() is None:
                    batch.append(message)
                    at_end.discard(message.partition())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            found += batch
            if on_batch is not None:
                on_batch(batch)
            if idle is not None:
                idle()
            if (until is not None and len(found) >= until) or (until is None and len(at_end) == PARTITIONS):
                return found
        raise TimeoutError(f"{topic}: {len(found)} records within {timeout:.0f}s (wanted {until})")
    finally:
        consumer.close()


def committed_total(clients: ClientSettings, topics: Topics, reader: Consumer) -> int:
    return sum(max(0, tp.offset) for tp in reader.committed(
        [TopicPartition(topics.input, p) for p in range(PARTITIONS)], timeout=30))


def speed_run(kind: str, clients: ClientSettings, records: list[tuple[bytes, bytes]], workdir: Path
              ) -> dict[str, Any]:
    topics = Topics(f"eos.{uuid.uuid4().hex[:8]}.")
    prepare(clients, topics, records)
    load_before = os.getloadavg()
    child = start(kind, topics, workdir / f"speed-{kind}-{topics.prefix}log")
    samples: list[tuple[float, float]] = []  # (wall ms, child CPU s)

    def sample() -> None:
        if child.poll() is not None:
            raise RuntimeError(f"{kind} exited with {child.returncode}")
        samples.append((time.time() * 1000, process_cpu_seconds(child.pid)))

    try:
        outputs = read_topic(clients, topics.output, until=len(records), idle=sample)
    finally:
        child.kill()
        child.wait()
    stamps = sorted(float(message.timestamp()[1]) for message in outputs)
    first, last = stamps[0], stamps[-1]

    def cpu_at(ms: float) -> float:  # the sample nearest the instant
        return min(samples, key=lambda s: abs(s[0] - ms))[1]

    counts = collections.Counter(message.value().split(b"|", 1)[0] for message in outputs)
    return {"kind": kind, "events": len(outputs), "events_per_s": (len(stamps) - 1) / ((last - first) / 1000),
            "cpu_us_per_event": (cpu_at(last) - cpu_at(first)) / (len(stamps) - 1) * 1e6,
            "duplicates": sum(n - 1 for n in counts.values()), "distinct": len(counts),
            "load_before": round(load_before[0], 2), "load_after": round(os.getloadavg()[0], 2),
            "prefix": topics.prefix}


def kill_run(kind: str, clients: ClientSettings, records: list[tuple[bytes, bytes]], kills: int,
             rng: random.Random, workdir: Path) -> dict[str, Any]:
    topics = Topics(f"eos.{uuid.uuid4().hex[:8]}.")
    prepare(clients, topics, records)
    total = len(records)
    log_path = workdir / f"kill-{kind}-{topics.prefix}log"
    reader = Consumer(clients.kafka_config({"group.id": topics.group, "isolation.level": "read_committed"}))
    killed_at: list[int] = []
    began = time.monotonic()
    child = start(kind, topics, log_path)
    exits: list[int | None] = []
    failure = None
    done = False
    try:
        for _ in range(kills):
            # each kill a random share (15-40%) of what is left past the last one: every kill lands mid-stream
            now = committed_total(clients, topics, reader)
            mark = now + int(rng.uniform(0.15, 0.4) * (total - now))
            deadline = time.monotonic() + STALL_SECONDS
            while committed_total(clients, topics, reader) < mark:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise _Stalled(f"committed offsets stayed below {mark} for {STALL_SECONDS:.0f} s (now "
                                   f"{_committed(topics, reader)}, exit code {child.poll()})")
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 0.3))  # anywhere in a batch or between commits (a batch: ~0.2-1 s)
            killed_at.append(committed_total(clients, topics, reader))
            exits.append(child.poll())
            child.send_signal(signal.SIGKILL)
            child.wait()
            with log_path.open("a") as out:
                out.write(f"---- SIGKILL at {killed_at[-1]} committed; restart ----\n")
            child = start(kind, topics, log_path)
        deadline = time.monotonic() + 2 * STALL_SECONDS
        while time.monotonic() < deadline:
            if committed_total(clients, topics, reader) >= total:
                done = True
                break
            if child.poll() is not None:
                break
            time.sleep(0.5)
        if not done:
            failure = (f"unfinished {2 * STALL_SECONDS:.0f} s after the last restart: committed "
                       f"{_committed(topics, reader)}, exit code {child.poll()}")
        exits.append(child.poll())
        if done:  # finish as a worker does: a commit interval or two, then a graceful stop (Faust's last commit)
            time.sleep(6.0)
            child.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(60)
    except _Stalled as exc:
        failure = str(exc)
    finally:
        finished = time.monotonic() - began
        child.kill()
        child.wait()
        reader.close()
    inputs = {identity(p, o) for p, o in _input_positions(clients, topics)}
    outputs = collections.Counter(m.value().split(b"|", 1)[0] for m in read_topic(clients, topics.output))
    state = {m.key(): m.value() for m in read_topic(clients, topics.changelog)}
    stated = {json.loads(value).encode() for value in state.values() if value is not None}
    return {"kind": kind, "events": total, "finished": done, "failure": failure,
            "output_end_offsets": sum(_ends(clients, topics.output)), "seconds": round(finished, 1),
            "kills_at": killed_at,
            "kills_mid_stream": sum(1 for at in killed_at if at < total),
            "exits_before_kill": [code for code in exits if code is not None],
            "lost": len(inputs - outputs.keys()), "duplicates": sum(n - 1 for n in outputs.values() if n > 1),
            "duplicated_inputs": sum(1 for n in outputs.values() if n > 1),
            "state_without_output": len(stated - outputs.keys()),
            "output_without_state": len(outputs.keys() - stated),
            "load": round(os.getloadavg()[0], 2), "prefix": topics.prefix, "log": str(log_path)}


class _Stalled(Exception):
    pass


def _committed(topics: Topics, reader: Consumer) -> list[int]:
    return [tp.offset for tp in reader.committed([TopicPartition(topics.input, p) for p in range(PARTITIONS)],
                                                 timeout=30)]


def _ends(clients: ClientSettings, topic: str) -> list[int]:
    """Each partition's end offset (records, aborted ones and transaction markers)."""
    consumer = Consumer(clients.kafka_config({"group.id": f"bench-eos-{uuid.uuid4()}"}))
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def _input_positions(clients: ClientSettings, topics: Topics) -> list[tuple[int, int]]:
    return [(m.partition(), m.offset()) for m in read_topic(clients, topics.input)]


def encoded_backlog(clients: ClientSettings, count: int) -> list[tuple[bytes, bytes]]:
    from kafka_lineage_devtools.bench_processor import encode_backlog
    records, size = encode_backlog(clients, count, "realistic")
    print(f"{len(records)} realistic events ({size:,.0f} bytes JSON, "
          f"{sum(len(v) for _, v in records) / len(records):,.0f} bytes encoded)", flush=True)
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    child = sub.add_parser("worker")
    child.add_argument("kind", choices=KINDS)
    child.add_argument("prefix")
    speed = sub.add_parser("speed")
    speed.add_argument("--events", type=int, default=20_000)
    speed.add_argument("--rounds", type=int, default=2)
    kill = sub.add_parser("kill")
    kill.add_argument("--events", type=int, default=20_000)
    kill.add_argument("--runs", type=int, default=5)
    kill.add_argument("--kills", type=int, default=3)
    kill.add_argument("--seed", type=int, default=None)
    for each in (speed, kill):
        each.add_argument("--kinds", default=",".join(KINDS))
        each.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="bench-eos-")))
    args = parser.parse_args(argv)
    if args.command == "worker":
        worker(args.kind, args.prefix)
        return
    clients = ClientSettings.from_env()
    kinds = args.kinds.split(",")
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"logs in {args.workdir}", flush=True)
    records = encoded_backlog(clients, args.events)
    results: list[dict[str, Any]] = []
    if args.command == "speed":
        for _ in range(args.rounds):
            for kind in kinds:
                results.append(speed_run(kind, clients, records, args.workdir))
                print(json.dumps(results[-1]), flush=True)
        for key in ("events_per_s", "cpu_us_per_event"):
            by = {kind: [r[key] for r in results if r["kind"] == kind] for kind in kinds}
            for kind in kinds[:-1]:  # each against the last, round by round
                ratios = [mine / base for mine, base in zip(by[kind], by[kinds[-1]], strict=True)]
                print(f"{kind}/{kinds[-1]} {key}: " + ", ".join(f"{r:.2f}" for r in ratios), flush=True)
    else:
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        print(f"seed {seed}", flush=True)
        rng = random.Random(seed)
        for _ in range(args.runs):
            for kind in kinds:
                results.append(kill_run(kind, clients, records, args.kills, rng, args.workdir))
                print(json.dumps(results[-1]), flush=True)
    (args.workdir / f"{args.command}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
