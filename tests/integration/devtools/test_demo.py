"""The README's first command, `lineage demo`, end to end on the real stack (Spark included), with `--streaming`: the
streaming engines (Kafka Connect → Flink → Spark → SQL) after the batch demo."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage_devtools.stack.config import StackSettings
from tests.integration.conftest import lineage, screenshot

pytestmark = pytest.mark.integration


def test_demo_shows_the_alert_the_impact_and_a_picture(stack_settings: StackSettings, browser: Any) -> None:
    pytest.importorskip("pyflink", reason="the flink extra is not installed (make install installs it)")
    demo = lineage("demo", "--streaming")
    out = demo.stdout
    assert "[BREAKING] file " in out and "orders_cleaned changed by job demo-spark" in out
    assert "TYPE_CHANGED         amount" in out and "double → string" in out
    assert "demo-tasks load_revenue_to_warehouse (depth 2)" in out  # the warehouse load is impacted
    assert "reporting.public.top_countries" in out  # …and the SQL task's table behind it
    channel = out[out.index("what the data team reads in its channel"):]  # the alert router's Slack message
    assert "BREAKING schema change on file/" in channel and "amount: type changed (double → string)" in channel
    assert re.search(r"\[Open the impact\] http://127\.0\.0\.1:\d+/#/lineage\?node=dataset%3Afile%3A", channel), channel
    picture = stack_settings.state_dir / "demo" / "impact.html"
    assert f"picture of the impact:  {picture}" in out and "top_countries" in picture.read_text()
    assert "The stack stays up for exploration" in out
    # the daily partition: not ready before the run that writes it, ready after (what a scheduler asks)
    daily = stack_settings.state_dir / "demo" / "lake" / "daily_revenue"
    day = re.search(rf"\$ lineage ready file {re.escape(str(daily))} --key date=(\S+)", out).group(1)
    before, after = out.index(f"not ready: file {daily} date={day}"), out.index(f"\n  ready: file {daily} date={day}")
    assert before < out.index("(exit 1)") < after < out.index("(exit 0)")
    # the streaming engines: the connector topic's schema change reaches the SQL task behind Flink and Spark
    suffix = re.search(r"Flink job orders-clean-(\w+) is RUNNING", out).group(1)
    assert f"Flink job orders-clean-{suffix} cancelled: its run is ABORT in the graph" in out
    assert re.search(rf"\[\w+\] kafka://\S+ orders\.{suffix} changed by job", out), out[-3000:]
    assert re.search(r"ADDED +channel ", out), out[-3000:]
    assert re.search(rf"impacted jobs: .*warehouse revenue-{suffix} \(depth \d+\)", out), out[-3000:]
    assert f"dataset  file  {stack_settings.state_dir / 'demo' / 'engines' / 'lake' / 'lake.db' / 'orders_clean'}" \
        in out  # Spark's table, on the path from the topic
    # the lineage server stays up beside the stack, its UI showing the impact
    server = f"http://127.0.0.1:{os.environ['LINEAGE_SERVER_PORT']}"  # the test stack's (conftest)
    ui = next(line.split(": ", 1)[1].strip() for line in out.splitlines() if "web UI (lineage serve)" in line)
    assert ui.startswith(f"{server}/#/lineage?node=dataset%3Afile%3A")
    assert requests.get(f"{server}/", timeout=10).status_code == 200
    cleaned = stack_settings.state_dir / "demo" / "lake" / "orders_cleaned"
    graph = requests.get(f"{server}/api/v1/lineage", timeout=30,
                         params={"nodeId": f"dataset:file:{cleaned}", "depth": 3}).json()["graph"]
    assert any(node["id"].endswith("top_countries") for node in graph)
    page = browser.new_page(viewport={"width": 1280, "height": 800})  # the link as the operator opens it
    page.goto(ui)
    page.wait_for_function("Number(document.body.dataset.graphNodes) >= 5", timeout=30_000)
    page.locator("#details h3", has_text="Schema history").wait_for(timeout=30_000)
    screenshot(page, "demo-lineage", readme=True)
    # each view on the demo's data: the change side by side, the daily partitions, the home page's breaking alert
    assert page.locator("#schema-diff tr.diff-changed", has_text="amount").count() == 1
    page.goto(f"{server}/#/lineage?node={quote(f'dataset:file:{daily}', safe='')}&depth=1")
    page.locator("#details svg.partition-grid rect.partition-cell").first.wait_for(timeout=30_000)
    screenshot(page, "demo-partitions")
    page.goto(f"{server}/")
    page.locator("#home-alerts li.change-BREAKING", has_text="orders_cleaned").first.wait_for(timeout=30_000)
    screenshot(page, "demo-home", readme=True)
    # the jobs, one job's runs over time, and the raw events the demo sent
    page.goto(f"{server}/#/jobs?state=COMPLETED")  # a job whose latest run completed: it has runs to draw
    page.locator("table.browse tr td a").first.click(timeout=30_000)
    page.locator("#details .run-timeline svg.timeline rect.run-bar").first.wait_for(timeout=30_000)
    page.goto(f"{server}/#/events")
    page.locator("#events-view ol.raw-events > li").first.wait_for(timeout=30_000)
    page.close()
