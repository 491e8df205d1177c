"""The web UI's views in Chromium against `lineage serve` on the real stack: the home page (what needs attention,
each a link into the graph), a 2,000-job graph drawn whole (first render and pan/zoom frame times recorded), keyboard
navigation of the graph, the column view without overlapping boxes, and axe-core's accessibility checks."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.bench_events import dag_runs
from kafka_lineage_devtools.processes import ChildProcess
from tests.integration.conftest import REPO, SCREENSHOTS, browser_page, screenshot
from tests.integration.server.test_ui import _dataset, _publish_alert, _run, alert_topics, alerting_server

pytestmark = pytest.mark.integration
AXE = REPO / "server" / "ui" / "node_modules" / "axe-core" / "axe.min.js"
DAG_JOBS = 2000
# The bench's realistic platform (20-column schemas, column lineage, SQL; tables on hosts of this module's own): its
# last layer's table, from which depth 10 reaches every layer, upstream and down
HOSTS = f"ui{uuid.uuid4().hex[:8]}"
DAG_END = f"dataset:s3a://{HOSTS}.Lake-Curated:layer_9/table_1999"


@pytest.fixture(scope="module")
def platform(clients: ClientSettings) -> dict[str, Any]:
    """A failed run, a run going since 2001, a finished one, column lineage (one column indirect), and one run of
    every job of the bench's realistic 2,000-job platform."""
    tag = uuid.uuid4().hex[:8]
    ns, jobs = f"warehouse://home-{tag}", f"home-jobs-{tag}"
    now = datetime.now(UTC)
    orders = _dataset(ns, f"orders_{tag}", "amount")
    clean = _dataset(ns, f"clean_{tag}", "amount", (f"orders_{tag}", "amount"))
    daily = _dataset(ns, f"daily_{tag}", "total", (f"clean_{tag}", "amount"))
    daily["facets"]["columnLineage"]["fields"]["total"]["inputFields"][0]["transformations"] = [
        {"type": "INDIRECT", "subtype": "GROUP_BY"}]
    failing, slow, fine = (jobs, f"load_orders_{tag}"), (jobs, f"rebuild_daily_{tag}"), (jobs, f"clean_orders_{tag}")
    failed = _run("FAIL", now, failing, [], [orders], str(uuid.uuid4()))  # the newest failure: listed first
    failed["run"]["facets"] = {"errorMessage": {
        "_producer": "https://example.com", "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
        "message": f"disk full {tag}", "programmingLanguage": "python"}}
    done = str(uuid.uuid4())
    dag = f"home-dag-{tag}"
    # clean gains a column (a second schema version); daily_load writes five days of daily, the fourth day failing
    clean_v2 = json.loads(json.dumps(clean))
    clean_v2["facets"]["schema"]["fields"].append({"name": "currency", "type": "STRING"})
    widen = str(uuid.uuid4())
    days, weekly_run = [], ""
    for day in range(5):
        when, run_id = now - timedelta(days=5 - day), str(uuid.uuid4())
        partition = {"kafkaLineage_partition": {
            "_producer": "https://example.com", "_schemaURL": "https://example.com/partition.json",
            "keys": [{"name": "date", "value": when.date().isoformat()}]}}
        written = {**json.loads(json.dumps(daily)), "outputFacets": partition}
        loader = (jobs, f"daily_load_{tag}")
        # the fourth day's partition is rebuilt last (a minute ahead of the fixture's clock, so the newest failure
        # whatever other modules left on a shared stack) and that run fails
        ran = now + timedelta(minutes=1) if day == 3 else when
        days += [_run("START", ran, loader, [clean], [written], run_id),
                 _run("FAIL" if day == 3 else "COMPLETE", ran + timedelta(minutes=1 if day == 3 else 10 + day),
                      loader, [clean], [written], run_id)]
        if day == 3:  # weekly reads the failed day: a backfill of that day rebuilds it
            read, weekly_run = {**json.loads(json.dumps(daily)), "inputFacets": partition}, str(uuid.uuid4())
            rollup = {**_dataset(ns, f"weekly_{tag}", "total"), "outputFacets": partition}
            weekly = (jobs, f"weekly_{tag}"), [read], [rollup]
            days += [_run("START", when + timedelta(hours=1), *weekly, weekly_run),
                     _run("COMPLETE", when + timedelta(hours=1, minutes=5), *weekly, weekly_run)]
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, [
            failed,
            # started before anything another test leaves running (and before this test's earlier runs on a reused
            # stack: a second earlier every 100 s), so first in "running longest"
            _run("START", datetime(2001, 1, 1, tzinfo=UTC) - timedelta(seconds=time.time() / 100), slow, [clean],
                 [daily], str(uuid.uuid4())),
            _run("START", now - timedelta(hours=1), fine, [orders], [clean], done),
            _run("COMPLETE", now - timedelta(minutes=50), fine, [orders], [clean], done),
            _run("START", now - timedelta(minutes=20), fine, [orders], [clean_v2], widen),
            _run("COMPLETE", now - timedelta(minutes=10), fine, [orders], [clean_v2], widen),
            *days,
        ])
        platform = dag_runs(dag, jobs=DAG_JOBS, hosts=HOSTS)
        for batch in range(0, len(platform), 500):
            write_events(driver, platform[batch:batch + 500])
    return {"ns": ns, "jobs": jobs, "tag": tag, "dag": dag, "weekly_run": weekly_run,
            "loads": [e["run"]["runId"] for e in days if e["job"]["name"] == f"daily_load_{tag}"][::2]}


