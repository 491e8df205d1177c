"""The processor's state stays bounded per key and costs O(1) writes per event (issue 16, item 1), is written only
after the outputs (item 3), and far-future event times are dead letters (item 5). The shell writes what the core
stages; here plain dicts play the changelog tables, serialized like Faust's JSON codec writes them."""

from __future__ import annotations

import json
import uuid
from typing import Any

from kafka_lineage.processors.core import (
    MAX_HELD_CHARS,
    MAX_HELD_PER_RUN,
    Incoming,
    Output,
    ProcessorCore,
)
from kafka_lineage.processors.schema_state import CHUNK_CHARS
from kafka_lineage.schemas.openlineage import event_to_record, partition_key, record_to_event
from tests.unit.processors.test_processor_core import CODEC, PRODUCED_MS, PRODUCER

FAUST_RECORD_LIMIT = 1_000_000  # what Faust's producer refused before (MessageSizeTooLargeError)


class Tables:
    """The three changelog tables as a shell keeps them: writes applied after the outputs, values as JSON."""

    def __init__(self) -> None:
        self.runs: dict[str, Any] = {}
        self.dedupe: dict[str, Any] = {}
        self.schemas: dict[str, Any] = {}
        self.largest = 0  # the largest record any table write produced

    def core(self, **kwargs: Any) -> ProcessorCore:
        return ProcessorCore(CODEC, self.runs, self.schemas, dedupe=self.dedupe, window_seconds=2.0, **kwargs)

    def apply(self, core: ProcessorCore, out: Output) -> Output:
        writes = [*((self.dedupe, k, v) for k, (_, v) in out.dedupe_writes.items()),
                  *((self.runs, k, v) for k, (_, v) in out.run_writes.items()),
                  *((self.schemas, k, v) for _, k, v in out.schema_writes)]
        for table, key, value in writes:
            if value is None:
                table.pop(key, None)
            else:
                text = json.dumps(value, separators=(",", ":"))
                self.largest = max(self.largest, len(text))
                table[key] = json.loads(text)  # what a restarted worker reads back
        core.written(out)
        return out


def _event(run: str, event_type: str, second: float, outputs: list | None = None, **run_facets: Any) -> dict:
    minute, sec = divmod(second, 60)
    hour, minute = divmod(int(minute), 60)
    moment = f"2024-05-0{1 + hour // 24}T{hour % 24:02d}:{minute:02d}:{sec:09.6f}Z"
    return {"eventType": event_type, "eventTime": moment,
            "producer": PRODUCER, "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run, **({"facets": run_facets} if run_facets else {})},
            "job": {"namespace": "tests", "name": "stream"}, "inputs": [], "outputs": outputs or []}


def _incoming(events: list[dict], first_offset: int = 0) -> list[Incoming]:
    return [Incoming(partition_key(e).encode(), CODEC.encode(event_to_record(e), 1), 0, first_offset + i, PRODUCED_MS,
                     "events") for i, e in enumerate(events)]


def _schema(columns: int, changed: int | None = None) -> list[dict]:
    fields = [{"name": f"column_{i:05d}", "type": "string" if i != changed else "bigint",
               "description": f"the {i}th column of a wide feature table"} for i in range(columns)]
    return [{"namespace": "s3://lake", "name": "wide", "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": fields}}}]


