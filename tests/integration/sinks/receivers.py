"""Local HTTP receivers standing in for the alert router's destinations in integration tests.

A ``Receiver`` is a threaded HTTP server on 127.0.0.1 for one destination kind: a signed JSON webhook, a Slack
incoming webhook, a Teams Workflows webhook, or Alertmanager's v2 API. Every request is validated against that
tool's documented payload format, recorded (``received``) with the problems found, and answered as the real tool
answers: its success status, or its rejection of an invalid payload. Tests can also make it fail with a status
(and Retry-After), go down (connections refused on the same port), or hold each answer (client timeouts).

The validators are plain functions (``validate_webhook``, ``validate_slack``, ``validate_teams``,
``validate_alertmanager``) returning a list of problems, so tests can also check a payload without a server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

Kind = Literal["webhook", "slack", "teams", "alertmanager"]

PATHS: dict[str, str] = {
    "webhook": "/hook",
    "slack": "/services/T0/B0/XXXX",
    "teams": "/workflows/teams",
    "alertmanager": "/api/v2/alerts",
}
# What each tool answers a valid delivery: Slack 200 "ok"; a Teams Workflows trigger 202 with no body;
# Alertmanager 200 with no body (its go-swagger responder removes the Content-Type); our webhook 204.
SUCCESS: dict[str, int] = {"webhook": 204, "slack": 200, "teams": 202, "alertmanager": 200}

Reply = tuple[int, dict[str, str], bytes]  # status, headers, body


class Headers(dict[str, str]):
    """Request headers; names compare case-insensitively, as in HTTP (stored lower-cased)."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__((name.lower(), value) for name, value in items)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass
class Received:
    """One request as it arrived, what it was answered, and the format problems found in it."""

    path: str  # as requested, query string included
    headers: dict[str, str]  # a Headers: names case-insensitive
    body: bytes
    json: Any  # the parsed body, None when it was not JSON
    at: float  # time.monotonic() at arrival
    status: int  # the status answered; 0 while the answer is held
    problems: list[str] = field(default_factory=list)  # format violations (empty = valid)
    method: str = "POST"


# --- generic JSON webhook (our own format: HMAC-signed, idempotency key) ------------------------------------------

SIGNATURE_MAX_AGE = 300.0  # seconds a signature's timestamp may be away from now (replay window, as Slack/Stripe)


def webhook_signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """``v1=`` + hex(HMAC-SHA256(secret, timestamp + b"." + body)): what the router must send as X-Lineage-Signature."""
    return "v1=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def validate_webhook(
    headers: Mapping[str, str],
    body: bytes,
    payload: Any,
    secret: bytes | None,
    *,
    now: float | None = None,
    max_age: float | None = SIGNATURE_MAX_AGE,
) -> list[str]:
    """The router's own contract: a JSON object, an X-Lineage-Delivery idempotency key, and when a secret is shared
    X-Lineage-Timestamp (unix seconds) with X-Lineage-Signature over timestamp + "." + body."""
    h = Headers(headers.items())
    problems = [] if isinstance(payload, dict) else ["body: must be a JSON object"]
    if not (h.get("X-Lineage-Delivery") or "").strip():
        problems.append("X-Lineage-Delivery: a non-empty idempotency key is required")
    if secret is None:
        return problems
    timestamp = h.get("X-Lineage-Timestamp") or ""
    if not re.fullmatch(r"[0-9]+", timestamp):
        return [*problems, f"X-Lineage-Timestamp: unix seconds as an integer string required, got {timestamp!r}"]
    skew = abs((time.time() if now is None else now) - int(timestamp))
    if max_age is not None and skew > max_age:
        problems.append(f"X-Lineage-Timestamp: {skew:.0f} s away from now (at most {max_age:.0f}): stale or replayed")
    signature = h.get("X-Lineage-Signature")
    if not signature:
        problems.append("X-Lineage-Signature: missing")
    elif not hmac.compare_digest(signature, webhook_signature(secret, timestamp, body)):
        problems.append("X-Lineage-Signature: does not match v1=hex(HMAC-SHA256(secret, timestamp + '.' + body))")
    return problems


