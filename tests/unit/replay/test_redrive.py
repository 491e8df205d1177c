"""Which dead letters a redrive selects."""

from __future__ import annotations

from datetime import UTC, datetime

from kafka_lineage.replay.redrive import selected


def test_a_redrive_selects_by_reason_and_failure_time() -> None:
    letter = {"errorClass": "neo4j-rejected", "failedAt": datetime(2025, 12, 24, 10, tzinfo=UTC)}
    assert selected(letter, None, None, None)
    assert selected(letter, "neo4j-rejected", datetime(2025, 12, 24, 10, tzinfo=UTC), None)  # from: inclusive
    assert not selected(letter, "invalid-event", None, None)
    assert not selected(letter, None, datetime(2025, 12, 24, 11, tzinfo=UTC), None)
    assert not selected(letter, None, None, datetime(2025, 12, 24, 10, tzinfo=UTC))  # to: exclusive
