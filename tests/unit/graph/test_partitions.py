"""Partitions (issue 22): events → partition rows, and the states computed from them — order independence, no
regression, versions, assertions, markers required or not, STALE and readiness. Pure: the graph is simulated from a
batch's rows exactly as the sink's statements merge them (one batch of all events = the merged graph)."""

from __future__ import annotations

import itertools
import random

import pytest

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.fingerprint import PARTITION_FINGERPRINT_QUERIES, fingerprint
from kafka_lineage.graph.partitions import (
    Check,
    PartitionFacts,
    Version,
    partition_status,
    readiness,
)
from kafka_lineage.graph.statements import CONSTRAINTS, STATEMENTS, statements

P = "https://example.com/producer"
LAKE = "s3://lake"
DAY = "date=2025-12-24"
RANK = {"RUNNING": 0, "SUCCESS": 1, "FAILED": 2}


def facet(keys: str = DAY, **extra: str) -> dict:
    pairs = [part.split("=", 1) for part in keys.split("/")]
    return {"_producer": P, "_schemaURL": "https://example.com/PartitionDatasetFacet.json#/$defs/PartitionDatasetFacet",
            "keys": [{"name": n, "value": v} for n, v in pairs], "source": "path", **extra}


def run_event(kind: str, second: int, run: str = "run-1", job: str = "load", out: str = "events",
              keys: str = DAY, reads: tuple[tuple[str, str], ...] = (), assertions: list | None = None,
              rows: int | None = None, **partition: str) -> dict:
    facets: dict = {"kafkaLineage_partition": facet(keys, **partition)}
    if assertions is not None:
        facets["dataQualityAssertions"] = {"_producer": P, "_schemaURL": "u", "assertions": assertions}
    if rows is not None:
        facets["outputStatistics"] = {"_producer": P, "_schemaURL": "u", "rowCount": rows, "size": rows * 10}
    return {"eventType": kind, "eventTime": f"2025-12-24T01:00:{second:02d}Z", "producer": P, "schemaURL": "u",
            "run": {"runId": run}, "job": {"namespace": "airflow", "name": job},
            "inputs": [{"namespace": LAKE, "name": name, "inputFacets": {"kafkaLineage_partition": facet(key)}}
                       for name, key in reads],
            "outputs": [{"namespace": LAKE, "name": out, "outputFacets": facets}] if out else []}


def marker_event(second: int, name: str = "events", keys: str = DAY, marker: str = "_SUCCESS") -> dict:
    return {"eventTime": f"2025-12-24T01:00:{second:02d}Z", "producer": P, "schemaURL": "u",
            "dataset": {"namespace": LAKE, "name": name, "facets": {"kafkaLineage_partition": facet(keys,
                                                                                                    marker=marker)}}}


def check_event(second: int, run: str, failed: bool, name: str = "events") -> dict:
    """A check task's run reading the partition and asserting on it."""
    event = run_event("COMPLETE", second, run=run, job="check", out="", reads=((name, DAY),))
    event["inputs"][0]["inputFacets"]["dataQualityAssertions"] = {
        "_producer": P, "_schemaURL": "u", "assertions": [{"assertion": "fresh", "success": not failed}]}
    return event


# --- the graph as the statements leave it, read back as the read query would --------------------------------------
def facts(events: list[dict], name: str = "events", key: str = DAY, reads: int = 2) -> PartitionFacts:
    b = graph_batch(events)
    runs = {r["runId"]: r for r in b["runs"]}
    jobs = {r["runId"]: (r["namespace"], r["name"]) for r in b["of_job"]}
    return _facts(b, runs, jobs, name, key, reads)


