"""The alert router on the real stack (Kafka, Schema Registry): ``lineage alerts route`` reads SchemaDriftAlerts
from the alert topic and delivers them to local HTTP receivers standing in for a signed webhook, Slack, Teams and
Alertmanager, each payload checked against that tool's documented format (``receivers.py``)."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage.runtime.tail import tail
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.routing.messages import delivery_id, sample_alert
from kafka_lineage_devtools.processes import ChildExited, alert_router_process, sleep_watching, wait_until
from tests.integration.conftest import lineage

from .receivers import Receiver
from .test_graph_sink import _settings

pytestmark = pytest.mark.integration
UI = "http://lineage.test:5050"
FAST = {"gather_seconds": 0, "digest_after": 0, "rate_per_minute": 6000, "retry_initial_seconds": 0.2,
        "retry_max_seconds": 2}


def _pipeline(tmp_path: Path, tag: str, routes: list[dict[str, Any]]) -> tuple[dict[str, str], ClientSettings]:
    prefix = f"test.route.{tag}.{uuid.uuid4().hex[:8]}"
    (tmp_path / "routes.yaml").write_text(json.dumps({"ui_url": UI, "routes": routes}))  # JSON is YAML
    env = {"LINEAGE_DRIFT_TOPIC": f"{prefix}.drift", "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq",
           "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized", "LINEAGE_EVENTS_TOPIC": f"{prefix}.events",
           "LINEAGE_ROUTER_GROUP": f"{prefix}.router", "LINEAGE_ALERT_ROUTES": str(tmp_path / "routes.yaml"),
           "LINEAGE_SINK_POLL_SECONDS": "0.2", "LINEAGE_PARTITIONS": "2", "LINEAGE_ROUTER_START": "earliest"}
    settings = _settings(env)
    prepare_pipeline(settings, 2)
    return env, settings


def _secret(tmp_path: Path, name: str, value: str) -> str:
    (tmp_path / name).write_text(value)
    return str(tmp_path / name)


def _hook_route(tmp_path: Path, hook: Receiver, **delivery: Any) -> dict[str, Any]:
    """A route ``hook`` taking every alert to ``hook``, a webhook receiver sharing the key "k" * 16."""
    return {"name": "hook", "destination": {"type": "webhook", "url": hook.url,
                                            "secret_file": _secret(tmp_path, "key", "k" * 16)},
            "delivery": {**FAST, **delivery}}


def _alert(number: int, **fields: Any) -> dict[str, Any]:
    alert = sample_alert(number)
    alert.update(alertId=f"alert-{number}-{uuid.uuid4().hex[:6]}", detectedAt=datetime.now(UTC), **fields)
    return alert


def _publish(settings: ClientSettings, alerts: list[dict[str, Any]]) -> None:
    client = SchemaRegistryClient(settings.registry_config())
    codec = AvroCodec("schema_drift_alert", registry.schema_fetcher(client))
    schema_id = registry.registered_id(client, settings.drift_topic, "schema_drift_alert")
    producer = Producer(settings.kafka_config())
    for alert in alerts:
        dataset = alert["dataset"]
        producer.produce(settings.drift_topic, key=f"{dataset['namespace']}/{dataset['name']}".encode(),
                         value=codec.encode(alert, schema_id))
    assert producer.flush(30) == 0


def _metric(url: str, name: str, route: str, **labels: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    wanted = {"route": route, **labels}
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f"lineage_{name}{{") and all(f'{k}="{v}"' in line for k, v in wanted.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _killed_at(env: dict[str, str], point: str) -> None:
    """Run the router until it kills itself (SIGKILL) at the crash point ``point``, reached the first time."""
    with pytest.raises(ChildExited) as died, \
            alert_router_process({**env, "LINEAGE_ROUTER_CRASH_POINTS": f"{point}=1"}) as crashing:
        wait_until(lambda: crashing.process.poll() is not None, 60, watch=[crashing], what="the crash point")
    assert died.value.code == -9 and f"crash point {point}" in died.value.tail


def _committed_to_the_end(settings: ClientSettings, group: str) -> bool:
    consumer = Consumer(settings.kafka_config({"group.id": group, "enable.auto.commit": False}))
    try:
        partitions = [TopicPartition(settings.drift_topic, p) for p in (0, 1)]
        committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions}
        return all(end == 0 or committed[p] >= end for p, end in ends.items())
    finally:
        consumer.close()


def _webhook_ids(receiver: Receiver) -> list[str]:
    """Alert ids in the order the webhook accepted them, repeats included."""
    return [alert["alertId"] for received in receiver.accepted() for alert in received.json["alerts"]]


def test_each_destination_gets_the_alerts_its_rules_select_in_its_documented_format(tmp_path: Path) -> None:
    key = b"webhook-signing-key-0123"
    with Receiver("webhook", secret=key) as hook, Receiver("slack") as slack, Receiver("teams") as teams, \
            Receiver("alertmanager") as manager:
        env, settings = _pipeline(tmp_path, "formats", [
            {"name": "everything", "destination": {"type": "webhook", "url": hook.url,
                                                   "secret_file": _secret(tmp_path, "key", key.decode())},
             "delivery": FAST},
            {"name": "payments", "match": {"owners": ["team:payments"]},
             "destination": {"type": "slack", "url_file": _secret(tmp_path, "slack", slack.url)}, "delivery": FAST},
            {"name": "compatible", "match": {"severity": "COMPATIBLE"},
             "destination": {"type": "teams", "url_file": _secret(tmp_path, "teams", teams.url)}, "delivery": FAST},
            {"name": "pages", "match": {"severity": "BREAKING", "namespace": "postgres://prod-*"},
             "destination": {"type": "alertmanager", "url": manager.url}, "delivery": FAST}])
        owned = _alert(1, datasetOwners=["team:payments"], dataset={"namespace": "postgres://prod-db:5432",
                                                                    "name": "public.orders"})
        compatible = _alert(2, severity="COMPATIBLE", datasetOwners=["team:bi"])
        impacting = _alert(3, datasetOwners=["team:web"], dataset={"namespace": "postgres://staging:5432",
                                                                   "name": "public.users"},
                           impactedDatasets=[{"namespace": "s3://lake", "name": "payments/ledger", "depth": 1,
                                              "owners": ["team:payments"]}])
        _publish(settings, [owned, compatible, impacting])
        with alert_router_process(env) as router:
            wait_until(lambda: len(hook.accepted()) == 3 and len(slack.accepted()) == 2 and len(teams.accepted())
                       == 1 and len(manager.accepted()) == 1, 60, watch=[router], what="every route's deliveries")
            sleep_watching(1.0, [router])  # nothing more comes
            delivered = _metric(router.metrics_url, "route_alerts_delivered_total", "payments")
        for receiver in (hook, slack, teams, manager):
            assert all(not r.problems for r in receiver.received), [r.problems for r in receiver.received]
        assert sorted(_webhook_ids(hook)) == sorted(a["alertId"] for a in (owned, compatible, impacting))
        assert {r.headers["X-Lineage-Delivery"] for r in slack.accepted()} == {
            delivery_id("payments", [a["alertId"]]) for a in (owned, impacting)}  # by its dataset's or impact's owner
        assert teams.accepted()[0].headers["X-Lineage-Delivery"] == delivery_id("compatible", [compatible["alertId"]])
        (page,) = manager.accepted()[0].json
        assert page["labels"]["alert_id"] == owned["alertId"] and page["labels"]["severity"] == "critical"
        assert page["generatorURL"].startswith(f"{UI}/#/lineage?node=dataset%3Apostgres%3A%2F%2Fprod-db")
        assert delivered == 2
        assert slack.url not in router.output and "XXXX" not in router.output  # the secret URL is never logged


def test_a_burst_arrives_as_one_digest_and_the_rate_limit_holds(tmp_path: Path) -> None:
    with Receiver("slack") as slack:
        env, settings = _pipeline(tmp_path, "burst", [{
            "name": "migrations", "destination": {"type": "slack", "url_file": _secret(tmp_path, "u", slack.url)},
            "delivery": {"gather_seconds": 3, "digest_after": 5, "rate_per_minute": 2}}])
        burst = [_alert(n, job={"namespace": "airflow", "name": "migrate_orders_v2"}) for n in range(200)]
        _publish(settings, burst)
        with alert_router_process(env) as router:
            (digest,) = slack.wait_for(1, 60)
            sleep_watching(5.0, [router])
            _publish(settings, [_alert(900)])  # one more right after: the bucket (2 a minute, bursts of 1) is empty
            sleep_watching(5.0, [router])
            assert len(slack.received) == 1  # held back by the rate limit, not sent
            messages = _metric(router.metrics_url, "route_messages_total", "migrations", kind="digest")
            delivered = _metric(router.metrics_url, "route_alerts_delivered_total", "migrations")
            waiting = _metric(router.metrics_url, "route_alerts_waiting", "migrations")
        assert not digest.problems, digest.problems
        blocks = digest.json["blocks"]
        assert blocks[0]["text"]["text"] == "200 lineage alerts on 200 datasets"
        assert "200 BREAKING by migrate_orders_v2" in digest.json["text"]
        assert digest.headers["X-Lineage-Delivery"] == delivery_id("migrations", [a["alertId"] for a in burst])
        assert (messages, delivered) == (1, 200)
        assert waiting == 1


def test_a_router_stopped_mid_delivery_and_restarted_delivers_nothing_twice_and_loses_nothing(
        tmp_path: Path) -> None:
    with Receiver("webhook", secret=b"k" * 16) as hook, Receiver("slack") as slack:
        env, settings = _pipeline(tmp_path, "restart", [
            _hook_route(tmp_path, hook),
            {"name": "chat", "destination": {"type": "slack", "url_file": _secret(tmp_path, "u", slack.url)},
             "delivery": FAST}])
        alerts = [_alert(n) for n in range(8)]
        _publish(settings, [*alerts, alerts[5]])  # an alert on the topic twice (same key): delivered once
        slack.hold(1.5)  # one route slow: the stop lands while its message is in flight
        with alert_router_process(env) as router:
            slack.wait_for(2, 60)
            hook.wait_for(8, 60)
        # (leaving the block sends SIGTERM: the message in flight is finished and recorded, the rest left waiting)
        assert router.returncode == 0, router.output[-3000:]
        first_run = len(slack.accepted())
        assert 2 <= first_run < 8  # stopped with some delivered, one in flight finished, the rest left waiting
        slack.ok()
        with alert_router_process(env) as router:
            slack.wait_for(8, 60)
            wait_until(lambda: _committed_to_the_end(settings, env["LINEAGE_ROUTER_GROUP"]), 30, watch=[router],
                       what="the router's offsets at the alert topic's end")
        chat_keys = Counter(r.headers["X-Lineage-Delivery"] for r in slack.accepted())
        assert set(chat_keys) == {delivery_id("chat", [a["alertId"]]) for a in alerts}
        assert max(chat_keys.values()) == 1  # nothing twice
        assert Counter(_webhook_ids(hook)) == Counter(a["alertId"] for a in alerts)  # the other route: once each
        assert "ledger records read" in router.output


def test_a_router_killed_after_recording_delivers_nothing_twice_after_its_restart(tmp_path: Path) -> None:
    with Receiver("webhook", secret=b"k" * 16) as hook:
        env, settings = _pipeline(tmp_path, "kill", [
            _hook_route(tmp_path, hook)])
        alerts = [_alert(n) for n in range(5)]
        _publish(settings, alerts)
        # killed (SIGKILL) once its first delivery is in the ledger, before the offsets are committed
        _killed_at(env, "after-record")
        assert len(hook.accepted()) == 1
        with alert_router_process(env) as router:
            hook.wait_for(5, 60)
            sleep_watching(3.0, [router])
        assert Counter(_webhook_ids(hook)) == Counter(a["alertId"] for a in alerts)


def test_the_one_window_left_repeats_a_message_with_the_same_delivery_key(tmp_path: Path) -> None:
    """Killed after the destination accepted a message and before the ledger has it: the restart sends that message
    again, with the same X-Lineage-Delivery (a receiver's deduplication key), and nothing else twice."""
    with Receiver("webhook", secret=b"k" * 16) as hook:
        env, settings = _pipeline(tmp_path, "window", [
            _hook_route(tmp_path, hook)])
        alerts = [_alert(n) for n in range(3)]
        _publish(settings, alerts)
        _killed_at(env, "after-delivery")
        (first,) = hook.accepted()
        with alert_router_process(env) as router:
            hook.wait_for(4, 60)
            sleep_watching(3.0, [router])
        keys = Counter(r.headers["X-Lineage-Delivery"] for r in hook.accepted())
        assert keys[first.headers["X-Lineage-Delivery"]] == 2 and sum(keys.values()) == 4  # only it repeated
        assert set(_webhook_ids(hook)) == {a["alertId"] for a in alerts}


def test_a_destination_down_for_a_minute_receives_everything_once_it_is_back(tmp_path: Path) -> None:
    with Receiver("webhook", secret=b"k" * 16) as hook, Receiver("teams") as teams:
        env, settings = _pipeline(tmp_path, "down", [
            _hook_route(tmp_path, hook, retry_max_seconds=5, digest_after=3),
            {"name": "team", "destination": {"type": "teams", "url_file": _secret(tmp_path, "u", teams.url)},
             "delivery": FAST}])
        hook.down()
        with alert_router_process(env) as router:
            alerts = [_alert(n) for n in range(12)]
            for number in range(0, 12, 3):  # arriving while it is down
                _publish(settings, alerts[number:number + 3])
                sleep_watching(3.0, [router])
            teams.wait_for(12, 30)  # the other route is not held up
            sleep_watching(60.0 - 12, [router])
            assert hook.received == [] and _metric(router.metrics_url, "route_retries_total", "hook") >= 5
            hook.up()
            wait_until(lambda: len(_webhook_ids(hook)) >= 12, 30, watch=[router], what="the webhook's deliveries")
            sleep_watching(3.0, [router])
        assert Counter(_webhook_ids(hook)) == Counter(a["alertId"] for a in alerts)
        assert all(not r.problems for r in hook.received + teams.received)


def test_a_refusal_for_good_dead_letters_the_alert_and_its_redrive_goes_to_that_route_only(
        clients: ClientSettings, tmp_path: Path) -> None:
    with Receiver("slack") as slack, Receiver("webhook", secret=b"k" * 16) as hook:
        env, settings = _pipeline(tmp_path, "refused", [
            {"name": "gone", "destination": {"type": "slack", "url_file": _secret(tmp_path, "u", slack.url)},
             "delivery": FAST},
            _hook_route(tmp_path, hook)])
        slack.fail(404, times=1, body="no_service")
        first, second = _alert(1), _alert(2)
        _publish(settings, [first])
        bad = Producer(settings.kafka_config())  # a record no alert sink wrote: dead-lettered, never a crash
        bad.produce(settings.drift_topic, key=b"x", value=b"not avro", partition=1)
        assert bad.flush(30) == 0
        with alert_router_process(env) as router:
            wait_until(lambda: len(slack.received) == 1, 30, watch=[router], what="the refused delivery")
            _publish(settings, [second])
            slack.wait_for(1, 30)
            letters = wait_until(lambda: len(found := list(tail(settings, settings.dlq_topic, "dead_letter", 10,
                                                                 False))) == 2 and found, 30,
                                 watch=[router], what="the dead letters")
            failed = _metric(router.metrics_url, "route_alerts_failed_total", "gone")
            (letter,) = [d for d in letters if d["errorClass"] == "refused"]
            (unreadable,) = [d for d in letters if d["errorClass"] == "decode"]
            assert unreadable["value"] == b"not avro" and "not a SchemaDriftAlert" in unreadable["errorMessage"]
            assert letter["stage"] == "alert-router" and letter["errorClass"] == "refused"
            assert "route gone" in letter["errorMessage"] and "HTTP 404 no_service" in letter["errorMessage"]
            assert "XXXX" not in letter["errorMessage"]  # the webhook URL's token is never written out
            assert (letter["sourceTopic"], letter["sourceOffset"]) == (settings.drift_topic, 0)
            assert failed == 1
            # the channel fixed, the dead letter redriven: the route that refused it sends it, the webhook not again
            redriven = lineage("dlq", "redrive", "--reason", "refused", env={**os.environ, **env})
            assert f"redrove 1 dead letters to {settings.drift_topic} (reason refused)" in redriven.stdout
            slack.wait_for(2, 30)
            sleep_watching(2.0, [router])
        assert [r.headers["X-Lineage-Delivery"] for r in slack.accepted()] == [
            delivery_id("gone", [second["alertId"]]), delivery_id("gone", [first["alertId"]])]
        assert Counter(_webhook_ids(hook)) == Counter([first["alertId"], second["alertId"]])


def test_a_wrong_routes_file_stops_the_router_at_start_with_the_reason(tmp_path: Path) -> None:
    env, _ = _pipeline(tmp_path, "invalid", [{"name": "x", "destination": {"type": "webhook",
                                                                                     "url": "http://127.0.0.1:1/h"}}])
    with pytest.raises(ChildExited) as refused, alert_router_process(env):
        pass
    assert "secret_file names the file holding its HMAC key" in refused.value.tail


def test_a_new_router_group_starts_at_the_topic_s_end_unless_told_otherwise(tmp_path: Path) -> None:
    with Receiver("webhook", secret=b"k" * 16) as hook:
        env, settings = _pipeline(tmp_path, "latest", [
            _hook_route(tmp_path, hook)])
        history, new = _alert(1), _alert(2)
        _publish(settings, [history])
        with alert_router_process({**env, "LINEAGE_ROUTER_START": "latest"}) as router:
            wait_until(lambda: "ledger records read" in router.output_so_far(), 30, watch=[router],
                       what="the router's partitions")
            _publish(settings, [new])
            hook.wait_for(1, 30)
            sleep_watching(2.0, [router])
        assert _webhook_ids(hook) == [new["alertId"]]  # the history before its first start is not posted


def test_a_second_router_joining_the_group_mid_delivery_shares_the_work_and_sends_nothing_twice(
        tmp_path: Path) -> None:
    with Receiver("webhook", secret=b"k" * 16) as hook:
        env, settings = _pipeline(tmp_path, "rebalance", [_hook_route(tmp_path, hook)])
        alerts = [_alert(n) for n in range(16)]  # over both partitions (keyed by dataset)
        _publish(settings, alerts)
        hook.hold(0.5)  # slow enough that the second member joins while the first is mid-way
        with alert_router_process(env) as first:
            hook.wait_for(2, 60)
            with alert_router_process(env) as second:
                hook.wait_for(16, 120)
                wait_until(lambda: _committed_to_the_end(settings, env["LINEAGE_ROUTER_GROUP"]), 60,
                           watch=[first, second], what="the group's offsets at the alert topic's end")
                sleep_watching(2.0, [first, second])
        assert Counter(_webhook_ids(hook)) == Counter(a["alertId"] for a in alerts)  # each once
        assert "ledger records read" in second.output  # it took partitions over, with what was done on them
