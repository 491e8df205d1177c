"""What the server reads from the pipeline's topics: the recent schema-drift alerts (kept in memory, followed live
by a background consumer and fanned out to server-sent-event subscribers) and the latest dead letters (read on
demand, bounded)."""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
from collections import deque
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.retry import Backoff, Stopped
from kafka_lineage.runtime.tail import tail

log = logging.getLogger(__name__)
RECENT_ALERTS = 1000  # alerts kept in memory (and read back from the topic at start)
SUBSCRIBER_QUEUE = 100  # alerts waiting for one slow live subscriber; beyond it the subscriber is dropped
DEAD_LETTER_PREVIEW = 2000  # characters of a dead letter's original value shown


def plain(value: Any) -> Any:
    """An Avro-decoded record as JSON values: times as ISO-8601 text, bytes as UTF-8 text (else base64)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    return value


class AlertFeed:
    """The latest ``keep`` schema-drift alerts, oldest first, followed live from the alert topic in a daemon
    thread (a Kafka outage is waited out, stop-aware)."""

    def __init__(self, clients: ClientSettings, keep: int = RECENT_ALERTS) -> None:
        self.clients = clients
        self.alerts: deque[dict[str, Any]] = deque(maxlen=keep)
        self._subscribers: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="alert-feed", daemon=True)

    def start(self) -> AlertFeed:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _follow(self) -> None:
        backoff = Backoff(cap=30.0)
        last = self.alerts.maxlen or RECENT_ALERTS
        while not self._stop.is_set():
            try:
                for alert in tail(self.clients, self.clients.drift_topic, "schema_drift_alert", last, True,
                                  self._unreadable, self._stop):
                    self._add(plain(alert))
                    backoff.reset()
                return
            except Exception as exc:  # Kafka or the registry away: wait, then read again from the latest alerts
                log.warning("alert feed: cannot read %s (%s); retrying in %.1fs", self.clients.drift_topic, exc,
                            backoff.delay)
                try:
                    backoff.wait(self._stop)
                except Stopped:
                    return
                with self._lock:
                    self.alerts.clear()

    @staticmethod
    def _unreadable(partition: int, offset: int, error: Exception) -> None:
        log.warning("alert feed: record at partition %d offset %d is not an alert: %s", partition, offset, error)

    def _add(self, alert: dict[str, Any]) -> None:
        with self._lock:
            if any(kept.get("alertId") == alert.get("alertId") for kept in list(self.alerts)[-50:]):
                return  # read again after a reconnect
            self.alerts.append(alert)
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            loop.call_soon_threadsafe(self._offer, loop, queue, alert)

    def _offer(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[dict[str, Any]],
               alert: dict[str, Any]) -> None:
        try:
            queue.put_nowait(alert)
        except asyncio.QueueFull:  # a subscriber that does not read: dropped, its stream ends
            self.unsubscribe(loop, queue)  # (the stream sees it is no longer subscribed and ends)

    def recent(self, limit: int, dataset: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """The latest alerts, newest first (only those of ``dataset``, a (namespace, name), if given)."""
        with self._lock:
            alerts = list(self.alerts)
        if dataset is not None:
            alerts = [a for a in alerts if (a["dataset"]["namespace"], a["dataset"]["name"]) == dataset]
        return alerts[::-1][:limit]

    def subscribe(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]:
        entry = (asyncio.get_running_loop(), asyncio.Queue(SUBSCRIBER_QUEUE))
        with self._lock:
            self._subscribers.add(entry)
        return entry

    def unsubscribe(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[dict[str, Any]]) -> None:
        with self._lock:
            self._subscribers.discard((loop, queue))

    def subscribed(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[dict[str, Any]]) -> bool:
        with self._lock:
            return (loop, queue) in self._subscribers


def dead_letters(clients: ClientSettings, limit: int) -> list[dict[str, Any]]:
    """The latest ``limit`` dead letters, newest first, each with a preview of its original value."""
    letters: Iterable[dict[str, Any]] = tail(clients, clients.dlq_topic, "dead_letter", limit, False,
                                             lambda *_: None)
    rows = []
    for letter in letters:
        value = letter.get("value")
        rows.append({
            "failedAt": plain(letter["failedAt"]), "stage": letter["stage"], "errorClass": letter["errorClass"],
            "errorMessage": letter["errorMessage"], "origin": letter.get("origin"),
            "sourceTopic": letter.get("sourceTopic"), "sourcePartition": letter.get("sourcePartition"),
            "sourceOffset": letter.get("sourceOffset"), "size": len(value) if value is not None else 0,
            "preview": plain(value[:DEAD_LETTER_PREVIEW]) if value is not None else None,
        })
    rows.sort(key=lambda row: row["failedAt"], reverse=True)
    return rows[:limit]
