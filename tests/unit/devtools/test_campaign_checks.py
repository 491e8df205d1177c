"""The fault campaign's checks on hand-made records: a clean run passes, each kind of breakage is named."""

from __future__ import annotations

from kafka_lineage_devtools.campaign_checks import (
    ALERTS,
    DEDUPE,
    EXACTLY_ONCE,
    GRAPH,
    LAG,
    LIFECYCLE,
    OFFSETS,
    RUNS,
    DeadLetterRecord,
    OutputRecord,
    SourceRecord,
    check_dedupe_table,
    check_exactly_once,
    check_graph,
    check_hanging,
    check_lag,
    check_lifecycle,
    check_offsets,
    check_runs_table,
    count_by_check,
)
from kafka_lineage_devtools.checker import check
from kafka_lineage_devtools.workload import KINDS, generate

TOPIC = "t.events"
# events 0/0..0/3: a, b, a again (a duplicate), c; 1/0: undecodable (dead-lettered)
SOURCES = [SourceRecord(0, 0, "a"), SourceRecord(0, 1, "b"), SourceRecord(0, 2, "a"), SourceRecord(0, 3, "c"),
           SourceRecord(1, 0, None)]
OUTPUTS = [OutputRecord(2, 10, "a", 0, 0, run_id="r1", event_type="START"),
           OutputRecord(2, 11, "b", 0, 1, run_id="r1", event_type="COMPLETE"),
           OutputRecord(3, 0, "c", 0, 3, run_id="r2", event_type="START")]
DEAD = [DeadLetterRecord(0, 0, TOPIC, 1, 0, "undecodable", "not Avro")]


def test_a_clean_run_has_no_violation() -> None:
    found = (check_exactly_once(SOURCES, OUTPUTS, DEAD, TOPIC, published=["a", "b", "c"])
             + check_dedupe_table(["a", "b", "c"], OUTPUTS, SOURCES, DEAD, TOPIC)
             + check_offsets([(1.0, 0, 2), (2.0, 0, 4), (2.0, 1, 1)], {0: 4, 1: 1}, SOURCES, OUTPUTS, DEAD, TOPIC)
             + check_runs_table({}) + check_lifecycle(OUTPUTS)
             + check_lag("g", TOPIC, {0: 4, 1: 1}, {0: 4, 1: 1}, {}))
    assert found == []


def test_an_event_output_twice_is_a_duplicate_with_where() -> None:
    again = [*OUTPUTS, OutputRecord(4, 7, "a", 0, 2)]
    (violation,) = check_exactly_once(SOURCES, again, DEAD, TOPIC)
    assert violation.check == EXACTLY_ONCE
    assert "2 times" in violation.message and "2/10" in violation.message and "4/7" in violation.message


def test_an_event_neither_output_nor_dead_lettered_is_missing() -> None:
    found = check_exactly_once(SOURCES, OUTPUTS[:2], DEAD, TOPIC)
    assert [v.check for v in found] == [EXACTLY_ONCE] and "c" in found[0].message and "0/3" in found[0].message
    # a dead letter for it accounts for it
    assert check_exactly_once(SOURCES, OUTPUTS[:2], [*DEAD, DeadLetterRecord(0, 1, TOPIC, 0, 3, "too-large", "x")],
                              TOPIC) == []


def test_undecodable_records_need_a_dead_letter_and_published_events_must_reach_the_topic() -> None:
    found = check_exactly_once(SOURCES, OUTPUTS, [], TOPIC, published=["a", "zz"])
    assert len(found) == 2
    assert any("1/0 does not decode" in v.message for v in found)
    assert any("published event zz" in v.message for v in found)


def test_an_output_of_no_source_event_is_reported() -> None:
    (violation,) = check_exactly_once(SOURCES, [*OUTPUTS, OutputRecord(2, 12, "x", 0, 9)], DEAD, TOPIC)
    assert "of no event" in violation.message


def test_a_live_dedupe_id_without_output_is_lost() -> None:
    (violation,) = check_dedupe_table(["a", "c", "lost"], OUTPUTS, SOURCES, DEAD, TOPIC)
    assert violation.check == DEDUPE and "lost" in violation.message


def test_a_committed_offset_that_moves_back_is_reported() -> None:
    samples = [(1.0, 0, 3), (2.0, 0, 1), (3.0, 0, 1), (4.0, 0, 2), (5.0, 0, 4), (5.0, 1, 1)]
    found = check_offsets(samples, {0: 4, 1: 1}, SOURCES, OUTPUTS, DEAD, TOPIC)
    assert [v.check for v in found] == [OFFSETS] and "from 3 (1.0s) to 1 (2.0s)" in found[0].message  # once
    (final,) = check_offsets([(1.0, 0, 4)], {0: 3}, SOURCES, OUTPUTS, DEAD, TOPIC)
    assert "final committed offset 3" in final.message


