"""Owners and tags an alert carries (``sinks/alerts/ownership.py``, ``graph/facets.py``): read leniently from
ownership and tags facets, bounded, the newest facet known winning."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kafka_lineage.graph.facets import (
    MAX_LABEL_CHARS,
    MAX_OWNERS,
    MAX_TAGS,
    document_facet,
    facet_owners,
    facets_tags,
    tag_name,
)
from kafka_lineage.graph.queries import Reached
from kafka_lineage.sinks.alerts.exposures import exposure_alerts
from kafka_lineage.sinks.alerts.ownership import (
    alert_ownership,
    dataset_ownership,
    event_dataset_facets,
    facet_requests,
)
from tests.unit.schemas.test_avro_schemas import _round_trip
from tests.unit.sinks.test_exposures import MART


def ownership(*names: Any) -> dict[str, Any]:
    return {"_producer": "p", "_schemaURL": "s", "owners": [{"name": n, "type": "MAINTAINER"} for n in names]}


def stored(key: str, facet: Any, time: str = "2024-05-01T12:00:00.000000Z") -> tuple[str | None, str]:
    """A facet document as ``graph.queries.node_facets`` answers it."""
    return (None if isinstance(facet, dict) and facet.get("_deleted") else json.dumps({key: facet}), time)


def test_owners_are_the_owner_names_deduplicated_in_order() -> None:
    assert facet_owners(ownership("team:payments", "user:ann", "team:payments", " user:bob ")) == [
        "team:payments", "user:ann", "user:bob"]
    assert facet_owners({"owners": [{"name": "team:a"}]}) == ["team:a"]  # no type: still an owner


@pytest.mark.parametrize("facet", [
    None, "team:a", 7, [], {}, {"owners": None}, {"owners": "team:a"}, {"owners": {"name": "team:a"}},
    {"owners": [None, 1, "team:a", [], {}, {"name": None}, {"name": 5}, {"name": ""}, {"name": "   "},
                {"name": ["team:a"]}, {"type": "MAINTAINER"}]},
    {"_deleted": True, "owners": [{"name": "team:a"}]},
])
def test_a_malformed_or_deleted_ownership_facet_gives_no_owners_and_no_error(facet: Any) -> None:
    assert facet_owners(facet) == []


def test_owners_are_bounded_in_count_and_length() -> None:
    too_long = "t" * (MAX_LABEL_CHARS + 1)
    names = [too_long, "team:a", *(f"team:{i}" for i in range(100))]
    owners = facet_owners(ownership(*names))
    assert len(owners) == MAX_OWNERS and owners[0] == "team:a" and too_long not in owners
    assert facet_owners(ownership("t" * MAX_LABEL_CHARS)) == ["t" * MAX_LABEL_CHARS]


def test_dataset_tags_are_the_dataset_level_ones_lower_cased() -> None:
    producers = {"tags": [{"key": "PII", "value": "true"}, {"key": "Tier", "value": "Gold"},
                          {"key": "email", "value": "pii", "field": "email"},  # a column's: not the dataset's
                          {"key": "owner", "value": "owner"}, {"key": "domain", "value": ""},
                          {"key": "flag"}, {"key": "pii"}]}
    api = {"tags": [{"key": "gdpr", "value": "true", "source": "USER"}, {"key": "Tier", "value": "gold"}]}
    assert facets_tags([producers, api]) == ["pii", "tier:gold", "owner", "domain", "flag", "gdpr"]
    assert tag_name({"key": "a", "field": ""}) == "a"  # an empty field is no column


@pytest.mark.parametrize("facet", [None, "pii", [], {}, {"tags": None}, {"tags": "pii"}, {"tags": {"key": "pii"}},
                                   {"tags": [None, 3, "pii", {}, {"key": None}, {"key": 4}, {"key": " "},
                                             {"key": "pii", "field": 7}]},
                                   {"_deleted": True, "tags": [{"key": "pii"}]}])
def test_a_malformed_or_deleted_tags_facet_gives_no_tags_and_no_error(facet: Any) -> None:
    assert facets_tags([facet]) == []


def test_tags_are_bounded_in_count_and_length() -> None:
    facet = {"tags": [{"key": "k" * (MAX_LABEL_CHARS + 1)}, {"key": "k", "value": "v" * MAX_LABEL_CHARS},
                      *({"key": f"tag{i}"} for i in range(100))]}
    tags = facets_tags([facet])
    assert len(tags) == MAX_TAGS and tags[0] == "tag0"


@pytest.mark.parametrize("text", [None, "", "not json", "[1]", '"x"', '{"_omitted": {"ownership": 70000}}',
                                  '{"other": {}}'])
def test_a_stored_document_without_the_facet_gives_none(text: str | None) -> None:
    assert document_facet(text, "ownership") is None


EVENT_TIME = "2024-05-01T12:00:00Z"


def _event(facets: dict[str, Any], time: str = EVENT_TIME) -> dict[str, Any]:
    return {"eventTime": time, "inputs": [{"namespace": "s3://lake", "name": "raw", "facets": {
        "ownership": ownership("team:input-side")}}],
        "outputs": [{"namespace": "s3://lake", "name": "other", "facets": {"ownership": ownership("team:x")}},
                    {"namespace": "s3://lake", "name": "orders", "facets": facets}]}


def test_the_changed_dataset_s_owners_come_from_its_event_unless_the_graph_knows_a_later_facet() -> None:
    event = _event({"ownership": ownership("team:payments"), "tags": {"tags": [{"key": "PII"}]}})
    graph_then = {("Dataset", "s3://lake", "orders", "ownership"): stored("ownership", ownership("team:old"),
                                                                          "2024-05-01T11:00:00.000000Z")}
    assert dataset_ownership(graph_then, "s3://lake", "orders", event) == (["team:payments"], ["pii"])
    assert dataset_ownership({}, "s3://lake", "orders", event) == (["team:payments"], ["pii"])
    # a late change's event: the graph's facet came with a later event
    graph_later = {("Dataset", "s3://lake", "orders", "ownership"): stored("ownership", ownership("team:new"),
                                                                           "2024-05-01T13:00:00.000000Z")}
    assert dataset_ownership(graph_later, "s3://lake", "orders", event)[0] == ["team:new"]
    # the event carries no ownership facet: the graph's, whenever it came; deleted later: nobody
    assert dataset_ownership(graph_then, "s3://lake", "orders", _event({}))[0] == ["team:old"]
    deleted = {("Dataset", "s3://lake", "orders", "ownership"): stored("ownership", {"_deleted": True},
                                                                       "2024-05-01T13:00:00.000000Z")}
    assert dataset_ownership(deleted, "s3://lake", "orders", event)[0] == []
    # the event deletes it: nobody, whatever the graph held before
    assert dataset_ownership(graph_then, "s3://lake", "orders", _event({"ownership": {"_deleted": True}}))[0] == []
    # tags from both tags facets, each the newest known
    graph_tags = {("Dataset", "s3://lake", "orders", "kafkaLineage_tags"): stored(
        "kafkaLineage_tags", {"tags": [{"key": "gdpr", "value": "true"}, {"key": "pii", "field": "email"}]})}
    assert dataset_ownership(graph_tags, "s3://lake", "orders", event)[1] == ["pii", "gdpr"]


def test_an_event_without_the_dataset_or_with_malformed_facets_gives_the_graph_s_or_nothing() -> None:
    assert event_dataset_facets({}, "s3://lake", "orders") == {}
    assert event_dataset_facets({"outputs": None, "dataset": "x", "inputs": [None, 3]}, "s3://lake", "orders") == {}
    assert event_dataset_facets({"dataset": {"namespace": "s3://lake", "name": "orders", "facets": "x"}},
                                "s3://lake", "orders") == {}
    assert event_dataset_facets({"dataset": {"namespace": "s3://lake", "name": "orders", "facets": {"a": 1}}},
                                "s3://lake", "orders") == {"a": 1}
    bad = _event({"ownership": "team:a", "tags": [{"key": "pii"}]})
    assert dataset_ownership({}, "s3://lake", "orders", bad) == ([], [])
    broken = {("Dataset", "s3://lake", "orders", "ownership"): ("{not json", "2024-05-01T13:00:00.000000Z")}
    assert dataset_ownership(broken, "s3://lake", "orders", {"eventTime": "not a time"}) == ([], [])


def test_an_alert_s_ownership_reads_impacted_nodes_from_the_graph_and_its_dataset_from_the_event_too() -> None:
    impacted = [Reached(1, "job", "jobs", "clean"), Reached(1, "dataset", "s3://lake", "clean"),
                Reached(2, "job", "jobs", "mart")]
    assert facet_requests("s3://lake", "orders", impacted) == [
        ("Dataset", "s3://lake", "orders", ("ownership", "tags", "kafkaLineage_tags")),
        ("Job", "jobs", "clean", ("ownership",)), ("Dataset", "s3://lake", "clean", ("ownership",)),
        ("Job", "jobs", "mart", ("ownership",))]
    found = {("Job", "jobs", "clean", "ownership"): stored("ownership", ownership("team:etl", "team:etl")),
             ("Dataset", "s3://lake", "clean", "ownership"): stored("ownership", ownership("team:bi")),
             ("Job", "jobs", "mart", "ownership"): stored("ownership", {"_deleted": True})}
    event = _event({"ownership": ownership("team:payments")})
    owned = alert_ownership(found, "s3://lake", "orders", event, impacted)
    assert owned.dataset_owners == ["team:payments"]
    assert owned.of("job", "jobs", "clean") == ["team:etl"] and owned.of("dataset", "s3://lake", "clean") == ["team:bi"]
    assert owned.of("job", "jobs", "mart") == [] and owned.of("job", "jobs", "unknown") == []
    # the graph did not answer: the event's own facet still names the dataset's owners
    unanswered = alert_ownership(None, "s3://lake", "orders", event, impacted)
    assert unanswered.dataset_owners == ["team:payments"] and unanswered.owners == {}


def test_an_exposure_alert_takes_its_dataset_s_owners_and_tags_from_the_graph() -> None:
    (alert,) = exposure_alerts([MART], datetime(2026, 12, 5, tzinfo=UTC), 5, 10)
    assert alert["datasetOwners"] == [] and alert["datasetTags"] == []
    found = {("Dataset", "pg://db", "mart.orders", "ownership"): stored("ownership", ownership("team:mart")),
             ("Dataset", "pg://db", "mart.orders", "tags"): stored("tags", {"tags": [{"key": "Finance"}]})}
    alert["datasetOwners"], alert["datasetTags"] = dataset_ownership(found, "pg://db", "mart.orders")
    assert (alert["datasetOwners"], alert["datasetTags"]) == (["team:mart"], ["finance"])
    assert _round_trip("schema_drift_alert", alert) == alert
