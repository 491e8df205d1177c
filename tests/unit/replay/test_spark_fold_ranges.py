"""How the Spark bulk fold splits the topic into tasks (replay/bulk/spark_fold.task_ranges)."""

from __future__ import annotations

from kafka_lineage.replay.bulk.spark_fold import task_ranges


def test_each_partition_is_cut_into_equal_tasks_of_at_most_the_given_records_largest_first():
    ranges = task_ranges({0: 0, 1: 120, 2: 7}, {0: 250, 1: 130, 2: 7}, 100)
    # 250 in three tasks of 83-84, not 100 + 100 + 50; partition 2 holds nothing
    assert ranges == [(0, 166, 250), (0, 0, 83), (0, 83, 166), (1, 120, 130)]


def test_the_tasks_cover_every_offset_once():
    firsts, ends = {0: 3, 1: 0, 5: 1000}, {0: 1003, 1: 1, 5: 5001}
    covered = [(p, offset) for p, first, end in task_ranges(firsts, ends, 97) for offset in range(first, end)]
    assert sorted(covered) == [(p, offset) for p in sorted(ends) for offset in range(firsts[p], ends[p])]
    assert all(end - first <= 97 for _, first, end in task_ranges(firsts, ends, 97))
