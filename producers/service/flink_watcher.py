"""Thin I/O shell of the Flink watcher (``lineage flink watch``): finish the Flink runs the listener left open.

It follows the events topic (the listener's events arrive there through the collector) to learn which Flink job
each run is, polls one Flink cluster's REST API (``GET /jobs/overview``; ``/jobs/<id>/exceptions`` for a failed
job) and publishes the terminal events the listener missed through the pipeline's publisher (validated, Avro,
keyed like the listener's events). The decisions are in ``flink_lineage``. A cluster that does not answer is one
log line (and one when it answers again); nothing is reported for its jobs meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.producers.service import flink_lineage as core
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.tail import tail

log = logging.getLogger(__name__)


class FlinkWatcher:
    """Tracks listener runs (``observe``, fed by ``follow_events``) and finishes them from Flink's job states."""

    def __init__(self, rest_url: str, send: Callable[[list[dict[str, Any]]], None], *, grace: float = 10.0,
                 timeout: float = 10.0, session: requests.Session | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rest_url = rest_url.rstrip("/")
        self.send = send
        self.grace = grace
        self.timeout = timeout
        self.session = session or requests.Session()
        self.clock = clock
        self.tracked: dict[str, core.Tracked] = {}
        self.emitted = 0
        self._lock = threading.Lock()
        self._reachable: bool | None = None

    def observe(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.tracked = core.observe(self.tracked, event)

    def _get(self, path: str) -> Any:
        response = self.session.get(self.rest_url + path, timeout=self.timeout)
        response.raise_for_status()
        return response.json()

    def poll_once(self) -> list[dict[str, Any]]:
        """One poll of the cluster: the events sent ([] when it does not answer)."""
        try:
            overview = core.parse_overview(self._get("/jobs/overview"))
        except (requests.RequestException, ValueError) as error:
            if self._reachable is not False:
                log.warning("Flink at %s is not answering (%s); polling goes on", self.rest_url,
                            type(error).__name__)
            self._reachable = False
            return []
        if self._reachable is False:
            log.info("Flink at %s answers again", self.rest_url)
        self._reachable = True
        with self._lock:
            tracked = dict(self.tracked)
        errors = {}
        for jid in core.wants_exception(tracked, overview):
            try:
                if (error := core.root_exception(self._get(f"/jobs/{jid}/exceptions"))) is not None:
                    errors[jid] = error
            except (requests.RequestException, ValueError) as exc:
                log.warning("could not read the exceptions of Flink job %s: %s", jid, exc)
        new, events = core.step(tracked, overview, self.clock(), grace=self.grace, errors=errors)
        if events:
            try:
                self.send(events)
            except Exception:  # not sent: the runs stay open and the next poll tries again
                log.exception("could not publish %d Flink run events", len(events))
                return []
            self.emitted += len(events)
            for event in events:
                log.info("Flink job %s: %s sent for run %s", event["job"]["name"], event["eventType"],
                         event["run"]["runId"])
        with self._lock:  # events observed meanwhile are kept: merge the step's changes into the current state
            for jid, t in new.items():
                current = self.tracked.get(jid)
                if current is None or current == tracked.get(jid):
                    self.tracked[jid] = t
        return events

    def follow_events(self, clients: ClientSettings, stop: threading.Event, lookback: int = 10_000) -> None:
        """Observe the events topic (the last ``lookback`` records per partition, then new ones) until ``stop``."""
        def unreadable(partition: int, offset: int, error: Exception) -> None:
            log.debug("skipping record %d:%d of the events topic: %s", partition, offset, error)

        from kafka_lineage.schemas.openlineage import record_to_event

        for record in tail(clients, clients.events_topic, "openlineage_event", lookback, follow=True,
                           on_unreadable=unreadable, stop=stop):
            try:
                self.observe(record_to_event(record))
            except Exception:
                log.exception("could not read an event of the events topic")


def publisher_sender(publisher: EventPublisher) -> Callable[[list[dict[str, Any]]], None]:
    """Send events through the pipeline's publisher and wait for Kafka's acknowledgement."""
    def send(events: list[dict[str, Any]]) -> None:
        publisher.send([publisher.encode(event) for event in events]).result(timeout=60)
    return send


def watch(clients: ClientSettings, rest_url: str, *, interval: float = 5.0, grace: float = 10.0,
          once: bool = False, stop_event: threading.Event | None = None, ready: Callable[[], None] | None = None
          ) -> int:
    """Watch the Flink cluster at ``rest_url`` until ``stop_event`` or Ctrl-C; returns how many events were sent.
    ``once``: read the events topic up to its end, poll once (without grace) and exit."""
    stop = stop_event or threading.Event()
    publisher = EventPublisher.from_settings(clients)
    watcher = FlinkWatcher(rest_url, publisher_sender(publisher), grace=0.0 if once else grace)
    try:
        if once:
            from kafka_lineage.schemas.openlineage import record_to_event

            for record in tail(clients, clients.events_topic, "openlineage_event", 10_000, follow=False):
                watcher.observe(record_to_event(record))
            watcher.poll_once()
            return watcher.emitted
        reader = threading.Thread(target=watcher.follow_events, args=(clients, stop), name="flink-events",
                                  daemon=True)
        reader.start()
        log.info("flink watcher ready: %s", rest_url)
        if ready is not None:
            ready()
        while not stop.is_set():
            watcher.poll_once()
            stop.wait(interval)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        publisher.close()
    return watcher.emitted
