"""The processor's compiled JSON paths (msgspec decoding, orjson encoding, validation by parts) give exactly what the
plain json module and the whole-event validation give: the same values, the same bytes, the same refusals."""

from __future__ import annotations

import copy
import json

import pytest

from kafka_lineage.processors.identity import canonical_json, dedupe_id
from kafka_lineage.schemas.openlineage import (
    FacetCache,
    InvalidEvent,
    event_to_record,
    loads,
    record_to_event,
    validate_event,
)
from kafka_lineage_devtools.bench_events import run_pairs

DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode

TEXTS = ['{"a":1,"a":2}', "-0", "123456789012345678901234567890", '{"n":123456789012345678901234567890}',
         '{"f":1e-05,"g":1E5,"h":-0.0,"i":2e308,"j":0.1}', "NaN", '{"x":NaN,"y":Infinity}', '"\\ud800"', '"\ud800"',
         '"\\ud83d\\ude00"', '"\\u0000\\u001f\u2028\u00e9"', '{"é":[true,false,null]}', " {} ", "01", "[1,]",
         '{"a":1}x', "\ufeff{}", '"\t"', "[" * 450 + "]" * 450, "[" * 5000 + "]" * 5000, "", "1e400"]


def _outcome(read, text: str) -> tuple[str, str]:
    try:
        return "ok", repr(read(text))
    except RecursionError:
        return "deep", ""
    except ValueError as exc:
        return "error", type(exc).__name__


@pytest.mark.parametrize("text", TEXTS)
def test_loads_reads_every_text_as_json_loads(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)
    cache = FacetCache()
    assert _outcome(cache.parse, text) == _outcome(json.loads, text)


@pytest.mark.parametrize("facet", [
    {"a": "x", "n": 2**63 - 1, "m": -(2**63), "b": [True, None, {"z": 1, "y": "\u2028\x00\U0001f600é"}]},
    {"f": 1e-05, "g": 1e16, "h": 0.1, "i": -0.0},  # floats: json's spelling, not orjson's
    {"big": 2**64, "small": -(2**70)},  # beyond 64 bits: orjson refuses, json writes them
    {"nan": float("nan"), "inf": float("-inf")},
])
def test_facets_are_written_as_json_writes_them(facet: dict) -> None:
    text = DUMPS(facet)
    cache = FacetCache(admit_after=0)
    for _ in range(3):  # parsed, then cached
        parsed = cache.parse(text)
        assert cache.dumps(parsed) == DUMPS(parsed) == text
        assert cache.canonical(parsed) == CANONICAL(parsed)
    fresh = FacetCache()
    parsed = fresh.parse(text)  # not cached: tracked until its event is written
    assert fresh.dumps(parsed) == text
    assert fresh.canonical(parsed) == CANONICAL(parsed)


def test_events_encode_and_hash_as_without_the_cache() -> None:
    cache = FacetCache(admit_after=1)
    for event in run_pairs(40, "realistic") * 3:
        event["outputs"][0]["facets"]["schema"]["ratio"] = 0.00001  # a float in one facet
        record = event_to_record(event)
        decoded = record_to_event(record, cache)
        assert decoded == record_to_event(record)
        assert event_to_record(decoded, cache) == record
        assert canonical_json(decoded, cache) == canonical_json(decoded)
        assert dedupe_id(decoded, cache) == dedupe_id(decoded)


def _refusal(event: dict, facets: FacetCache | None) -> str:
    try:
        return validate_event(event, facets)
    except InvalidEvent as exc:
        return f"refused: {exc}"


BREAKS = [
    lambda e: e["run"].update(runId="not-a-uuid"),
    lambda e: e["job"]["facets"]["sql"].pop("query"),
    lambda e: e["outputs"][0]["facets"]["schema"].update(fields="none"),
    lambda e: e["outputs"][0]["facets"].update(schema=[1]),
    lambda e: e["inputs"][0].update(facets={"schema": "text"}),
    lambda e: (e["run"].update(runId="bad"), e["job"]["facets"]["jobType"].update(processingType=3)),
    lambda e: e["job"]["facets"]["sql"].update(query="\ud800"),
    lambda e: e["outputs"][0].update(outputFacets={"outputStatistics": {"_producer": "p"}}),
    lambda e: e.update(eventType="NOPE"),
    lambda e: e["inputs"][0].update(name=None),
    lambda e: None,
]


@pytest.mark.parametrize("index", range(len(BREAKS)))
def test_validation_by_parts_refuses_as_the_whole_check(index: int) -> None:
    cache = FacetCache(admit_after=0)
    base = run_pairs(2, "realistic")[1]
    for _ in range(3):  # the facets' validity computed, then remembered
        event = copy.deepcopy(base)
        BREAKS[index](event)
        decoded = record_to_event(event_to_record(event), cache) if index != 6 else event
        assert _refusal(decoded, cache) == _refusal(copy.deepcopy(event), None)
