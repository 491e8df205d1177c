"""The processor's batch logic without Kafka: dedupe, order, normalization, drift, dead letters, restart."""

from __future__ import annotations

import copy
import random
import uuid

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.processors.core import Incoming, ProcessorCore
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import event_to_record, partition_key, record_to_event
from kafka_lineage.schemas.wire import AvroCodec, SchemaNotFound
from tests.openlineage_samples import PRODUCER


def _fetch(schema_id: int) -> str:
    if schema_id != 1:
        raise SchemaNotFound(schema_id)
    return schema_text("openlineage_event")


CODEC = AvroCodec("openlineage_event", _fetch)
PRODUCED_MS = 1_800_000_000_000  # the records' Kafka timestamp (2027): the test events' times are before it


def _event(run: str, job: str, event_type: str, second: int, outputs: list | None = None) -> dict:
    return {"eventType": event_type, "eventTime": f"2024-05-01T12:00:{second:02d}Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run}, "job": {"namespace": "tests", "name": job},
            "inputs": [{"namespace": "s3a://raw", "name": "orders"}], "outputs": outputs or []}


def _incoming(events: list[dict]) -> list[Incoming]:
    return [Incoming(partition_key(e).encode(), CODEC.encode(event_to_record(e), 1), 0, offset, PRODUCED_MS, "events")
            for offset, e in enumerate(events)]


def _core(runs: dict | None = None, schemas: dict | None = None) -> ProcessorCore:
    return ProcessorCore(CODEC, {} if runs is None else runs, {} if schemas is None else schemas, window_seconds=2.0)


def _types(output) -> list[tuple[str, str]]:
    return [(record_to_event(r["event"])["run"]["runId"], record_to_event(r["event"])["eventType"])
            for _, r in output.normalized]


def test_shuffled_duplicated_runs_come_out_deduped_and_in_lifecycle_order() -> None:
    runs = [str(uuid.uuid4()) for _ in range(5)]
    events = [_event(run, f"job-{i}", t, s) for i, run in enumerate(runs)
              for t, s in (("START", 1), ("RUNNING", 2), ("COMPLETE", 3))]
    stream = events + random.Random(7).sample(events, 6)  # exact repeats
    random.Random(1).shuffle(stream)
    core = _core()
    out = core.process(_incoming(stream), now=100.0)
    out.extend(core.expire(now=103.0, assigned={0}))
    assert out.duplicates == 6 and not out.dead_letters
    released = _types(out)
    assert sorted(released) == sorted((e["run"]["runId"], e["eventType"]) for e in events)
    for run in runs:
        order = [t for r, t in released if r == run]
        assert order == ["START", "RUNNING", "COMPLETE"] or out.late, order


def test_complete_before_start_is_held_then_released_in_order_and_late_start_is_marked() -> None:
    run = str(uuid.uuid4())
    core = _core()
    held = core.process(_incoming([_event(run, "j", "COMPLETE", 3)]), now=10.0)
    assert held.normalized == []
    out = core.process(_incoming([_event(run, "j", "START", 1)]), now=10.5)
    assert [t for _, t in _types(out)] == ["START", "COMPLETE"]
    other = str(uuid.uuid4())
    core.process(_incoming([_event(other, "k", "COMPLETE", 3)]), now=20.0)
    expired = core.expire(now=22.5, assigned={0})
    assert [t for _, t in _types(expired)] == ["COMPLETE"]
    late = core.process(_incoming([_event(other, "k", "START", 1)]), now=23.0)
    assert late.late == 1 and late.normalized[0][1]["processing"]["late"] is True


def test_spark_style_starts_with_accumulating_facets_are_distinct() -> None:
    run = str(uuid.uuid4())
    first = _event(run, "spark", "START", 1)
    second = copy.deepcopy(first)
    second["run"]["facets"] = {"spark_jobDetails": {
        "_producer": "https://github.com/OpenLineage/OpenLineage", "jobId": 3,
        "_schemaURL": "https://openlineage.io/spark/facets/SparkJobDetailsRunFacet.json"}}
    out = _core().process(_incoming([first, second, first]), now=1.0)
    assert len(out.normalized) == 2 and out.duplicates == 1


def test_namespaces_are_canonical_and_the_original_is_kept() -> None:
    run = str(uuid.uuid4())
    out = _core().process(_incoming([_event(run, "j", "START", 1)]), now=1.0)
    (key, record), = out.normalized
    assert record_to_event(record["event"])["inputs"][0]["namespace"] == "s3://raw"
    assert record["processing"]["renamedDatasets"][0]["originalNamespace"] == "s3a://raw"
    assert key == b"run:tests/j"


