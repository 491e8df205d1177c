"""Backfill plans (issue 22): the pure planner over stated facts — window, partition-level derivation, job-level
fallback, depth, cycles, deterministic longest-path stages."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from datetime import date
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from kafka_lineage import schemas as schemas_package
from kafka_lineage.graph.backfill import BackfillFacts, PlanError, RunFacts, partition_date, plan
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.partitions import PartitionStatus, partition_status
from kafka_lineage.schemas.partitions import BACKFILL_SCHEMA_URL, partition_facet
from tests.unit.graph.test_partitions import facts, marker_event, run_event

NS = "s3://lake"
DAYS = ["2025-12-01", "2025-12-02", "2025-12-03"]
FROM, TO = date(2025, 12, 1), date(2025, 12, 2)


def _facts(jobs: dict[str, tuple[list[str], list[str], int]], runs: list[RunFacts], start: str = "raw",
           keys: list[str] | None = None, truncated: bool = False) -> BackfillFacts:
    """jobs: name → (input datasets, output datasets, level)."""
    return BackfillFacts(
        (NS, start), tuple(keys if keys is not None else [f"date={d}" for d in DAYS]),
        {("air", j): level for j, (_, _, level) in jobs.items()},
        {("air", j): tuple((NS, d) for d in ins) for j, (ins, _, _) in jobs.items()},
        {("air", j): tuple((NS, d) for d in outs) for j, (_, outs, _) in jobs.items()},
        tuple(runs), truncated)


def _daily(job: str, ins: list[str], outs: list[str], days: list[str] = DAYS, backfill: str | None = None,
           hour: str = "01") -> list[RunFacts]:
    return [RunFacts(f"{job}-{day}-{hour}", ("air", job), "COMPLETE", f"{day}T{hour}:00:00.000Z", None, backfill,
                     tuple((NS, d, f"date={day}") for d in ins), tuple((NS, d, f"date={day}") for d in outs))
            for day in days]


def _items(result: dict[str, Any]) -> list[list[tuple[str, str]]]:
    return [[(i["job"]["name"], i["key"]) for i in stage["items"]] for stage in result["stages"]]


DIAMOND = {"a": (["raw"], ["A"], 1), "b": (["raw"], ["B"], 1), "c": (["A", "B"], ["C"], 2)}


def _diamond_runs() -> list[RunFacts]:
    return _daily("a", ["raw"], ["A"]) + _daily("b", ["raw"], ["B"]) + _daily("c", ["A", "B"], ["C"])


def test_partition_date_rule() -> None:
    assert partition_date("date=2025-12-01/region=eu") == date(2025, 12, 1)
    assert partition_date("region=eu/dt=20251201") == date(2025, 12, 1)
    assert partition_date("region=eu/day=2025-12-02/other=2025-12-03") == date(2025, 12, 2)
    assert partition_date("date=yesterday") is None  # a date key that is no date: not by another key
    assert partition_date("region=eu") is None
    assert partition_date("dt=20251301") is None


def test_diamond_stages_inputs_and_last_runs() -> None:
    result = plan(_facts(DIAMOND, _diamond_runs()), FROM, TO, 10)
    assert result["partitions"] == ["date=2025-12-01", "date=2025-12-02"]
    assert _items(result) == [[("a", "date=2025-12-01"), ("a", "date=2025-12-02"), ("b", "date=2025-12-01"),
                               ("b", "date=2025-12-02")], [("c", "date=2025-12-01"), ("c", "date=2025-12-02")]]
    c1 = result["stages"][1]["items"][0]
    assert c1["rebuild"] == [{"namespace": NS, "name": "C", "key": "date=2025-12-01"}]
    assert c1["inputs"] == [{"namespace": NS, "name": "A", "key": "date=2025-12-01"},
                            {"namespace": NS, "name": "B", "key": "date=2025-12-01"}]
    assert c1["after"] == ["air a date=2025-12-01", "air b date=2025-12-01"]
    assert c1["lastRun"]["runId"] == "c-2025-12-01-01" and c1["lastRun"]["state"] == "COMPLETE"
    assert c1["partitions"] == "known" and c1["derivation"] == "partition"
    assert [j["name"] for j in result["jobs"]] == ["a", "b", "c"]
    assert result["cycles"] == [] and result["itemCount"] == 6


def test_stages_do_not_depend_on_fact_order() -> None:
    runs = _diamond_runs()
    expected = plan(_facts(DIAMOND, runs), FROM, TO, 10)
    for seed in range(5):
        random.Random(seed).shuffle(runs)
        assert plan(_facts(DIAMOND, runs), FROM, TO, 10) == expected


def test_fan_out_and_a_weekly_rollup_follow_the_recorded_partitions() -> None:
    jobs = {"x": (["raw"], ["X"], 1), "y": (["raw"], ["Y"], 1), "z": (["raw"], ["Z"], 1),
            "week": (["X"], ["W"], 2)}
    week = RunFacts("week-49", ("air", "week"), "COMPLETE", "2025-12-08T00:00:00Z", None, None,
                    tuple((NS, "X", f"date={d}") for d in DAYS), ((NS, "W", "week=2025-49"),))
    runs = _daily("x", ["raw"], ["X"]) + _daily("y", ["raw"], ["Y"]) + _daily("z", ["raw"], ["Z"]) + [week]
    result = plan(_facts(jobs, runs), FROM, TO, 10)
    assert [len(s) for s in _items(result)] == [6, 1]
    assert _items(result)[1] == [("week", "week=2025-49")]
    # it reads day 3 too, which is not rebuilt: listed as input, not as a dependency
    assert len(result["stages"][1]["items"][0]["inputs"]) == 3
    assert result["stages"][1]["items"][0]["after"] == ["air x date=2025-12-01", "air x date=2025-12-02"]


def test_job_without_partition_facts_is_planned_by_window_and_so_is_what_reads_it() -> None:
    jobs = {"a": (["raw"], ["A"], 1), "blind": (["A"], ["B"], 2), "after": (["B"], ["C"], 3)}
    blind = RunFacts("blind-1", ("air", "blind"), "COMPLETE", "2025-12-05T00:00:00Z")
    runs = [*_daily("a", ["raw"], ["A"]), blind, *_daily("after", ["B"], ["C"])]
    result = plan(_facts(jobs, runs), FROM, TO, 10)
    assert _items(result) == [[("a", "date=2025-12-01"), ("a", "date=2025-12-02")],
                              [("blind", "date=2025-12-01"), ("blind", "date=2025-12-02")],
                              [("after", "date=2025-12-01"), ("after", "date=2025-12-02")]]
    blind = result["stages"][1]["items"][0]
    assert blind["partitions"] == "unknown" and blind["derivation"] == "window"
    assert blind["inputs"] == [{"namespace": NS, "name": "A", "key": None}]
    assert blind["after"] == ["air a date=2025-12-01", "air a date=2025-12-02"]  # the whole dataset it reads
    assert blind["lastRun"]["runId"] == "blind-1"
    # `after` records partition reads of B, but B was rebuilt by window: by window too, after every blind item
    assert result["stages"][2]["items"][0]["derivation"] == "window"


def test_depth_caps_the_jobs() -> None:
    jobs = {"a": (["raw"], ["A"], 1), "b": (["A"], ["B"], 2), "c": (["B"], ["C"], 3)}
    runs = _daily("a", ["raw"], ["A"]) + _daily("b", ["A"], ["B"]) + _daily("c", ["B"], ["C"])
    result = plan(_facts(jobs, runs, truncated=True), FROM, TO, 2)
    assert [j["name"] for j in result["jobs"]] == ["a", "b"] and result["truncated"]


def test_cycles_end_and_are_reported() -> None:
    jobs = {"a": (["raw", "B"], ["A"], 1), "b": (["A"], ["B"], 2)}
    runs = _daily("a", ["raw", "B"], ["A"]) + _daily("b", ["A"], ["B"])
    result = plan(_facts(jobs, runs), FROM, TO, 10)
    assert result["cycles"] == [[{"namespace": "air", "name": "a"}, {"namespace": "air", "name": "b"}]]
    assert sorted(i for s in _items(result) for i in s) == [("a", "date=2025-12-01"), ("a", "date=2025-12-02"),
                                                            ("b", "date=2025-12-01"), ("b", "date=2025-12-02")]
    assert len(result["stages"]) == 1  # each day's a and b depend on each other: one layer


def test_window_errors_and_empty_window() -> None:
    with pytest.raises(PlanError, match="no partition key is a date"):
        plan(_facts(DIAMOND, [], keys=["region=eu"]), FROM, TO, 10)
    with pytest.raises(PlanError, match="no partitions"):
        plan(_facts(DIAMOND, [], keys=[]), FROM, TO, 10)
    with pytest.raises(PlanError, match="before"):
        plan(_facts(DIAMOND, []), TO, FROM, 10)
    empty = plan(_facts(DIAMOND, _diamond_runs()), date(2026, 1, 1), date(2026, 1, 2), 10)
    assert empty["stages"] == [] and empty["partitions"] == []


def test_last_run_prefers_a_later_live_run_over_an_earlier_backfill() -> None:
    runs = (_daily("a", ["raw"], ["A"], hour="01") + _daily("a", ["raw"], ["A"], backfill="bf-1", hour="00")
            + _daily("b", ["raw"], ["B"]) + _daily("c", ["A", "B"], ["C"]))
    result = plan(_facts(DIAMOND, runs), FROM, TO, 10)
    assert result["stages"][0]["items"][0]["lastRun"]["runId"] == "a-2025-12-01-01"
    later = _daily("a", ["raw"], ["A"], backfill="bf-1", hour="05")
    result = plan(_facts(DIAMOND, runs + later), FROM, TO, 10)
    assert result["stages"][0]["items"][0]["lastRun"] == {
        "runId": "a-2025-12-01-05", "state": "COMPLETE", "startTime": "2025-12-01T05:00:00.000Z", "endTime": None,
        "backfill": "bf-1"}


# --- the mark-stale and backfill-run rules, from events as the sink folds them (order free) -----------------------
def _stale_event(second: int, key: str = "date=2025-12-24") -> dict:
    mark = {"requestedAt": f"2025-12-24T01:00:{second:02d}Z", "reason": "backfill plan bf-1",
            "upstream": {"namespace": "s3://lake", "name": "raw", "planId": "bf-1"}}
    event = marker_event(second, keys=key)
    facet = event["dataset"]["facets"]["kafkaLineage_partition"]
    del facet["marker"]
    facet["stale"] = mark
    return event


def _backfill(event: dict, plan_id: str = "bf-1") -> dict:
    event["run"]["facets"] = {"kafkaLineage_backfill": {"_producer": "p", "_schemaURL": "u", "planId": plan_id,
                                                        "window": {"from": "2025-12-24", "to": "2025-12-24"}}}
    return event


def _status(events: list[dict]) -> PartitionStatus:
    """As test_partitions simulates the merged graph, plus the stale marks and the writers' backfill facets."""
    b = graph_batch(events)
    base = facts(events, reads=0)
    runs = {r["runId"]: r for r in b["runs"]}
    part = next(p for p in b["partitions"] if p["name"] == "events")
    marks = tuple(tuple(m.split(" ", 1)) for m in part.get("staleMarks") or ())
    versions = tuple(dataclasses.replace(v, backfill=(runs[v.run_id].get("backfill") or {}).get("planId"))
                     for v in base.versions)
    return partition_status(dataclasses.replace(base, versions=versions, stale_marks=marks))