def test_a_long_streaming_run_writes_one_small_dedupe_entry_per_event_and_forgets_ids_after_the_ttl() -> None:
    tables = Tables()
    core = tables.core(dedupe_ttl_seconds=3600.0)
    run = str(uuid.uuid4())
    processed = {"_producer": PRODUCER, "_schemaURL": "https://example.com/Processed.json"}
    events = [_event(run, "START", 0)] + [_event(run, "RUNNING", 7 * i, processed={**processed, "count": i})
                                          for i in range(1, 30_001)]
    now, sizes = 1000.0, []
    for start in range(0, len(events), 500):  # 30,000 RUNNING events, one every 7 s of event time
        out = tables.apply(core, core.process(_incoming(events[start:start + 500], start), now))
        assert len(out.dedupe_writes) == len(out.normalized) == len(events[start:start + 500])
        sizes += [len(json.dumps(v)) for _, v in out.run_writes.values() if v is not None]
        now += 500 * 7.0  # a compressed clock: the batch spans an hour of the stream
        tables.apply(core, core.expire(now, {0}))
    assert sizes == []  # an in-order run holds nothing back: its position lives in memory, no run writes at all
    assert tables.largest < 300
    assert len(tables.dedupe) <= 3600 / 7 + 500 + 1  # ids older than the TTL were deleted from the table
    assert core.state_sizes()["ids"] == len(tables.dedupe)
    # an exact repeat of a recent event is still a duplicate, for this worker and for a restarted one
    repeat = _incoming([events[-1]], 99_999)
    assert core.process(repeat, now).duplicates == 1
    assert tables.core(dedupe_ttl_seconds=3600.0).process(repeat, now).duplicates == 1


def test_a_burst_of_one_run_before_its_start_holds_a_bounded_state_and_loses_nothing() -> None:
    tables = Tables()
    core = tables.core()
    run = str(uuid.uuid4())
    facets = {"spark_properties": {"_producer": PRODUCER, "_schemaURL": "https://example.com/x.json",
                                   "properties": {"spark.app.name": "x" * 1500}}}
    burst = [_event(run, "RUNNING", i + 1, **facets) for i in range(5_000)]
    out = tables.apply(core, core.process(_incoming(burst), 10.0))
    held = core.state_sizes()["held"]
    assert held <= MAX_HELD_PER_RUN
    assert tables.largest <= MAX_HELD_CHARS + 1000  # the run's snapshot, held events included
    out.extend(tables.apply(core, core.process(_incoming([_event(run, "START", 0)], 5_000), 10.5)))
    out.extend(tables.apply(core, core.expire(20.0, {0})))
    released = [record_to_event(r["event"]) for _, r in out.normalized]
    assert len(released) == 5_001 and core.state_sizes()["held"] == 0  # every event out exactly once
    times = [e["eventTime"] for e in released if e["eventType"] == "RUNNING"]
    assert times == sorted(times)  # forced out early, still in order
    assert out.late == 1  # only the START, which came after RUNNING events had left


def test_an_event_too_large_to_hold_leaves_at_once_marked_late() -> None:
    tables = Tables()
    core = tables.core()
    run = str(uuid.uuid4())
    huge = _event(run, "COMPLETE", 5, big={"_producer": PRODUCER, "_schemaURL": "https://example.com/x.json",
                                           "blob": "y" * (MAX_HELD_CHARS + 1)})
    out = tables.apply(core, core.process(_incoming([_event(run, "RUNNING", 1), huge]), 10.0))
    assert [(record_to_event(r["event"])["eventType"], r["processing"]["late"]) for _, r in out.normalized] == \
        [("RUNNING", False), ("COMPLETE", True)]
    assert tables.largest < FAUST_RECORD_LIMIT


def test_a_wide_schema_is_stored_in_bounded_entries_and_its_changes_are_found_after_a_restart() -> None:
    tables = Tables()
    first = tables.core()
    runs = [str(uuid.uuid4()) for _ in range(3)]
    tables.apply(first, first.process(_incoming([_event(runs[0], "COMPLETE", 1, _schema(12_000))]), 1.0))
    assert len(tables.schemas) > 1 and tables.largest <= CHUNK_CHARS + 100  # head + chunks, each bounded
    second = tables.core()  # a restarted worker reads the stored schema back from its chunks
    out = tables.apply(second, second.process(_incoming([_event(runs[1], "COMPLETE", 2, _schema(12_000, 7_777))],
                                                       1), 2.0))
    (change,) = [c for _, r in out.normalized for c in r["schemaChanges"]]
    assert [(c["path"], c["kind"]) for c in change["changes"]] == [("column_07777", "TYPE_CHANGED")]
    assert change["previousSchema"] == change["newSchema"] == ""  # too wide to repeat in the finding
    assert tables.largest <= CHUNK_CHARS + 100
    chunk_versions = {key.split("\x1f")[1] for key in tables.schemas if "\x1f" in key}
    assert chunk_versions == {change["previousVersion"], change["newVersion"]}  # both in the history
    third = tables.core(schema_history_limit=2)  # a third version pushes the first out of a history of two
    out = tables.apply(third, third.process(_incoming([_event(runs[2], "COMPLETE", 3, _schema(12_000, 5))], 2), 3.0))
    (latest,) = [c for _, r in out.normalized for c in r["schemaChanges"]]
    chunk_versions = {key.split("\x1f")[1] for key in tables.schemas if "\x1f" in key}
    assert chunk_versions == {latest["previousVersion"], latest["newVersion"]}  # the first one's entries deleted