# --- Slack incoming webhook, Block Kit ----------------------------------------------------------------------------
# https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks (errors: invalid_payload, no_text, ...)
# https://api.slack.com/reference/block-kit/blocks ("up to 50 blocks in each message"; actions ≤25 elements)
# https://docs.slack.dev/reference/block-kit/blocks/{header,section,context,divider,actions}-block
# https://docs.slack.dev/reference/block-kit/composition-objects/text-object (1..3000 chars; emoji: plain_text only,
#   verbatim: mrkdwn only)
# https://docs.slack.dev/reference/block-kit/block-elements/{button,image}-element

_SLACK_BLOCK_FIELDS: dict[str, set[str]] = {
    "header": {"text"},
    "section": {"text", "fields", "accessory", "expand"},
    "context": {"elements"},
    "divider": set(),
    "actions": {"elements"},
}
_TEXT_FIELDS = {"plain_text": {"type", "text", "emoji"}, "mrkdwn": {"type", "text", "verbatim"}}
_BUTTON_FIELDS = {"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"}


def _unknown_fields(path: str, obj: Mapping[str, Any], allowed: set[str]) -> list[str]:
    extra = sorted(set(obj) - allowed)
    return [f"{path}: unknown field(s) {extra}"] if extra else []


def _string(path: str, value: Any, limit: int, *, required: bool = True) -> list[str]:
    if value is None and not required:
        return []
    if not isinstance(value, str) or not value:
        return [f"{path}: a string of 1 to {limit} characters is required"]
    return [f"{path}: {len(value)} characters, at most {limit}"] if len(value) > limit else []