def _every_order(events: list[dict]) -> set[tuple[str | None, str | None]]:
    return {(s.state, s.latest.version.run_id if s.latest else None)
            for s in (_status(list(order)) for order in itertools.permutations(events))}


def test_a_stale_mark_holds_until_a_writer_started_after_it_in_any_order() -> None:
    written = [run_event("START", 10, run="live"), run_event("COMPLETE", 20, run="live")]
    assert _every_order([*written, _stale_event(30)]) == {("STALE", "live")}
    assert _status([*written, _stale_event(30)]).reason.startswith("marked stale at 2025-12-24T01:00:30")
    assert _every_order([*written, _stale_event(5)]) == {("SUCCESS", "live")}  # a mark older than the version
    # a rewrite that started before the mark does not clear it; one started after it does
    early = [run_event("START", 25, run="early"), run_event("COMPLETE", 40, run="early")]
    assert _every_order([*written, _stale_event(30), *early]) == {("STALE", "early")}
    late = [_backfill(run_event("START", 35, run="bf")), _backfill(run_event("COMPLETE", 45, run="bf"))]
    assert _every_order([*written, _stale_event(30), *late]) == {("SUCCESS", "bf")}


def test_a_backfill_version_never_replaces_a_later_live_one() -> None:
    live = [run_event("START", 20, run="live"), run_event("COMPLETE", 30, run="live")]
    before = [_backfill(run_event("START", 10, run="bf")), _backfill(run_event("COMPLETE", 50, run="bf"))]
    assert _every_order([*live, *before]) == {("SUCCESS", "live")}  # completed last, started first: not current
    after = [_backfill(run_event("START", 40, run="bf")), _backfill(run_event("COMPLETE", 45, run="bf"))]
    assert _every_order([*live, *after]) == {("SUCCESS", "bf")}
    tie = [_backfill(run_event("START", 20, run="zz-bf")), _backfill(run_event("COMPLETE", 25, run="zz-bf"))]
    assert _every_order([*live, *tie]) == {("SUCCESS", "live")}  # the same start: the live version wins
    status = _status([*live, *after])
    assert [v.as_dict()["backfill"] for v in status.versions] == [None, "bf-1"]


