"""The raw events read back through the server on the real stack: Marquez's events browser
(``/api/v1/events/lineage``: paging, order, window, totals) and one run's events in publication order
(``/api/v2/runs/{id}/events``), from a raw topic of three partitions."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.processes import ChildProcess, server_process
from tests.integration.conftest import browser_page
from tests.integration.server.test_ui import _dataset, _run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def published(clients: ClientSettings) -> dict[str, Any]:
    """Twelve jobs' START/COMPLETE pairs, one run with START, RUNNING and COMPLETE, published one by one in order
    (so their publication order is known) to a raw topic of its own; the graph knows the runs."""
    tag = uuid.uuid4().hex[:8]
    settings = ClientSettings.from_env({**os.environ, "LINEAGE_EVENTS_TOPIC": f"test.events-browser.{tag}.events"})
    prepare_pipeline(settings, 3)
    ns, now = f"events-{tag}", datetime.now(UTC) - timedelta(minutes=2)  # all in the past (the stats' last hour)
    table = _dataset(f"warehouse://events-{tag}", "orders", "amount")
    events = []
    for job in range(12):
        run = str(uuid.uuid4())
        started = now + timedelta(seconds=job)
        events += [_run("START", started, (ns, f"job{job}"), [], [table], run),
                   _run("COMPLETE", started + timedelta(milliseconds=500), (ns, f"job{job}"), [], [table], run)]
    watched = str(uuid.uuid4())
    for step, kind in enumerate(("START", "RUNNING", "COMPLETE")):
        events.append(_run(kind, now + timedelta(seconds=20 + step), (ns, "watched"), [], [table], watched))
    publisher = EventPublisher.from_settings(settings, settings.events_topic)
    try:
        for event in events:  # one at a time: each acknowledged before the next, record times apart
            assert publisher.send([publisher.encode(event)]).result(60) == 1
            time.sleep(0.003)
    finally:
        publisher.close()
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, events)
    return {"settings": settings, "events": events, "watched": watched, "ns": ns}


@pytest.fixture(scope="module")
def server(published: dict[str, Any]) -> Iterator[ChildProcess]:
    with server_process({"LINEAGE_EVENTS_TOPIC": published["settings"].events_topic}) as child:
        yield child


def _ids(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["run"]["runId"], e["eventType"]) for e in events]


def test_the_events_browser_pages_the_raw_topic_newest_first(server: ChildProcess, published: dict[str, Any]
                                                             ) -> None:
    events = published["events"]
    url = f"{server.url}/api/v1/events/lineage"
    whole = requests.get(url, params={"limit": 100}, timeout=60).json()
    assert whole["totalCount"] == len(events)
    assert _ids(whole["events"]) == _ids(events)[::-1]  # newest first across the three partitions
    assert whole["events"][0]["job"] == {"namespace": published["ns"], "name": "watched"}
    pages = []
    for offset in range(0, len(events), 7):
        pages += requests.get(url, params={"limit": 7, "offset": offset}, timeout=60).json()["events"]
    assert _ids(pages) == _ids(whole["events"])
    counted = requests.get(url, params={"limit": 0}, timeout=60).json()  # the total only, at once
    assert counted == {"events": [], "totalCount": len(events)}
    oldest = requests.get(url, params={"limit": 3, "sortDirection": "asc"}, timeout=60).json()
    assert _ids(oldest["events"]) == _ids(events)[:3]
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert requests.get(url, params={"after": later}, timeout=60).json() == {"events": [], "totalCount": 0}
    too_deep = requests.get(url, params={"limit": 100, "offset": 9950}, timeout=60)
    assert too_deep.status_code == 400 and "narrow" in too_deep.json()["message"]


def test_a_runs_events_in_publication_order(server: ChildProcess, published: dict[str, Any]) -> None:
    watched = published["watched"]
    answer = requests.get(f"{server.url}/api/v2/runs/{watched}/events", timeout=60).json()
    assert [e["eventType"] for e in answer["events"]] == ["START", "RUNNING", "COMPLETE"]
    assert {e["run"]["runId"] for e in answer["events"]} == {watched}
    assert answer["truncated"] is False
    one = requests.get(f"{server.url}/api/v2/runs/{watched}/events", params={"limit": 1}, timeout=60).json()
    assert [e["eventType"] for e in one["events"]] == ["START"] and one["truncated"] is True
    missing = requests.get(f"{server.url}/api/v2/runs/{uuid.uuid4()}/events", timeout=60)
    assert missing.status_code == 404


def test_the_ui_shows_the_events_and_a_runs_own(server: ChildProcess, browser: Any, published: dict[str, Any]
                                                ) -> None:
    ns = published["ns"]
    with browser_page(browser, 1280, 800) as page:
        page.goto(f"{server.url}/#/events")
        page.wait_for_function("document.body.dataset.events === 'ready'", timeout=30_000)
        assert page.locator("#events-view ol.raw-events > li").count() == len(published["events"])
        assert "watched" in page.locator("#events-view ol.raw-events > li").first.inner_text()
        tomorrow = (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")  # the picker's local time
        page.locator("form.event-window input[name=after]").fill(tomorrow)
        page.locator("form.event-window button").click()
        page.wait_for_function("location.hash.includes('after=')", timeout=15_000)
        page.locator("#events-view p.small", has_text="0 events").wait_for(timeout=30_000)
        page.goto(f"{server.url}/#/lineage?node={quote(f'job:{ns}:watched', safe='')}&depth=1")
        page.locator("#details table.runs button.run").first.click(timeout=30_000)
        page.locator("#run-events").click(timeout=15_000)
        page.locator("#run-events-list ol.raw-events > li").nth(2).wait_for(timeout=30_000)
        kinds = page.locator("#run-events-list ol.raw-events summary > span:first-child").all_inner_texts()
        assert kinds == ["START", "RUNNING", "COMPLETE"]



def test_marquez_stats_count_the_runs_started_and_ended(server: ChildProcess, published: dict[str, Any]) -> None:
    url = f"{server.url}/api/v1/stats/lineage-events"
    day = requests.get(url, params={"period": "DAY"}, timeout=60).json()
    assert len(day) == 24 and set(day[0]) == {"startInterval", "endInterval", "start", "complete", "fail", "abort"}
    runs = len(published["events"]) // 2  # 13 runs, each started and completed within the last hour or two
    assert sum(bucket["start"] for bucket in day) >= runs and sum(bucket["complete"] for bucket in day) >= runs
    week = requests.get(url, params={"period": "week", "timezone": "America/New_York"}, timeout=60).json()
    assert len(week) == 7 and week[-1]["startInterval"].endswith(("-05:00", "-04:00"))
    assert requests.get(url, params={"period": "WEEK"}, timeout=60).status_code == 400
    assert requests.get(url, params={"period": "MONTH"}, timeout=60).status_code == 400

