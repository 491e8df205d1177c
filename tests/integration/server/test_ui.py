"""The web UI in a real browser (Playwright driving Debian's Chromium) against `lineage serve` on the real stack:
search → open a dataset → expand downstream → toggle columns → move the time slider → a drift alert arrives live.
Screenshots of each step are kept in .lineage/screenshots/."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.graph.queries import Reached
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.sink import build_alert
from kafka_lineage_devtools.processes import ChildProcess, server_process
from tests.integration.conftest import screenshot

pytestmark = pytest.mark.integration
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/tests/integration/server"
SCHEMA_URL = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"


def _dataset(ns: str, name: str, field: str, source: tuple[str, str] | None = None) -> dict[str, Any]:
    facets: dict[str, Any] = {"schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL,
                                         "fields": [{"name": field, "type": "DECIMAL"}]}}
    if source is not None:
        facets["columnLineage"] = {
            "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": {field: {"inputFields": [{
                "namespace": ns, "name": source[0], "field": source[1],
                "transformations": [{"type": "DIRECT", "subtype": "TRANSFORMATION"}]}]}}}
    return {"namespace": ns, "name": name, "facets": facets}


def _run(kind: str, when: datetime, job: tuple[str, str], inputs: list[dict], outputs: list[dict], run: str
         ) -> dict[str, Any]:
    return {"eventType": kind, "eventTime": when.isoformat(), "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": {"runId": run}, "job": {"namespace": job[0], "name": job[1]}, "inputs": inputs, "outputs": outputs}


@pytest.fixture(scope="module")
def world(clients: ClientSettings) -> dict[str, str]:
    """payments --settle (10 days ago)--> settled --report (1 day ago)--> revenue, with column lineage; names of
    their own (search finds names)."""
    tag = uuid.uuid4().hex[:8]
    ns, jobs = f"warehouse://ui-{tag}", f"ui-jobs-{tag}"
    now = datetime.now(UTC)
    payments = _dataset(ns, f"payments_{tag}", "amount")
    settled = _dataset(ns, f"settled_{tag}", "amount", (f"payments_{tag}", "amount"))
    revenue = _dataset(ns, f"revenue_{tag}", f"total_{tag}", (f"settled_{tag}", "amount"))
    settle, report = (jobs, "settle"), (jobs, "report")
    settle_run, report_run = str(uuid.uuid4()), str(uuid.uuid4())
    failed = _run("FAIL", now - timedelta(days=1, minutes=-5), report, [settled], [revenue], report_run)
    failed["run"]["facets"] = {"errorMessage": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
        "message": "out of memory", "programmingLanguage": "python"}}
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, [
            _run("START", now - timedelta(days=10), settle, [payments], [settled], settle_run),
            _run("COMPLETE", now - timedelta(days=10, minutes=-5), settle, [payments], [settled], settle_run),
            _run("START", now - timedelta(days=1), report, [settled], [revenue], report_run),
            failed,
        ])
    return {"ns": ns, "jobs": jobs, "tag": tag}


def alert_topics(prefix: str) -> ClientSettings:
    """The pipeline's settings with drift and dead-letter topics of their own (created)."""
    prefix = f"{prefix}.{uuid.uuid4().hex[:8]}"
    settings = ClientSettings.from_env({**os.environ, "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
                                        "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq"})
    prepare_pipeline(settings, 1)
    return settings


def alerting_server(topics: ClientSettings) -> contextlib.AbstractContextManager[ChildProcess]:
    """``lineage serve`` reading those drift and dead-letter topics."""
    return server_process({"LINEAGE_DRIFT_TOPIC": topics.drift_topic, "LINEAGE_DLQ_TOPIC": topics.dlq_topic})


@pytest.fixture(scope="module")
def drift(clients: ClientSettings) -> ClientSettings:
    return alert_topics("test.ui")


@pytest.fixture(scope="module")
def server(world: dict[str, str], drift: ClientSettings) -> Iterator[ChildProcess]:
    with alerting_server(drift) as child:
        yield child


def _shot(page: Any, name: str) -> None:
    screenshot(page, f"ui-{name}")


def _nodes(page: Any) -> set[str]:
    return set(page.locator("#node-list button").evaluate_all("buttons => buttons.map(b => b.dataset.nodeId)"))


