"""The pipeline's status (`lineage status`, the lineage server's /api/v2/status): one truthful picture of the
pipeline — services, consumer lag, dead letters, drift alerts.

Everything is read, nothing is changed: the services come from a probe given by the caller (the development tools
plug in the local stack's own ``Stack.status()``: pid files and health probes), the Kafka rows from one
short-lived AdminClient:

- lag per stage: end offset (high watermark) - committed offset of the stage's group, per partition; a partition
  the group never committed counts whole (high - low watermark) and says "no commits";
- active members per group: ``describe_consumer_groups``;
- last event per topic: the largest record timestamp of its partitions (``ListOffsets`` with the max-timestamp
  spec, KIP-734) — one request, no consumer, no record fetched;
- dead letters: sum of (high - low watermark) over the DLQ topic's partitions;
- drift alerts in the last hour: sum of (end offset - first offset at or after now - 1 h) over the drift topic;
- hanging transactions on the topics the pipeline itself writes in transactions (normalized, DLQ, drift): a
  partition whose last stable offset (``ListOffsets`` read_committed) is behind its end, where the record at that
  offset, the first of the oldest open transaction, is older than ``TRANSACTION_HANG_SECONDS``. No transaction of
  the pipeline's lives that long (the broker aborts one after 30 s), so its commit or abort markers were lost:
  read_committed readers stop there for good (a single broker's controlled shutdown can do it; ARCHITECTURE 72).

Every request is bounded (``timeout``, 5 s by default); the Kafka requests run concurrently with the service probes
and against one shared deadline. A service that is down shows as down with its reason, a Kafka row that cannot be
read says ``unavailable: …``; nothing raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.metrics import lag_from

PROBE_TIMEOUT_SECONDS = 5.0
SERVICES_TIMEOUT_SECONDS = 20.0  # the local stack's probe asks four services one after another, each bounded (≤ 5 s)
DEFAULT_LAG_THRESHOLD = 1000
ALERT_WINDOW_SECONDS = 3600
KAFKA_UNREACHABLE = "Kafka unreachable"
# A transaction on the pipeline's topics open longer than this has lost its markers: the pipeline's producers ask
# for a 30 s transaction timeout, after which the broker aborts (it looks every 10 s); four times that is no race.
TRANSACTION_HANG_SECONDS = 120

# Stage -> the ClientSettings attribute naming the topic its group consumes:
# processors/stream.py (the Faust agent reads clients.events_topic), sinks/graph/sink.py and sinks/alerts/sink.py
# (both subscribe to clients.normalized_topic; the alert sink *produces* to the drift topic), and the alert router
# (sinks/alerts/routing/router.py reads the drift topic).
STAGE_TOPICS: dict[str, str] = {
    "processor": "events_topic",
    "graph-sink": "normalized_topic",
    "alert-sink": "normalized_topic",
    "alert-router": "drift_topic",
}


def stage_topic(stage: str, clients: ClientSettings) -> str:
    try:
        return getattr(clients, STAGE_TOPICS[stage])
    except KeyError:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(STAGE_TOPICS)}") from None


# --- the picture -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServiceState:
    name: str
    state: str  # up | starting | down | dead (Stack's ServiceStatus.state), or unknown when the probes hung
    detail: str = ""
    pid: int | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"


ServiceProbe = Callable[[], tuple[ServiceState, ...]]


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    low: int
    end: int
    committed: int | None  # None: the group never committed this partition

    @property
    def lag(self) -> int:
        """Records the group has still to read: end - committed; without a commit every record present."""
        return lag_from(self.end, -1 if self.committed is None else self.committed, self.low)


def partition_lags(low: Mapping[int, int], end: Mapping[int, int],
                   committed: Mapping[int, int | None]) -> tuple[PartitionLag, ...]:
    """Per-partition lag rows; a committed offset below 0 (librdkafka's OFFSET_INVALID) is no commit."""
    rows = []
    for partition in sorted(end):
        offset = committed.get(partition)
        rows.append(PartitionLag(partition, low.get(partition, 0), end[partition],
                                 offset if offset is not None and offset >= 0 else None))
    return tuple(rows)


def count_since(end: Mapping[int, int], first_at_or_after: Mapping[int, int]) -> int:
    """Records written since a time: sum of end - the first offset at or after it (-1: no record that recent)."""
    return sum(max(0, end[p] - offset) for p, offset in first_at_or_after.items() if offset >= 0 and p in end)


@dataclass(frozen=True)
class StageStatus:
    stage: str
    group: str
    topic: str
    partitions: tuple[PartitionLag, ...] = ()
    lag_error: str = ""
    members: int | None = None
    group_state: str = ""  # stable, empty, dead (no such group), preparing_rebalance, ...
    members_error: str = ""
    last_event_ms: int | None = None  # newest record timestamp of the topic; None: the topic holds no record
    last_event_error: str = ""

    @property
    def lag(self) -> int | None:
        return None if self.lag_error else sum(p.lag for p in self.partitions)

    @property
    def uncommitted_partitions(self) -> tuple[int, ...]:
        return tuple(p.partition for p in self.partitions if p.committed is None)

    @property
    def no_commits(self) -> bool:
        """The group committed nothing on this topic: its whole content counts as lag."""
        return not self.lag_error and all(p.committed is None for p in self.partitions)


@dataclass(frozen=True)
class TopicCount:
    """Records of a topic: all of them (DLQ) or those of the last window (drift alerts)."""

    topic: str
    count: int | None = None
    last_event_ms: int | None = None
    error: str = ""
    last_event_error: str = ""


@dataclass(frozen=True)
class HangingTransaction:
    """A partition whose read_committed readers stop at ``stable_end``: a transaction opened at ``opened_ms`` and
    never ended holds the ``end - stable_end`` records from there on."""

    topic: str
    partition: int
    stable_end: int
    end: int
    opened_ms: int


def hanging_transactions(stable_ends: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int],
                         opened_ms: Mapping[tuple[str, int], int], now: float,
                         hang_seconds: float = TRANSACTION_HANG_SECONDS) -> tuple[HangingTransaction, ...]:
    """The partitions whose oldest open transaction (first record's timestamp in ``opened_ms``) began more than
    ``hang_seconds`` before ``now``; a partition whose stable end is its end has none open."""
    found = []
    for key in sorted(stable_ends):
        stable, end, opened = stable_ends[key], ends.get(key), opened_ms.get(key)
        if end is not None and opened is not None and stable < end and now - opened / 1000 > hang_seconds:
            found.append(HangingTransaction(key[0], key[1], stable, end, opened))
    return tuple(found)