def _facts(b, runs, jobs, name: str, key: str, reads: int) -> PartitionFacts:
    part = next((p for p in b["partitions"] if (p["name"], p["key"]) == (name, key)), None)
    writes = [w for w in b["wrote_partition"] if (w["name"], w["key"]) == (name, key)]
    versions = tuple(Version(
        w["runId"], runs[w["runId"]]["state"], runs[w["runId"]]["startTime"] or w["firstSeen"] or "",
        runs[w["runId"]]["endTime"], tuple(w["failed"] or ()), tuple(w["markers"] or ()),
        (w["stats"] or {}).get("rowCount"), None, None, None, jobs.get(w["runId"])) for w in writes)
    checks = tuple(Check(r["runId"], runs[r["runId"]]["startTime"] or r["firstSeen"], tuple(r["failed"]))
                   for r in b["read_partition"] if (r["name"], r["key"]) == (name, key) and r["failed"])
    upstream: tuple = ()
    if versions and reads:
        latest = max(versions, key=lambda v: (v.start, v.run_id))
        upstream = tuple((runs[r["runId"]]["startTime"] or r["firstSeen"],
                          _facts(b, runs, jobs, r["name"], r["key"], reads - 1))
                         for r in b["read_partition"] if r["runId"] == latest.run_id)
    markers = tuple(tuple(m.split(" ", 1)) for m in (part or {}).get("markers") or ())
    required = ((part or {}).get("requiredMarker") or {}).get("marker")
    return PartitionFacts(LAKE, name, key, required, markers, len(versions), versions, checks, upstream)


def state(events: list[dict], **kwargs: object) -> str | None:
    return partition_status(facts(events, **kwargs)).state


# --- rows ------------------------------------------------------------------------------------------------------------
def test_rows_of_a_write_a_read_and_a_marker():
    events = [run_event("COMPLETE", 5, reads=(("raw", DAY),), rows=7, requiredMarker="_SUCCESS",
                        assertions=[{"assertion": "not_null", "column": "id", "success": True},
                                    {"assertion": "unique", "column": "id", "success": False}]),
              marker_event(9)]
    b = graph_batch(events)
    assert [(p["name"], p["key"]) for p in b["partitions"]] == [("events", DAY), ("raw", DAY)]
    events_row = b["partitions"][0]
    assert events_row["markers"] == ["2025-12-24T01:00:09.000000Z _SUCCESS"]
    assert events_row["requiredMarker"]["marker"] == "_SUCCESS"
    assert [(r["name"], r["key"]) for r in b["has_partition"]] == [("events", DAY), ("raw", DAY)]
    assert [(v["name"], v["runId"]) for v in b["partition_versions"]] == [("events", "run-1")]
    assert b["has_version"] == b["partition_versions"]
    (wrote,) = b["wrote_partition"]
    assert (wrote["failed"], wrote["passed"], wrote["markers"]) == (["unique(id)"], ["not_null(id)"], None)
    assert wrote["stats"]["rowCount"] == 7 and wrote["stats"]["bytes"] == 70
    (read,) = b["read_partition"]
    assert (read["runId"], read["name"], read["key"], read["firstSeen"]) == ("run-1", "raw", DAY,
                                                                              "2025-12-24T01:00:05.000000Z")
    # a partition is never a dataset of its own, nor a facet document of the dataset
    assert {(d["namespace"], d["name"]) for d in b["datasets"]} == {(LAKE, "events"), (LAKE, "raw")}
    assert not [f for f in b["facets"] if f["key"] == "kafkaLineage_partition"]


def test_key_order_is_kept_and_malformed_facets_are_skipped():
    b = graph_batch([run_event("START", 1, keys="region=eu/date=2025-12-24")])
    assert [p["key"] for p in b["partitions"]] == ["region=eu/date=2025-12-24"]
    bad = run_event("START", 1)
    bad["outputs"][0]["outputFacets"]["kafkaLineage_partition"]["keys"] = [{"name": "date"}]
    assert not graph_batch([bad])["partitions"] and graph_batch([bad])["wrote"]


def test_statements_constraints_and_fingerprint_cover_partitions():
    pairs = statements(graph_batch([run_event("COMPLETE", 1, reads=(("raw", DAY),)), marker_event(2)]))
    names = [next(n for n, q in STATEMENTS.items() if q == query) for query, _ in pairs]
    assert {"partitions", "partition_versions", "has_partition", "has_version", "wrote_partition",
            "read_partition"} <= set(names)
    assert names.index("partition_versions") < names.index("has_version") < names.index("wrote_partition")
    assert any("(p:Partition) REQUIRE (p.namespace, p.name, p.key) IS UNIQUE" in c for c in CONSTRAINTS)
    assert any("(v:PartitionVersion) REQUIRE (v.namespace, v.name, v.key, v.runId)" in c for c in CONSTRAINTS)
    base = fingerprint({})
    assert fingerprint({"Partition": []}) == base  # no partitions: the fingerprint a graph had before
    assert fingerprint({"Partition": [{"namespace": LAKE, "name": "events", "key": DAY}]}) != base
    assert set(PARTITION_FINGERPRINT_QUERIES) == {"Partition", "PartitionVersion", "HAS_PARTITION", "HAS_VERSION",
                                                  "WROTE_PARTITION", "READ_PARTITION", "BackfillRun"}


