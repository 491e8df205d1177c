"""The stall watch (runtime/stall.py): when a quiet member looks at its group's progress, what counts as stuck."""

from __future__ import annotations

from kafka_lineage.runtime.stall import StallWatch, stuck_partitions


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


# --- offsets past transaction markers, the rewind of a batch given up ---------------------------------------------

class _Message:
    def __init__(self, partition: int, offset: int, topic: str = "t") -> None:
        self._at = (topic, partition, offset)

    def topic(self) -> str:
        return self._at[0]

    def partition(self) -> int:
        return self._at[1]

    def offset(self) -> int:
        return self._at[2]


class _Consumer:
    """What the member and the sinks ask of a confluent-kafka consumer, answered from dicts."""

    def __init__(self, positions: dict[int, int], committed: dict[int, int] | None = None) -> None:
        self.positions, self.committed_offsets = positions, committed
        self.commits: list[dict[int, int]] = []
        self.seeks: list[tuple[int, int]] = []

    def assignment(self) -> list:
        from confluent_kafka import TopicPartition

        return [TopicPartition("t", p) for p in sorted(self.positions)]

    def position(self, partitions: list) -> list:
        from confluent_kafka import TopicPartition

        return [TopicPartition("t", tp.partition, self.positions[tp.partition]) for tp in partitions]

    def committed(self, partitions: list, timeout: float) -> list:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if self.committed_offsets is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return [TopicPartition("t", tp.partition, self.committed_offsets.get(tp.partition, -1001))
                for tp in partitions]

    def commit(self, offsets: list, asynchronous: bool) -> None:
        self.commits.append({tp.partition: tp.offset for tp in offsets})

    def seek(self, partition) -> None:
        self.seeks.append((partition.partition, partition.offset))


def _member(monkeypatch, fake: _Consumer):
    from kafka_lineage.runtime.config import ClientSettings
    from kafka_lineage.sinks import consumer

    monkeypatch.setattr(consumer, "sink_consumer", lambda *_args: fake)
    return consumer.SinkMember(ClientSettings.from_env({}), "group", "t")


def test_a_batch_commits_its_positions_which_step_over_transaction_markers() -> None:
    from kafka_lineage.sinks.consumer import batch_offsets, next_offsets

    messages = [_Message(0, 4), _Message(0, 6), _Message(1, 2)]
    assert next_offsets(messages) == {("t", 0): 7, ("t", 1): 3}
    # partition 0's commit marker at 7 was stepped over; 2 moved over markers alone; 3's position is not known yet
    fake = _Consumer({0: 8, 1: 3, 2: 5, 3: -1001})
    assert batch_offsets(fake, messages) == {("t", 0): 8, ("t", 1): 3, ("t", 2): 5}  # type: ignore[arg-type]


def test_a_quiet_member_commits_positions_only_when_they_moved(monkeypatch) -> None:
    fake = _Consumer({0: 8, 1: -1001})
    member = _member(monkeypatch, fake)
    member.commit_idle_positions("test")
    member.commit_idle_positions("test")
    fake.positions[0] = 9
    member.commit_idle_positions("test")
    assert fake.commits == [{0: 8}, {0: 9}]


def test_a_batch_given_up_goes_back_to_the_committed_offsets_or_the_beginning(monkeypatch) -> None:
    from confluent_kafka import OFFSET_BEGINNING

    fake = _Consumer({0: 8, 1: 3}, committed={0: 5})
    member = _member(monkeypatch, fake)
    member.rewind("test", [_Message(0, 6), _Message(1, 2)])
    assert fake.seeks == [(0, 5), (1, OFFSET_BEGINNING)]


def test_without_an_answer_from_the_coordinator_the_rewind_goes_to_the_batch_s_first_records(monkeypatch) -> None:
    fake = _Consumer({0: 8, 1: 3}, committed=None)
    member = _member(monkeypatch, fake)
    member.rewind("test", [_Message(0, 6), _Message(0, 5), _Message(1, 2)])
    assert sorted(fake.seeks) == [(0, 5), (1, 2)]


def test_progress_unreadable_at_two_looks_in_a_row_counts_as_stuck() -> None:
    clock = _Clock()
    watch = StallWatch(60.0, clock)
    clock.now = 60.0
    assert not watch.unreadable()  # once: the broker may be restarting
    assert not watch.due()
    clock.now = 120.0
    assert watch.due() and watch.unreadable()  # again: this member's link to its group is broken
    watch.busy()
    clock.now = 180.0
    assert not watch.unreadable()  # records came in between: counted afresh
    clock.now = 240.0
    watch.stuck({0: 10}, {0: 10})  # a look that read the progress
    clock.now = 300.0
    assert not watch.unreadable()