def test_schema_state_is_staged_so_a_crash_before_the_write_repeats_the_finding() -> None:
    tables = Tables()
    core = tables.core()
    base = _incoming([_event(str(uuid.uuid4()), "START", 1, _schema(3))])
    tables.apply(core, core.process(base, 1.0))
    change = _incoming([_event(str(uuid.uuid4()), "START", 2, _schema(3, 1))], 1)
    crashed = core.process(change, 2.0)  # outputs never acknowledged: the shell writes nothing
    assert sum(len(r["schemaChanges"]) for _, r in crashed.normalized) == 1
    assert tables.schemas and all(v["version"] != crashed.normalized[0][1]["schemaChanges"][0]["newVersion"]
                                  for k, v in tables.schemas.items() if "\x1f" not in k)
    restarted = tables.core()
    redelivered = tables.apply(restarted, restarted.process(change, 3.0))
    assert sum(len(r["schemaChanges"]) for _, r in redelivered.normalized) == 1


def test_state_of_the_earlier_layout_is_adopted() -> None:
    tables = Tables()
    run = str(uuid.uuid4())
    start = _event(run, "START", 1)
    ours = tables.core()
    seen = tables.apply(ours, ours.process(_incoming([start]), 1.0)).normalized[0][1]["processing"]["dedupeId"]
    tables.runs = {run: {"ids": {seen: 1.0}, "order": {"maxRank": 0, "lastActivity": 1.0, "held": []}, "p": 0}}
    tables.dedupe = {}
    tables.schemas = {"s3://lake/wide": {"fields": [{"name": "column_00000", "type": "string"}],
                                         "eventTime": "2024-05-01T00:00:00Z"}}
    core = tables.core()
    out = tables.apply(core, core.process(_incoming([start, _event(run, "COMPLETE", 2, _schema(1, 0))]), 2.0))
    assert out.duplicates == 1 and seen in tables.dedupe
    ended = {"maxRank": 2, "started": True, "lastActivity": 2.0, "held": []}
    assert tables.runs[run] == {"order": ended, "p": 0}  # ended, no ids
    (change,) = [c for _, r in out.normalized for c in r["schemaChanges"]]
    assert change["changes"][0]["kind"] == "TYPE_CHANGED"


def test_a_worker_taking_over_an_ended_run_marks_what_still_comes_of_it_late() -> None:
    tables = Tables()
    run = str(uuid.uuid4())
    first = tables.core()
    tables.apply(first, first.process(_incoming([_event(run, "START", 1), _event(run, "COMPLETE", 3)]), 1.0))
    assert tables.runs[run]["order"]["maxRank"] == 2  # one small entry when the run ends
    successor = tables.core()  # after a restart or a rebalance: the run's end is known from the table
    tables.apply(successor, successor.expire(2.0, {0}))
    out = tables.apply(successor, successor.process(_incoming([_event(run, "RUNNING", 2)], first_offset=2), 3.0))
    assert [record["processing"]["late"] for _, record in out.normalized] == [True]
    ttl = tables.core(dedupe_ttl_seconds=10.0)
    tables.apply(ttl, ttl.expire(5.0, {0}))
    tables.apply(ttl, ttl.expire(100.0, {0}))  # past the retention: the entry goes
    assert run not in tables.runs