@dataclass(frozen=True)
class PipelineStatus:
    checked_at: float  # epoch seconds
    kafka_bootstrap: str
    services: tuple[ServiceState, ...]
    stages: tuple[StageStatus, ...]
    dead_letters: TopicCount
    alerts_last_hour: TopicCount
    kafka_error: str = ""  # set when Kafka did not answer at all: every Kafka row is unavailable
    hanging: tuple[HangingTransaction, ...] = ()
    hanging_error: str = ""
    lag_threshold: int = DEFAULT_LAG_THRESHOLD
    alert_window_seconds: int = ALERT_WINDOW_SECONDS

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(degraded_reasons(self))

    @property
    def healthy(self) -> bool:
        return not self.reasons

    @property
    def verdict(self) -> str:
        return "healthy" if self.healthy else "degraded"


def degraded_reasons(status: PipelineStatus) -> list[str]:
    """Why the pipeline is not healthy: a service not up, Kafka or a Kafka row unavailable, lag above the
    threshold, a stage without an active consumer, dead letters present. Drift alerts are findings, not faults."""
    reasons = [f"service {s.name} is {s.state}" + (f": {s.detail}" if s.detail else "")
               for s in status.services if not s.up]
    if status.kafka_error:
        return [*reasons, f"Kafka {status.kafka_bootstrap} unreachable: {status.kafka_error}"]
    for stage in status.stages:
        if stage.lag_error:
            reasons.append(f"{stage.stage}: lag unavailable: {stage.lag_error}")
        elif (stage.lag or 0) > status.lag_threshold:
            reasons.append(f"{stage.stage}: lag {stage.lag} on {stage.topic} above the threshold of "
                           f"{status.lag_threshold}")
        if stage.members_error:
            reasons.append(f"{stage.stage}: members unavailable: {stage.members_error}")
        elif not stage.members:
            reasons.append(f"{stage.stage}: no active member in group {stage.group}")
    dlq = status.dead_letters
    if dlq.error:
        reasons.append(f"dead letters unavailable: {dlq.error}")
    elif dlq.count:
        reasons.append(f"dead letters present: {dlq.count} in {dlq.topic}")
    if status.alerts_last_hour.error:
        reasons.append(f"drift alerts unavailable: {status.alerts_last_hour.error}")
    if status.hanging_error:
        reasons.append(f"open transactions not checked: {status.hanging_error}")
    for hang in status.hanging:
        reasons.append(
            f"{hang.topic}[{hang.partition}]: a transaction open since {iso_time(hang.opened_ms / 1000)} was never "
            f"ended (its markers were lost): read_committed readers stop at offset {hang.stable_end}, "
            f"{hang.end - hang.stable_end} records before the end; see README, \"Hanging transactions\"")
    return reasons


