"""The alert router's pure parts: the routes file, rule matching, messages from templates, delivery rules, the
ledger's records."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kafka_lineage.runtime.config import ConfigError
from kafka_lineage.sinks.alerts.routing import delivery, ledger, messages
from kafka_lineage.sinks.alerts.routing.config import Delivery, Match, load_routes, parse_routes
from kafka_lineage.sinks.alerts.routing.rules import all_owners, matches, select
from kafka_lineage.sinks.alerts.routing.settings import RouterSettings
from tests.integration.sinks import receivers

TEMPLATES = messages.default_templates()


def _routes(tmp_path: Path, routes: list[dict[str, Any]], **top: Any) -> tuple[str, list]:
    return parse_routes({"routes": routes, **top}, tmp_path, TEMPLATES)


def _secret(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text + "\n")
    return name


# --- the routes file --------------------------------------------------------------------------------------------------
def test_a_routes_file_reads_its_secrets_from_files_and_keeps_them_out_of_reprs(tmp_path: Path) -> None:
    url = "https://hooks.example.com/services/T0/B0/very-secret-token"
    ui_url, routes = _routes(tmp_path, [
        {"name": "team-a", "match": {"owners": "team:a", "severity": "BREAKING"},
         "destination": {"type": "slack", "url_file": _secret(tmp_path, "slack", url)}},
        {"name": "hook", "destination": {"type": "webhook", "url": "http://127.0.0.1:1/hook",
                                         "secret_file": _secret(tmp_path, "key", "k" * 32)}}],
        ui_url="https://lineage.example.com/")
    assert ui_url == "https://lineage.example.com"
    assert routes[0].secrets.url == url and routes[0].route.match.owners == ["team:a"]
    assert routes[1].secrets.key == b"k" * 32
    assert "very-secret-token" not in repr(routes[0]) and "k" * 32 not in repr(routes[1])
    assert routes[0].where() == "slack at https://hooks.example.com"
    assert routes[0].template == TEMPLATES["slack"]


@pytest.mark.parametrize(("route", "expected"), [
    ({"name": "x", "destination": {"type": "slack"}}, "exactly one of url and url_file"),
    ({"name": "x", "destination": {"type": "webhook", "url": "http://h/x"}}, "secret_file names the file"),
    ({"name": "x", "destination": {"type": "slack", "url": "http://h/x", "secret_file": "k"}}, "signs webhooks only"),
    ({"name": "Has Space", "destination": {"type": "slack", "url": "http://h/x"}}, "routes[0].name: lower-case"),
    ({"name": "x", "destination": {"type": "pager", "url": "http://h/x"}}, "routes[0].destination.type"),
    ({"name": "x", "match": {"severity": ["HUGE"]}, "destination": {"type": "slack", "url": "http://h/x"}},
     "routes[0].match.severity[0]"),
    ({"name": "x", "match": {"colour": "red"}, "destination": {"type": "slack", "url": "http://h/x"}},
     "routes[0].match.colour: Extra inputs are not permitted"),
    ({"name": "x", "destination": {"type": "slack", "url": "ftp://h/x"}}, "an http(s) URL with a host expected"),
    ({"name": "x", "destination": {"type": "slack", "url_file": "missing"}}, "cannot read"),
    ({"name": "x", "destination": {"type": "slack", "url": "http://h/x", "headers": {"Authorization": "t"}}},
     "set by the router"),
    ({"name": "x", "destination": {"type": "slack", "url": "http://h/x"}, "delivery": {"rate_per_minute": 0}},
     "routes[0].delivery.rate_per_minute"),
])
def test_a_wrong_route_is_refused_at_start_with_its_place_named(tmp_path: Path, route: dict[str, Any],
                                                                 expected: str) -> None:
    with pytest.raises(ConfigError, match="LINEAGE_ALERT_ROUTES") as refused:
        _routes(tmp_path, [route])
    assert expected in str(refused.value)


def test_route_names_are_unique_and_a_secret_read_from_a_file_is_never_quoted(tmp_path: Path) -> None:
    route = {"name": "x", "destination": {"type": "slack", "url": "http://h/x"}}
    with pytest.raises(ConfigError, match="x repeated"):
        _routes(tmp_path, [route, route])
    with pytest.raises(ConfigError) as refused:
        _routes(tmp_path, [{"name": "x", "destination": {"type": "slack",
                                                          "url_file": _secret(tmp_path, "u", "not-a-url-secret")}}])
    assert "not-a-url-secret" not in str(refused.value) and "not shown" in str(refused.value)
    with pytest.raises(ConfigError, match="is empty"):
        _routes(tmp_path, [{"name": "x", "destination": {"type": "slack", "url_file": _secret(tmp_path, "e", "")}}])


# --- rules ------------------------------------------------------------------------------------------------------------
def _alert(**fields: Any) -> dict[str, Any]:
    alert = messages.sample_alert()
    alert.update(fields)
    return alert


def test_every_criterion_given_must_hold_and_any_value_of_one_meets_it() -> None:
    alert = _alert(severity="BREAKING", dataset={"namespace": "postgres://prod-db:5432", "name": "public.orders"})
    assert matches(Match(), alert)
    assert matches(Match(severity=["COMPATIBLE", "BREAKING"], namespace=["postgres://prod-*"]), alert)
    assert not matches(Match(severity=["BREAKING"], namespace=["postgres://staging-*"]), alert)
    assert matches(Match(name=["public.*"], change=["TYPE_CHANGED"]), alert)
    assert not matches(Match(change=["REMOVED"]), alert)
    assert not matches(Match(kind=["sensitiveExposure"]), alert)
    assert matches(Match(tags=["pii"]), alert) and not matches(Match(tags=["gdpr"]), alert)
    assert matches(Match(tags=["PII"]), alert)  # tags are lower-cased where they are read


def test_owners_are_the_dataset_s_and_those_of_everything_it_impacts() -> None:
    alert = _alert(datasetOwners=["team:payments"],
                   impactedDatasets=[{"namespace": "s3://b", "name": "r", "depth": 1, "owners": ["team:bi"]}],
                   impactedJobs=[{"namespace": "spark", "name": "j", "depth": 1, "owners": ["user:ann", "team:bi"]}])
    assert all_owners(alert) == ["team:payments", "team:bi", "user:ann"]
    assert matches(Match(owners=["team:bi"]), alert)
    assert not matches(Match(dataset_owners=["team:bi"]), alert)
    assert matches(Match(dataset_owners=["team:*"]), alert)
    old = {k: v for k, v in alert.items() if k != "datasetOwners"}  # an alert from before owners were carried
    assert not matches(Match(dataset_owners=["team:*"]), old) and matches(Match(owners=["user:*"]), old)
    assert select([("a", Match(owners=["team:bi"])), ("b", Match(severity=["UNKNOWN"])), ("c", Match())],
                  alert) == ["a", "c"]


# --- messages ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@pytest.mark.parametrize("count", [1, 2, 500])
def test_every_default_template_renders_json_within_its_destination_s_limit(kind: str, count: int) -> None:
    alerts = [messages.sample_alert(i) for i in range(count)]
    parts = messages.split_build(TEMPLATES[kind], kind, alerts, route="r", ui_url="http://127.0.0.1:5050")
    assert [a["alertId"] for part in parts for a in part[0]] == [a["alertId"] for a in alerts]
    for _alerts, identity, body in parts:
        assert len(body) <= messages.MAX_BODY_BYTES[kind]
        payload = json.loads(body)
        if kind == "webhook":
            assert payload["deliveryId"] == identity and payload["count"] == len(_alerts)
        if kind == "alertmanager":
            assert len(payload) == len(_alerts) and {a["labels"]["alert_id"] for a in payload} == {
                a["alertId"] for a in _alerts}


def test_a_slack_message_says_what_changed_what_it_impacts_and_links_into_the_ui() -> None:
    alert = _alert(changes=[{"path": "amount", "kind": "TYPE_CHANGED", "oldType": "decimal", "newType": "text",
                             "severity": "BREAKING"}], dataset={"namespace": "pg://db", "name": "public.<orders>"})
    (_, _, body), = messages.split_build(TEMPLATES["slack"], "slack", [alert], route="r", ui_url="http://ui")
    payload = json.loads(body)
    text = json.dumps(payload, ensure_ascii=False)
    assert payload["text"] == "BREAKING schema change on pg://db/public.&lt;orders&gt;"  # mrkdwn: < > escaped
    assert payload["blocks"][0]["text"]["text"] == "BREAKING schema change on pg://db/public.<orders>"  # plain
    assert "amount: type changed (decimal → text)" in text
    assert "5 jobs, 5 datasets, 0 columns downstream" in text
    assert "owners: team:payments, team:bi" in payload["blocks"][3]["elements"][0]["text"]
    buttons = payload["blocks"][-1]["elements"]
    assert buttons[0]["url"] == "http://ui/#/lineage?node=dataset%3Apg%3A%2F%2Fdb%3Apublic.%3Corders%3E&depth=3&dir=down"
    assert len(payload["blocks"][0]["text"]["text"]) <= 150


def test_a_digest_counts_the_burst_and_lists_its_first_alerts() -> None:
    alerts = [messages.sample_alert(i) for i in range(200)]
    (_, _, body), = messages.split_build(TEMPLATES["slack"], "slack", alerts, route="r", ui_url="http://ui")
    payload = json.loads(body)
    assert payload["blocks"][0]["text"]["text"] == "200 lineage alerts on 200 datasets"
    assert "200 BREAKING by migrations.orders" in payload["text"]
    assert len(payload["blocks"]) <= 50
    assert "…and 190 more alerts" in json.dumps(payload, ensure_ascii=False)


def test_a_template_that_writes_broken_json_or_names_nothing_known_fails_with_the_reason() -> None:
    with pytest.raises(messages.MessageError, match="not JSON"):
        messages.build('{"text": {{ alert.title }}}', "slack", [messages.alert_view(_alert(), "u")], route="r",
                       delivery_id="d", ui_url="u")
    with pytest.raises(messages.MessageError, match=r"template failed.*no_such"):
        messages.build('{{ alert.no_such | tojson }}', "slack", [messages.alert_view(_alert(), "u")], route="r",
                       delivery_id="d", ui_url="u")
    with pytest.raises(messages.MessageError, match="template failed"):  # the sandbox: no reaching into Python
        messages.build('{{ alert.__class__.__mro__ }}', "slack", [messages.alert_view(_alert(), "u")], route="r",
                       delivery_id="d", ui_url="u")


def test_one_alert_too_large_for_its_destination_is_refused_and_a_digest_is_split() -> None:
    huge = "{{ alerts | tojson }}{# the body is every alert whole #}"
    alerts = [_alert(alertId=f"a{i}", newSchema="x" * 9_000) for i in range(8)]
    parts = messages.split_build(huge.replace("{{", '{"a": {{').replace("}}{#", "}}}{#"), "teams", alerts,
                                 route="r", ui_url="u")
    assert len(parts) > 1 and sum(len(p[0]) for p in parts) == 8
    with pytest.raises(messages.TooLarge):
        messages.split_build('{"a": {{ alerts | tojson }}}', "teams", [_alert(newSchema="x" * 40_000)], route="r",
                             ui_url="u")
    assert messages.delivery_id("r", ["b", "a"]) == messages.delivery_id("r", ["a", "b"]) != messages.delivery_id(
        "s", ["a", "b"])


# --- delivery ---------------------------------------------------------------------------------------------------------
def test_a_webhook_request_is_signed_over_its_timestamp_and_body(tmp_path: Path) -> None:
    _, (route,) = _routes(tmp_path, [{"name": "hook", "destination": {
        "type": "webhook", "url": "http://127.0.0.1:1/hook", "secret_file": _secret(tmp_path, "key", "s3cret-key"),
        "token_file": _secret(tmp_path, "token", "tok-123456"), "headers": {"X-Team": "a"}}}])
    prepared = delivery.request(route, b'{"a":1}', "d-1", now=1_700_000_000.5)
    expected = hmac.new(b"s3cret-key", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    assert prepared.headers["X-Lineage-Signature"] == f"v1={expected}"
    assert prepared.headers["X-Lineage-Timestamp"] == "1700000000"
    assert prepared.headers["X-Lineage-Delivery"] == "d-1"
    assert prepared.headers["Authorization"] == "Bearer tok-123456" and prepared.headers["X-Team"] == "a"
    _, (manager,) = _routes(tmp_path, [{"name": "am", "destination": {"type": "alertmanager",
                                                                        "url": "http://127.0.0.1:9093/"}}])
    assert delivery.request(manager, b"[]", "d").url == "http://127.0.0.1:9093/api/v2/alerts"
    assert "X-Lineage-Signature" not in delivery.request(manager, b"[]", "d").headers


@pytest.mark.parametrize(("status", "headers", "text", "result", "after"), [
    (200, {}, "ok", "delivered", None),
    (202, {}, "", "delivered", None),
    (400, {}, "invalid_blocks", "refused", None),
    (404, {}, "no_service", "refused", None),
    (410, {}, "channel_is_archived", "refused", None),
    (429, {"Retry-After": "7"}, "rate_limited", "retry", 7.0),
    (503, {"retry-after": "99999"}, "", "retry", delivery.MAX_RETRY_AFTER),
    (500, {}, "", "retry", None),
    (408, {}, "", "retry", None),
])
def test_an_answer_says_delivered_try_again_or_refused_for_good(status: int, headers: dict[str, str], text: str,
                                                                 result: str, after: float | None) -> None:
    answer = delivery.outcome(status, headers, text)
    assert (answer.result, answer.retry_after) == (result, after)
    if result != "delivered":
        assert answer.reason.startswith(f"HTTP {status}") and text in answer.reason


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert delivery.retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert delivery.retry_after("soon") is None and delivery.retry_after(None) is None


def test_the_pace_lets_a_tenth_of_the_rate_through_at_once_then_one_at_a_time() -> None:
    now = [0.0]
    pace = delivery.Pace(60, clock=lambda: now[0])  # one a second, bursts of 6
    for _ in range(6):
        assert pace.wait_needed() == 0
        pace.spend()
    assert pace.wait_needed() == pytest.approx(1.0)
    now[0] += 1.0
    assert pace.wait_needed() == 0


def test_more_alerts_waiting_than_digest_after_go_as_one_digest() -> None:
    assert delivery.batch_size(1, Delivery()) == 1
    assert delivery.batch_size(5, Delivery(digest_after=5)) == 1
    assert delivery.batch_size(200, Delivery(digest_after=5)) == 200
    assert delivery.batch_size(900, Delivery(digest_after=5, digest_max=500)) == 500
    assert delivery.batch_size(900, Delivery(digest_after=0)) == 1


# --- the ledger -------------------------------------------------------------------------------------------------------
def test_ledger_records_read_back_and_the_committed_offsets_make_them_stale() -> None:
    done = ledger.Done("team-a", "alert\x1fwith-separator", 3, 41, "delivered", "d-1")
    record_key = ledger.key(done.route, done.alert_id)
    assert ledger.parse(record_key, ledger.value(done, 1.0)) == done
    assert ledger.parse(b"r\x1fa", b"not json") is None
    assert ledger.stale([done], {3: 41}) == [] and ledger.stale([done], {3: 42}) == [done]
    assert ledger.stale([done], {}) == []


def test_the_readme_s_example_routes_file_is_valid_with_its_secret_files(tmp_path: Path) -> None:
    example = Path(__file__).parents[3] / "docs" / "examples"
    shutil.copytree(example, tmp_path / "examples")
    secrets = tmp_path / "examples" / "secrets"
    secrets.mkdir()
    for name, text in (("slack-payments", "https://hooks.slack.com/services/T0/B0/x"),
                       ("teams-analytics", "https://example.webhook.office.com/workflows/x"),
                       ("catalog-hmac-key", "0123456789abcdef")):
        (secrets / name).write_text(text)
    ui_url, routes = load_routes(tmp_path / "examples" / "alert-routes.yaml", TEMPLATES)
    assert ui_url == "https://lineage.example.com"
    assert [r.name for r in routes] == ["payments-slack", "analytics-teams", "oncall-pages", "catalog-webhook"]
    for route in routes:  # every template renders on a single alert and a digest
        for count in (1, 7):
            messages.split_build(route.template, route.route.destination.type,
                                 [messages.sample_alert(i) for i in range(count)], route=route.name, ui_url=ui_url)


def test_router_settings_need_a_routes_file_and_say_where_a_new_group_starts() -> None:
    with pytest.raises(ConfigError, match="LINEAGE_ALERT_ROUTES: name the routes file"):
        RouterSettings.from_env({})
    settings = RouterSettings.from_env({"LINEAGE_ALERT_ROUTES": "routes.yaml", "LINEAGE_SERVER_PORT": "6060"})
    assert (settings.start_from, settings.local_ui_url, settings.ui_url) == ("latest", "http://127.0.0.1:6060", "")
    with pytest.raises(ConfigError, match="LINEAGE_ROUTER_START: latest or earliest"):
        RouterSettings.from_env({"LINEAGE_ALERT_ROUTES": "r.yaml", "LINEAGE_ROUTER_START": "yesterday"})


def _exposure_alert() -> dict[str, Any]:
    return _alert(kind="sensitiveExposure", severity="UNKNOWN", changes=[], job={"namespace": "", "name": ""},
                  exposure={"tag": "pii", "columnsTruncated": False, "columns": [
                      {"field": "email_hash", "origin": {"namespace": "pg://db", "name": "public.users",
                                                         "field": "email"}, "path": []}]})


def _format_problems(kind: str, identity: str, body: bytes, payload: Any) -> list[str]:
    if kind == "slack":
        return receivers.validate_slack(payload)
    if kind == "teams":  # held to 1.4: cards posted through Workflows render only up to it
        return receivers.validate_teams(payload, size=len(body), max_version=(1, 4))
    if kind == "alertmanager":
        return receivers.validate_alertmanager(payload)
    return receivers.validate_webhook({"X-Lineage-Delivery": identity}, body, payload, None)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@pytest.mark.parametrize("case", ["drift", "exposure", "digest"])
def test_every_default_template_passes_its_tool_s_documented_format(kind: str, case: str) -> None:
    alerts = {"drift": [_alert()], "exposure": [_exposure_alert()],
              "digest": [messages.sample_alert(i) for i in range(30)] + [_exposure_alert()]}[case]
    for _alerts, identity, body in messages.split_build(TEMPLATES[kind], kind, alerts, route="r", ui_url="http://u"):
        payload = json.loads(body)
        problems = _format_problems(kind, identity, body, payload)
        assert problems == [], problems
    if case == "exposure" and kind == "slack":
        assert payload["text"] == "Sensitive tag pii reaches 1 columns of postgres://db.example:5432/public.orders_0"
        assert "email_hash ← public.users.email" in payload["blocks"][1]["text"]["text"]


def test_an_alert_of_a_shape_no_alert_sink_writes_is_a_message_error_not_a_crash() -> None:
    odd = _alert(kind="sensitiveExposure", exposure={"tag": "pii", "columns": [{"field": "x"}]})  # no origin
    with pytest.raises(messages.MessageError, match="cannot be shown"):
        messages.split_build(TEMPLATES["slack"], "slack", [odd], route="r", ui_url="u")


def test_a_link_too_long_for_slack_opens_the_ui_s_home_and_the_start_check_tries_an_exposure() -> None:
    alert = _alert(dataset={"namespace": "s3://bucket", "name": "x/" * 2000})
    (_, _, body), = messages.split_build(TEMPLATES["slack"], "slack", [alert], route="r", ui_url="http://ui")
    payload = json.loads(body)
    assert payload["blocks"][-1]["elements"][0]["url"] == "http://ui/#/"
    assert receivers.validate_slack(payload) == []
    exposure = messages.sample_alert(0, exposure=True)
    assert exposure["kind"] == "sensitiveExposure" and len(exposure["exposure"]["columns"]) > messages.LISTED_CHANGES


def test_header_values_and_tokens_must_be_one_line_of_printable_ascii(tmp_path: Path) -> None:
    for headers in ({"X-Team": "a\r\nInjected: 1"}, {"X-Team": "café"}, {"Bad Name": "v"}):
        with pytest.raises(ConfigError, match="printable ASCII"):
            _routes(tmp_path, [{"name": "x", "destination": {"type": "slack", "url": "http://h/x",
                                                              "headers": headers}}])
    with pytest.raises(ConfigError, match="token must be printable"):
        _routes(tmp_path, [{"name": "x", "destination": {"type": "alertmanager", "url": "http://h",
                                                          "token_file": _secret(tmp_path, "t", "tök")}}])
    _, (route,) = _routes(tmp_path, [{"name": "x", "destination": {
        "type": "teams", "url_file": _secret(tmp_path, "u", "https://h.example/workflows/1?api-version=1&sig=S3CRET")}}])
    assert "S3CRET" in route.secret_values()  # the signature in the query is masked in logs too
    _, (inline,) = _routes(tmp_path, [{"name": "am", "destination": {
        "type": "alertmanager", "url": "http://alertmanager.example:9093",
        "token_file": _secret(tmp_path, "t", "tok-1")}}])
    assert inline.secret_values() == ["tok-1"]  # an inline URL is no secret; the token is
