"""Sensitive tags along column lineage on the real stack (``lineage tags``, ``GET /api/v2/sensitive``): a ``pii`` tag
carried three hops down through unmasked hops, stopped by a masked one, not carried by an INDIRECT one, kept or
stopped at an aggregation as configured, and datasets cleared for it told apart."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import ChildProcess, pipeline_env, processor_process, server_process, sink_process
from tests.integration.conftest import decoded_events, lineage, screenshot

pytestmark = pytest.mark.integration
FACET = {"_producer": "t", "_schemaURL": "t"}


class Platform:
    def __init__(self) -> None:
        self.ns = f"postgres://pii-{uuid.uuid4().hex[:8]}:5432"
        raw = self.dataset("raw.customers", tags=[{"key": "classification", "value": "pii", "field": "email"},
                                                  {"key": "owner", "value": "crm"}])
        stg = self.dataset("stg.customers", {"email": [("raw.customers", "email", "DIRECT", "IDENTITY", False)],
                                             "email_hash": [("raw.customers", "email", "DIRECT", "HASH", True)]})
        mart = self.dataset("mart.orders", {"email": [("stg.customers", "email", "DIRECT", "IDENTITY", False)],
                                            "is_gmail": [("stg.customers", "email", "INDIRECT", "FILTER", False)]})
        export = self.dataset("export.contacts", {"contact": [("mart.orders", "email", "DIRECT", "TRANSFORMATION",
                                                               False)]}, tags=[{"key": "pii-cleared", "value": "yes"}])
        hashed = self.dataset("analytics.hashed", {"h": [("stg.customers", "email_hash", "DIRECT", "IDENTITY",
                                                          False)]})
        stats = self.dataset("stats.senders", {"senders": [("mart.orders", "email", "DIRECT", "AGGREGATION", False)]})
        self.events = [self.event("load", [], [raw]), self.event("stage", [raw], [stg]),
                       self.event("mart", [stg], [mart]), self.event("export", [mart], [export]),
                       self.event("hash", [stg], [hashed]), self.event("stats", [mart], [stats])]

    def dataset(self, name: str, lineage: dict[str, list[tuple[str, str, str, str, bool]]] | None = None,
                tags: list[dict[str, str]] | None = None) -> dict[str, Any]:
        facets: dict[str, Any] = {}
        if lineage:
            facets["columnLineage"] = {**FACET, "fields": {out: {"inputFields": [
                {"namespace": self.ns, "name": source, "field": field, "transformations": [
                    {"type": kind, "subtype": subtype, **({"masking": True} if masked else {})}]}
                for source, field, kind, subtype, masked in inputs]} for out, inputs in lineage.items()}}
        if tags:
            facets["tags"] = {**FACET, "tags": [{**tag, "source": "USER"} for tag in tags]}
        return {"namespace": self.ns, "name": name, "facets": facets}

    def event(self, job: str, inputs: list[dict], outputs: list[dict]) -> dict[str, Any]:
        return {"eventType": "COMPLETE", "eventTime": "2026-12-05T10:00:00Z", "producer": "t",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
                "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": self.ns, "name": job},
                "inputs": inputs, "outputs": outputs}


@pytest.fixture(scope="module")
def platform(clients: ClientSettings) -> Platform:
    platform = Platform()
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, platform.events)
    return platform


def reached(columns: list[dict[str, Any]], namespace: str) -> dict[str, tuple[str, int, bool]]:
    return {f"{c['name']}.{c['field']}": (c["status"], c["depth"], c["cleared"])
            for c in columns if c["namespace"] == namespace}


EXPECTED = {"raw.customers.email": ("origin", 0, False),
            "stg.customers.email": ("derived", 1, False),
            "stg.customers.email_hash": ("masked", 1, False),  # the tag stops here: analytics.hashed.h is clean
            "mart.orders.email": ("derived", 2, False),  # mart.orders.is_gmail (INDIRECT/FILTER) carries no values
            "export.contacts.contact": ("derived", 3, True),
            "stats.senders.senders": ("derived", 3, False)}


def test_a_pii_tag_goes_three_hops_down_unmasked_and_stops_at_a_masked_hop(platform: Platform) -> None:
    answer = json.loads(lineage("tags", "--json").stdout)
    assert answer["tags"] == ["pii"]
    assert reached(answer["columns"], platform.ns) == EXPECTED
    (contact,) = [c for c in answer["columns"] if c["namespace"] == platform.ns and c["field"] == "contact"]
    assert [(h["name"], h["field"], h["transformation"], [j["name"] for j in h["jobs"]]) for h in contact["path"]] == [
        ("stg.customers", "email", "DIRECT/IDENTITY", ["stage"]), ("mart.orders", "email", "DIRECT/IDENTITY", ["mart"]),
        ("export.contacts", "contact", "DIRECT/TRANSFORMATION", ["export"])]
    assert contact["origin"] == {"namespace": platform.ns, "name": "raw.customers", "field": "email"}
    (hash_column,) = [c for c in answer["columns"] if c["namespace"] == platform.ns and c["field"] == "email_hash"]
    assert hash_column["maskedBy"]["transformation"] == "DIRECT/HASH(masked)"
    text = lineage("tags", "--dataset", platform.ns, "stg.customers").stdout
    assert "stg.customers.email_hash  masked from customers.email" in text.replace("raw.customers", "customers")
    stopped = json.loads(lineage("tags", "--json", env={"LINEAGE_SENSITIVE_AGGREGATION": "stop"}).stdout)
    assert "stats.senders.senders" not in reached(stopped["columns"], platform.ns)
    whole = json.loads(lineage("tags", "--json", "--tag", "owner:crm").stdout)  # a dataset's tag: all its columns
    assert {k: v[0] for k, v in reached(whole["columns"], platform.ns).items()} == {
        k: v[0] for k, v in EXPECTED.items()}


@pytest.fixture(scope="module")
def server(platform: Platform) -> Iterator[ChildProcess]:
    with server_process() as child:
        yield child


def test_the_server_answers_where_the_tag_reaches(platform: Platform, server: ChildProcess) -> None:
    answer = requests.get(f"{server.url}/api/v2/sensitive", timeout=60).json()
    assert reached(answer["columns"], platform.ns) == EXPECTED
    one = requests.get(f"{server.url}/api/v2/datasets/{requests.utils.quote(platform.ns, safe='')}/mart.orders/"
                       "sensitive", timeout=60).json()
    assert [(c["field"], c["status"]) for c in one["columns"]] == [("email", "derived")]
    assert requests.get(f"{server.url}/api/v2/sensitive", params={"asOf": "yesterday"}, timeout=30).status_code == 400


def test_tags_set_through_the_api_are_events_that_reach_the_graph(platform: Platform, tmp_path: Path) -> None:
    prefix = f"test.tags.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    hashed = f"{server_segment(platform.ns)}/analytics.hashed"
    with processor_process(env), sink_process(env), server_process(env) as server:
        url = f"{server.url}/api/v2/datasets/{hashed}/tags"
        answer = requests.put(url, json={"tags": [{"key": "pii", "field": "h"}]}, timeout=60)
        assert answer.status_code == 202, answer.text
        assert answer.json()["userTags"] == [{"key": "pii", "value": "true", "source": "USER", "field": "h"}]
        columns = _wait_for(server.url, platform.ns, lambda found: "analytics.hashed.h" in found)
        assert columns["analytics.hashed.h"] == ("origin", 0, False)
        assert requests.get(url, timeout=30).json()["userTags"][0]["field"] == "h"
        assert requests.put(url, json={"tags": [{"value": "x"}]}, timeout=30).status_code == 400
        missing = f"{server.url}/api/v2/datasets/{server_segment(platform.ns)}/no.such.table/tags"
        assert requests.put(missing, json={"tags": [{"key": "pii"}]}, timeout=30).status_code == 404
        gone = requests.delete(url, params={"key": "pii", "field": "h"}, timeout=60)
        assert gone.status_code == 202 and gone.json()["userTags"] == []
        _wait_for(server.url, platform.ns, lambda found: "analytics.hashed.h" not in found)
    recorded = decoded_events(settings, settings.events_topic, 2)
    assert [event["dataset"]["facets"]["kafkaLineage_tags"]["tags"] for _key, event in recorded] == [
        [{"key": "pii", "value": "true", "source": "USER", "field": "h"}], []]


def server_segment(value: str) -> str:
    return requests.utils.quote(value, safe="")


def _wait_for(url: str, namespace: str, done: Any) -> dict[str, tuple[str, int, bool]]:
    deadline = time.monotonic() + 60
    while True:
        found = reached(requests.get(f"{url}/api/v2/sensitive", timeout=60).json()["columns"], namespace)
        if done(found) or time.monotonic() > deadline:
            assert done(found), found
            return found
        time.sleep(0.5)


def test_the_dataset_page_shows_each_columns_tag_and_its_origin(platform: Platform, server: ChildProcess,
                                                               browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    node = server_segment(f"dataset:{platform.ns}:stg.customers")
    page.goto(f"{server.url}/#/lineage?node={node}&depth=1")
    page.locator("#details .tag").first.wait_for(timeout=15_000)
    badges = {badge.inner_text(): badge.get_attribute("class") for badge in page.locator("#details .tag").all()}
    assert badges == {"pii: derived from raw.customers.email, dataset not cleared": "tag tag-derived tag-uncleared",
                      "pii: masked: stops here (from raw.customers.email)": "tag tag-masked"}
    derived = page.locator("#details .tag-derived")
    assert derived.get_attribute("title") == "raw.customers.email → stg.customers.email (DIRECT/IDENTITY)"
    screenshot(page, "sensitive-tags")
    assert errors == []