def test_schema_change_gives_exactly_one_finding() -> None:
    def out_with(fields: list[tuple[str, str]]) -> list:
        return [{"namespace": "s3://lake", "name": "t", "facets": {"schema": {
            "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": n, "type": t} for n, t in fields]}}}]

    schemas: dict = {}
    core = _core(schemas=schemas)
    v1 = out_with([("id", "int"), ("amount", "double")])
    v2 = out_with([("id", "string"), ("amount", "double")])
    runs = [str(uuid.uuid4()) for _ in range(4)]
    batch = [_event(run, "w", event_type, 2 * i + offset, outputs)
             for i, (run, outputs) in enumerate(zip(runs, [v1, v1, v2, v2], strict=True))
             for event_type, offset in (("START", 0), ("COMPLETE", 1))]
    late_v1 = _event(str(uuid.uuid4()), "w", "START", 0, v1)  # an older schema arriving last changes nothing
    out = core.process(_incoming([*batch, late_v1]), now=1.0)
    findings = [c for _, r in out.normalized for c in r["schemaChanges"]]
    assert len(findings) == 1
    assert findings[0]["severity"] == "BREAKING" and findings[0]["changes"][0]["path"] == "id"
    assert findings[0]["previousEventTime"] == "2024-05-01T12:00:00Z"
    assert schemas == {}  # staged, not written: the shell writes the state after the outputs were delivered
    written = {key: value for _, key, value in out.schema_writes}
    assert written["s3://lake/t"]["eventTime"] == "2024-05-01T12:00:04Z"


def test_poison_records_become_dead_letters_and_good_ones_flow() -> None:
    run = str(uuid.uuid4())
    good = _incoming([_event(run, "j", "START", 1)])[0]
    invalid = _event(run, "j", "COMPLETE", 2)
    invalid["run"]["runId"] = "not-a-uuid"
    bad = [Incoming(b"k", b"{json}", 0, 1, None, "events"),
           Incoming(b"k", b"\x00\x00\x00\x00\x07xx", 0, 2, None, "events"),
           Incoming(b"k", good.value[:-5], 0, 3, None, "events"),
           Incoming(b"k", CODEC.encode(event_to_record(invalid), 1), 0, 4, None, "events")]
    out = _core().process([bad[0], good, *bad[1:]], now=1.0)
    assert len(out.normalized) == 1
    reasons = [d["errorClass"] for _, d in out.dead_letters]
    assert reasons == ["bad-magic-byte", "unknown-schema-id", "truncated", "invalid-event"]
    assert all(d["value"] is not None and d["stage"] == "processor" for _, d in out.dead_letters)
    assert "run.runId" in out.dead_letters[-1][1]["errorMessage"]


def test_a_restarted_worker_continues_from_the_persisted_state() -> None:
    run = str(uuid.uuid4())
    first = _core()
    start, complete = _event(run, "j", "START", 1), _event(run, "j", "COMPLETE", 3)
    held = first.process(_incoming([complete]), now=10.0)  # held back, and its state written out
    assert held.normalized == []
    runs = {key: value for key, (_, value) in held.run_writes.items()}  # what the changelog tables keep
    dedupe = {key: value for key, (_, value) in held.dedupe_writes.items()}
    second = ProcessorCore(CODEC, runs, {}, dedupe=dedupe, window_seconds=2.0)  # a new worker restores the tables
    out = second.process(_incoming([complete, start]), now=11.0)  # the redelivered COMPLETE is a duplicate
    assert out.duplicates == 1
    assert [t for _, t in _types(out)] == ["START", "COMPLETE"]