# --- the state machine ---------------------------------------------------------------------------------------------
# The dataset's producer sends its required marker on every report of its partitions.
LIFE = [run_event("START", 1, requiredMarker="_SUCCESS"), run_event("RUNNING", 3, requiredMarker="_SUCCESS"),
        run_event("COMPLETE", 5, rows=3, requiredMarker="_SUCCESS"), marker_event(6)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(LIFE)))))
def test_every_order_gives_the_same_rows_and_never_regresses(order):
    events = [LIFE[i] for i in order]
    assert graph_batch(events).rows == graph_batch(LIFE).rows
    assert graph_batch(events + events[:2]).rows == graph_batch(LIFE).rows  # repeats change nothing
    seen = [state(events[:n]) for n in range(1, len(events) + 1)]
    known = [s for s in seen if s is not None]  # None: the marker alone, before any run event
    assert all(RANK[a] <= RANK[b] for a, b in itertools.pairwise(known)) and None not in seen[seen.index(known[0]):]
    assert seen[-1] == "SUCCESS"


def test_running_then_success_without_a_required_marker():
    assert state([run_event("START", 1)]) == "RUNNING"
    assert state([run_event("START", 1), run_event("COMPLETE", 4)]) == "SUCCESS"
    assert state([run_event("COMPLETE", 4)]) == "SUCCESS"  # COMPLETE alone (no START) is enough


def test_a_required_marker_holds_success_back_until_reported():
    complete = [run_event("START", 1, requiredMarker="_SUCCESS"), run_event("COMPLETE", 4)]
    status = partition_status(facts(complete))
    assert status.state == "RUNNING" and "marker _SUCCESS not reported" in (status.reason or "")
    assert state([*complete, marker_event(8)]) == "SUCCESS"  # a marker event after COMPLETE …
    assert state([marker_event(2), *complete]) == "SUCCESS"  # … or arriving first, dated during the run
    assert state([*complete, marker_event(8, marker=".DONE")]) == "RUNNING"  # not the marker the dataset needs
    reported = [run_event("START", 1, requiredMarker="_SUCCESS"), run_event("COMPLETE", 4, marker="_SUCCESS")]
    assert state(reported) == "SUCCESS"  # the writer reported it on its output


def test_a_marker_before_the_version_started_does_not_count():
    assert state([marker_event(0), run_event("START", 1, requiredMarker="_SUCCESS"), run_event("COMPLETE", 4)]) \
        == "RUNNING"


def test_failures_name_the_reason_and_stay():
    assert state([run_event("START", 1), run_event("FAIL", 4)]) == "FAILED"
    assert state([run_event("START", 1), run_event("ABORT", 4)]) == "FAILED"
    bad = [run_event("START", 1), run_event("COMPLETE", 4, assertions=[{"assertion": "not_null", "column": "id",
                                                                       "success": False}])]
    status = partition_status(facts(bad))
    assert status.state == "FAILED" and status.reason == "assertion failed: not_null(id)"
    passing = [{"assertion": "not_null", "column": "id", "success": True}]
    passing_later = [*bad, run_event("COMPLETE", 9, assertions=passing)]
    assert state(passing_later) == "FAILED"  # a failure is kept: the state never moves back
    assert state([run_event("START", 1, assertions=[{"assertion": "x", "success": False}])]) == "FAILED"


def test_a_check_run_failing_on_the_partition_fails_the_version_it_read():
    written = [run_event("START", 1), run_event("COMPLETE", 4)]
    assert state([*written, check_event(6, "check-1", failed=False)]) == "SUCCESS"
    status = partition_status(facts([*written, check_event(6, "check-1", failed=True)]))
    assert status.state == "FAILED" and status.reason == "assertion failed: fresh"
    rewritten = [*written, check_event(6, "check-1", failed=True), run_event("START", 8, run="run-2"),
                 run_event("COMPLETE", 9, run="run-2")]
    assert state(rewritten) == "SUCCESS"  # the check was about the version before