def exit_code(status: PipelineStatus) -> int:
    """0 healthy, 1 degraded, 2 Kafka unreachable."""
    if status.kafka_error:
        return 2
    return 0 if status.healthy else 1


# --- collecting --------------------------------------------------------------------------------------------------
T = TypeVar("T")


def _bounded(call: Callable[[], T], timeout: float) -> T:
    """``call()`` in a daemon thread; TimeoutError if it has not returned within ``timeout`` (the thread is left)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="lineage-status-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:.0f}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _services(probe: ServiceProbe | None, timeout: float) -> tuple[ServiceState, ...]:
    """The services' states from ``probe``, bounded as a whole; none when no probe is installed."""
    if probe is None:
        return ()
    try:
        return _bounded(probe, timeout)
    except Exception as exc:
        return (ServiceState("services", "unknown", f"service probes failed: {_error_text(exc)}"),)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return f"{error.name()}: {error.str()}"
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out"
    return f"{exc.__class__.__name__}: {exc}"


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def result(self, future: Future) -> Any:
        # librdkafka fails the request itself after request_timeout; the margin only guards against a lost callback.
        remaining = max(0.0, self.at - time.monotonic()) + 0.5
        try:
            return future.result(timeout=remaining)
        except TimeoutError:
            raise TimeoutError(f"no answer within {self.seconds:.0f}s") from None


def _offsets(admin: AdminClient, tps: Sequence[tuple[str, int]], spec: OffsetSpec, deadline: _Deadline,
             timeout: float, isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
             ) -> Callable[[], tuple[dict[tuple[str, int], Any], dict[str, str]]]:
    """Send a ListOffsets request now; the returned function waits for it: (results, topic -> first error)."""
    futures = (admin.list_offsets({TopicPartition(t, p): spec for t, p in tps}, isolation_level=isolation,
                                  request_timeout=timeout) if tps else {})

    def wait() -> tuple[dict[tuple[str, int], Any], dict[str, str]]:
        results: dict[tuple[str, int], Any] = {}
        errors: dict[str, str] = {}
        for tp, future in futures.items():
            try:
                results[(tp.topic, tp.partition)] = deadline.result(future)
            except Exception as exc:
                errors.setdefault(tp.topic, _error_text(exc))
        return results, errors

    return wait


def collect_status(services: ServiceProbe | None, clients: ClientSettings, groups: dict[str, str],
                   now: float | None = None,
                   *, lag_threshold: int = DEFAULT_LAG_THRESHOLD,
                   timeout: float = PROBE_TIMEOUT_SECONDS) -> PipelineStatus:
    """The pipeline's status; ``groups`` maps stage name (see STAGE_TOPICS) -> consumer group id, ``services``
    reports the services' states (None: no services section)."""
    now = time.time() if now is None else now
    stage_topics = {stage: stage_topic(stage, clients) for stage in groups}  # unknown stage: ValueError up front
    services_box: dict[str, tuple[ServiceState, ...]] = {}
    services_thread = threading.Thread(
        target=lambda: services_box.__setitem__("rows", _services(services, SERVICES_TIMEOUT_SECONDS)),
        name="lineage-status-services", daemon=True)
    services_thread.start()
    try:
        kafka = _collect_kafka(clients, groups, stage_topics, now, timeout)
    finally:
        services_thread.join(SERVICES_TIMEOUT_SECONDS + 1)
    return PipelineStatus(checked_at=now, kafka_bootstrap=clients.kafka_bootstrap_servers,
                          services=services_box.get("rows") or (),
                          lag_threshold=lag_threshold, **kafka)


