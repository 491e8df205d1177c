"""The integration tests' destination receivers: their validators, answers, and failure modes (no Kafka needed)."""

from __future__ import annotations

import copy
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.sinks.receivers import (
    Receiver,
    validate_alertmanager,
    validate_slack,
    validate_teams,
    validate_webhook,
    webhook_signature,
)

SECRET = b"s3cret"

SLACK_OK: dict[str, Any] = {
    "text": "Schema drift: s3://lake/orders (BREAKING)",
    "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "Schema drift: orders", "emoji": True}},
        {"type": "section", "block_id": "summary", "text": {"type": "mrkdwn", "text": "*id*: bigint → string"},
         "accessory": {"type": "button", "text": {"type": "plain_text", "text": "Open"},
                       "url": "http://lineage.local/datasets/orders", "action_id": "open", "style": "primary"}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "*Severity*\nBREAKING"},
                                       {"type": "plain_text", "text": "3 downstream jobs"}]},
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "alert a1b2", "verbatim": True},
                                         {"type": "image", "image_url": "http://x/i.png", "alt_text": "icon"}]},
        {"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Graph"}, "url": "http://x/g", "action_id": "g"},
            {"type": "button", "text": {"type": "plain_text", "text": "Mute"}, "value": "mute", "action_id": "m",
             "style": "danger"}]},
    ],
}

CARD: dict[str, Any] = {
    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
    "body": [
        {"type": "TextBlock", "text": "Schema drift: orders", "weight": "Bolder", "wrap": True},
        {"type": "FactSet", "facts": [{"title": "Severity", "value": "BREAKING"}, {"title": "Field", "value": "id"}]},
        {"type": "Container", "items": [{"type": "TextBlock", "text": "3 downstream jobs"}]},
        {"type": "ColumnSet", "columns": [{"type": "Column", "width": "auto",
                                           "items": [{"type": "TextBlock", "text": "left"}]}]},
    ],
    "actions": [{"type": "Action.OpenUrl", "title": "Open", "url": "http://lineage.local/datasets/orders"},
                {"type": "Action.ShowCard", "title": "More",
                 "card": {"type": "AdaptiveCard", "body": [{"type": "TextBlock", "text": "details"}]}}],
    "msteams": {"width": "Full"},
}
TEAMS_OK: dict[str, Any] = {
    "type": "message",
    "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": CARD}],
}

ALERTS_OK: list[dict[str, Any]] = [{
    "labels": {"alertname": "SchemaDrift", "dataset": "orders", "severity": "critical"},
    "annotations": {"summary": "id: bigint -> string"},
    "startsAt": "2024-05-01T12:00:00.123456789Z", "endsAt": "2024-05-01T15:00:00+02:00",
    "generatorURL": "http://lineage.local/alerts/a1b2",
}]