def test_replay_path_builds_the_graph_the_full_processing_builds() -> None:
    """``normalize`` (replay) skips dedupe, hold-back and drift: the graph of its events equals the graph of what
    ``process`` emits, for a shuffled stream with repeats, out-of-order runs and non-canonical namespaces."""
    runs = [str(uuid.uuid4()) for _ in range(6)]
    schema = [{"namespace": "s3n://lake", "name": "out", "facets": {"schema": {
        "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": "id", "type": "int"}]}}}]
    events = [_event(run, f"job-{i % 3}", t, s, schema) for i, run in enumerate(runs)
              for t, s in (("START", 1), ("RUNNING", 2), ("COMPLETE", 3))]
    stream = events + random.Random(3).sample(events, 5)
    random.Random(5).shuffle(stream)
    poison = Incoming(b"k", b"\x00\x00\x00\x00\x07xx", 0, 99, None, "events")
    records = [*_incoming(stream), poison]

    full = _core()
    out = full.process(records, now=1.0)
    out.extend(full.expire(now=10.0, assigned={0}))
    replayed, replay_out = _core().normalize(records)

    assert len(replayed) == len(stream) and [d["errorClass"] for _, d in replay_out.dead_letters] == \
        ["unknown-schema-id"]
    assert {d["namespace"] for e in replayed for d in e["outputs"]} == {"s3://lake"}
    processed = [record_to_event(record["event"]) for _, record in out.normalized]
    assert graph_batch(replayed) == graph_batch(processed)


def test_a_dataset_event_carrying_a_run_flows_at_once() -> None:
    event = {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
             "dataset": {"namespace": "s3://lake", "name": "raw/orders"}, "run": {"runId": str(uuid.uuid4())}}
    out = _core().process(_incoming([event]), now=1.0)
    assert len(out.normalized) == 1 and not out.dead_letters  # not held back for a START it will never get


def test_a_record_stamped_as_validated_is_not_validated_again_and_an_unstamped_one_is() -> None:
    invalid = _event("not-a-uuid", "job", "COMPLETE", 1)
    unstamped, stamped = _incoming([invalid, invalid])
    stamped = Incoming(stamped.key, stamped.value, 0, 1, PRODUCED_MS, "events", validated=True)
    events, out = _core().normalize([unstamped, stamped])
    assert [event["run"]["runId"] for event in events] == ["not-a-uuid"]  # the stamped one: trusted
    assert len(out.dead_letters) == 1 and out.dead_letters[0][1]["errorClass"] == "invalid-event"
    assert out.dead_letters[0][1]["sourceOffset"] == 0
    far_ahead = _event(str(uuid.uuid4()), "job", "COMPLETE", 1)  # what the record's own timestamp decides: checked
    record = _incoming([far_ahead])[0]
    events, out = _core().normalize([Incoming(record.key, record.value, 0, 2, 1_000_000_000_000, "events",
                                              validated=True)])
    assert not events and out.dead_letters[0][1]["errorClass"] == "event-time-in-future"


def test_dbt_documented_columns_are_a_partial_schema_without_drift_and_catalog_columns_are_whole() -> None:
    """dbt-ol's schema facet lists the documented columns, untyped, when the project has no catalog.json: documenting
    one more column changes no schema (no finding); a facet from the catalog (every column typed) still drifts."""
    dbt = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/dbt"

    def run(second: int, fields: list[dict]) -> list[dict]:
        output = [{"namespace": "duckdb:///w/shop.duckdb", "name": "shop.main.stg", "facets": {"schema": {
            "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json",
            "fields": fields}}}]
        run_id = str(uuid.uuid4())
        return [{**_event(run_id, "stg", kind, second + offset, output), "producer": dbt}
                for kind, offset in (("START", 0), ("COMPLETE", 1))]

    documented = [{"name": "id", "description": "key"}, {"name": "email", "description": "receipts"}]
    more_documented = [*documented, {"name": "country", "description": "where"}]
    catalog = [{"name": "id", "type": "INTEGER"}, {"name": "email", "type": "VARCHAR"},
               {"name": "country", "type": "VARCHAR"}]
    core = _core()
    out = core.process(_incoming([*run(0, documented), *run(2, more_documented), *run(4, documented)]), now=1.0)
    assert [c for _, r in out.normalized for c in r["schemaChanges"]] == []
    assert out.schema_writes == []  # no history either: a partial facet is no observation
    out = core.process(_incoming([*run(10, catalog), *run(12, catalog[:2])]), now=2.0)
    findings = [c for _, r in out.normalized for c in r["schemaChanges"]]
    assert [(f["severity"], [(c["path"], c["kind"]) for c in f["changes"]]) for f in findings] == [
        ("BREAKING", [("country", "REMOVED")])]
    typed_docs = [{"name": "id", "type": "integer"}]  # a dbt contract: documented and typed is whole
    out = core.process(_incoming(run(14, typed_docs)), now=3.0)
    assert [c["path"] for _, r in out.normalized for f in r["schemaChanges"] for c in f["changes"]] == ["email"]
