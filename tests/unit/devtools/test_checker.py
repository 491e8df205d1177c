"""The checker: exact missing / extra / wrong / duplicate reports on hand-made mutations of a truth."""

from __future__ import annotations

import re
import uuid
from functools import cache

import pytest

from kafka_lineage.graph.fingerprint import FINGERPRINT_QUERIES
from kafka_lineage_devtools.checker import GRAPH_QUERIES, check, format_report, query_parameters
from kafka_lineage_devtools.workload import KINDS, GroundTruth, Scope, alert_id, generate


@cache
def truth() -> GroundTruth:
    return generate(12, 3, 9, 2).truth


def graph() -> dict[str, list[dict]]:
    """The truth's rows, as Neo4j would return them for a perfect graph (fresh lists: tests mutate them)."""
    return {kind: truth().rows(kind) for kind in KINDS}


def alerts() -> list[dict]:
    """The truth's alerts as SchemaDriftAlert records (only the fields the checker reads, plus a few)."""
    return [{"alertId": alert_id(*a[:4]), "dataset": {"namespace": a.namespace, "name": a.name},
             "job": {"namespace": "x", "name": "y"}, "previousVersion": a.previous_version,
             "newVersion": a.new_version, "severity": a.severity, "changes": []} for a in sorted(truth().alerts)]


def test_a_perfect_graph_and_alerts_are_ok() -> None:
    report = check(truth(), graph(), alerts())
    assert report.ok and report.problems() == 0
    counts = report.counts()
    assert list(counts) == [*KINDS, "alerts"]
    assert counts["Run"]["expected"] == counts["Run"]["found"] == len(truth().graph["Run"])
    assert counts["alerts"]["expected"] == 2
    assert format_report(report).startswith("OK: ")


def test_a_dropped_row_is_missing_and_nothing_else() -> None:
    rows = graph()
    dropped = rows["READ"].pop(3)
    report = check(truth(), rows, alerts())
    assert not report.ok and report.problems() == 1
    assert report["READ"].missing == (dropped,)
    assert all(r.ok for kind, r in report.kinds.items() if kind != "READ")


def test_an_added_row_is_extra() -> None:
    rows = graph()
    ns = sorted(truth().scope.dataset_namespaces)[0]
    added = {"namespace": ns, "name": "not/in/the/truth", "field": "x"}
    rows["Field"].append(added)
    report = check(truth(), rows, alerts())
    assert report["Field"].extra == (added,) and report.problems() == 1
    rows["Field"].append(dict(added))  # the same extra row twice: one extra, one duplicate
    report = check(truth(), rows, alerts())
    assert report["Field"].extra == (added,) and report["Field"].duplicates == ((added, 2),)


def test_a_changed_run_state_is_wrong_with_both_values() -> None:
    rows = graph()
    run = next(r for r in rows["Run"] if r["state"] == "COMPLETE")
    run["state"] = "START"
    report = check(truth(), rows, alerts())
    assert report["Run"].wrong == (({"runId": run["runId"], "state": "COMPLETE"}, run),)
    assert not report["Run"].missing and not report["Run"].extra and report.problems() == 1
    assert 'expected {"state": "COMPLETE"}' in format_report(report)


def test_wrong_statistics_and_transformation_are_wrong() -> None:
    rows = graph()
    wrote = next(r for r in rows["WROTE"] if r["rowCount"] is not None)
    wrote["rowCount"] += 1
    derived = rows["DERIVES_FROM"][0]
    derived["transformation"] = "MADE/UP"
    report = check(truth(), rows, None)
    assert [found for _, found in report["WROTE"].wrong] == [wrote]
    assert [found for _, found in report["DERIVES_FROM"].wrong] == [derived]
    assert "alerts" not in report.kinds


def test_a_row_found_twice_is_a_duplicate_not_an_extra() -> None:
    rows = graph()
    rows["OF_JOB"].append(dict(rows["OF_JOB"][0]))
    report = check(truth(), rows, alerts())
    assert report["OF_JOB"].duplicates == ((rows["OF_JOB"][0], 2),)
    assert not report["OF_JOB"].extra and not report["OF_JOB"].wrong and report.problems() == 1