def post(url: str, payload: Any = None, *, data: bytes | None = None, headers: dict[str, str] | None = None,
         method: str = "POST", timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    body = data if data is not None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def signed(body: bytes, *, secret: bytes = SECRET, at: int | None = None) -> dict[str, str]:
    timestamp = str(int(time.time()) if at is None else at)
    return {"X-Lineage-Timestamp": timestamp, "X-Lineage-Signature": webhook_signature(secret, timestamp, body),
            "X-Lineage-Delivery": "d-1"}


def changed(doc: Any, path: str, value: Any) -> Any:
    """A deep copy of ``doc`` with the item at ``path`` ("blocks.0.text", "-" drops the key) set to ``value``."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key = int(last) if isinstance(node, list) else last
    if value == "-":
        del node[key]
    else:
        node[key] = value
    return doc


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.close()


# --- webhook ------------------------------------------------------------------------------------------------------


def test_a_signed_webhook_delivery_is_accepted_and_recorded(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("webhook", secret=SECRET))
    body = json.dumps({"alertId": "a1"}).encode()
    status, _, out = post(r.url, data=body, headers=signed(body))
    assert (status, out) == (204, b"")
    [got] = r.accepted()
    assert r.url.endswith("/hook") and got.path == "/hook" and got.method == "POST"
    assert got.json == {"alertId": "a1"} and got.body == body and got.problems == [] and got.status == 204
    assert got.headers["x-lineage-delivery"] == got.headers["X-Lineage-Delivery"] == "d-1"


@pytest.mark.parametrize(("headers", "problem"), [
    ({"X-Lineage-Signature": "v1=" + "0" * 64}, "X-Lineage-Signature: does not match"),
    ({"X-Lineage-Signature": ""}, "X-Lineage-Signature: missing"),
    ({"X-Lineage-Timestamp": "1.5"}, "X-Lineage-Timestamp: unix seconds"),
    ({"X-Lineage-Delivery": " "}, "X-Lineage-Delivery: a non-empty idempotency key"),
    ({"Content-Type": "text/plain"}, "Content-Type: must be application/json"),
])
def test_webhook_signature_and_header_problems_are_rejected_with_400(
        receivers: list[Receiver], headers: dict[str, str], problem: str) -> None:
    receivers.append(r := Receiver("webhook", secret=SECRET))
    body = b'{"alertId": "a1"}'
    status, _, out = post(r.url, data=body, headers={**signed(body), **headers})
    assert status == 400 and any(p.startswith(problem) for p in json.loads(out)["problems"])
    assert r.accepted() == [] and any(p.startswith(problem) for p in r.received[0].problems)


def test_webhook_validator_checks_the_signature_over_the_exact_bytes_and_its_age() -> None:
    body = b'{"a": 1}'
    assert validate_webhook(signed(body), body, {"a": 1}, SECRET) == []
    assert validate_webhook(signed(body), body + b" ", {"a": 1}, SECRET)  # re-serialised body: other bytes
    assert validate_webhook(signed(body, secret=b"other"), body, {"a": 1}, SECRET)
    stale = signed(body, at=1_700_000_000)
    assert validate_webhook(stale, body, {"a": 1}, SECRET, now=1_700_000_301)[0].startswith(
        "X-Lineage-Timestamp: 301 s away")
    assert validate_webhook(stale, body, {"a": 1}, SECRET, now=1_700_000_300) == []
    assert validate_webhook(stale, body, {"a": 1}, SECRET, max_age=None) == []
    assert validate_webhook({"X-Lineage-Delivery": "d"}, b"[1]", [1], None) == ["body: must be a JSON object"]


# --- Slack --------------------------------------------------------------------------------------------------------


def test_a_valid_block_kit_message_gets_slacks_200_ok(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("slack"))
    assert validate_slack(SLACK_OK) == []
    status, headers, out = post(r.url, SLACK_OK)
    assert (status, out) == (200, b"ok") and headers["Content-Type"] == "text/plain"
    assert r.url.endswith("/services/T0/B0/XXXX") and r.wait_for(1, timeout=1)[0].json == SLACK_OK


@pytest.mark.parametrize(("path", "value", "problem"), [
    ("text", "", "text: a non-empty fallback"),
    ("blocks", {"type": "divider"}, "blocks: an array"),
    ("blocks", [{"type": "divider"}] * 51, "blocks: 51 blocks, at most 50"),
    ("blocks.0.text.text", "h" * 151, "blocks[0].text.text: 151 characters, at most 150"),
    ("blocks.0.text.type", "mrkdwn", "blocks[0].text.type: must be plain_text"),
    ("blocks.1.text.text", "s" * 3001, "blocks[1].text.text: 3001 characters, at most 3000"),
    ("blocks.1.text.text", "", "blocks[1].text.text: a string of 1 to 3000"),
    ("blocks.1.text.emoji", True, "blocks[1].text: unknown field(s) ['emoji']"),
    ("blocks.1.text.verbatim", "yes", "blocks[1].text.verbatim: must be a boolean"),
    ("blocks.1.block_id", "b" * 256, "blocks[1].block_id: 256 characters"),
    ("blocks.2.block_id", "summary", "blocks[2].block_id: 'summary' is not unique"),
    ("blocks.2.fields", [{"type": "plain_text", "text": "f"}] * 11, "blocks[2].fields: an array of 1 to 10"),
    ("blocks.2.fields.0.text", "f" * 2001, "blocks[2].fields[0].text: 2001 characters, at most 2000"),
    ("blocks.2.fields", "-", "blocks[2]: text or fields is required"),
    ("blocks.3.type", "tabel", "blocks[3].type: unknown block type 'tabel'"),
    ("blocks.3.text", "x", "blocks[3]: unknown field(s) ['text']"),
    ("blocks.4.elements", [{"type": "mrkdwn", "text": "c"}] * 11, "blocks[4].elements: an array of 1 to 10"),
    ("blocks.4.elements.1.alt_text", "-", "blocks[4].elements[1].alt_text: a string of 1 to 2000"),
    ("blocks.5.elements", [{"type": "button", "text": {"type": "plain_text", "text": "b"}}] * 26,
     "blocks[5].elements: an array of 1 to 25"),
    ("blocks.5.elements.0.text.text", "b" * 76, "blocks[5].elements[0].text.text: 76 characters, at most 75"),
    ("blocks.5.elements.0.url", "http://x/" + "u" * 2992, "blocks[5].elements[0].url: 3001 characters"),
    ("blocks.5.elements.0.action_id", "a" * 256, "blocks[5].elements[0].action_id: 256 characters"),
    ("blocks.5.elements.1.action_id", "g", "blocks[5].elements[1].action_id: 'g' is not unique in its block"),
    ("blocks.5.elements.1.style", "secondary", "blocks[5].elements[1].style: must be primary or danger"),
    ("blocks.5.elements.0.type", "static_select", "blocks[5].elements[0]: an actions element"),
])
def test_slack_format_violations_are_found(path: str, value: Any, problem: str) -> None:
    problems = validate_slack(changed(SLACK_OK, path, value))
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(("payload", "code"), [
    (changed(SLACK_OK, "blocks.0.text.text", "h" * 151), b"invalid_blocks"),
    (changed(SLACK_OK, "text", "-"), b"no_text"),
    ([SLACK_OK], b"invalid_payload"),
])
def test_slack_rejects_as_slack_does(receivers: list[Receiver], payload: Any, code: bytes) -> None:
    receivers.append(r := Receiver("slack"))
    assert post(r.url, payload)[::2] == (400, code)
    assert post(r.url, data=b"text=hi", headers={"Content-Type": "application/x-www-form-urlencoded"})[::2] == (
        400, b"invalid_payload")
    assert r.accepted() == [] and all(x.problems for x in r.received)


def test_slack_answers_a_wrong_path_404_and_a_get_405(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("slack"))
    base = r.url.removesuffix("/services/T0/B0/XXXX")
    assert post(base + "/services/T0/B0/YYYY", SLACK_OK)[::2] == (404, b"no_service")
    status, headers, _ = post(r.url, method="GET", data=b"")
    assert status == 405 and headers["Allow"] == "POST"
    assert [x.problems[0].split(":")[0] for x in r.received] == ["path", "method"]


# --- Teams --------------------------------------------------------------------------------------------------------


def test_a_valid_adaptive_card_message_gets_teams_202(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("teams"))
    assert validate_teams(TEAMS_OK) == []
    assert post(r.url, TEAMS_OK)[::2] == (202, b"")
    assert r.url.endswith("/workflows/teams") and len(r.wait_for(1, timeout=1)) == 1


@pytest.mark.parametrize(("path", "value", "problem"), [
    ("type", "MessageCard", "type: must be 'message'"),
    ("attachments", [], "attachments: a non-empty array"),
    ("attachments.0.contentType", "application/vnd.microsoft.card.hero", "attachments[0].contentType: must be"),
    ("attachments.0.content.type", "Card", "attachments[0].content.type: must be 'AdaptiveCard'"),
    ("attachments.0.content.version", "1.6", "attachments[0].content.version: 1.6 is above 1.5"),
    ("attachments.0.content.version", 1.4, "attachments[0].content.version: a version string"),
    ("attachments.0.content.version", "-", "attachments[0].content.version: a version string"),
    ("attachments.0.content.body", "-", "attachments[0].content.body: an array of elements"),
    ("attachments.0.content.body.0.text", "-", "attachments[0].content.body[0].text: required"),
    ("attachments.0.content.body.0.text", 7, "attachments[0].content.body[0].text: must be a string"),
    ("attachments.0.content.body.1.facts.0.value", 3, "attachments[0].content.body[1].facts[0]: title and value"),
    ("attachments.0.content.body.2.items", "-", "attachments[0].content.body[2].items: required"),
    ("attachments.0.content.body.2.items.0.type", "Input.Text", "attachments[0].content.body[2].items[0].type"),
    ("attachments.0.content.body.3.columns.0.type", "Container", "attachments[0].content.body[3].columns[0]"),
    ("attachments.0.content.body.3.columns.0.items.0", {"type": "TextBlock"},
     "attachments[0].content.body[3].columns[0].items[0].text: required"),
    ("attachments.0.content.actions.0.url", "-", "attachments[0].content.actions[0].url: a non-empty string"),
    ("attachments.0.content.actions.0.title", "", "attachments[0].content.actions[0].title: a non-empty string"),
    ("attachments.0.content.actions.0.type", "Action.Submit", "attachments[0].content.actions[0].type"),
    ("attachments.0.content.actions.1.card.body", [{"type": "Nope"}],
     "attachments[0].content.actions[1].card.body[0].type: unknown"),
])
def test_teams_format_violations_are_found(path: str, value: Any, problem: str) -> None:
    problems = validate_teams(changed(TEAMS_OK, path, value))
    assert any(p.startswith(problem) for p in problems), problems


def test_teams_rejects_an_invalid_card_400_and_an_oversized_message_413(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("teams"))
    status, _, out = post(r.url, changed(TEAMS_OK, "attachments.0.content.version", "1.6"))
    assert status == 400 and "1.6 is above 1.5" in json.loads(out)["error"]["message"]
    big = changed(TEAMS_OK, "attachments.0.content.body.0.text", "x" * 28 * 1024)
    assert post(r.url, big)[0] == 413
    r.teams_max_version = (1, 4)  # what Workflows' flow bot renders in practice
    assert post(r.url, changed(TEAMS_OK, "attachments.0.content.version", "1.5"))[0] == 400
    assert r.accepted() == [] and len(r.received) == 3


# --- Alertmanager -------------------------------------------------------------------------------------------------


def test_alertmanager_accepts_postable_alerts_with_an_empty_200(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("alertmanager"))
    assert validate_alertmanager(ALERTS_OK) == [] and validate_alertmanager([]) == []
    status, headers, out = post(r.url + "/api/v2/alerts", ALERTS_OK)
    assert (status, out) == (200, b"") and "Content-Type" not in headers
    assert r.url.count("/") == 2 and r.wait_for(1, timeout=1)[0].path == "/api/v2/alerts"


@pytest.mark.parametrize(("alert", "status", "problem"), [
    ({"annotations": {"a": "b"}}, 422, "[0].labels: required"),
    ({"labels": {"alertname": "A", "bad-name": "x"}}, 400, "[0].labels: invalid name 'bad-name'"),
    ({"labels": {"alertname": ""}}, 400, "[0].labels: at least one label pair required"),
    ({"labels": {"dataset": "orders"}}, 400, "[0].labels: alertname is required"),
    ({"labels": {"alertname": 1}}, 400, "[0].labels: must be an object of string values"),
    ({"labels": {"alertname": "A"}, "annotations": {"1x": "y"}}, 400, "[0].annotations: invalid name '1x'"),
    ({"labels": {"alertname": "A"}, "startsAt": "2024-05-01 12:00:00Z"}, 400, "[0].startsAt: an RFC3339"),
    ({"labels": {"alertname": "A"}, "startsAt": "2024-05-02T00:00:00Z", "endsAt": "2024-05-01T00:00:00Z"}, 400,
     "[0]: start time must be before end time"),
    ({"labels": {"alertname": "A"}, "generatorURL": "not a uri"}, 422, "[0].generatorURL: must be of type uri"),
    ({"labels": {"alertname": "A"}, "generatorUrl": "http://x"}, 400, "[0]: unknown field(s) ['generatorUrl']"),
    (None, 400, "[0]: must be an alert object"),
])
def test_alertmanager_rejects_as_alertmanager_does(
        receivers: list[Receiver], alert: Any, status: int, problem: str) -> None:
    receivers.append(r := Receiver("alertmanager"))
    got, headers, out = post(r.url + "/api/v2/alerts", [alert])
    assert got == status and headers["Content-Type"] == "application/json" and json.loads(out)
    assert any(p.startswith(problem) for p in r.received[0].problems), r.received[0].problems


def test_alertmanager_answers_path_method_and_media_type_errors(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("alertmanager"))
    assert post(r.url + "/api/v2/alert", ALERTS_OK)[0] == 404
    assert post(r.url + "/api/v2/alerts", method="PUT", data=b"[]")[0] == 405
    assert post(r.url + "/api/v2/alerts", data=b"[]", headers={"Content-Type": "text/plain"})[0] == 415
    assert post(r.url + "/api/v2/alerts", {"labels": {"alertname": "A"}})[0] == 400  # not an array
    assert post(r.url + "/api/v2/alerts", data=b"[{")[0] == 400
    assert post(r.url + "/api/v2/alerts", data=b"")[0] == 422  # as v0.32.1: "alerts in body is required"
    assert r.accepted() == [] and all(x.problems for x in r.received)


# --- failure modes ------------------------------------------------------------------------------------------------


def test_fail_answers_the_next_requests_with_the_status_and_retry_after(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("slack"))
    r.fail(503, times=2, retry_after=1.5, body="busy")
    answers = [post(r.url, SLACK_OK) for _ in range(3)]
    assert [(s, h.get("Retry-After"), b) for s, h, b in answers] == [
        (503, "1.5", b"busy"), (503, "1.5", b"busy"), (200, None, b"ok")]
    r.fail(429, retry_after=2)  # times=None: until ok()
    assert [(s, h["Retry-After"]) for s, h, _ in (post(r.url, SLACK_OK) for _ in range(2))] == [(429, "2")] * 2
    r.ok()
    assert post(r.url, SLACK_OK)[0] == 200
    assert [x.status for x in r.received] == [503, 503, 200, 429, 429, 200] and len(r.accepted()) == 2


def test_down_refuses_connections_and_up_reopens_the_same_url(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("teams"))
    assert post(r.url, TEAMS_OK)[0] == 202
    url = r.url
    r.down()
    with pytest.raises(urllib.error.URLError) as refused:
        post(r.url, TEAMS_OK)
    assert isinstance(refused.value.reason, ConnectionRefusedError)
    with socket.socket() as other, pytest.raises(OSError):  # the port stays bound meanwhile
        other.bind(("127.0.0.1", int(url.split(":")[2].split("/")[0])))
    r.up()
    assert r.url == url and post(r.url, TEAMS_OK)[0] == 202 and len(r.accepted()) == 2


def test_hold_delays_answers_so_clients_time_out(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("webhook"))
    r.hold(0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post(r.url, {"a": 1}, headers={"X-Lineage-Delivery": "d"}, timeout=0.1)
    assert r.received[0].status == 0  # still held
    assert r.wait_for(1, timeout=2)[0].status == 204 and time.monotonic() - started >= 0.5
    r.hold(0)
    assert post(r.url, {"a": 1}, headers={"X-Lineage-Delivery": "d"}, timeout=0.5)[0] == 204


def test_wait_for_fails_with_what_arrived(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("slack"))
    post(r.url, changed(SLACK_OK, "blocks.0.text.text", "h" * 151))
    with pytest.raises(AssertionError, match=r"0 of 1 accepted .*\n.*-> 400 .*150"):
        r.wait_for(1, timeout=0.2)


def test_concurrent_and_chunked_deliveries_are_all_recorded(receivers: list[Receiver]) -> None:
    receivers.append(r := Receiver("alertmanager"))
    threads = [threading.Thread(target=post, args=(r.url + "/api/v2/alerts", ALERTS_OK)) for _ in range(20)]
    for t in threads:
        t.start()
    assert len(r.wait_for(20, timeout=5)) == 20
    host, port = r.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    connection.request("POST", "/api/v2/alerts", body=iter([json.dumps(ALERTS_OK).encode()]),
                       headers={"Content-Type": "application/json"}, encode_chunked=True)
    assert connection.getresponse().status == 200 and r.received[-1].json == ALERTS_OK
    for t in threads:
        t.join()


def test_receiver_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="only the webhook"):
        Receiver("slack", secret=SECRET)
    with pytest.raises(ValueError, match="unknown receiver kind"):
        Receiver("pagerduty")  # type: ignore[arg-type]
    with Receiver("webhook") as r:
        assert post(r.url, {"a": 1})[0] == 400  # no X-Lineage-Delivery
    assert r.received[0].problems == ["X-Lineage-Delivery: a non-empty idempotency key is required"]
