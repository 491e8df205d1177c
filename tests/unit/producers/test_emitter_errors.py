"""Issue 16 item 4: a failure on one event is that event's error in every emitter; the others go on.

The real stack versions (collector answers, the transport, `lineage emit`) are in tests/integration/test_bad_input.py;
here the emitters' own handling runs with a publisher that fails on one event in a way nothing anticipates.
"""

from __future__ import annotations

import json

import pytest

from kafka_lineage.producers.client.publisher import PublishError
from kafka_lineage.producers.service.backfill import backfill
from kafka_lineage.producers.service.collector import Collector, Rejection
from kafka_lineage.runtime.config import CollectorSettings
from tests.unit.producers.test_collector_pure import FakePublisher


class FailingPublisher(FakePublisher):
    """``{"boom": …}`` raises an unexpected error, ``{"down": …}`` a registry outage; the rest as FakePublisher."""

    def encode(self, event: object) -> tuple[bytes, bytes]:
        if isinstance(event, dict) and "boom" in event:
            raise AttributeError("'int' object has no attribute 'get'")
        if isinstance(event, dict) and "down" in event:
            raise PublishError("schema registry unavailable")
        return super().encode(event)


def test_emit_reports_the_failing_line_and_publishes_the_others() -> None:
    lines = [b'{"n": 1}\n', b'{"boom": 1}\n', b'{"n": 2}\n', b'{"down": 1}\n', b'{"n": 3}\n']
    publisher = FailingPublisher()
    report = backfill(lines, publisher)  # type: ignore[arg-type]
    assert report.published == 3 and [json.loads(v)["n"] for v in publisher.sent] == [1, 2, 3]
    assert report.problems[0].startswith("line 2: cannot be encoded (AttributeError:")
    assert report.problems[1].startswith("line 4: not published: schema registry unavailable")
    assert len(report.problems) == 2 and not report.ok


def test_collector_answers_400_naming_the_event_and_not_500() -> None:
    collector = Collector(FailingPublisher(), CollectorSettings())  # type: ignore[arg-type]
    assert len(collector._encode_all([{"n": 1}, {"n": 2}])) == 2
    with pytest.raises(Rejection) as caught:
        collector._encode_all([{"n": 1}, {"boom": 1}, {"n": 2}])
    assert caught.value.status == 400
    assert caught.value.errors == ({"index": 1, "error": "event: cannot be encoded (AttributeError: 'int' object "
                                                         "has no attribute 'get')"},)
    with pytest.raises(Rejection) as caught:  # a registry outage stays a "retry later"
        collector._encode_all([{"n": 1}, {"down": 1}])
    assert caught.value.status == 503
