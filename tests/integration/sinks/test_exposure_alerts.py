"""Sensitive-exposure alerts on the real stack (``sinks/alerts/exposure_watch.py``): a ``pii`` tag newly reaching a
column of a dataset not cleared for it is alerted once on the alert topic, with its path; masked hops and cleared
datasets are not; a sink killed with its exposure transaction open alerts nothing, and its restart alerts once."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage_devtools.processes import (
    ChildExited,
    ChildProcess,
    alert_sink_process,
    pipeline_env,
    processor_process,
    server_process,
    sink_process,
    wait_until,
)
from tests.integration.app.test_sensitive import Platform
from tests.integration.conftest import consume_all, lineage

from .test_alert_transactions import _all_records

pytestmark = pytest.mark.integration
EMAIL = [("raw.customers", "email", "DIRECT", "IDENTITY", False)]


def _env(tag: str, tmp_path: Path) -> tuple[dict[str, str], ClientSettings]:
    env = {**pipeline_env(f"test.exposure.{tag}.{uuid.uuid4().hex[:8]}", 2, tmp_path / "processor"),
           "LINEAGE_SINK_POLL_SECONDS": "0.2", "LINEAGE_SENSITIVE_CHECK_SECONDS": "0.5"}
    return env, ClientSettings.from_env({**os.environ, **env})


def _exposures(settings: ClientSettings, namespace: str) -> list[dict[str, Any]]:
    """The exposure alerts about ``namespace`` a read_committed reader sees, in the order they were detected (they are
    keyed by dataset: partitions are read in no particular order)."""
    codec = AvroCodec("schema_drift_alert", registry.schema_fetcher(SchemaRegistryClient(settings.registry_config())))
    alerts = [codec.decode(m.value()) for m in consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)]
    return sorted((a for a in alerts if a["kind"] == "sensitiveExposure" and a["dataset"]["namespace"] == namespace),
                  key=lambda a: a["detectedAt"])


def _baseline_taken(sink: ChildProcess) -> None:
    wait_until(lambda: "sensitive exposures: baseline of" in sink.output_so_far(), 90, watch=[sink],
               what="the exposure watch's baseline")


def test_a_tag_newly_reaching_a_dataset_not_cleared_alerts_once_with_its_path(tmp_path: Path, browser: Any) -> None:
    platform = Platform()
    raw = platform.dataset("raw.customers", tags=[{"key": "classification", "value": "pii", "field": "email"}])
    stg = platform.dataset("stg.customers", {"email": EMAIL,
                                             "email_hash": [("raw.customers", "email", "DIRECT", "HASH", True)]},
                           tags=[{"key": "Domain", "value": "CRM"}])
    stg["facets"]["ownership"] = {"_producer": "t", "owners": [{"name": "team:crm", "type": "MAINTAINER"}],
                                  "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/OwnershipDatasetFacet.json"}
    cleared = platform.dataset("export.contacts", {"contact": [("stg.customers", "email", "DIRECT", "IDENTITY",
                                                                False)]}, tags=[{"key": "pii-cleared", "value": "yes"}])
    mart = platform.dataset("mart.orders", {"email": [("stg.customers", "email", "DIRECT", "IDENTITY", False)]})
    env, settings = _env("pipeline", tmp_path)
    with processor_process(env), sink_process(env), alert_sink_process(env) as alerts:
        _baseline_taken(alerts)
        publisher = EventPublisher.from_settings(settings)

        def publish(*events: dict[str, Any]) -> None:
            publisher.send([publisher.encode(event) for event in events]).result(60)

        publish(platform.event("load", [], [raw]), platform.event("stage", [raw], [stg]),
                platform.event("export", [stg], [cleared]))
        wait_until(lambda: _exposures(settings, platform.ns), 90, watch=[alerts], what="the first exposure alert")
        publish(platform.event("stage", [raw], [stg]), platform.event("mart", [stg], [mart]))  # a repeat, a new hop
        wait_until(lambda: len(_exposures(settings, platform.ns)) >= 2, 90, watch=[alerts], what="the second one")
        time.sleep(3)  # six more comparisons: nothing is alerted again
        found = _exposures(settings, platform.ns)
        publisher.close()
    assert [(a["dataset"]["name"], a["exposure"]["tag"], [c["field"] for c in a["exposure"]["columns"]])
            for a in found] == [("stg.customers", "pii", ["email"]), ("mart.orders", "pii", ["email"])]
    (column,) = found[1]["exposure"]["columns"]
    assert column["origin"] == {"namespace": platform.ns, "name": "raw.customers", "field": "email"}
    assert [(h["name"], h["field"], h["transformation"], [j["name"] for j in h["jobs"]]) for h in column["path"]] == [
        ("stg.customers", "email", "DIRECT/IDENTITY", ["stage"]), ("mart.orders", "email", "DIRECT/IDENTITY", ["mart"])]
    assert found[1]["job"]["name"] == "mart" and found[1]["severity"] == "UNKNOWN"
    # the exposed dataset's owners and tags, as the graph holds them
    assert (found[0]["datasetOwners"], found[0]["datasetTags"]) == (["team:crm"], ["domain:crm"])
    assert (found[1]["datasetOwners"], found[1]["datasetTags"]) == ([], [])
    text = lineage("alerts", "tail", env=env).stdout
    assert f"[pii] {platform.ns} mart.orders is not cleared for pii and now receives it in 1 columns" in text
    with server_process(env) as server:  # the operator view lists it among the alerts, saying what it is
        def served() -> set[str]:  # the server reads the alert topic in the background once started
            return {a["dataset"]["name"] for a in requests.get(f"{server.url}/api/v2/alerts", timeout=30).json()[
                "alerts"] if a["kind"] == "sensitiveExposure" and a["dataset"]["namespace"] == platform.ns}

        assert wait_until(lambda: len(served()) == 2 and served(), 60, watch=[server],
                          what="the server's alerts") == {"mart.orders", "stg.customers"}
        page = browser.new_page()
        page.goto(f"{server.url}/#/operator")
        item = page.locator("#alerts li.exposure", has_text="mart.orders")
        item.first.wait_for(timeout=30_000)
        assert "not cleared for pii and now receives it in email (from raw.customers.email)" in item.first.inner_text()
        page.close()


def test_a_sink_killed_with_its_exposure_transaction_open_alerts_nothing_and_its_restart_alerts_once(
        clients: ClientSettings, tmp_path: Path) -> None:
    platform = Platform()
    env, settings = _env("crash", tmp_path)
    with alert_sink_process(env) as first:
        _baseline_taken(first)
    with driver_for(settings) as driver:  # the lineage reaches the graph while no sink runs
        ensure_constraints(driver)
        raw = platform.dataset("raw.customers", tags=[{"key": "classification", "value": "pii", "field": "email"}])
        write_events(driver, [platform.event("load", [], [raw]),
                              platform.event("stage", [raw], [platform.dataset("stg.customers", {"email": EMAIL})])])
    with pytest.raises(ChildExited) as died, alert_sink_process(
            {**env, "LINEAGE_ALERT_CRASH_POINTS": "exposure-before-commit=1.0"}) as crashing:
        wait_until(lambda: crashing.process.poll() is not None, 150, watch=[crashing], what="the crash point")
    assert died.value.code == -9 and "crash point exposure-before-commit: killing this sink" in died.value.tail
    assert _all_records(settings, settings.drift_topic) == 1  # on the broker, in the open transaction
    assert _exposures(settings, platform.ns) == []  # invisible to read_committed readers
    for _restart in range(2):  # the first alerts it; the second remembers it was alerted
        with alert_sink_process(env) as sink:
            wait_until(lambda s=sink: "exposures remembered" in s.output_so_far(), 150, watch=[sink],
                       what="the exposure watch's start")
            wait_until(lambda: _exposures(settings, platform.ns), 30, watch=[sink], what="the exposure alert")
            time.sleep(2)
    assert [(a["dataset"]["name"], a["exposure"]["columns"][0]["field"])
            for a in _exposures(settings, platform.ns)] == [("stg.customers", "email")]
    assert _all_records(settings, settings.drift_topic) == 2  # the aborted one and the committed one
