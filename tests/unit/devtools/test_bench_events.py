import json
import os
import time

import pytest

from kafka_lineage.schemas.openlineage import validate_event
from kafka_lineage_devtools import bench_events, cpu_budget


@pytest.mark.parametrize(("shape", "low", "high"), [("light", 800, 2000), ("realistic", 5000, 8000),
                                                   ("heavy", 20_000, 40_000)])
def test_each_shape_has_its_size_and_every_event_is_valid_openlineage(shape: str, low: int, high: int) -> None:
    events = bench_events.run_pairs(200, shape, seed=1)
    assert low <= bench_events.mean_bytes(events) <= high
    for event in events:
        validate_event(event)


def test_events_come_as_start_complete_pairs_of_distinct_runs_of_a_layered_dag() -> None:
    events = bench_events.run_pairs(400, seed=2)
    starts, completes = events[0::2], events[1::2]
    assert {e["eventType"] for e in starts} == {"START"} and {e["eventType"] for e in completes} == {"COMPLETE"}
    assert [e["run"]["runId"] for e in starts] == [e["run"]["runId"] for e in completes]
    assert len({e["run"]["runId"] for e in starts}) == 200
    for event in starts:
        job = int(event["job"]["name"].rsplit("_", 1)[1])
        layer = job * bench_events.LAYERS // bench_events.JOBS
        assert 2 <= len(event["inputs"]) <= 3
        for dataset in event["inputs"]:  # every input is a source or a table of the layer before
            expected = f"layer_{layer - 1}/" if layer else "public.source_"
            assert dataset["name"].startswith(expected)
        facets = event["outputs"][0]["facets"]
        lineage_inputs = {(f["namespace"], f["name"]) for column in facets["columnLineage"]["fields"].values()
                          for f in column["inputFields"]}
        assert lineage_inputs == {(d["namespace"], d["name"]) for d in event["inputs"]}
        assert len(facets["schema"]["fields"]) == bench_events.SHAPES["realistic"]


def test_a_seed_repeats_the_stream_and_no_seed_makes_fresh_runs() -> None:
    assert bench_events.run_pairs(10, seed=3) == bench_events.run_pairs(10, seed=3)
    first, second = bench_events.run_pairs(10), bench_events.run_pairs(10)
    assert not {e["run"]["runId"] for e in first} & {e["run"]["runId"] for e in second}


def test_namespace_replaces_the_job_namespace_and_odd_counts_end_with_a_start() -> None:
    events = bench_events.run_pairs(5, namespace="bench-x")
    assert len(events) == 5 and events[-1]["eventType"] == "START"
    assert {e["job"]["namespace"] for e in events} == {"bench-x"}
    with pytest.raises(ValueError, match="unknown event shape"):
        bench_events.run_pairs(2, "huge")


def test_cpu_of_a_busy_process_is_counted_and_only_its_own_when_alone() -> None:
    pid = os.getpid()
    before = cpu_budget.cpu_seconds({"me": pid, "gone": None}, alone=frozenset({"me"}))
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        json.dumps(list(range(1000)))
    after = cpu_budget.cpu_seconds({"me": pid}, alone=frozenset({"me"}))
    assert "gone" not in after
    assert cpu_budget.per_event_us(before, after, 1000)["me"] >= 200  # ≥ 0.2 s over 1000 events


def test_budget_rows_sort_by_cost_and_give_the_ceiling_on_the_cores() -> None:
    rows = cpu_budget.budget_rows({"sink": 100.0, "neo4j": 300.0}, cores=2)
    assert [row["component"] for row in rows] == ["neo4j", "sink", "TOTAL"]
    assert rows[0]["share"] == 0.75 and rows[0]["events_per_s_per_core"] == pytest.approx(1e6 / 300)
    assert rows[-1]["ceiling_events_per_s"] == pytest.approx(2e6 / 400)
    assert "5,000 events/s" in cpu_budget.format_budget(rows, 2)


def test_encoded_run_pairs_decode_to_valid_pairs_of_distinct_runs() -> None:
    from kafka_lineage.schemas.avro_schemas import schema_text
    from kafka_lineage.schemas.openlineage import FacetCache, event_to_record, partition_key, record_to_event
    from kafka_lineage.schemas.wire import AvroCodec

    codec = AvroCodec("openlineage_event", lambda _id: schema_text("openlineage_event"))

    def encode(event: dict) -> tuple[bytes, bytes]:
        validate_event(event)
        return partition_key(event).encode(), codec.encode(event_to_record(event), 1)

    records = list(bench_events.encoded_run_pairs(encode, 301, "bench-ns"))
    events = [record_to_event(codec.decode(value), FacetCache()) for _, value in records]
    assert len(events) == 301
    for (key, _), event in zip(records, events, strict=True):
        validate_event(event)
        assert key == partition_key(event).encode()
        assert event["job"]["namespace"] == "bench-ns"
    starts, completes = events[0::2], events[1::2]
    assert [e["run"]["runId"] for e in starts[:150]] == [e["run"]["runId"] for e in completes]
    assert len({e["run"]["runId"] for e in starts}) == 151
    assert all(e["eventTime"] < c["eventTime"] for e, c in zip(starts, completes, strict=False))
    rows = {c["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] for c in completes}
    assert len(rows) > 100 and all(10**11 <= count < 10**12 for count in rows)


def test_resident_memory_sums_the_processes_and_counts_gone_ones_as_nothing() -> None:
    own = cpu_budget.resident_mib([os.getpid()])
    assert own > 10
    assert cpu_budget.resident_mib([None, 2**22 + 12345]) == 0  # above pid_max: no such process
    assert cpu_budget.resident_mib(cpu_budget.process_tree(os.getpid())) >= own


def test_dag_runs_run_every_job_once_on_hosts_of_their_own() -> None:
    events = bench_events.dag_runs("ui", jobs=40, hosts="t1")
    assert len(events) == 80 and [e["eventType"] for e in events[:2]] == ["START", "COMPLETE"]
    assert {e["job"]["name"] for e in events} == {f"etl.job_{job}" for job in range(40)}
    assert {e["job"]["namespace"] for e in events} == {"ui"}
    namespaces = {d["namespace"] for e in events for d in e["inputs"] + e["outputs"]}
    assert namespaces and all("://t1." in ns for ns in namespaces)
    lineage = events[-1]["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert all("://t1." in f["namespace"] for column in lineage.values() for f in column["inputFields"])