def test_search_open_expand_columns_time_and_live_alert(server: ChildProcess, browser: Any, world: dict[str, str],
                                                        drift: ClientSettings) -> None:
    ns, jobs, tag = world["ns"], world["jobs"], world["tag"]
    payments, settled, revenue = f"payments_{tag}", f"settled_{tag}", f"revenue_{tag}"
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}/#/lineage?depth=1")
    # search with type-ahead, keyboard only
    page.locator("#search").fill(f"PAYMENTS_{tag}")
    page.locator(f'#results button[data-node-id="dataset:{ns}:{payments}"]').wait_for(timeout=15_000)
    page.locator("#search").press("ArrowDown")
    page.keyboard.press("Enter")  # the focused (only) result
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    assert _nodes(page) == {f"dataset:{ns}:{payments}", f"job:{jobs}:settle", f"dataset:{ns}:{settled}"}
    assert page.locator("#details h2").inner_text() == payments
    # expand downstream from settled: report and revenue join the graph
    page.locator(f'#node-list button[data-node-id="dataset:{ns}:{settled}"]').click()
    page.locator("#details button", has_text="Expand").click()
    page.wait_for_function("document.body.dataset.graphNodes === '5'", timeout=15_000)
    page.locator("#details button", has_text="Collapse").click()  # report and revenue hang on settled alone
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    page.locator("#details button", has_text="Expand").click()
    page.wait_for_function("document.body.dataset.graphNodes === '5'", timeout=15_000)
    report = page.locator(f'#node-list button[data-node-id="job:{jobs}:report"]')
    assert "(FAILED)" in report.inner_text()  # its latest run, coloured as failed in the graph
    _shot(page, "lineage")
    # the job page: its runs
    report.click()
    page.locator("#details table.runs td.state-FAILED").wait_for(timeout=15_000)
    page.locator("#details table.runs button.run").first.click()  # a run's detail: its error and facets
    page.locator("#run-detail p", has_text="out of memory").wait_for(timeout=15_000)
    page.locator("#run-detail details.facet summary", has_text="errorMessage").click()
    assert '"programmingLanguage": "python"' in page.locator("#run-detail details.facet pre").inner_text()
    # columns: payments.amount → settled.amount → revenue.total
    page.goto(f"{server.url}/#/lineage?node={_q(f'dataset:{ns}:{settled}')}&depth=3&dir=both")
    page.wait_for_function("document.body.dataset.graphNodes === '5'", timeout=15_000)
    page.locator("#columns").check()
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    column_graph = {f"datasetField:{ns}:{payments}:amount", f"datasetField:{ns}:{settled}:amount",
                    f"datasetField:{ns}:{revenue}:total_{tag}"}
    assert _nodes(page) == column_graph
    _shot(page, "columns")
    # a column found by search opens the column-level graph around it
    page.locator("#search").fill(f"TOTAL_{tag}")
    page.locator(f'#results button[data-node-id="datasetField:{ns}:{revenue}:total_{tag}"]').click(timeout=15_000)
    page.wait_for_function(f"location.hash.includes({json.dumps(_q(f'datasetField:{ns}:{revenue}:total_{tag}'))})",
                           timeout=15_000)
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    assert _nodes(page) == column_graph
    page.goto(f"{server.url}/#/lineage?node={_q(f'dataset:{ns}:{settled}')}&depth=3&dir=both&columns=1")
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    # the time slider: three days ago, report's edges (first seen a day ago) were not there yet
    page.locator("#columns").uncheck()
    page.wait_for_function("document.body.dataset.graphNodes === '5'", timeout=15_000)
    page.locator("#as-of-days").fill("3")
    page.wait_for_function("document.body.dataset.graphNodes === '3'", timeout=15_000)
    assert "asOf=" in page.url
    assert _nodes(page) == {f"dataset:{ns}:{payments}", f"job:{jobs}:settle", f"dataset:{ns}:{settled}"}
    _shot(page, "as-of")
    # the operator view: a drift alert published now arrives live
    page.goto(f"{server.url}/#/operator")
    page.wait_for_function("document.body.dataset.alertStream === 'live'", timeout=15_000)
    _publish_alert(drift, ns, settled, jobs)
    page.locator("#alerts li", has_text=settled).wait_for(timeout=30_000)
    _shot(page, "operator")
    assert not errors, errors
    page.close()


def test_the_ui_is_keyboard_reachable_and_fits_1280x800(server: ChildProcess, browser: Any,
                                                        world: dict[str, str]) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    start = _q(f"dataset:{world['ns']}:payments_{world['tag']}")
    page.goto(f"{server.url}/#/lineage?node={start}&depth=2")
    page.wait_for_function("Number(document.body.dataset.graphNodes) >= 3", timeout=15_000)
    focused = []
    for _ in range(12):  # the brand, search, the six views, then the controls
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
    assert "search" in focused and "depth" in focused
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no horizontal scrolling
    page.close()


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _publish_alert(settings: ClientSettings, ns: str, name: str, jobs: str) -> None:
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
    change = {"namespace": ns, "name": name, "previousVersion": "a", "newVersion": "b", "previousSchema": "[]",
              "newSchema": "[]", "severity": "BREAKING",
              "changes": [{"path": "amount", "kind": "REMOVED", "oldType": "DECIMAL", "newType": None,
                           "severity": "BREAKING"}]}
    event = {"eventTime": datetime.now(UTC).isoformat(), "run": {"runId": str(uuid.uuid4())},
             "job": {"namespace": jobs, "name": "settle"}}
    record = build_alert(change, event, [Reached(1, "job", jobs, "report")], 5, 200, datetime.now(UTC))
    producer = Producer(settings.kafka_config())
    producer.produce(settings.drift_topic, key=f"{ns}/{name}".encode(),
                     value=codec.encode(record, registry.registered_id(client, settings.drift_topic,
                                                                       "schema_drift_alert")))
    assert producer.flush(30) == 0