def test_two_nodes_of_one_run_with_different_states_are_duplicate_and_wrong() -> None:
    rows = graph()
    run = dict(next(r for r in rows["Run"] if r["state"] == "FAIL"))
    rows["Run"].append({**run, "state": "RUNNING"})
    report = check(truth(), rows, None)
    assert report["Run"].duplicates == ((run, 2),)
    assert report["Run"].wrong == ((run, {**run, "state": "RUNNING"}),)


def test_alert_duplicates_missing_wrong_and_extra() -> None:
    published = alerts()
    report = check(truth(), None, [*published, published[0]])
    assert report["alerts"].duplicates[0][1] == 2 and report.problems() == 1

    report = check(truth(), None, published[1:])
    assert len(report["alerts"].missing) == 1 and report["alerts"].missing[0]["alertId"] == published[0]["alertId"]

    flipped = {"BREAKING": "COMPATIBLE", "COMPATIBLE": "BREAKING"}
    bad = [{**published[0], "severity": flipped[published[0]["severity"]]}, {**published[1], "alertId": "0" * 64}]
    report = check(truth(), None, bad)
    wrong = {found["alertId"]: (expected, found) for expected, found in report["alerts"].wrong}
    assert len(wrong) == 2 and not report["alerts"].missing and not report["alerts"].extra
    expected, found = wrong[published[0]["alertId"]]
    assert (expected["severity"], found["severity"]) == (published[0]["severity"], bad[0]["severity"])
    expected, found = wrong["0" * 64]
    assert expected["alertId"] == published[1]["alertId"] and found["severity"] == expected["severity"]

    ns = published[0]["dataset"]["namespace"]
    extra = {**published[0], "newVersion": "f" * 64, "alertId": alert_id(ns, published[0]["dataset"]["name"],
                                                                        published[0]["previousVersion"], "f" * 64)}
    report = check(truth(), None, [*published, extra])
    assert len(report["alerts"].extra) == 1 and report.problems() == 1


def test_flat_schema_change_items_without_ids_are_accepted() -> None:
    items = [{"namespace": a["dataset"]["namespace"], "name": a["dataset"]["name"],
              "previousVersion": a["previousVersion"], "newVersion": a["newVersion"], "severity": a["severity"]}
             for a in alerts()]
    assert check(truth(), None, items).ok


def test_rows_outside_the_workload_are_ignored() -> None:
    rows = graph()
    foreign_run = str(uuid.uuid4())
    rows["Job"].append({"namespace": "someone-else", "name": "job"})
    rows["Run"].append({"runId": foreign_run, "state": "COMPLETE"})
    rows["OF_JOB"].append({"runId": foreign_run, "namespace": "someone-else", "name": "job"})
    rows["Dataset"].append({"namespace": "s3://other-bucket", "name": "t"})
    rows["READ"].append({"runId": foreign_run, "namespace": "s3://other-bucket", "name": "t"})
    foreign_alert = {**alerts()[0], "dataset": {"namespace": "s3://other-bucket", "name": "t"}}
    report = check(truth(), rows, [*alerts(), foreign_alert])
    assert report.ok, format_report(report)
    assert {kind: r.ignored for kind, r in report.kinds.items() if r.ignored} == {
        "Job": 1, "Run": 1, "OF_JOB": 1, "Dataset": 1, "READ": 1, "alerts": 1}


def test_a_missing_or_retyped_same_as_edge_is_reported() -> None:
    rows = graph()
    assert len(rows["SAME_AS"]) > 1, "the workload links path datasets to their tables"
    dropped = rows["SAME_AS"].pop(0)
    report = check(truth(), rows, None)
    assert report["SAME_AS"].missing == (dropped,) and report.problems() == 1
    assert "SAME_AS missing (1):" in format_report(report) and dropped["aliasName"] in format_report(report)
    kept = rows["SAME_AS"][0]
    rows["SAME_AS"][0] = {**kept, "type": "LOCATION"}
    report = check(truth(), rows, None)
    assert report["SAME_AS"].wrong == ((kept, rows["SAME_AS"][0]),) and report.problems() == 2