def test_versions_follow_the_writers_start_times_in_any_order():
    events = [run_event("START", 10, run="b-run"), run_event("COMPLETE", 12, run="b-run", rows=2),
              run_event("START", 1, run="z-run"), run_event("FAIL", 3, run="z-run")]
    for seed in range(5):
        shuffled = random.Random(seed).sample(events, len(events))
        status = partition_status(facts(shuffled))
        assert [(v.number, v.version.run_id, v.state) for v in status.versions] == [
            (1, "z-run", "FAILED"), (2, "b-run", "SUCCESS")]
        assert status.state == "SUCCESS" and status.latest.version.row_count == 2


def test_an_unwritten_partition_is_known_by_its_marker():
    landed = partition_status(facts([marker_event(1, name="raw")], name="raw"))
    assert landed.state is None and landed.landed
    read_only = [run_event("START", 1, out="", reads=(("raw", DAY),))]
    assert partition_status(facts(read_only, name="raw")).landed is False
    # landed satisfies ready upstream, never as the partition asked about
    assert readiness([facts([marker_event(1, name="raw")], name="raw")])[0] is False


# --- STALE and ready -----------------------------------------------------------------------------------------------
def world(rewrite_at: int | None = None, upstream_fails: bool = False) -> list[dict]:
    """raw (landed, marker) → clean (run-c at 10..12) → mart (run-m at 20..22); a rewrite of clean at ``rewrite_at``."""
    events = [marker_event(1, name="raw"),
              run_event("START", 10, run="run-c", out="clean", reads=(("raw", DAY),)),
              run_event("FAIL" if upstream_fails else "COMPLETE", 12, run="run-c", out="clean"),
              run_event("START", 20, run="run-m", out="mart", reads=(("clean", DAY),)),
              run_event("COMPLETE", 22, run="run-m", out="mart")]
    if rewrite_at is not None:
        events += [run_event("START", rewrite_at, run="run-c2", out="clean", reads=(("raw", DAY),)),
                   run_event("COMPLETE", rewrite_at + 2, run="run-c2", out="clean")]
    return events


def test_ready_when_the_partition_and_what_it_was_built_from_are_success():
    assert readiness([facts(world(), name="mart")]) == (True, [])
    assert readiness([]) == (False, [])


def test_an_upstream_rewrite_after_the_read_makes_it_stale_and_not_ready():
    status = partition_status(facts(world(rewrite_at=30), name="mart"))
    assert status.state == "STALE" and "clean" in status.stale[0] and "run-c2" in status.stale[0]
    ok, missing = readiness([facts(world(rewrite_at=30), name="mart")])
    assert not ok and missing[0]["role"] == "partition" and missing[0]["state"] == "STALE"
    # rewritten before mart's run started: mart was built from the new version
    assert partition_status(facts(world(rewrite_at=14), name="mart")).state == "SUCCESS"
    # a rewrite that ended after the read began: mart may have read the old files
    concurrent = [*world(), run_event("START", 18, run="run-c3", out="clean"),
                  run_event("COMPLETE", 25, run="run-c3", out="clean")]
    assert partition_status(facts(concurrent, name="mart")).state == "STALE"


def test_a_failed_upstream_is_named():
    events = world(upstream_fails=True)
    ok, missing = readiness([facts(events, name="mart")])
    assert not ok and missing == [{"role": "upstream", "namespace": LAKE, "name": "clean", "key": DAY,
                                   "state": "FAILED", "reason": "run run-c ended FAIL"}]


def test_an_upstream_that_is_itself_stale_is_not_ready():
    # raw is rewritten after clean read it: clean is STALE, so mart (built from clean) is not ready
    events = [*world(), run_event("START", 40, run="raw-2", out="raw"),
              run_event("COMPLETE", 41, run="raw-2", out="raw")]
    ok, missing = readiness([facts(events, name="mart")])
    assert not ok and [(m["role"], m["name"], m["state"]) for m in missing] == [("upstream", "clean", "STALE")]
