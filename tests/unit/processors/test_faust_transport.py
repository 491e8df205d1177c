"""The processor's fixes to Faust's consumer bookkeeping (``processors/faust_transport.py``), without a broker."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from faust.types import TP
from intervaltree import IntervalTree
from mode.utils.queues import FlowControlQueue

from kafka_lineage.processors.faust_transport import _Consumer, _Drainable, _FlowControl

EVENTS = TP("events", 0)


def _consumer(committed: int | None, acked: list[int], *, start: int | None = None,
              gap: tuple[int, int] | None = None) -> _Consumer:
    """A consumer holding only the offset bookkeeping ``_new_offset`` reads (no client, no app)."""
    consumer = _Consumer.__new__(_Consumer)
    consumer._committed_offset = defaultdict(lambda: None, {EVENTS: committed})
    consumer._acked = defaultdict(list, {EVENTS: list(acked)})
    consumer._acked_index = defaultdict(set, {EVENTS: set(acked)})
    consumer._gap = defaultdict(IntervalTree)
    if gap:
        consumer._gap[EVENTS].addi(*gap)
    consumer.start_offsets = {EVENTS: start} if start is not None else {}
    return consumer


@pytest.mark.parametrize(("committed", "acked", "start", "expected"), [
    (100, [100, 101, 102], None, 103),  # the run starts at the committed offset: commit past it
    (100, [101, 102, 103], None, None),  # the record at the committed offset is not done (Faust committed 104)
    (100, [100, 101, 105, 106], None, 102),  # a hole later on: commit up to the hole, as Faust does
    (None, [1, 2, 3], 0, None),  # never committed, sought to the beginning (0): record 0 is not done
    (None, [0, 1, 2], 0, 3),
    (None, [7, 8], 7, 9),  # a partition whose log starts at 7
])
def test_a_commit_never_passes_the_record_at_the_committed_or_start_offset(
        committed: int | None, acked: list[int], start: int | None, expected: int | None) -> None:
    assert _consumer(committed, acked, start=start)._new_offset(EVENTS) == expected


def test_offsets_known_to_hold_no_record_count_as_done_at_the_head() -> None:
    # offsets 100-101 are a gap the fetcher saw (e.g. transaction markers): the run starts there
    assert _consumer(100, [102, 103], gap=(100, 102))._new_offset(EVENTS) == 104


def test_resuming_active_flow_keeps_the_queued_records_and_resuming_suspended_flow_drops_them() -> None:
    async def scenario() -> tuple[int, int]:
        flow = _FlowControl()
        queue: FlowControlQueue[int] = FlowControlQueue(flow_control=flow, clear_on_resume=True)
        flow.resume()
        for record in range(3):
            queue.put_nowait(record)
        flow.resume()  # redundant: what Faust does at the end of recovery while the fetcher is running
        kept = queue.qsize()
        flow.suspend()  # a revocation: what is queued belongs to the old assignment
        flow.resume()
        return kept, queue.qsize()

    kept, after_suspension = asyncio.run(scenario())
    assert kept == 3
    assert after_suspension == 0


def test_the_transport_is_a_faust_driver_selected_by_its_url_scheme() -> None:
    import faust.transport

    from kafka_lineage.processors.faust_transport import App, Transport, broker_url

    assert faust.transport.by_url(broker_url("127.0.0.1:9092")) is Transport
    assert type(App("driver-test", broker=broker_url("127.0.0.1:9092")).transport) is Transport


# --- fix 4: no records taken that Faust would drop ---------------------------------------------------------------
CHANGELOG = TP("group-dedupe-changelog", 0)


class _Held:
    """Records the fetcher holds for one partition (aiokafka's FetchResult, without a broker)."""

    def __init__(self, records: list[int]) -> None:
        self.records = records

    def getall(self, max_records: int | None = None) -> list[int]:
        records, self.records = self.records, []
        return records

    def has_more(self) -> bool:
        return bool(self.records)


def _fetched(partitions: object, held: dict[TP, list[int]], monkeypatch: pytest.MonkeyPatch) -> dict:
    """aiokafka's own ``Fetcher.fetched_records`` over ``held``, asked for ``partitions``."""
    from types import SimpleNamespace

    import aiokafka.consumer.fetcher as fetcher_module

    monkeypatch.setattr(fetcher_module, "FetchResult", _Held)  # fetched_records checks what it holds by type
    fetcher = fetcher_module.Fetcher.__new__(fetcher_module.Fetcher)
    fetcher._records = {tp: _Held(list(records)) for tp, records in held.items()}
    fetcher._subscriptions = SimpleNamespace(reassignment_in_progress=False, is_assigned=lambda tp: True)
    fetcher._notify = lambda future: None
    fetcher._wait_consume_future = None
    return asyncio.run(fetcher.fetched_records(partitions, timeout=0))


def test_a_fetch_takes_no_records_while_flow_is_stopped_even_with_every_partition_paused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    consumer = SimpleNamespace(flow_active=False)
    active: set[TP] = set()  # recovery paused everything: Faust's own (empty) set makes aiokafka hand out all
    held = {CHANGELOG: [0, 1, 2], EVENTS: [7]}
    assert _fetched(active, held, monkeypatch) == held  # what Faust alone takes (and then drops)
    assert _fetched(_Drainable(consumer, active), held, monkeypatch) == {}
    active.add(CHANGELOG)  # recovery resumed the changelog; flow not yet
    assert _fetched(_Drainable(consumer, active), held, monkeypatch) == {}
    consumer.flow_active = True
    assert _fetched(_Drainable(consumer, active), held, monkeypatch) == {CHANGELOG: [0, 1, 2]}


def test_a_commit_held_by_the_record_at_the_committed_offset_is_reported_with_what_was_done_past_it() -> None:
    assert _consumer(100, [101, 102, 107]).held_commits("events") == {0: (100, 101, 107)}
    assert _consumer(100, [100, 101]).held_commits("events") == {}  # commits flow
    assert _consumer(100, [102, 103], gap=(100, 102)).held_commits("events") == {}  # a known gap is done
    assert _consumer(100, [101]).held_commits("other") == {}
