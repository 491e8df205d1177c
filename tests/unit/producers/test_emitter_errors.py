"""Issue 16 item 4: a failure on one event is that event's error in every emitter; the others go on.

The real stack versions (collector answers, the transport, `lineage emit`) are in tests/integration/test_bad_input.py;
here the emitters' own handling runs with a publisher that fails on one event in a way nothing anticipates.
"""

from __future__ import annotations

import json

import pytest

from kafka_lineage.producers.client.publisher import PublishError
from kafka_lineage.producers.service.collector import Collector, Rejection, batch_answer
from kafka_lineage.producers.service.emit import emit_lines
from kafka_lineage.producers.service.settings import CollectorSettings
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
    report = emit_lines(lines, publisher)  # type: ignore[arg-type]
    assert report.published == 3 and [json.loads(v)["n"] for v in publisher.sent] == [1, 2, 3]
    assert report.problems[0].startswith("line 2: cannot be encoded (AttributeError:")
    assert report.problems[1].startswith("line 4: not published: schema registry unavailable")
    assert len(report.problems) == 2 and not report.ok


def _body(*events: dict) -> bytes:
    return json.dumps(list(events)).encode()


def test_collector_answers_400_naming_the_event_and_not_500() -> None:
    collector = Collector(FailingPublisher(), CollectorSettings())  # type: ignore[arg-type]
    assert len(collector._decode_and_encode(_body({"n": 1}, {"n": 2}), None)[1]) == 2
    with pytest.raises(Rejection) as caught:
        collector._decode_and_encode(_body({"n": 1}, {"boom": 1}, {"n": 2}), None)
    assert caught.value.status == 400
    assert caught.value.errors == ({"index": 1, "error": "event: cannot be encoded (AttributeError: 'int' object "
                                                         "has no attribute 'get')"},)
    with pytest.raises(Rejection) as caught:  # a registry outage stays a "retry later"
        collector._decode_and_encode(_body({"n": 1}, {"down": 1}), None)
    assert caught.value.status == 503


def test_the_batch_endpoint_publishes_the_valid_events_and_names_the_others() -> None:
    collector = Collector(FailingPublisher(), CollectorSettings())  # type: ignore[arg-type]
    events, records, failed = collector._decode_and_encode(_body({"n": 1}, {"boom": 1}, {"n": 2}), None, batch=True)
    assert len(events) == 3 and len(records) == 2 and [f["index"] for f in failed] == [1]
    answer = batch_answer(len(events), failed)
    assert answer == {"status": "partial_success",
                      "summary": {"received": 3, "successful": 2, "failed": 1, "retriable": 0, "non_retriable": 1},
                      "failed_events": [{"index": 1, "reason": failed[0]["reason"], "retriable": False}]}
    assert batch_answer(2, []) == {"status": "success", "failed_events": [], "summary": {
        "received": 2, "successful": 2, "failed": 0, "retriable": 0, "non_retriable": 0}}
    with pytest.raises(Rejection) as caught:  # the spec's batch is an array
        collector._decode_and_encode(b'{"n": 1}', None, batch=True)
    assert caught.value.status == 400 and "array" in caught.value.reason
    with pytest.raises(Rejection) as caught:  # an outage: nothing of the batch was accepted, retry all of it
        collector._decode_and_encode(_body({"n": 1}, {"down": 1}), None, batch=True)
    assert caught.value.status == 503
