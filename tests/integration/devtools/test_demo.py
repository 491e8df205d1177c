"""The README's first command, `lineage demo`, end to end on the real stack (Spark included)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from kafka_lineage_devtools.stack.config import StackSettings
from tests.integration.conftest import lineage, screenshot

pytestmark = pytest.mark.integration


def test_demo_shows_the_alert_the_impact_and_a_picture(stack_settings: StackSettings, browser: Any) -> None:
    demo = lineage("demo")
    out = demo.stdout
    assert "[BREAKING] file " in out and "orders_cleaned changed by job demo-spark" in out
    assert "TYPE_CHANGED         amount" in out and "double → string" in out
    assert "demo-tasks load_revenue_to_warehouse (depth 2)" in out  # the warehouse load is impacted
    assert "reporting.public.top_countries" in out  # …and the SQL task's table behind it
    picture = stack_settings.state_dir / "demo" / "impact.html"
    assert f"picture of the impact:  {picture}" in out and "top_countries" in picture.read_text()
    assert "The stack stays up for exploration" in out
    # the lineage server stays up beside the stack, its UI showing the impact
    ui = next(line.split(": ", 1)[1].strip() for line in out.splitlines() if "web UI (lineage serve)" in line)
    assert ui.startswith("http://127.0.0.1:25050/#/lineage?node=dataset%3Afile%3A")
    assert requests.get("http://127.0.0.1:25050/", timeout=10).status_code == 200
    cleaned = stack_settings.state_dir / "demo" / "lake" / "orders_cleaned"
    graph = requests.get("http://127.0.0.1:25050/api/v1/lineage", timeout=30,
                         params={"nodeId": f"dataset:file:{cleaned}", "depth": 3}).json()["graph"]
    assert any(node["id"].endswith("top_countries") for node in graph)
    page = browser.new_page(viewport={"width": 1280, "height": 800})  # the link as the operator opens it
    page.goto(ui)
    page.wait_for_function("Number(document.body.dataset.graphNodes) >= 5", timeout=30_000)
    page.locator("#details h3", has_text="Schema history").wait_for(timeout=30_000)
    screenshot(page, "demo-lineage", readme=True)
    page.close()