def test_the_facet_schemas_accept_a_stale_request_and_a_backfill_run_facet() -> None:
    facets = Path(schemas_package.__file__).parent / "facets"
    base = {"$defs": {"RunFacet": {"type": "object", "required": ["_producer", "_schemaURL"]},
                      "DatasetFacet": {"type": "object", "required": ["_producer", "_schemaURL"]}}}

    def validator(file: str, name: str) -> jsonschema_rs.Validator:
        document = json.loads((facets / file).read_text())
        return jsonschema_rs.validator_for({**document, "$ref": f"#/$defs/{name}"}, retriever=lambda _uri: base)

    run_facet = {"_producer": "https://p", "_schemaURL": BACKFILL_SCHEMA_URL, "planId": "bf-1",
                 "window": {"from": "2025-12-01", "to": "2025-12-07"}}
    assert BACKFILL_SCHEMA_URL.endswith("BackfillRunFacet.json#/$defs/BackfillRunFacet")
    validator("BackfillRunFacet.json", "BackfillRunFacet").validate(run_facet)
    assert not validator("BackfillRunFacet.json", "BackfillRunFacet").is_valid({**run_facet, "planId": ""})
    stale = {"reason": "r", "requestedAt": "2025-12-08T00:00:00Z", "upstream": {"namespace": "s3://lake",
                                                                                 "name": "raw", "planId": "bf-1"}}
    validator("PartitionDatasetFacet.json", "PartitionDatasetFacet").validate(
        partition_facet("date=2025-12-01", "hook", stale=stale))
    with pytest.raises(ValueError, match="requestedAt"):
        partition_facet("date=2025-12-01", "hook", stale={"reason": "r"})