def test_a_source_below_the_committed_offset_must_be_accounted_for() -> None:
    # 0/2 is a copy of a (output from 0/0): accounted; 0/3 (c) without its output is not
    found = check_offsets([], {0: 4}, SOURCES, OUTPUTS[:2], DEAD, TOPIC)
    assert [v.message.split(" is ")[0] for v in found] == ["events 0/3"]
    # above the committed offset: not yet
    assert check_offsets([], {0: 3}, SOURCES, OUTPUTS[:2], DEAD, TOPIC) == []


def test_a_run_record_left_in_the_runs_table_is_reported_with_its_held_events() -> None:
    (violation,) = check_runs_table({"run-1": {"order": {"held": [1, 2]}, "p": 3}})
    assert violation.check == RUNS and "run-1" in violation.message and "2 held" in violation.message
    ended = {"order": {"maxRank": 2, "lastActivity": 1.0, "held": []}, "p": 3}  # kept until the TTL, by design
    open_run = {"order": {"maxRank": 0, "lastActivity": 1.0, "held": []}, "p": 3}
    # a run its window opened without a START: kept so that the START comes out late, by design
    opened = {"order": {"maxRank": 1, "started": False, "lastActivity": 1.0, "held": []}, "p": 3}
    started = {"order": {"maxRank": 1, "started": True, "lastActivity": 1.0, "held": []}, "p": 3}
    assert [v.message for v in check_runs_table({"ended": ended, "open": open_run, "opened": opened,
                                                 "started": started})] == [
        "run open still has a runs-table record (0 held events)",
        "run started still has a runs-table record (0 held events)"]


def test_a_run_stepping_back_in_its_lifecycle_is_reported_unless_late_or_a_copy() -> None:
    records = [OutputRecord(0, 1, "s", None, None, run_id="r", event_type="START"),
               OutputRecord(0, 2, "c", None, None, run_id="r", event_type="COMPLETE"),
               OutputRecord(0, 3, "r2", None, None, run_id="r", event_type="RUNNING")]
    (violation,) = check_lifecycle(records)
    assert violation.check == LIFECYCLE
    assert "RUNNING at 0/3" in violation.message and "COMPLETE at 0/2" in violation.message
    late = [*records[:2], OutputRecord(0, 3, "r2", None, None, late=True, run_id="r", event_type="START")]
    assert check_lifecycle(late) == []
    copy = [*records[:2], OutputRecord(0, 3, "s", None, None, run_id="r", event_type="START")]
    assert check_lifecycle(copy) == []  # the copy is check 1's
    # topic order, not list order
    assert check_lifecycle(list(reversed(records[:2]))) == []


def test_a_lag_of_transaction_markers_only_is_none() -> None:
    assert check_lag("g", TOPIC, {0: 9}, {0: 10}, {0: 0}) == []
    (violation,) = check_lag("g", TOPIC, {0: 5, 1: None}, {0: 10, 1: 0}, {0: 4})
    assert violation.check == LAG and "4 committed records" in violation.message
    (nothing,) = check_lag("g", TOPIC, {0: None}, {0: 3}, {0: 3})
    assert "committed nothing" in nothing.message


def test_graph_and_alert_differences_are_violations_of_check_6() -> None:
    truth = generate(8, 3, 4, 2).truth
    rows = {kind: truth.rows(kind) for kind in KINDS}
    alerts = [{"namespace": a.namespace, "name": a.name, "previousVersion": a.previous_version,
               "newVersion": a.new_version, "severity": a.severity} for a in truth.alerts]
    assert check_graph(check(truth, rows, alerts)) == []
    rows["Job"] = rows["Job"][1:]
    found = check_graph(check(truth, rows, alerts + alerts[:1]))
    assert count_by_check(found) == {GRAPH: 1, ALERTS: 1}
    assert "1 missing" in found[0].message and "1 duplicated" in found[1].message


def test_a_partition_whose_stable_end_stays_behind_its_end_holds_a_hanging_transaction() -> None:
    assert check_hanging("t.normalized", {0: 300, 1: 12}, {0: 300, 1: 12}) == []
    (violation,) = check_hanging("t.normalized", {0: 169, 1: 12}, {0: 300, 1: 12})
    assert violation.check == "8 hanging-txn"
    assert "t.normalized[0]" in violation.message and "131 records" in violation.message
