"""The workload generator: deterministic, valid events, disturbed delivery, a truth the real pipeline logic meets."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime
from functools import cache

import pytest

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.fingerprint import FINGERPRINT_QUERIES, fingerprint
from kafka_lineage.processors.core import Incoming, ProcessorCore
from kafka_lineage.processors.normalize import normalize_event, parse_aliases
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import event_to_record, partition_key, record_to_event, validate_event
from kafka_lineage.schemas.schema_diff import schema_version
from kafka_lineage.schemas.wire import AvroCodec
from kafka_lineage.sinks.alerts.sink import build_alert
from kafka_lineage.sinks.alerts.sink import change_id as sink_change_id
from kafka_lineage_devtools.checker import check, format_report, rows_from_graph_batch
from kafka_lineage_devtools.workload import KINDS, Delivery, GroundTruth, Workload, alert_id, generate, iter_batches

CODEC = AvroCodec("openlineage_event", lambda _: schema_text("openlineage_event"))


@cache
def workload(seed: int = 11, jobs: int = 40, runs: int = 6, changes: int = 8, tag: str | None = None) -> Workload:
    return generate(jobs, runs, seed, changes, tag=tag)


def _canonical(event: dict) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


def _time(event: dict) -> datetime:
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).astimezone(UTC)


# --- determinism and validity ----------------------------------------------------------------------------------------
def test_same_seed_gives_the_same_events_and_truth() -> None:
    a, b = generate(25, 4, 5, 3), generate(25, 4, 5, 3)
    assert [_canonical(e) for e in a.events] == [_canonical(e) for e in b.events]
    assert a.truth == b.truth and a.delivery == b.delivery
    other = generate(25, 4, 6, 3)
    assert [_canonical(e) for e in other.events] != [_canonical(e) for e in a.events]


def test_the_tag_separates_workloads_and_the_delivery_leaves_the_model_alone() -> None:
    a, b = workload(), workload(tag="other-1")
    assert not a.truth.scope.run_ids & b.truth.scope.run_ids
    assert not a.truth.scope.dataset_namespaces & b.truth.scope.dataset_namespaces
    assert all("wl-other-1" in ns for ns in b.truth.scope.dataset_namespaces | b.truth.scope.job_namespaces)
    calm = generate(40, 6, 11, 8, delivery=Delivery.none())
    assert calm.truth == a.truth  # same model, only the delivery differs
    assert sorted(map(_canonical, calm.events)) == sorted({_canonical(e) for e in a.events})


def test_every_event_is_a_valid_run_event_and_survives_avro() -> None:
    events = workload().events
    assert all(validate_event(event) == "RunEvent" for event in events)
    for event in events[::7]:
        assert record_to_event(CODEC.decode(CODEC.encode(event_to_record(event), 1))) == event


@pytest.mark.parametrize("bad", [dict(jobs=0, runs_per_job=3), dict(jobs=3, runs_per_job=1, schema_changes=1),
                                 dict(jobs=1, runs_per_job=2, schema_changes=50), dict(tag="Upper"),
                                 dict(schema_changes=-1)])
def test_impossible_parameters_are_refused(bad: dict) -> None:
    args = {"jobs": 5, "runs_per_job": 3, "seed": 1, "schema_changes": 1} | bad
    with pytest.raises(ValueError):
        generate(**args)


# --- delivery --------------------------------------------------------------------------------------------------------
def test_delivery_has_duplicates_retries_late_starts_and_cross_run_shuffling() -> None:
    w = workload()
    positions: dict[str, list[int]] = defaultdict(list)
    for pos, event in enumerate(w.events):
        positions[_canonical(event)].append(pos)
    copies = [p for p in positions.values() if len(p) > 1]
    assert sum(len(p) - 1 for p in copies) == w.delivery["duplicates"] + w.delivery["retries"] > 0
    assert any(p[1] - p[0] <= 3 for p in copies), "no immediate re-send"
    assert any(p[1] - p[0] > 100 for p in copies), "no late retry"
    started: set[str] = set()
    late: set[str] = set()  # runs whose COMPLETE/RUNNING/FAIL comes before their START
    for event in w.events:
        run = event["run"]["runId"]
        if event["eventType"] == "START":
            started.add(run)
        elif run not in started:
            late.add(run)
    assert len(late) == w.delivery["late_starts"] > w.delivery["late_starts_planned"] > 0
    times = [_time(e) for e in w.events]
    assert times != sorted(times)  # shuffled across runs
    assert w.summary()["events"] == len(w.events) > w.summary()["distinct_events"]


def test_no_disturbance_means_time_order_and_each_event_once() -> None:
    w = generate(20, 3, 2, 1, delivery=Delivery.none())
    times = [_time(e) for e in w.events]
    assert times == sorted(times)
    assert len({_canonical(e) for e in w.events}) == len(w.events)
    assert w.delivery["late_starts"] == w.delivery["duplicates"] == w.delivery["retries"] == 0


def test_iter_batches_covers_the_events_in_order() -> None:
    w = workload()
    batches = list(iter_batches(w, 100))
    assert [e for batch in batches for e in batch] == w.events
    assert all(len(batch) == 100 for batch in batches[:-1]) and 0 < len(batches[-1]) <= 100
    with pytest.raises(ValueError):
        next(iter_batches(w, 0))


# --- the truth -------------------------------------------------------------------------------------------------------
def test_kinds_mirror_the_fingerprint_queries() -> None:
    assert list(KINDS) == list(FINGERPRINT_QUERIES)
    for kind, query in FINGERPRINT_QUERIES.items():
        assert tuple(re.findall(r" AS (\w+)", query)) == KINDS[kind].columns


def test_the_truth_is_a_consistent_graph() -> None:
    truth = workload().truth
    g = {kind: truth.rows(kind) for kind in KINDS}
    jobs = {(r["namespace"], r["name"]) for r in g["Job"]}
    runs = {r["runId"] for r in g["Run"]}
    datasets = {(r["namespace"], r["name"]) for r in g["Dataset"]}
    fields = {(r["namespace"], r["name"], r["field"]) for r in g["Field"]}
    versions = {(r["namespace"], r["name"], r["hash"]) for r in g["SchemaVersion"]}
    assert Counter(r["runId"] for r in g["OF_JOB"]) == Counter(runs)  # every run has exactly one job
    assert {(r["namespace"], r["name"]) for r in g["OF_JOB"]} == jobs
    for r in g["CHILD_OF"]:
        assert {r["runId"], r["parentRunId"]} <= runs
    for kind in ("READ", "WROTE"):
        assert {r["runId"] for r in g[kind]} <= runs
        assert {(r["namespace"], r["name"]) for r in g[kind]} <= datasets
    for r in g["INPUT_TO"] + g["OUTPUTS"]:
        assert (r["namespace"], r["name"]) in datasets and (r["jobNamespace"], r["jobName"]) in jobs
    assert {(r["fieldNamespace"], r["fieldName"], r["field"]) for r in g["HAS_FIELD"]} == fields
    assert all((r["namespace"], r["name"]) == (r["fieldNamespace"], r["fieldName"]) for r in g["HAS_FIELD"])
    assert {(r["schemaNamespace"], r["schemaName"], r["hash"]) for r in g["HAS_SCHEMA"]} == versions
    assert {(ns, nm) for ns, nm, _ in fields | versions} <= datasets
    for r in g["DERIVES_FROM"]:
        assert (r["namespace"], r["name"], r["field"]) in fields
        assert (r["inputNamespace"], r["inputName"], r["inputField"]) in fields
    # every dataset is read or written, or another name (a symlinks TABLE identifier) of one that is; every job ran
    # or parents runs
    used = {(r["namespace"], r["name"]) for r in g["READ"] + g["WROTE"]}
    aliases = {(r["aliasNamespace"], r["aliasName"]) for r in g["SAME_AS"]}
    assert datasets == used | aliases and not used & aliases
    assert {(r["namespace"], r["name"]) for r in g["SAME_AS"]} <= used
    assert len(aliases) == len(g["SAME_AS"])  # one table name per path dataset
    scope = truth.scope
    assert {ns for ns, _ in jobs} == scope.job_namespaces and {ns for ns, _ in datasets} == scope.dataset_namespaces
    assert runs == scope.run_ids
    # the run states the model produces, parents that never reported included
    assert {r["state"] for r in g["Run"]} == {"COMPLETE", "FAIL", "RUNNING", "START", None}
    wrote = [(r["rowCount"], r["bytes"]) for r in g["WROTE"]]
    assert any(b is None and c is not None for c, b in wrote) and (None, None) in wrote
    assert all(c is not None and b is not None for c, b in wrote if (c, b) != (None, None) and b is not None)
    assert {r["transformation"] for r in g["DERIVES_FROM"]} >= {"DIRECT/IDENTITY", "IDENTITY", ""}
    assert any("." in r["field"] for r in g["Field"])  # nested fields


def test_the_truth_holds_canonical_names_while_events_spell_them_otherwise() -> None:
    w = workload(seed=7)
    assert w.truth.scope.dataset_namespaces >= {"s3://wl-s7-lake", "postgres://wl-s7-db:5432"}
    assert not [ns for ns in w.truth.scope.dataset_namespaces if re.match(r"s3[an]:|jdbc:|postgresql:", ns)
                or ns != ns.lower()]
    assert not [r for r in w.truth.rows("Dataset") if "://" in r["name"]]  # no URI left in a name
    spelled = {d["namespace"] for e in w.events for d in e.get("inputs", []) + e.get("outputs", [])}
    assert {"s3a://wl-s7-lake", "jdbc:postgresql://wl-s7-db/analytics", "s3://WL-S7-LAKE"} <= spelled
    assert spelled - w.truth.scope.dataset_namespaces


def test_path_datasets_carry_table_symlinks_and_the_truth_links_them() -> None:
    w = workload()
    truth = w.truth
    same = truth.rows("SAME_AS")
    assert {r["aliasNamespace"] for r in same} == {"hive://wl-s11-metastore:9083", "s3://wl-s11-lake/warehouse"}
    assert {r["aliasNamespace"] for r in same} <= truth.scope.dataset_namespaces  # the checker sees the aliases
    assert {r["type"] for r in same} == {"TABLE"}
    assert {r["namespace"].partition(":")[0] for r in same} <= {"s3", "hdfs", "gs"}  # path datasets only
    paths = {(r["namespace"], r["name"]) for r in truth.rows("WROTE") if r["namespace"].partition(":")[0] in
             ("s3", "hdfs", "gs")}
    assert 0.2 < len({(r["namespace"], r["name"]) for r in same} & paths) / len(paths) < 0.6
    # first/last seen: the events naming the dataset carry its symlinks, so its INPUT_TO/OUTPUTS edges' bounds
    bounds: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for r in truth.rows("INPUT_TO") + truth.rows("OUTPUTS"):
        bounds[(r["namespace"], r["name"])].append((r["firstSeen"], r["lastSeen"]))
    for r in same:
        seen = bounds[(r["namespace"], r["name"])]
        assert (r["firstSeen"], r["lastSeen"]) == (min(f for f, _ in seen), max(last for _, last in seen))
    # every event naming a linked dataset carries the facet, in OpenLineage's shape and canonical form (the
    # processor changes nothing in it); no other dataset carries one
    linked = {(r["namespace"], r["name"]): {"namespace": r["aliasNamespace"], "name": r["aliasName"], "type": "TABLE"}
              for r in same}
    carried = set()
    for event in w.events[::3]:
        normalized = normalize_event(event)[0]
        for sent, dataset in zip(event.get("inputs", []) + event.get("outputs", []),
                                 normalized.get("inputs", []) + normalized.get("outputs", []), strict=True):
            facet = dataset.get("facets", {}).get("symlinks")
            identity = (dataset["namespace"], dataset["name"])
            if identity not in linked:
                assert facet is None
                continue
            carried.add(identity)
            assert facet is sent["facets"]["symlinks"] and facet["identifiers"] == [linked[identity]]
            assert facet["_schemaURL"] == ("https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
                                           "#/$defs/SymlinksDatasetFacet")
    assert carried == set(linked)


def test_symlink_rate_zero_leaves_the_rest_of_the_workload_alone() -> None:
    w, plain = workload(), generate(40, 6, 11, 8, symlink_rate=0)
    assert not plain.truth.graph["SAME_AS"]
    assert not [e for e in plain.events for d in e.get("inputs", []) + e.get("outputs", [])
                if "symlinks" in d.get("facets", {})]
    aliases = {(r["aliasNamespace"], r["aliasName"]) for r in w.truth.rows("SAME_AS")}
    assert plain.truth.graph["Dataset"] == w.truth.graph["Dataset"] - aliases
    assert all(plain.truth.graph[kind] == w.truth.graph[kind] for kind in KINDS if kind not in ("Dataset", "SAME_AS"))
    assert plain.delivery == w.delivery and len(plain.events) == len(w.events)


def test_an_alias_map_renames_hive_tables_but_not_tables_under_a_warehouse_location() -> None:
    aliases = parse_aliases("hive://wl-s3-metastore:9083=hive://metastore; s3://wl-s3-lake=s3://lake")
    w = generate(30, 4, 3, 2, aliases=aliases)
    assert {r["aliasNamespace"] for r in w.truth.rows("SAME_AS")} == {"hive://metastore", "s3://wl-s3-lake/warehouse"}
    assert {"s3://lake", "hive://metastore"} <= w.truth.scope.dataset_namespaces
    rows = rows_from_graph_batch(graph_batch(normalize_event(event, aliases)[0] for event in w.events))
    report = check(w.truth, rows, None)
    assert report.ok, format_report(report)


def test_schema_changes_give_one_alert_each_of_both_severities() -> None:
    w = workload()
    alerts = w.truth.alerts
    assert len(alerts) == 8 and {a.severity for a in alerts} == {"BREAKING", "COMPATIBLE"}
    versions = {(r["namespace"], r["name"], r["hash"]) for r in w.truth.rows("SchemaVersion")}
    for alert in alerts:
        assert alert.previous_version != alert.new_version
        assert {(alert.namespace, alert.name, alert.previous_version),
                (alert.namespace, alert.name, alert.new_version)} <= versions
        assert alert_id(*alert[:4]) == sink_change_id({"namespace": alert.namespace, "name": alert.name,
                                                       "previousVersion": alert.previous_version,
                                                       "newVersion": alert.new_version})
    # the versions are those of schemas the events really carry (normalized identity → versions seen)
    carried: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event in w.events:
        for out in normalize_event(event)[0].get("outputs", []):
            carried[(out["namespace"], out["name"])].add(schema_version(out["facets"]["schema"]["fields"]))
    for alert in alerts:
        assert {alert.previous_version, alert.new_version} <= carried[(alert.namespace, alert.name)]


def test_truth_round_trips_through_json() -> None:
    truth = workload().truth
    assert GroundTruth.from_dict(json.loads(json.dumps(truth.as_dict()))) == truth


def test_summary_is_compact_and_json_ready() -> None:
    summary = workload().summary()
    json.dumps(summary)
    assert summary["expected"]["alerts"] == 8 and summary["expected"]["runs"] == len(workload().truth.scope.run_ids)


# --- the truth against the real pipeline logic -----------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_graph_of_the_normalized_events_is_exactly_the_truth(seed: int) -> None:
    """What the sink would write for the processor's output (normalize_event, then graph.events) is the truth."""
    w = generate(30, 5, seed, 4)
    rows = rows_from_graph_batch(graph_batch(normalize_event(event)[0] for event in w.events))
    report = check(w.truth, rows, None)
    assert report.ok, format_report(report)
    assert fingerprint(rows) == w.truth.fingerprint()
    # batches in delivery order (one sink transaction each) merge to the same graph: the same rows per batch, and
    # each edge's first/last seen times the earliest/latest of its batches' (the statements' min/max rules)
    merged: dict[str, dict] = defaultdict(dict)
    for batch in iter_batches(w, 97):
        for kind, found in rows_from_graph_batch(graph_batch(normalize_event(e)[0] for e in batch)).items():
            if kind in ("Run", "WROTE"):
                continue
            for row in found:
                key = tuple((k, v) for k, v in row.items() if k not in ("firstSeen", "lastSeen"))
                old = merged[kind].get(key, row)
                merged[kind][key] = {**row, **({"firstSeen": min(old["firstSeen"], row["firstSeen"]),
                                                "lastSeen": max(old["lastSeen"], row["lastSeen"])}
                                               if "firstSeen" in row else {})}
    assert all({tuple(r.items()) for r in merged[k].values()} == {tuple(r.items()) for r in rows[k]}
               for k in KINDS if k not in ("Run", "WROTE"))


