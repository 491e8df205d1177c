"""``OffsetLedger`` (processors/offsets.py): a committed offset never passes a record that was not processed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kafka_lineage.processors.offsets import Gap, OffsetLedger, RecordsSkipped, membership_problem


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int


def records(partition: int, offsets: range | list[int]) -> list[Record]:
    return [Record(partition, offset) for offset in offsets]


def commit_after(admitted: list[Record]) -> dict[int, int]:
    """What the shell commits after processing ``admitted``: one past the last record per partition."""
    return {record.partition: record.offset + 1 for record in admitted}


def test_records_already_committed_are_dropped_and_the_rest_advance_the_position() -> None:
    ledger = OffsetLedger()
    ledger.start({0: 10, 1: 0})
    admitted = ledger.admit(records(0, range(8, 13)) + records(1, range(0, 2)), owned={0, 1})
    assert [(r.partition, r.offset) for r in admitted.records] == [(0, 10), (0, 11), (0, 12), (1, 0), (1, 1)]
    assert admitted.redelivered == 2
    assert ledger.positions() == {0: 13, 1: 2}


def test_the_dropped_records_scenario_never_commits_past_an_unprocessed_record() -> None:
    # Committed 712; the consumer dropped 751-799 and delivered 800; after a seek it delivers 712-760 again.
    ledger = OffsetLedger()
    ledger.start({0: 712})
    first = ledger.admit(records(0, range(712, 751)) + records(0, [800]), owned={0})
    assert commit_after(first.records) == {0: 751}  # up to the hole, nothing past it
    assert first.gaps == [Gap(0, 751, 800)]
    with pytest.raises(RecordsSkipped):  # Kafka holds 751-799: the worker must start over, not go on
        ledger.admit_checked(records(0, [800]), {0}, gap_is_real=lambda gap: False)
    ledger.reset()  # the seek: positions are read again from what was committed
    ledger.start({0: 751})
    again = ledger.admit(records(0, range(712, 761)), owned={0})
    assert commit_after(again.records) == {0: 761}
    assert again.redelivered == 751 - 712


def test_a_gap_kafka_confirms_empty_is_crossed_with_the_records_after_it() -> None:
    ledger = OffsetLedger()
    ledger.start({0: 5})
    checked: list[Gap] = []
    admitted = ledger.admit_checked(records(0, [5, 6, 8, 9]) + records(1, [0]), {0},
                                    gap_is_real=lambda gap: checked.append(gap) or True)
    assert checked == [Gap(0, 7, 8)]  # e.g. a transaction marker at 7
    assert [r.offset for r in admitted.records] == [5, 6, 8, 9]
    assert admitted.unowned == 1
    assert ledger.positions() == {0: 10}


def test_partitions_not_owned_are_never_admitted_and_a_reset_forgets_every_position() -> None:
    ledger = OffsetLedger()
    ledger.start({0: 0})
    assert ledger.admit(records(3, [0]), owned={0}).unowned == 1
    epoch = ledger.epoch
    ledger.reset()
    assert ledger.epoch == epoch + 1
    assert ledger.unknown({0, 3}) == {0, 3}


def test_positions_are_started_once_per_assignment() -> None:
    ledger = OffsetLedger()
    ledger.start({0: 4})
    ledger.admit(records(0, [4, 5]), owned={0})
    ledger.start({0: 4})  # a late answer for the same assignment does not move the position back
    assert ledger.positions() == {0: 6}


def test_offsets_are_committed_only_under_the_membership_the_assignment_came_with() -> None:
    assigned = (5, "faust-0.15.3-abc")
    assert membership_problem(assigned, assigned) is None
    # a session that expired while the worker was stopped: the broker would take these offsets unchecked
    assert "not a member" in membership_problem(assigned, (-1, ""))
    assert "not a member" in membership_problem(None, (-1, ""))
    assert "rejoined" in membership_problem(assigned, (7, "faust-0.15.3-def"))
    assert "revoked" in membership_problem(None, (7, "faust-0.15.3-def"))