def _slack_text(path: str, obj: Any, limit: int = 3000, *, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{path}: a text object is required"]
    kind = obj.get("type")
    if kind not in _TEXT_FIELDS or (plain_only and kind != "plain_text"):
        return [f"{path}.type: must be {'plain_text' if plain_only else 'plain_text or mrkdwn'}, got {kind!r}"]
    problems = _unknown_fields(path, obj, _TEXT_FIELDS[kind]) + _string(f"{path}.text", obj.get("text"), limit)
    return problems + [f"{path}.{k}: must be a boolean" for k in ("emoji", "verbatim") if k in obj and not
                       isinstance(obj[k], bool)]


def _slack_element(path: str, el: Any, action_ids: set[str]) -> list[str]:
    if not isinstance(el, dict):
        return [f"{path}: must be an object"]
    if el.get("type") == "image":
        problems = _unknown_fields(path, el, {"type", "image_url", "slack_file", "alt_text"})
        if ("image_url" in el) == ("slack_file" in el):
            problems.append(f"{path}: exactly one of image_url or slack_file is required")
        return problems + _string(f"{path}.image_url", el.get("image_url"), 3000, required=False) + _string(
            f"{path}.alt_text", el.get("alt_text"), 2000)
    if el.get("type") != "button":
        return [f"{path}.type: {el.get('type')!r} is not an element the harness validates (button, image)"]
    problems = _unknown_fields(path, el, _BUTTON_FIELDS) + _slack_text(f"{path}.text", el.get("text"), 75,
                                                                       plain_only=True)
    problems += _string(f"{path}.url", el.get("url"), 3000, required=False)
    problems += _string(f"{path}.value", el.get("value"), 2000, required=False)
    problems += _string(f"{path}.accessibility_label", el.get("accessibility_label"), 75, required=False)
    if "style" in el and el["style"] not in ("primary", "danger"):
        problems.append(f"{path}.style: must be primary or danger (omit it for the default), got {el['style']!r}")
    action_id = el.get("action_id")
    if action_id is not None:
        problems += _string(f"{path}.action_id", action_id, 255)
        if action_id in action_ids:  # the docs: unique among the action_ids of the containing block
            problems.append(f"{path}.action_id: {action_id!r} is not unique in its block")
        action_ids.add(action_id)
    return problems


def _slack_block(path: str, block: Any, block_ids: set[str]) -> list[str]:
    if not isinstance(block, dict):
        return [f"{path}: must be an object"]
    kind = block.get("type")
    if kind not in _SLACK_BLOCK_FIELDS:
        return [f"{path}.type: unknown block type {kind!r} (validated: {sorted(_SLACK_BLOCK_FIELDS)})"]
    problems = _unknown_fields(path, block, _SLACK_BLOCK_FIELDS[kind] | {"type", "block_id"})
    block_id = block.get("block_id")
    if block_id is not None:
        problems += _string(f"{path}.block_id", block_id, 255)
        if block_id in block_ids:
            problems.append(f"{path}.block_id: {block_id!r} is not unique in the message")
        block_ids.add(block_id)
    action_ids: set[str] = set()
    if kind == "header":
        problems += _slack_text(f"{path}.text", block.get("text"), 150, plain_only=True)
    elif kind == "section":
        if "text" not in block and "fields" not in block:
            problems.append(f"{path}: text or fields is required")
        if "text" in block:
            problems += _slack_text(f"{path}.text", block["text"])
        if "fields" in block:
            fields = block["fields"]
            if not isinstance(fields, list) or not 1 <= len(fields) <= 10:
                problems.append(f"{path}.fields: an array of 1 to 10 text objects is required")
            else:
                for i, item in enumerate(fields):
                    problems += _slack_text(f"{path}.fields[{i}]", item, 2000)
        if "accessory" in block:
            problems += _slack_element(f"{path}.accessory", block["accessory"], action_ids)
        if "expand" in block and not isinstance(block["expand"], bool):
            problems.append(f"{path}.expand: must be a boolean")
    elif kind in ("context", "actions"):
        most = 10 if kind == "context" else 25
        elements = block.get("elements")
        if not isinstance(elements, list) or not 1 <= len(elements) <= most:
            return [*problems, f"{path}.elements: an array of 1 to {most} elements is required"]
        for i, el in enumerate(elements):
            at = f"{path}.elements[{i}]"
            if kind == "context" and not (isinstance(el, dict) and el.get("type") == "image"):
                problems += _slack_text(at, el)  # context: text objects and image elements only
            elif kind == "context" or (isinstance(el, dict) and el.get("type") == "button"):
                problems += _slack_element(at, el, action_ids)
            else:
                problems.append(f"{at}: an actions element the harness validates (button) is required")
    return problems


def validate_slack(payload: Any) -> list[str]:
    """A Slack incoming-webhook message with Block Kit blocks. Problems name their JSON path (``text``,
    ``blocks[2].fields[0].text``...), which the receiver maps to Slack's error codes."""
    if not isinstance(payload, dict):
        return ["payload: must be a JSON object"]
    problems = []
    if not isinstance(payload.get("text"), str) or not payload["text"].strip():
        # Slack accepts blocks without text but then has nothing for notifications and screen readers: the router
        # must always send the fallback.
        problems.append("text: a non-empty fallback string is required")
    blocks = payload.get("blocks")
    if not isinstance(blocks, list):
        return [*problems, "blocks: an array is required"]
    if len(blocks) > 50:
        problems.append(f"blocks: {len(blocks)} blocks, at most 50 in a message")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        problems += _slack_block(f"blocks[{i}]", block, block_ids)
    return problems


def _slack_rejection(problems: list[str]) -> Reply:
    code = ("invalid_blocks" if any(p.startswith("blocks") for p in problems)
            else "no_text" if any(p.startswith("text") for p in problems) else "invalid_payload")
    return 400, {"Content-Type": "text/plain"}, code.encode()


# --- Microsoft Teams: Workflows "When a Teams webhook request is received" → post an Adaptive Card -----------------
# https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using
#   (envelope: type "message", attachments[].contentType application/vnd.microsoft.card.adaptive, content = card;
#    Workflows support Adaptive Cards only; actions: Action.OpenUrl, Action.ShowCard, Action.ToggleVisibility)
# https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook
#   ("The message size limit is 28 KB"; also the Teams connector's "Post card" action limit)
# https://learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/cards-reference (Teams: ≤ 1.5;
#   but Workflows' flow bot renders only ≤ 1.4 in practice: github.com/microsoft/AdaptiveCards/issues/8965)
# https://adaptivecards.io/explorer/ and microsoft/AdaptiveCards schemas/src (required properties per element)

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
TEAMS_MAX_BYTES = 28 * 1024
TEAMS_MAX_VERSION = (1, 5)
_CARD_ELEMENTS: dict[str, tuple[str, ...]] = {  # element type -> its required properties (schema "required": true)
    "TextBlock": ("text",),
    "RichTextBlock": ("inlines",),
    "Image": ("url",),
    "ImageSet": ("images",),
    "FactSet": ("facts",),
    "Container": ("items",),
    "ColumnSet": (),
    "ActionSet": ("actions",),
    "Table": (),
}


def _card_elements(path: str, items: Any, top: tuple[int, int]) -> list[str]:
    if not isinstance(items, list):
        return [f"{path}: an array of elements is required"]
    return [p for i, el in enumerate(items) for p in _card_element(f"{path}[{i}]", el, top)]


def _card_element(path: str, el: Any, top: tuple[int, int]) -> list[str]:
    if not isinstance(el, dict):
        return [f"{path}: must be an object"]
    kind = el.get("type")
    if kind not in _CARD_ELEMENTS:
        return [f"{path}.type: unknown or unsupported element type {kind!r} (validated: {sorted(_CARD_ELEMENTS)})"]
    problems = [f"{path}.{name}: required" for name in _CARD_ELEMENTS[kind] if name not in el]
    if kind == "TextBlock" and "text" in el and not isinstance(el["text"], str):
        problems.append(f"{path}.text: must be a string")
    elif kind == "Image" and "url" in el and not isinstance(el["url"], str):
        problems.append(f"{path}.url: must be a string")
    elif kind == "FactSet" and "facts" in el:
        facts = el["facts"]
        if not isinstance(facts, list):
            problems.append(f"{path}.facts: an array of {{title, value}} is required")
        else:
            problems += [f"{path}.facts[{i}]: title and value must be strings" for i, fact in enumerate(facts)
                         if not (isinstance(fact, dict) and isinstance(fact.get("title"), str)
                                 and isinstance(fact.get("value"), str))]
    elif kind == "Container" and "items" in el:
        problems += _card_elements(f"{path}.items", el["items"], top)
    elif kind == "ImageSet" and "images" in el:
        problems += _card_elements(f"{path}.images", el["images"], top)
    elif kind == "ActionSet" and "actions" in el:
        problems += _card_actions(f"{path}.actions", el["actions"], top)
    elif kind == "ColumnSet":
        columns = el.get("columns", [])
        if not isinstance(columns, list):
            return [*problems, f"{path}.columns: must be an array of Column"]
        for i, col in enumerate(columns):
            at = f"{path}.columns[{i}]"
            if not isinstance(col, dict) or col.get("type", "Column") != "Column":
                problems.append(f"{at}: must be a Column")
            elif "items" in col:
                problems += _card_elements(f"{at}.items", col["items"], top)
    return problems


def _card_actions(path: str, actions: Any, top: tuple[int, int]) -> list[str]:
    if not isinstance(actions, list):
        return [f"{path}: an array of actions is required"]
    problems = []
    for i, action in enumerate(actions):
        at, kind = f"{path}[{i}]", action.get("type") if isinstance(action, dict) else None
        if kind == "Action.OpenUrl":
            problems += [f"{at}.{k}: a non-empty string is required" for k in ("url", "title")
                         if not (isinstance(action.get(k), str) and action[k])]  # title: else a blank button
        elif kind == "Action.ShowCard":
            problems += _adaptive_card(f"{at}.card", action.get("card"), top, version_required=False)
        elif kind == "Action.ToggleVisibility":
            if not isinstance(action.get("targetElements"), list):
                problems.append(f"{at}.targetElements: an array is required")
        else:
            problems.append(f"{at}.type: {kind!r} is not supported in cards posted by a webhook"
                            " (Action.OpenUrl, Action.ShowCard, Action.ToggleVisibility)")
    return problems


def _adaptive_card(path: str, card: Any, top: tuple[int, int], *, version_required: bool = True) -> list[str]:
    if not isinstance(card, dict):
        return [f"{path}: an AdaptiveCard object is required"]
    problems = [] if card.get("type") == "AdaptiveCard" else [f"{path}.type: must be 'AdaptiveCard'"]
    version = card.get("version")
    if version is not None or version_required:  # required on the top-level card, not in Action.ShowCard's
        m = re.fullmatch(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
        if m is None:
            problems.append(f"{path}.version: a version string like '1.4' is required, got {version!r}")
        elif (int(m[1]), int(m[2])) > top:
            problems.append(f"{path}.version: {version} is above {top[0]}.{top[1]}, the highest Teams renders")
    if version_required or "body" in card:
        problems += _card_elements(f"{path}.body", card.get("body"), top)
    if "actions" in card:
        problems += _card_actions(f"{path}.actions", card["actions"], top)
    return problems


def validate_teams(payload: Any, *, size: int | None = None,
                   max_version: tuple[int, int] = TEAMS_MAX_VERSION) -> list[str]:
    """A Teams Workflows webhook message carrying Adaptive Cards; ``size`` is the request body's length in bytes."""
    problems = []
    if size is not None and size > TEAMS_MAX_BYTES:
        problems.append(f"payload: {size} bytes, over Teams' 28 KB message limit")
    if not isinstance(payload, dict):
        return [*problems, "payload: must be a JSON object"]
    if payload.get("type") != "message":
        problems.append(f"type: must be 'message', got {payload.get('type')!r}")
    attachments = payload.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return [*problems, "attachments: a non-empty array is required"]
    for i, att in enumerate(attachments):
        if not isinstance(att, dict):
            problems.append(f"attachments[{i}]: must be an object")
            continue
        if att.get("contentType") != ADAPTIVE_CARD:
            problems.append(f"attachments[{i}].contentType: must be {ADAPTIVE_CARD}, got {att.get('contentType')!r}")
        problems += _adaptive_card(f"attachments[{i}].content", att.get("content"), max_version)
    return problems


def _teams_rejection(problems: list[str]) -> Reply:
    # The real trigger answers 202 for any JSON and the flow run fails later ("Property 'type' must be
    # 'AdaptiveCard'", "Request Entity too large"): the harness rejects at once so tests see it.
    status = 413 if any(p.startswith("payload:") and "bytes" in p for p in problems) else 400
    error = {"error": {"code": "InvalidRequestContent", "message": "; ".join(problems)}}
    return status, {"Content-Type": "application/json"}, json.dumps(error).encode()


# --- Prometheus Alertmanager API v2: POST /api/v2/alerts --------------------------------------------------------
# https://prometheus.io/docs/alerting/latest/clients/ (labels with alertname; RFC3339 startsAt/endsAt; generatorURL)
# https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml (postableAlert: labels required,
#   labelSet = object of strings, date-time, generatorURL format uri)
# https://prometheus.io/docs/concepts/data_model/ (label names [a-zA-Z_][a-zA-Z0-9_]*)
# Answers as v0.32.1 does (checked against a local build): body not parseable (not an array, wrong types, bad
# date-time) → 400 {"code":400,...}; a schema violation (labels missing, generatorURL not a URI) → 422 {"code":60x};
# the server's own validation (no non-empty label, invalid name, endsAt before startsAt) → 400 "json string".

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_ALERT_FIELDS = {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}


def _rfc3339(value: str) -> datetime:
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)  # fromisoformat takes at most microseconds
    return datetime.fromisoformat(value.upper().replace("Z", "+00:00"))


def _alertmanager(payload: Any) -> tuple[list[str], Reply]:
    parse: list[str] = []  # Alertmanager cannot decode the body
    schema: list[str] = []  # the OpenAPI schema's checks
    semantic: list[str] = []  # Alertmanager's own validation, and what the docs require beyond it
    if not isinstance(payload, list):
        parse.append("body: must be a JSON array of alerts")
    for i, alert in enumerate(payload if isinstance(payload, list) else []):
        at = f"[{i}]"
        if not isinstance(alert, dict):
            parse.append(f"{at}: must be an alert object")  # (v0.32.1 drops the connection on a null alert)
            continue
        semantic += _unknown_fields(at, alert, _ALERT_FIELDS)  # the server ignores them: a misspelt key is lost
        for name in ("labels", "annotations"):
            pairs = alert.get(name)
            if pairs is None:
                if name == "labels":
                    schema.append(f"{at}.labels: required")
                continue
            if not isinstance(pairs, dict) or not all(isinstance(v, str) for v in pairs.values()):
                parse.append(f"{at}.{name}: must be an object of string values")
                continue
            semantic += [f"{at}.{name}: invalid name {k!r} (must match {LABEL_NAME.pattern})" for k in pairs
                         if not LABEL_NAME.fullmatch(k)]
            if name == "labels":
                if not any(pairs.values()):  # empty values are dropped before the check
                    semantic.append(f"{at}.labels: at least one label pair required")
                elif not pairs.get("alertname"):
                    semantic.append(f"{at}.labels: alertname is required (the docs' clients contract)")
        times: dict[str, datetime] = {}
        for name in ("startsAt", "endsAt"):
            if name in alert:
                value = alert[name]
                if isinstance(value, str) and _RFC3339.fullmatch(value):
                    times[name] = _rfc3339(value)
                else:
                    parse.append(f"{at}.{name}: an RFC3339 date-time is required, got {value!r}")
        if len(times) == 2 and times["endsAt"] < times["startsAt"]:
            semantic.append(f"{at}: start time must be before end time")
        url = alert.get("generatorURL")
        if url is not None:
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None:
                parse.append(f"{at}.generatorURL: must be a string")
            elif url and (" " in url or not ((parts.scheme and (parts.netloc or parts.path)) or url.startswith("/"))):
                schema.append(f"{at}.generatorURL: must be of type uri, got {url!r}")
    problems = parse + schema + semantic
    if parse:
        return problems, (400, {"Content-Type": "application/json"},
                          json.dumps({"code": 400, "message": "; ".join(parse)}).encode())
    if schema:
        return problems, (422, {"Content-Type": "application/json"},
                          json.dumps({"code": 602, "message": "; ".join(schema)}).encode())
    if semantic:
        return problems, (400, {"Content-Type": "application/json"}, json.dumps("\n".join(semantic)).encode())
    return problems, (200, {}, b"")


def validate_alertmanager(payload: Any) -> list[str]:
    """A POST /api/v2/alerts body: an array of postableAlert."""
    return _alertmanager(payload)[0]


# --- the server ---------------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a held answer must not keep the test process alive
    block_on_close = False
    request_queue_size = 64
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so down() cuts the router off at once (no kept-alive connection goes on
    # being served by a handler thread after the listener closed).
    protocol_version = "HTTP/1.0"
    server: _Server

    def _handle(self) -> None:
        self.server.receiver._serve(self)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:  # the test output stays quiet
        pass


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        chunks = []
        while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
        while handler.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b"".join(chunks)
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


class Receiver:
    """A local HTTP server on 127.0.0.1 (ephemeral port, threaded) standing in for one destination."""

    url: str
    received: list[Received]

    def __init__(self, kind: Kind, *, secret: bytes | None = None) -> None:
        if kind not in PATHS:
            raise ValueError(f"unknown receiver kind {kind!r}")
        if secret is not None and kind != "webhook":
            raise ValueError("only the webhook receiver verifies a signature")
        self.kind, self.secret = kind, secret
        self.received = []
        self.teams_max_version = TEAMS_MAX_VERSION  # lower to (1, 4) to hold the router to what Workflows renders
        self.signature_max_age: float | None = SIGNATURE_MAX_AGE
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._failure: tuple[int, int | None, float | None, str] | None = None
        self._hold = 0.0
        self._state = threading.Lock()  # up/down/close
        self._server: _Server | None = None
        self._placeholder: socket.socket | None = None
        self._port = 0
        self.up()
        base = f"http://127.0.0.1:{self._port}"
        self.url = base if kind == "alertmanager" else base + PATHS[kind]  # the router appends /api/v2/alerts

    # --- control ---

    def fail(self, status: int, times: int | None = None, retry_after: float | None = None, body: str = "") -> None:
        """Answer the next ``times`` requests (None: all until ok()) with ``status`` (and Retry-After if given)."""
        with self._cond:
            self._failure = (status, times, retry_after, body)

    def ok(self) -> None:
        """Back to answering normally: no injected failure, no hold."""
        with self._cond:
            self._failure, self._hold = None, 0.0

    def hold(self, seconds: float) -> None:
        """Answer each request only after ``seconds`` (0 = at once)."""
        with self._cond:
            self._hold = seconds

    def down(self) -> None:
        """Stop listening: connections are refused. The port stays bound (not listening), so up() reopens it."""
        with self._state:
            server, self._server = self._server, None
            if server is None:
                return
            server.shutdown()
            server.server_close()
            # A bound socket that does not listen answers a SYN with RST (connection refused) and keeps the port
            # ours; SO_REUSEADDR because the answered connections linger in TIME_WAIT on it.
            self._placeholder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._placeholder.bind(("127.0.0.1", self._port))

    def up(self) -> None:
        with self._state:
            if self._server is not None or self._closed.is_set():
                return
            if self._placeholder is not None:
                self._placeholder.close()
                self._placeholder = None
            server = _Server(("127.0.0.1", self._port), _Handler)
            server.receiver = self
            self._server, self._port = server, server.server_address[1]
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                             name=f"receiver-{self.kind}-{self._port}").start()

    def close(self) -> None:
        self.down()
        with self._state:
            self._closed.set()  # also wakes held answers
            if self._placeholder is not None:
                self._placeholder.close()
                self._placeholder = None

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- inspection ---

    def accepted(self) -> list[Received]:
        """The requests answered with the tool's success status."""
        with self._cond:
            return [r for r in self.received if r.status == SUCCESS[self.kind]]

    def wait_for(self, count: int, timeout: float) -> list[Received]:
        """Wait until ``count`` requests were accepted (returns all accepted), else AssertionError with what arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(accepted := self.accepted()) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    arrived = "\n".join(f"  {r.method} {r.path} -> {r.status or 'held'} {r.problems or ''}"
                                        for r in self.received) or "  nothing"
                    raise AssertionError(f"{self.kind} receiver: {len(accepted)} of {count} accepted within "
                                         f"{timeout} s; arrived:\n{arrived}")
                self._cond.wait(left)
            return accepted

    # --- serving ---

    def _serve(self, handler: _Handler) -> None:
        body = _read_body(handler)
        record = Received(path=handler.path, headers=Headers(handler.headers.items()), body=body, json=None,
                          at=time.monotonic(), status=0, method=handler.command)
        try:
            record.json, record.problems, (status, headers, out) = self._judge(record)
        except Exception as e:  # a harness bug: answer and record it rather than drop the connection
            record.problems, (status, headers, out) = [f"harness: {e!r}"], (500, {}, b"")
        with self._cond:
            self.received.append(record)
            failure, hold = self._failure, self._hold
            if failure is not None:
                status, times, retry_after, text = failure
                headers, out = {"Content-Type": "text/plain"}, text.encode()
                if retry_after is not None:
                    headers["Retry-After"] = f"{retry_after:g}"
                if times is not None:
                    self._failure = (status, times - 1, retry_after, text) if times > 1 else None
        if hold > 0:
            self._closed.wait(hold)
        with self._cond:  # set before the answer leaves, so a test sees it as soon as the router does
            record.status = status
            self._cond.notify_all()
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        if status == 405:
            handler.send_header("Allow", "POST")
        handler.send_header("Content-Length", str(len(out)))
        handler.end_headers()
        handler.wfile.write(out)

    def _judge(self, r: Received) -> tuple[Any, list[str], Reply]:
        """The parsed body, the problems found, and the answer the real tool gives to this request."""
        kind, expected = self.kind, PATHS[self.kind]
        path = urlsplit(r.path).path
        if path != expected:
            problem = [f"path: {path} is not {expected}"]
            if kind == "alertmanager":
                return None, problem, (404, {"Content-Type": "application/json"},
                                       json.dumps({"code": 404, "message": f"path {path} was not found"}).encode())
            return None, problem, (404, {"Content-Type": "text/plain"}, b"no_service" if kind == "slack" else b"")
        if r.method != "POST":
            return None, [f"method: {r.method}, only POST is accepted"], (405, {"Content-Type": "text/plain"}, b"")
        content_type = r.headers.get("Content-Type", "").split(";")[0].strip().lower()
        problems = [] if content_type == "application/json" else [
            f"Content-Type: must be application/json, got {content_type or 'none'!r}"]
        if problems and kind == "alertmanager":
            message = f"unsupported media type {content_type!r}, only [application/json] are allowed"
            return None, problems, (415, {"Content-Type": "application/json"},
                                    json.dumps({"code": 415, "message": message}).encode())
        try:
            payload = json.loads(r.body)
        except ValueError as e:
            payload, problems = None, [*problems, f"body: not JSON ({e})"]
        if kind == "alertmanager":
            if not r.body.strip():
                return None, ["body: required"], (422, {"Content-Type": "application/json"},
                                                  b'{"code":602,"message":"alerts in body is required"}')
            if problems:  # not JSON
                return None, problems, (400, {"Content-Type": "application/json"},
                                        json.dumps({"code": 400, "message": problems[-1]}).encode())
            found, reply = _alertmanager(payload)
            return payload, found, reply
        if kind == "webhook":
            problems += validate_webhook(r.headers, r.body, payload, self.secret, max_age=self.signature_max_age)
            reject: Reply = (400, {"Content-Type": "application/json"}, json.dumps({"problems": problems}).encode())
        elif kind == "slack":
            problems += validate_slack(payload) if payload is not None else []
            reject = _slack_rejection(problems)
        else:
            problems += validate_teams(payload, size=len(r.body), max_version=self.teams_max_version)
            reject = _teams_rejection(problems)
        if problems:
            return payload, problems, reject
        return payload, [], (SUCCESS[kind], {"Content-Type": "text/plain"} if kind == "slack" else {},
                             b"ok" if kind == "slack" else b"")