@pytest.fixture(scope="module")
def drift(clients: ClientSettings) -> ClientSettings:
    return alert_topics("test.ui-views")


@pytest.fixture(scope="module")
def server(platform: dict[str, Any], drift: ClientSettings) -> Iterator[ChildProcess]:
    with alerting_server(drift) as child:
        yield child


def _boxes(page: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The graph's dataset boxes and column boxes on the canvas (their bounding boxes, labels left out)."""
    boxes = page.evaluate("""() => window.lineageGraph().nodes().map(n => ({id: n.id(), group: n.isParent(),
      box: n.boundingBox({includeLabels: false})}))""")
    return [b for b in boxes if b["group"]], [b for b in boxes if not b["group"]]


def _overlapping(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
        return a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]

    ordered = sorted(items, key=lambda item: item["box"]["x1"])
    found = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b["box"]["x1"] >= a["box"]["x2"]:
                break
            if overlap(a["box"], b["box"]):
                found.append((a["id"], b["id"]))
    return found


def _critical_violations(page: Any) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})).violations"
                          ".filter(v => v.impact === 'critical')"
                          ".map(v => v.id + ': ' + v.nodes.map(n => n.target).join(' '))")
    return list(found)


def test_home_shows_what_needs_attention_first(server: ChildProcess, browser: Any, platform: dict[str, Any],
                                               drift: ClientSettings) -> None:
    ns, jobs, tag = platform["ns"], platform["jobs"], platform["tag"]
    _publish_alert(drift, ns, f"orders_{tag}", jobs)  # BREAKING: amount removed
    with browser_page(browser) as page:
        page.goto(f"{server.url}/")
        page.wait_for_function("document.body.dataset.home === 'ready'", timeout=30_000)
        failed = page.locator("#home-failed li", has_text=f"load_orders_{tag}")
        assert f"disk full {tag}" in failed.inner_text()
        running = page.locator("#home-running li", has_text=f"rebuild_daily_{tag}").inner_text()
        assert "running for " in running and " days" in running  # since 2000
        assert page.locator("#home-alerts li.change-BREAKING", has_text=f"orders_{tag}").count() >= 1
        assert "date=" in page.locator("#home-partitions li", has_text=f"daily_{tag}").inner_text()  # day 4 failed
        assert int(page.locator(".summary .figure b").first.inner_text()) >= DAG_JOBS  # jobs
        assert page.locator(".runs-chart svg rect").count() >= 1
        assert page.locator("#home-pipeline table tr").count() >= 2
        screenshot(page, "ui-home", readme=True)
        assert _critical_violations(page) == []
        # a failed run leads into the graph around its job
        failed.locator("a").click()
        page.wait_for_function("Number(document.body.dataset.graphNodes) >= 2", timeout=30_000)
        assert page.locator("#details h2").inner_text() == f"load_orders_{tag}"
        # orders: its only writer's run failed, so it is a declared output only (dashed, as the legend says)
        declared = page.evaluate("id => window.lineageGraph().getElementById(id).hasClass('declared')",
                                 f"dataset:{platform['ns']}:orders_{tag}")
        assert declared is True
        assert not page.locator("#home-view").is_visible()


