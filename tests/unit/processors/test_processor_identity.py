"""Event identity for dedupe: exact repeats collide, anything else (facets included) stays distinct."""

from __future__ import annotations

import copy
import json

from openlineage.client.event_v2 import RunState

from kafka_lineage.processors.identity import dedupe_id, run_id
from tests.openlineage_samples import dataset_event, full_run_event, job_event


def test_dedupe_id_is_hex_sha256_and_deterministic() -> None:
    event = full_run_event()
    first = dedupe_id(event)
    assert len(first) == 64
    assert int(first, 16) >= 0
    assert dedupe_id(copy.deepcopy(event)) == first


def test_exact_repeat_after_a_wire_round_trip_collides() -> None:
    event = full_run_event()
    assert dedupe_id(json.loads(json.dumps(event))) == dedupe_id(event)


def test_key_order_does_not_matter() -> None:
    event = full_run_event()
    reordered = json.loads(json.dumps(event, sort_keys=True))
    reversed_keys = dict(reversed(list(event.items())))
    assert dedupe_id(reordered) == dedupe_id(reversed_keys) == dedupe_id(event)


def test_spark_style_starts_with_accumulating_facets_stay_distinct() -> None:
    start = full_run_event(RunState.START)
    richer = copy.deepcopy(start)
    richer["run"]["facets"]["spark_properties"] = {"_producer": "p", "_schemaURL": "s", "properties": {"a": "1"}}
    richest = copy.deepcopy(richer)
    richest["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] = 11
    ids = {dedupe_id(e) for e in (start, richer, richest)}
    assert len(ids) == 3
    assert {run_id(e) for e in (start, richer, richest)} == {start["run"]["runId"]}


def test_any_value_difference_is_a_different_event() -> None:
    event = full_run_event()
    other_time = {**event, "eventTime": "2024-05-01T12:00:00.123457+00:00"}
    other_type = {**event, "eventType": "FAIL"}
    one_as_float = copy.deepcopy(event)
    one_as_float["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] = 10.0
    assert len({dedupe_id(e) for e in (event, other_time, other_type, one_as_float)}) == 4


def test_non_ascii_and_odd_strings_hash_without_error() -> None:
    event = dataset_event()
    event["dataset"]["name"] = "zamówienia 📦"
    assert dedupe_id(event) != dedupe_id(dataset_event())
    event["dataset"]["name"] = "\ud800 lone surrogate"  # json.loads accepts "\ud800"
    assert len(dedupe_id(event)) == 64


def test_run_id() -> None:
    event = full_run_event()
    assert run_id(event) == event["run"]["runId"]
    assert run_id(dataset_event()) is None
    assert run_id(job_event()) is None
    assert run_id({"run": None}) is None
    assert run_id({"run": {"runId": 7}}) is None
    assert run_id({"run": {"runId": ""}}) is None
