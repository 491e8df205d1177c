"""The sinks' stall watch: when a quiet member looks at its group's progress, and which partitions count as stuck."""

from __future__ import annotations

from kafka_lineage.sinks.consumer import StallWatch, stuck_partitions


def test_a_partition_behind_whose_committed_offset_did_not_move_is_stuck() -> None:
    ends = {0: 10, 1: 10, 2: 5}
    assert stuck_partitions(ends, {0: 4, 1: 10, 2: 2}, {0: 4, 1: 10, 2: 3}) == [0]  # 1 caught up, 2 moved


def test_a_partition_never_committed_counts_from_offset_zero() -> None:
    assert stuck_partitions({0: 3, 1: 0}, {}, {}) == [0]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_quiet_member_looks_twice_before_calling_a_partition_stuck() -> None:
    clock = _Clock()
    watch = StallWatch(60.0, clock)
    clock.now = 59.0
    assert not watch.due()
    clock.now = 60.0
    assert watch.due()
    assert watch.stuck({0: 10}, {0: 4}) == []  # the first look only remembers
    assert not watch.due()
    clock.now = 120.0
    assert watch.stuck({0: 10}, {0: 4}) == [0]


def test_records_or_a_handled_batch_start_the_looks_over() -> None:
    clock = _Clock()
    watch = StallWatch(60.0, clock)
    clock.now = 60.0
    watch.stuck({0: 10}, {0: 4})
    clock.now = 100.0
    watch.busy()
    clock.now = 160.0
    assert watch.due()
    assert watch.stuck({0: 10}, {0: 4}) == []  # a first look again


def test_a_broker_that_did_not_answer_postpones_the_look() -> None:
    clock = _Clock()
    watch = StallWatch(60.0, clock)
    clock.now = 60.0
    watch.postpone()
    assert not watch.due()
    clock.now = 120.0
    assert watch.due()


def test_a_throttled_action_runs_at_most_once_per_interval_and_first_after_one(monkeypatch) -> None:
    from kafka_lineage.sinks import consumer

    clock = _Clock()
    monkeypatch.setattr(consumer.time, "monotonic", clock)
    runs: list[float] = []
    maybe = consumer.throttled(5.0, lambda: runs.append(clock.now))
    for now in (0.0, 4.9, 5.0, 7.0, 9.9, 10.0, 30.0):
        clock.now = now
        maybe()
    assert runs == [5.0, 10.0, 30.0]