def test_same_as_edges_are_in_scope_through_either_end() -> None:
    rows = graph()
    alias_ns = rows["SAME_AS"][0]["aliasNamespace"]
    into_alias = {"namespace": "s3://other-bucket", "name": "t", "aliasNamespace": alias_ns, "aliasName": "x.t",
                  "type": "TABLE", "firstSeen": None, "lastSeen": None}
    foreign = {**into_alias, "aliasNamespace": "hive://other-metastore:9083"}
    rows["SAME_AS"] += [into_alias, foreign]
    report = check(truth(), rows, None)
    assert report["SAME_AS"].extra == (into_alias,) and report["SAME_AS"].ignored == 1 and report.problems() == 1


def test_an_unknown_run_of_a_workload_job_is_extra_with_its_edges() -> None:
    rows = graph()
    job = truth().rows("Job")[0]
    stray = str(uuid.uuid4())
    rows["Run"].append({"runId": stray, "state": "COMPLETE"})
    rows["OF_JOB"].append({"runId": stray, **job})
    rows["WROTE"].append({"runId": stray, "namespace": "s3://other-bucket", "name": "t", "rowCount": 1,
                          "bytes": None})  # in scope through its run only
    report = check(truth(), rows, None)
    assert [r["runId"] for r in report["Run"].extra] == [stray]
    assert len(report["OF_JOB"].extra) == 1 and len(report["WROTE"].extra) == 1 and report.problems() == 3


def test_an_explicit_scope_narrows_the_check() -> None:
    scope = Scope(frozenset({"nothing"}), frozenset({"nothing"}))
    report = check(truth(), graph(), alerts(), scope=scope)
    assert report["Job"].found == 0 and len(report["Job"].missing) == len(truth().graph["Job"])


def test_rows_as_value_lists_and_absent_kinds() -> None:
    rows = {kind: [list(row.values()) for row in found] for kind, found in graph().items()}
    assert check(truth(), rows, None).ok
    del rows["HAS_SCHEMA"]
    report = check(truth(), rows, None)
    assert len(report["HAS_SCHEMA"].missing) == len(truth().graph["HAS_SCHEMA"]) and report.problems() == len(
        truth().graph["HAS_SCHEMA"])
    with pytest.raises(ValueError, match="not graph kinds"):
        check(truth(), {"Jobs": []}, None)
    with pytest.raises(ValueError, match="values"):
        check(truth(), {"Job": [["only-one"]]}, None)


def test_format_report_lists_examples_up_to_the_limit() -> None:
    rows = graph()
    removed = rows["Field"][:5]
    del rows["Field"][:5]
    text = format_report(check(truth(), rows, None), limit=2)
    assert text.startswith("MISMATCH: 5 differences")
    assert "Field missing (5):" in text and "… 3 more" in text
    assert re.search(r"^Field\s+\d+\s+\d+\s+5\s+0\s+0\s+0\s+0\s+<--$", text, re.M)
    assert removed[0]["field"] in text


def test_graph_queries_mirror_the_fingerprint_queries_filtered_by_parameters() -> None:
    assert list(GRAPH_QUERIES) == list(FINGERPRINT_QUERIES)
    for kind, query in GRAPH_QUERIES.items():
        final = query.rsplit("RETURN ", 1)[1]
        assert tuple(re.findall(r" AS (\w+)", " " + final)) == KINDS[kind].columns, kind
        assert set(re.findall(r"\$(\w+)", query)) <= {"jobNamespaces", "datasetNamespaces", "runIds"}
        assert "DISTINCT" not in query and "UNION ALL" not in query
        assert query.count("{") == query.count("}")
    params = query_parameters(truth())
    assert params["runIds"] == sorted(truth().scope.run_ids)
    assert params["jobNamespaces"] == sorted(truth().scope.job_namespaces)
    assert set(params["datasetNamespaces"]) == truth().scope.dataset_namespaces


def test_an_alert_a_late_version_made_obsolete_is_left_out_when_a_later_one_names_it() -> None:
    # issue 34: the change A -> B was first alerted at the B seen first; a B older still came late and moved it
    published = alerts()
    first = {**published[0], "changedAt": "2024-05-01T12:03:00Z"}
    moved = {**published[0], "changedAt": "2024-05-01T12:02:00Z", "late": True, "supersedes": {
        "previousVersion": first["previousVersion"], "newVersion": first["newVersion"],
        "changedAt": "2024-05-01T12:03:00Z"}}
    assert check(truth(), None, [first, moved, *published[1:]]).ok
    assert check(truth(), None, [first, {**moved, "supersedes": None}, *published[1:]]).problems() == 1