def test_a_run_that_its_window_opened_without_a_start_is_remembered_so_its_start_comes_out_late() -> None:
    # campaign seed 2026 run 0: a RUNNING left alone when its window passed, the worker was killed, and its START
    # then came out of the successor not late, after the RUNNING
    tables = Tables()
    run = str(uuid.uuid4())
    first = tables.core()
    out = tables.apply(first, first.process(_incoming([_event(run, "RUNNING", 5)]), 1.0))
    assert out.normalized == []  # held for the window
    out = tables.apply(first, first.expire(4.0, {0}))
    assert [record["processing"]["late"] for _, record in out.normalized] == [False]
    assert tables.runs[run]["order"]["started"] is False  # remembered although it holds nothing
    successor = tables.core()  # a restart: the run's position is known from the table
    tables.apply(successor, successor.expire(4.5, {0}))
    out = tables.apply(successor, successor.process(_incoming([_event(run, "START", 1)], first_offset=1), 5.0))
    assert [record["processing"]["late"] for _, record in out.normalized] == [True]


def test_an_event_time_far_ahead_of_its_kafka_timestamp_is_a_dead_letter() -> None:
    core = Tables().core()
    ahead = _event(str(uuid.uuid4()), "START", 1)
    ahead["eventTime"] = "9999-12-31T23:59:59Z"
    near = _event(str(uuid.uuid4()), "START", 1)
    records = _incoming([ahead, near])
    out = core.process([Incoming(r.key, r.value, 0, r.offset, 1_714_521_600_000, "events") for r in records], 1.0)
    assert [d["errorClass"] for _, d in out.dead_letters] == ["event-time-in-future"]
    assert "9999-12-31T23:59:59Z" in out.dead_letters[0][1]["errorMessage"]
    assert len(out.normalized) == 1


def _amount(kind: str) -> list[dict]:
    fields = [{"name": "id", "type": "bigint"}, {"name": "amount", "type": kind}]
    return [{"namespace": "postgres://db:5432", "name": "shop.orders", "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": fields}}}]


def test_a_change_is_found_whatever_order_its_runs_arrive_in_and_marked_late_when_it_came_late() -> None:
    # issue 34: day 2's run (amount: string) arrives before day 1's (amount: int)
    tables = Tables()
    core = tables.core()
    day2, day1 = _event(str(uuid.uuid4()), "START", 86_400 + 5, _amount("string")), \
        _event(str(uuid.uuid4()), "START", 5, _amount("int"))
    out = tables.apply(core, core.process(_incoming([day2]), 1.0))
    assert len(out.normalized) == 1 and out.normalized[0][1]["schemaChanges"] == []  # the first: a baseline
    restarted = tables.core()  # and a restart in between: the history is in the table
    out = tables.apply(restarted, restarted.process(_incoming([day1], 1), 2.0))
    (change,) = [c for _, r in out.normalized for c in r["schemaChanges"]]
    assert [(c["path"], c["kind"], c["oldType"], c["newType"]) for c in change["changes"]] == [
        ("amount", "TYPE_CHANGED", "int", "string")]
    assert change["severity"] == "BREAKING" and change["late"] is True
    assert (change["previousEventTime"], change["changedAt"]) == (day1["eventTime"], day2["eventTime"])
    # the same run again (a redelivery of day 1) reveals nothing new
    again = tables.core()
    out = tables.apply(again, again.process(_incoming([day1], 2), 3.0))
    assert out.duplicates == 1


def test_a_dataset_written_every_minute_records_its_schema_once_an_hour() -> None:
    tables = Tables()
    core = tables.core()
    writes = 0
    for minute in range(0, 181):  # three hours of runs, one a minute, the same schema
        event = _event(str(uuid.uuid4()), "START", minute * 60, _amount("int"))
        out = tables.apply(core, core.process(_incoming([event], minute), float(minute)))
        writes += len(out.schema_writes)
    head = tables.schemas["postgres://db:5432/shop.orders"]
    assert [entry[0][11:16] for entry in head["history"]] == ["00:00", "01:00", "02:00", "03:00"]
    assert writes == 2 + 3  # the first (version entry + head), then the head once an hour