def _collect_kafka(clients: ClientSettings, groups: Mapping[str, str], stage_topics: Mapping[str, str], now: float,
                   timeout: float) -> dict[str, Any]:
    dlq_topic, drift_topic = clients.dlq_topic, clients.drift_topic

    def unavailable(error: str) -> dict[str, Any]:
        stages = tuple(StageStatus(stage, groups[stage], stage_topics[stage], lag_error=error, members_error=error,
                                   last_event_error=error) for stage in groups)
        return {"stages": stages, "dead_letters": TopicCount(dlq_topic, error=error, last_event_error=error),
                "alerts_last_hour": TopicCount(drift_topic, error=error, last_event_error=error)}

    admin = AdminClient(clients.kafka_config({"log_level": 0, "socket.timeout.ms": int(timeout * 1000)}))
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as exc:  # the full reason is the verdict's; every row just says Kafka did not answer
        return {"kafka_error": _error_text(exc), **unavailable(KAFKA_UNREACHABLE)}
    if not metadata.brokers:
        return {"kafka_error": "the cluster metadata lists no broker", **unavailable(KAFKA_UNREACHABLE)}

    wanted = {*stage_topics.values(), dlq_topic, drift_topic}
    partitions: dict[str, list[int]] = {}
    missing: dict[str, str] = {}
    for topic in wanted:
        found = metadata.topics.get(topic)
        if found is None:
            missing[topic] = f"topic {topic} does not exist"
        elif found.error is not None:
            missing[topic] = f"topic {topic}: {found.error.str()}"
        else:
            partitions[topic] = sorted(found.partitions)
    tps = [(topic, p) for topic in sorted(partitions) for p in partitions[topic]]
    drift_tps = [(drift_topic, p) for p in partitions.get(drift_topic, [])]

    # Every request goes out now; all are awaited against one deadline.
    deadline = _Deadline(timeout)
    since_ms = int((now - ALERT_WINDOW_SECONDS) * 1000)
    wait_low = _offsets(admin, tps, OffsetSpec.earliest(), deadline, timeout)
    wait_high = _offsets(admin, tps, OffsetSpec.latest(), deadline, timeout)
    wait_newest = _offsets(admin, tps, OffsetSpec.max_timestamp(), deadline, timeout)
    wait_since = _offsets(admin, drift_tps, OffsetSpec.for_timestamp(since_ms), deadline, timeout)
    transactional_tps = [(t, p) for t, p in tps if t in (clients.normalized_topic, dlq_topic, drift_topic)]
    wait_stable = _offsets(admin, transactional_tps, OffsetSpec.latest(), deadline, timeout,
                           IsolationLevel.READ_COMMITTED)
    committed_futures = {
        stage: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(stage_topics[stage], p)
                                                  for p in partitions[stage_topics[stage]]])],
            request_timeout=timeout)[group]
        for stage, group in groups.items() if stage_topics[stage] in partitions
    }
    described = (admin.describe_consumer_groups(sorted(set(groups.values())), request_timeout=timeout)
                 if groups else {})

    low, low_errors = wait_low()
    high, high_errors = wait_high()
    newest, newest_errors = wait_newest()
    since, since_errors = wait_since()
    stable, stable_errors = wait_stable()

    def offsets_error(topic: str) -> str:
        return missing.get(topic) or low_errors.get(topic) or high_errors.get(topic) or ""

    def by_partition(results: Mapping[tuple[str, int], Any], topic: str) -> dict[int, int]:
        return {p: results[(t, p)].offset for t, p in results if t == topic}

    def last_event(topic: str) -> tuple[int | None, str]:
        error = missing.get(topic) or newest_errors.get(topic)
        if error:
            return None, error
        stamps = [info.timestamp for (t, _p), info in newest.items() if t == topic and info.timestamp >= 0]
        return (max(stamps) if stamps else None), ""

    stages = []
    for stage, group in groups.items():
        topic = stage_topics[stage]
        lag_error = offsets_error(topic)
        rows: tuple[PartitionLag, ...] = ()
        if not lag_error:
            try:
                answer = deadline.result(committed_futures[stage])
                committed = {}
                for tp in answer.topic_partitions:
                    if tp.error is not None:
                        raise KafkaException(tp.error)
                    committed[tp.partition] = tp.offset
                rows = partition_lags(by_partition(low, topic), by_partition(high, topic), committed)
            except Exception as exc:
                lag_error = f"committed offsets of {group}: {_error_text(exc)}"
        members, group_state, members_error = None, "", ""
        try:
            description = deadline.result(described[group])
            members, group_state = len(description.members), description.state.name.lower()
        except Exception as exc:
            members_error = _error_text(exc)
        newest_ms, newest_error = last_event(topic)
        stages.append(StageStatus(stage, group, topic, rows, lag_error, members, group_state, members_error,
                                  newest_ms, newest_error))

    dlq_error = offsets_error(dlq_topic)
    dlq_low, dlq_high = by_partition(low, dlq_topic), by_partition(high, dlq_topic)
    dlq_newest, dlq_newest_error = last_event(dlq_topic)
    dead_letters = TopicCount(dlq_topic, None if dlq_error else sum(dlq_high[p] - dlq_low[p] for p in dlq_high),
                              dlq_newest, dlq_error, dlq_newest_error)

    drift_error = offsets_error(drift_topic) or since_errors.get(drift_topic, "")
    drift_newest, drift_newest_error = last_event(drift_topic)
    alerts = TopicCount(drift_topic,
                        None if drift_error else count_since(by_partition(high, drift_topic),
                                                             by_partition(since, drift_topic)),
                        drift_newest, drift_error, drift_newest_error)
    hanging: tuple[HangingTransaction, ...] = ()
    hanging_error = next(iter(stable_errors.values()), "")
    if not hanging_error:
        stable_ends = {key: info.offset for key, info in stable.items()}
        ends = {key: info.offset for key, info in high.items()}
        behind = {key: offset for key, offset in stable_ends.items() if key in ends and offset < ends[key]}
        try:
            hanging = hanging_transactions(stable_ends, ends, _first_timestamps(clients, behind, timeout), now)
        except Exception as exc:
            hanging_error = _error_text(exc)
    return {"stages": tuple(stages), "dead_letters": dead_letters, "alerts_last_hour": alerts,
            "hanging": hanging, "hanging_error": hanging_error}