def test_a_2000_job_answer_is_drawn_whole_and_stays_smooth(server: ChildProcess, browser: Any,
                                                           platform: dict[str, Any]) -> None:
    answer = requests.get(f"{server.url}/api/v1/lineage", params={"nodeId": DAG_END, "depth": 10}, timeout=60)
    assert answer.headers.get("X-Lineage-Truncated") is None
    whole = len(answer.json()["graph"])  # every layer's jobs and tables, upstream and down (4,000-odd)
    assert whole > 2000
    with browser_page(browser) as page:
        page.goto(f"{server.url}/#/lineage?node={quote(DAG_END, safe='')}&depth=10&dir=both")
        page.wait_for_function(f"document.body.dataset.graphNodes === '{whole}'", timeout=120_000)
        first_render = page.evaluate("Number(document.body.dataset.renderedAt)")
        drawn = page.evaluate("Number(document.body.dataset.drawnAt)")
        assert "more lineage exists" not in page.locator("#notice").inner_text()
        # the start is on screen at a readable size, selected in the side panel
        zoom, inside = page.evaluate("""() => { const cy = window.lineageGraph();
          const p = cy.nodes('.start').renderedPosition();
          return [cy.zoom(), p.x >= 0 && p.y >= 0 && p.x <= cy.width() && p.y <= cy.height()]; }""")
        assert zoom >= 0.5 and inside
        # names shortened by their kind: a path-named table by its last segment, a Spark job by its last part
        labels = page.evaluate("() => window.lineageGraph().nodes().map(n => n.data('label').split('\\n')[0])")
        assert "…/table_1999" in labels and "etl.job_1999" in labels
        page.locator("#details h3", has_text="Schema history").wait_for(timeout=30_000)  # its page in the side panel
        screenshot(page, "ui-graph-2000", readme=True)
        # frame times while dragging and wheeling (recorded, not asserted: the machines are shared)
        page.evaluate("""() => { window.frames_ = []; let last = performance.now();
          const tick = (t) => { window.frames_.push(t - last); last = t;
            if (window.frames_.length < 600) requestAnimationFrame(tick); };
          requestAnimationFrame(tick); }""")
        box = page.locator("#graph").bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        for step in range(40):
            page.mouse.move(x - step * 10, y + step * 2)
        page.mouse.up()
        for step in range(16):
            page.mouse.wheel(0, 200 if step < 8 else -200)
            page.wait_for_timeout(25)
        page.wait_for_function("window.frames_.length >= 30", timeout=60_000)
        frames = sorted(page.evaluate("window.frames_")[1:])
        measured = {"nodes": whole, "first_render_ms": first_render, "all_drawn_ms": drawn,
                    "frame_ms": {"p50": frames[len(frames) // 2], "p95": frames[int(len(frames) * 0.95)],
                                 "max": frames[-1], "count": len(frames)}}
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        Path(SCREENSHOTS / "ui-graph-2000.json").write_text(json.dumps(measured, indent=2))
        print("2,000-job graph in Chromium:", measured)
        # the keyboard: into the graph, left to the job writing the start (its page opens), left to a table it reads
        page.locator("#graph").focus()
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("document.querySelector('#details h2').textContent === 'etl.job_1999'", timeout=15_000)
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("document.querySelector('#details h2').textContent.startsWith('layer_8/')",
                               timeout=15_000)


def test_the_column_view_has_no_overlaps_and_the_pages_pass_axe(server: ChildProcess, browser: Any,
                                                                platform: dict[str, Any]) -> None:
    ns, tag = platform["ns"], platform["tag"]
    with browser_page(browser, 1280, 800) as page:
        page.goto(f"{server.url}/#/lineage?node={quote(f'dataset:{ns}:clean_{tag}', safe='')}&depth=3&columns=1")
        page.wait_for_function("document.body.dataset.graphNodes === '4'", timeout=30_000)  # currency has no lineage
        groups, fields = _boxes(page)
        assert len(groups) == 3 and len(fields) == 4
        assert _overlapping(groups) == [] and _overlapping(fields) == []
        indirect = page.evaluate("() => window.lineageGraph().edges('.indirect').map(e => e.id())")
        assert indirect == [f"datasetField:{ns}:clean_{tag}:amount->datasetField:{ns}:daily_{tag}:total"]
        screenshot(page, "ui-columns")
        assert _critical_violations(page) == []
        # a realistic wide neighbourhood: 20-column tables, each column from a column of every input
        page.goto(f"{server.url}/#/lineage?node={quote(DAG_END, safe='')}&depth=2&columns=1")
        page.wait_for_function("Number(document.body.dataset.graphNodes) > 100", timeout=60_000)
        groups, fields = _boxes(page)
        assert len(groups) > 10 and _overlapping(groups) == [] and _overlapping(fields) == []
        page.goto(f"{server.url}/#/operator")
        page.locator("#stages tbody tr").first.wait_for(timeout=30_000)
        assert _critical_violations(page) == []


def test_runs_over_time_partitions_and_schema_diffs(server: ChildProcess, browser: Any,
                                                    platform: dict[str, Any]) -> None:
    ns, jobs, tag = platform["ns"], platform["jobs"], platform["tag"]
    with browser_page(browser) as page:
        # the job's runs as a timeline (five, one failed) and a run's partitions
        page.goto(f"{server.url}/#/lineage?node={quote(f'job:{jobs}:daily_load_{tag}', safe='')}&depth=1")
        page.locator("#details .run-timeline svg.timeline").wait_for(timeout=30_000)
        assert page.locator("#details rect.run-bar").count() == 5
        assert "5 runs, 1 failed" in page.locator("#details .run-timeline").inner_text()
        page.locator("#details ul.failed-runs button.run").first.click()
        page.locator("#run-detail ul.partitions li", has_text="FAILED").wait_for(timeout=15_000)
        screenshot(page, "ui-run-timeline", readme=True)
        # the dataset's partitions by day: four succeeded, one failed, and what a partition was built from
        page.goto(f"{server.url}/#/lineage?node={quote(f'dataset:{ns}:daily_{tag}', safe='')}&depth=1")
        page.locator("#details svg.partition-grid").wait_for(timeout=30_000)
        assert page.locator("#details rect.partition-cell").count() == 5
        assert "4 success" in page.locator("#details svg.partition-grid + p").inner_text()
        page.locator("#details button.partition").first.click()
        page.locator("#partition-detail h4", has_text="FAILED").wait_for(timeout=15_000)
        # a backfill of the failed day (the form's default): weekly rebuilds it
        page.locator("form.backfill button").click()
        page.locator("#backfill-plan li.stage li.plan-item", has_text=f"weekly_{tag}").wait_for(timeout=15_000)
        assert page.locator("#backfill-plan li.stage").count() == 1
        screenshot(page, "ui-partitions", readme=True)
        # two schema versions side by side: currency added
        page.goto(f"{server.url}/#/lineage?node={quote(f'dataset:{ns}:clean_{tag}', safe='')}&depth=1")
        page.locator("#schema-diff table.schema-diff").wait_for(timeout=30_000)
        assert page.locator("#schema-diff tr.diff-added td").first.inner_text() == "currency"
        assert page.locator("#schema-diff tr.diff-same td").first.inner_text() == "amount"
        assert _critical_violations(page) == []


def test_keyboard_only_search_to_graph_to_a_dataset(server: ChildProcess, browser: Any,
                                                    platform: dict[str, Any]) -> None:
    ns, tag = platform["ns"], platform["tag"]
    with browser_page(browser, 1280, 800) as page:
        page.goto(f"{server.url}/")
        page.wait_for_function("document.body.dataset.home === 'ready'", timeout=30_000)
        page.keyboard.press("Tab")  # the brand link, then the search box
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.id") == "search"
        page.keyboard.type(f"clean_{tag}")
        page.locator(f'#results button[data-node-id="dataset:{ns}:clean_{tag}"]').wait_for(timeout=15_000)
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        page.wait_for_function("Number(document.body.dataset.graphNodes) >= 3", timeout=30_000)
        for _ in range(30):  # tab through the controls to the graph
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == "graph":
                break
        assert page.evaluate("document.activeElement.id") == "graph"
        page.keyboard.press("ArrowLeft")  # to the job writing clean, then to the table it reads
        page.wait_for_function(f"document.querySelector('#details h2').textContent === 'clean_orders_{tag}'",
                               timeout=15_000)
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(f"document.querySelector('#details h2').textContent === 'orders_{tag}'", timeout=15_000)
        page.locator("#details h3", has_text="Schema").first.wait_for(timeout=15_000)  # the dataset's page
        page.keyboard.press("Enter")  # re-centres the graph on it
        page.wait_for_function(f"decodeURIComponent(location.hash).includes('node=dataset:{ns}:orders_{tag}')",
                               timeout=15_000)
        page.locator("#graph").focus()
        page.keyboard.press("Control+k")  # back to the search box from anywhere
        assert page.evaluate("document.activeElement.id") == "search"


def test_browsing_jobs_by_state_and_a_namespaces_datasets(server: ChildProcess, browser: Any,
                                                          platform: dict[str, Any]) -> None:
    ns, tag = platform["ns"], platform["tag"]
    with browser_page(browser, 1280, 800) as page:
        page.goto(f"{server.url}/#/jobs?state=FAILED")
        page.wait_for_function("document.body.dataset.browse === 'jobs'", timeout=30_000)
        failing = page.locator("table.browse tr", has_text=f"load_orders_{tag}")  # newest activity first
        assert "FAILED" in failing.inner_text()
        assert "COMPLETED" not in page.locator("table.browse").inner_text()
        failing.locator("a").click()
        page.wait_for_function("Number(document.body.dataset.graphNodes) >= 2", timeout=30_000)
        page.goto(f"{server.url}/#/datasets?namespace={quote(ns, safe='')}")
        page.wait_for_function("document.body.dataset.browse === 'datasets'", timeout=30_000)
        names = page.locator("table.browse tr td:first-child a").all_inner_texts()
        assert names == sorted(f"{name}_{tag}" for name in ("clean", "daily", "orders", "weekly"))
        assert _critical_violations(page) == []


def test_marquez_upstream_run_lineage(server: ChildProcess, platform: dict[str, Any]) -> None:
    ns, jobs, tag = platform["ns"], platform["jobs"], platform["tag"]
    answer = requests.get(f"{server.url}/api/v1/runlineage/upstream",
                          params={"runId": platform["weekly_run"], "depth": 5}, timeout=60).json()
    runs = answer["runs"]
    assert [r["job"]["name"] for r in runs] == [f"weekly_{tag}", f"daily_load_{tag}"]
    assert runs[0]["run"]["status"] == "COMPLETED" and runs[0]["job"] == {"namespace": jobs, "name": f"weekly_{tag}",
                                                                          "version": None}
    # weekly read daily: produced by the last load that completed before weekly started (the third day's; the
    # fourth day's load failed), which read clean before any run had written it
    (daily,) = runs[0]["inputs"]
    assert daily["namespace"] == ns and daily["name"] == f"daily_{tag}"
    assert daily["producedByRunId"] == runs[1]["run"]["id"] == platform["loads"][2]
    assert runs[1]["inputs"][0]["name"] == f"clean_{tag}" and runs[1]["inputs"][0]["producedByRunId"] is None
    assert requests.get(f"{server.url}/api/v1/runlineage/upstream", params={"runId": str(uuid.uuid4())},
                        timeout=60).status_code == 404