@pytest.mark.parametrize("seed", [4, 5])
def test_the_processor_core_turns_the_workload_into_the_truth_and_its_alerts(seed: int) -> None:
    """Avro decode, validation, dedupe, reordering, normalization and drift detection of the real processor core:
    its normalized events give the truth's graph, its schema changes exactly the truth's alerts."""
    w = generate(40, 6, seed, 10)
    core = ProcessorCore(CODEC, {}, {}, window_seconds=2.0)
    produced = 1_800_000_000_000  # a Kafka timestamp after the events' times
    incoming = [Incoming(partition_key(e).encode(), CODEC.encode(event_to_record(e), 1), 0, offset, produced, "events")
                for offset, e in enumerate(w.events)]
    out = core.process(incoming, now=100.0)
    out.extend(core.expire(now=200.0, assigned={0}))
    assert not out.dead_letters
    assert out.duplicates == w.delivery["duplicates"] + w.delivery["retries"]
    assert len(out.normalized) == w.summary()["distinct_events"]
    events = [record_to_event(record["event"]) for _, record in out.normalized]
    alerts = [build_alert(change, event, [], 3, 10, datetime.now(UTC))
              for event, (_, record) in zip(events, out.normalized, strict=True) for change in record["schemaChanges"]]
    report = check(w.truth, rows_from_graph_batch(graph_batch(events)), alerts)
    assert report.ok, format_report(report)
    assert report["alerts"].expected == len(alerts) == 10


def test_a_larger_workload_scales_linearly() -> None:
    w = generate(300, 8, 3, 20)
    summary = w.summary()
    assert 5_000 < summary["events"] < 9_000
    assert summary["expected"]["jobs"] > 300 and summary["expected"]["alerts"] == 20


def test_delivery_sends_an_old_schema_version_after_a_newer_one() -> None:
    # issue 34: the processor's drift goes by event time, so the workload disturbs schema versions too
    from kafka_lineage.schemas.schema_diff import schema_fields, schema_version

    workload = generate(60, 6, 7, schema_changes=4)
    assert workload.delivery["late_schema_runs"] >= 1
    seen: dict[tuple[str, str], list[tuple[str, str]]] = {}
    late = 0
    for event in workload.events:
        for dataset in event.get("outputs") or ():
            if fields := schema_fields(dataset):
                earlier = seen.setdefault((dataset["namespace"], dataset["name"]), [])
                version = schema_version(fields)
                late += any(time > event["eventTime"] and other != version for time, other in earlier)
                earlier.append((event["eventTime"], version))
    assert late >= 1