def _first_timestamps(clients: ClientSettings, at: Mapping[tuple[str, int], int], timeout: float
                      ) -> dict[tuple[str, int], int]:
    """The timestamp of the record at each (topic, partition) → offset, read uncommitted (there: the first record of
    an open transaction); one short-lived consumer, in no group's books. A partition whose record does not come
    within ``timeout`` is left out (not known to hang)."""
    if not at:
        return {}
    reader = Consumer(clients.kafka_config({"group.id": "lineage-status", "enable.auto.commit": False,
                                            "isolation.level": "read_uncommitted", "log_level": 0}))
    try:
        reader.assign([TopicPartition(topic, partition, offset) for (topic, partition), offset in at.items()])
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(at) and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None or message.error() is not None:
                continue
            key = (message.topic(), message.partition())
            if key in at and key not in found and message.offset() >= at[key]:
                found[key] = message.timestamp()[1]
                reader.pause([TopicPartition(*key)])
        return found
    finally:
        reader.close()


# --- as plain values ---------------------------------------------------------------------------------------------
def iso_time(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ms_json(last_event_ms: int | None) -> str | None:
    return None if last_event_ms is None else iso_time(last_event_ms / 1000)


def status_json(status: PipelineStatus) -> dict[str, Any]:
    """The same picture as plain JSON types (``lineage status --json``); unavailable values are null + error."""

    def count(row: TopicCount) -> dict[str, Any]:
        return {"topic": row.topic, "count": row.count, "error": row.error or None,
                "last_event": _ms_json(row.last_event_ms), "last_event_ms": row.last_event_ms,
                "last_event_error": row.last_event_error or None}

    return {
        "checked_at": iso_time(status.checked_at),
        "verdict": status.verdict,
        "reasons": list(status.reasons),
        "exit_code": exit_code(status),
        "kafka": {"bootstrap_servers": status.kafka_bootstrap, "error": status.kafka_error or None},
        "services": [{"name": s.name, "state": s.state, "up": s.up, "detail": s.detail, "pid": s.pid}
                     for s in status.services],
        "stages": [
            {
                "stage": s.stage, "group": s.group, "topic": s.topic,
                "members": s.members, "group_state": s.group_state or None, "members_error": s.members_error or None,
                "lag": s.lag, "no_commits": s.no_commits if not s.lag_error else None,
                "lag_error": s.lag_error or None,
                "partitions": [{"partition": p.partition, "low": p.low, "end": p.end, "committed": p.committed,
                                "lag": p.lag} for p in s.partitions],
                "last_event": _ms_json(s.last_event_ms), "last_event_ms": s.last_event_ms,
                "last_event_error": s.last_event_error or None,
            }
            for s in status.stages
        ],
        "dead_letters": count(status.dead_letters),
        "drift_alerts_last_hour": {**count(status.alerts_last_hour),
                                   "since": iso_time(status.checked_at - status.alert_window_seconds)},
        "hanging_transactions": [{"topic": h.topic, "partition": h.partition, "stable_end": h.stable_end,
                                  "end": h.end, "opened": _ms_json(h.opened_ms)} for h in status.hanging],
        "hanging_transactions_error": status.hanging_error or None,
        "lag_threshold": status.lag_threshold,
    }
