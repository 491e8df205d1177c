"""The alert sink's exposure watch: sensitive tags newly reaching columns of datasets not cleared for them, alerted
once on the alert topic (``kind: sensitiveExposure``).

An exposure is a state of the graph, not of one event: a column lineage edge, a tag, a clearance or a masked hop can
each make or end one, in any order. So the watch compares the graph with what it has already alerted, every
``sensitive_check_seconds``, instead of reacting to records; anything the graph sink writes is seen by the next
comparison, whichever member read its record and whatever crashed in between.

Exactly once: the exposures alerted are remembered in a compacted topic of the alert group
(``{group}.sensitive-exposures``, key = the exposure, a tombstone when it ended), written in the same Kafka
transaction as the alerts. One member compares, the one holding partition 0 of the normalized topic, through a
transactional id of its own that is the same in every member: the next holder's producer fences the last one and
ends its open transaction before the remembered exposures are read back, so no alert is lost or repeated when the
role moves or a member is killed mid-publish. The first comparison of a new group, or the first with other settings
(tags, aggregation, depth), takes the exposures in the graph as its baseline (remembered, not alerted).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException
from neo4j import Driver
from neo4j.exceptions import ClientError, DriverError, Neo4jError

from kafka_lineage.graph.queries import node_facets
from kafka_lineage.graph.sensitive import DEFAULT_DEPTH as SENSITIVE_DEPTH
from kafka_lineage.graph.sensitive import sensitive_columns
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.crash_points import CrashPoints
from kafka_lineage.runtime.kafka_io import PublishError, TopicUnread, compacted_contents, ensure_compacted
from kafka_lineage.runtime.logs import problem
from kafka_lineage.runtime.transactions import TransactionAborted, TransactionalProducer, TransactionFatal, fenced
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.exposures import (
    BASELINE_KEY,
    compare,
    exposure_alerts,
    exposures,
    remembered_value,
)
from kafka_lineage.sinks.alerts.ownership import dataset_ownership, facet_requests
from kafka_lineage.sinks.alerts.settings import AlertSettings

log = logging.getLogger(__name__)
STAGE = "alert-sink"
MAX_REMEMBERED = 1_000_000  # exposures remembered (keys of 32 bytes): past it, new ones wait and the log says so
MAX_NEW_PER_CHECK = 5_000  # exposures alerted by one comparison; the rest by the next ones
READ_SECONDS = 120.0  # reading the remembered exposures back
PUBLISH_SECONDS = 60.0  # an exposure transaction (begin … commit) not done by then is abandoned
DEPTH = SENSITIVE_DEPTH  # column-lineage hops followed, as `lineage tags` and /api/v2/sensitive follow them
# Columns listed per alert (each with its path of up to DEPTH hops, 10 jobs each): ~1 MB at most, under the record
# limit, and the server keeps its latest 1,000 alerts in memory
MAX_LISTED_COLUMNS = 100
QUERY_MARGIN = 5.0  # seconds past a query's transaction timeout before the client gives it up (as the sink's)
# ``work()`` waited for at most a time (a silent connection must not hold the sink): AlertSink._bounded
Bounded = Callable[..., Any]


def remembered_topic(settings: AlertSettings) -> str:
    return f"{settings.group_id}.sensitive-exposures"


def comparison_config(tags: tuple[str, ...], stop_at_aggregation: bool, depth: int) -> str:
    return json.dumps({"tags": sorted(t.strip().lower() for t in tags), "aggregationStops": stop_at_aggregation,
                       "depth": depth}, sort_keys=True)


def _baseline_config(value: bytes | None) -> str | None:
    try:
        config = json.loads(value or b"{}").get("config")
    except (ValueError, AttributeError):
        return None
    return config if isinstance(config, str) else None


class ExposureWatch:
    def __init__(self, clients: ClientSettings, settings: AlertSettings, driver: Driver, alerts: AvroCodec,
                 alert_schema_id: int, crash: CrashPoints, bounded: Bounded) -> None:
        self.clients, self.settings, self.driver = clients, settings, driver
        # What the exposures are computed with: a baseline taken with other settings is no baseline (a tag added
        # must not alert its history, a tag removed and added back not re-alert it)
        self.config = comparison_config(settings.sensitive_tags, settings.sensitive_stop_at_aggregation, DEPTH)
        self.alerts, self.alert_schema_id, self.crash, self.bounded = alerts, alert_schema_id, crash, bounded
        self.topic = remembered_topic(settings)
        self.producer: TransactionalProducer | None = None  # set while this member holds the role
        self.remembered: set[bytes] = set()
        self.baseline = False  # whether the group's first comparison was made
        self.next_check = 0.0

    def tick(self, owner: bool) -> None:
        """Called after each poll: compares when due if this member holds the normalized topic's partition 0."""
        if not owner:
            self.release()
            return
        if time.monotonic() < self.next_check:
            return
        self.next_check = time.monotonic() + self.settings.sensitive_check_seconds
        try:
            if self.producer is None:
                self._claim()
            self._check()
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            problem(log, "sensitive exposures not compared: the graph did not answer", "check that Neo4j runs",
                    error=exc, retry_in=self.settings.sensitive_check_seconds, stage=STAGE)
        except (KafkaException, TransactionFatal) as exc:  # the role not taken: Kafka away, or fenced at once
            problem(log, f"sensitive exposures: the comparing role not taken ({exc})",
                    "nothing to do if the next comparison goes through", stage=STAGE)
            self.release()
        except Unpublished as exc:
            if isinstance(exc.__cause__, TransactionFatal) and fenced(exc.__cause__):
                log.info("sensitive exposures: another member compares now (%s)", exc)
            else:
                problem(log, f"sensitive exposure alerts not published ({exc}); compared again next time",
                        "nothing to do if the next comparison goes through", stage=STAGE)

    def release(self, *, close: bool = True) -> None:
        """Leave the role (what is open is aborted; ``close`` False: a producer stuck in a call is left to its
        thread). The next holder, this member again included, reads the remembered exposures anew."""
        if self.producer is not None and close:
            self.producer.close()
        self.producer, self.remembered, self.baseline = None, set(), False

    def _claim(self) -> None:
        """Take the role: fence the last holder (its open transaction is aborted), then read what it remembered."""
        try:
            ensure_compacted(self.clients, self.topic)
        except PublishError as exc:
            raise Unpublished(str(exc)) from exc
        self.producer = TransactionalProducer(self.clients.kafka_config(), f"{self.settings.group_id}.exposures")
        try:
            self.remembered, self.baseline = self._read_remembered()
        except BaseException:  # never compare without what was remembered: a second baseline would hide exposures
            self.release()
            raise
        log.info("sensitive exposures: this member compares; %d exposures remembered%s", len(self.remembered),
                 "" if self.baseline else " (no baseline yet)")

    def _read_remembered(self) -> tuple[set[bytes], bool]:
        try:
            contents = compacted_contents(self.clients, self.topic, READ_SECONDS)
        except TopicUnread as exc:
            raise Unpublished(str(exc)) from exc
        baseline = BASELINE_KEY in contents and _baseline_config(contents.pop(BASELINE_KEY)) == self.config
        return set(contents), baseline

    def _check(self) -> None:
        settings = self.settings
        columns, cut = self.bounded(lambda: sensitive_columns(
            self.driver, settings.sensitive_tags, depth=DEPTH,
            stop_at_aggregation=settings.sensitive_stop_at_aggregation, timeout=settings.query_timeout),
            settings.query_timeout * 4, "Neo4j")
        found = exposures(columns)
        room = max(0, MAX_REMEMBERED - len(self.remembered))
        # the baseline is remembered whole: what it left out would be alerted by the next comparison
        changes = compare(self.remembered, found, complete=not cut,
                          limit=min(MAX_NEW_PER_CHECK, room) if self.baseline else room)
        if changes.more and room < MAX_NEW_PER_CHECK:
            problem(log, f"{changes.more} sensitive exposures not alerted: {MAX_REMEMBERED} are remembered already",
                    "clear datasets for their tags or mask the columns", stage=STAGE)
        if not changes.new and not changes.gone and self.baseline:
            return
        now = datetime.now(UTC)
        alerts = exposure_alerts((column for _key, column in changes.new), now, DEPTH,
                                 MAX_LISTED_COLUMNS) if self.baseline else []
        self._add_ownership(alerts)
        records: list[tuple[str, bytes, bytes | None]] = [
            (self.clients.drift_topic, f"{a['dataset']['namespace']}/{a['dataset']['name']}".encode(),
             self.alerts.encode(a, self.alert_schema_id)) for a in alerts]
        records += [(self.topic, key, remembered_value(column)) for key, column in changes.new]
        records += [(self.topic, key, None) for key in changes.gone]
        if not self.baseline:
            records.append((self.topic, BASELINE_KEY, json.dumps({"at": now.isoformat(),
                                                                  "config": self.config}).encode()))
        self._publish(records)
        self.remembered.update(key for key, _column in changes.new)
        self.remembered.difference_update(changes.gone)
        if not self.baseline:
            log.info("sensitive exposures: baseline of %d exposures taken (not alerted; %d forgotten) with %s",
                     len(changes.new), len(changes.gone), self.config)
            self.baseline = True
        for alert in alerts:
            exposure: dict[str, Any] = alert["exposure"]
            dataset = f"{alert['dataset']['namespace']}/{alert['dataset']['name']}"
            log.warning("sensitive tag %s newly reaches %d columns of %s (not cleared for it): %s", exposure["tag"],
                        len(exposure["columns"]), dataset, ", ".join(c["field"] for c in exposure["columns"]),
                        extra={"stage": STAGE, "dataset": dataset})

    def _add_ownership(self, alerts: list[dict[str, Any]]) -> None:
        """The exposed datasets' owners and tags (the graph's), in one query for every alert of the comparison;
        refused or out of time: the alerts go without them."""
        if not alerts:
            return
        datasets = sorted({(a["dataset"]["namespace"], a["dataset"]["name"]) for a in alerts})
        requests = [request for ns, name in datasets for request in facet_requests(ns, name, ())]
        timeout = self.settings.query_timeout
        try:
            found = self.bounded(lambda: node_facets(self.driver, requests, timeout=timeout), timeout + QUERY_MARGIN,
                                 "Neo4j")
        except ClientError as exc:
            problem(log, f"owners and tags of exposed datasets not read ({exc.code}); their alerts go without them",
                    "see the Neo4j log", stage=STAGE)
            return
        for alert in alerts:
            alert["datasetOwners"], alert["datasetTags"] = dataset_ownership(found, alert["dataset"]["namespace"],
                                                                             alert["dataset"]["name"])

    def _publish(self, records: list[tuple[str, bytes, bytes | None]]) -> None:
        """The alerts and the remembered exposures in one transaction. Any failure leaves the role: whether a commit
        whose answer was lost took effect is known only by reading the remembered exposures back."""
        producer = self.producer
        assert producer is not None

        def transact() -> None:
            producer.begin()
            for topic, key, value in records:
                producer.produce(topic, key, value)
            self.crash.reach("exposure-before-commit", producer.flush)
            producer.commit()

        try:
            self.bounded(transact, PUBLISH_SECONDS, "the exposure transaction", stoppable=False)
        except TimeoutError as exc:  # a call that hung: the producer is left to its thread
            self.release(close=False)
            raise Unpublished(str(exc)) from exc
        except (TransactionAborted, TransactionFatal) as exc:
            self.release()
            raise Unpublished(str(exc)) from exc


class Unpublished(Exception):
    """An exposure comparison's outcome could not be published (or its remembered exposures not read)."""
