"""The README's first command, `lineage demo`, end to end on the real stack (Spark included)."""

from __future__ import annotations

import pytest

from kafka_lineage_devtools.stack.config import StackSettings
from tests.integration.conftest import lineage

pytestmark = pytest.mark.integration


def test_demo_shows_the_alert_the_impact_and_a_picture(stack_settings: StackSettings) -> None:
    demo = lineage("demo")
    out = demo.stdout
    assert "[BREAKING] file " in out and "orders_cleaned changed by job demo-spark" in out
    assert "TYPE_CHANGED         amount" in out and "double → string" in out
    assert "demo-tasks load_revenue_to_warehouse (depth 2)" in out  # the warehouse load is impacted
    assert "reporting.public.top_countries" in out  # …and the SQL task's table behind it
    picture = stack_settings.state_dir / "demo" / "impact.html"
    assert f"picture of the impact:  {picture}" in out and "top_countries" in picture.read_text()
    assert "The stack stays up for exploration" in out
