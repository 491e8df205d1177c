"""The peer bench's pure parts: the events both systems get, the nodes both are asked about, the report."""

from pathlib import Path

import pytest

from kafka_lineage_devtools import bench_events
from kafka_lineage_devtools.bench_peer import (
    PeerSetupError,
    format_peer,
    marquez_classpath,
    percentile,
    pom_xml,
    query_nodes,
    ratio,
    run_peer_bench,
    setup_marquez,
    tag_namespaces,
)


def test_tagging_makes_every_dataset_namespace_the_runs_own_and_leaves_the_rest() -> None:
    events = bench_events.run_pairs(40, "realistic", seed=3, namespace="peer")
    tagged = tag_namespaces(events, "ab12")
    for before, after in zip(events, tagged, strict=True):
        assert after["job"] == before["job"] and after["run"]["runId"] == before["run"]["runId"]
        for side in ("inputs", "outputs"):
            for old, new in zip(before[side], after[side], strict=True):
                assert new["name"] == old["name"]
                assert new["namespace"] == old["namespace"].replace("://", "://ab12-", 1)
        lineage = after["outputs"][0]["facets"]["columnLineage"]["fields"]
        assert all("://ab12-" in field["namespace"] for column in lineage.values() for field in column["inputFields"])


def test_query_nodes_are_outputs_of_completed_jobs_in_normal_form_from_the_middle_layers() -> None:
    events = tag_namespaces(bench_events.run_pairs(2000, "realistic", seed=5, namespace="peer"), "ab12")
    nodes = query_nodes(events, 10)
    assert len(nodes) == len(set(nodes)) == 10
    written = {(o["namespace"], o["name"]) for e in events if e["eventType"] == "COMPLETE" for o in e["outputs"]}
    for node in nodes:
        kind, rest = node.split(":", 1)
        namespace, name = rest.rsplit(":", 1)
        assert kind == "dataset" and (namespace, name) in written
        assert namespace in {"s3://ab12-lake", "postgres://ab12-warehouse.prod.internal:5432"}  # never normalized
        assert 2 <= int(name.split("/")[0].removeprefix("layer_")) <= 7  # lineage both ways within depth 10


def test_query_nodes_skip_runs_that_never_completed() -> None:
    events = bench_events.run_pairs(1, "realistic", seed=1, namespace="peer")  # a START alone
    assert query_nodes(events, 5) == []


def test_percentile_and_ratio_handle_nothing() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile(list(range(100)), 0.99) == 99
    assert ratio(10.0, 4.0) == 2.5
    assert ratio(None, 4.0) is None and ratio(1.0, 0.0) is None


def _result() -> dict:
    side = {"ingest_single_events_per_s": 1000.0, "time_to_queryable_s": 10.0,
            "lineage_ms": {"p50": 5.0, "p99": 20.0}, "lineage_nodes_mean": 300.0,
            "rss_mib": {"app": 400.0, "total": 2000.0}}
    return {"events": 4000, "shape": "realistic", "mean_event_bytes": 6600.0, "depth": 10,
            "marquez_version": "0.51.1", "postgres_version": "15.18",
            "ours": {**side, "batch_size": 100, "ingest_batched_events_per_s": 5000.0},
            "marquez": {**side, "ingest_single_events_per_s": 250.0, "ingest_batched_events_per_s": None,
                        "ingest_batched_note": "one event per request", "lineage_ms": {"p50": 10.0, "p99": None}}}


def test_format_peer_shows_both_sides_and_the_ratio_and_what_does_not_apply() -> None:
    text = format_peer(_result())
    single = next(line for line in text.splitlines() if line.startswith("ingest, 1 event/request"))
    assert single.split()[-3:] == ["1,000", "250", "4.00x"]
    batched = next(line for line in text.splitlines() if line.startswith("ingest, 100 events/request"))
    assert batched.split()[-3:] == ["5,000", "n/a", "n/a"]
    p99 = next(line for line in text.splitlines() if "p99" in line)
    assert p99.split()[-2:] == ["n/a", "n/a"]
    assert "Marquez batched: one event per request" in text
    assert "0.51.1" in text and "6.6 KB" in text


def test_pom_compiles_with_lombok_only_when_building_sources() -> None:
    deps = ["io.dropwizard:dropwizard-core:2.1.12"]
    built = pom_xml(deps, compile_sources=True)
    assert "<artifactId>dropwizard-core</artifactId><version>2.1.12</version>" in built
    assert "<scope>provided</scope>" in built and "<release>17</release>" in built
    assert "lombok" not in pom_xml(deps, compile_sources=False)


def test_classpath_needs_jars_and_either_classes_or_the_published_jar(tmp_path: Path) -> None:
    assert marquez_classpath(tmp_path) is None
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "guava.jar").touch()
    assert marquez_classpath(tmp_path) is None  # dependencies but no Marquez
    (tmp_path / "classes").mkdir()
    assert marquez_classpath(tmp_path) == f"{tmp_path / 'classes'}:{tmp_path / 'lib' / '*'}"


def test_setup_without_a_published_artifact_or_sources_says_why(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_lineage_devtools.bench_peer.fetch_published", lambda _target: False)
    with pytest.raises(PeerSetupError, match="source release"):
        setup_marquez(None, tmp_path)


def test_the_bench_exits_2_with_the_reason_when_marquez_cannot_be_set_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(_source: object) -> str:
        raise PeerSetupError("no Marquez here")

    monkeypatch.setattr("kafka_lineage_devtools.bench_peer.setup_marquez", refuse)
    with pytest.raises(SystemExit) as exited:
        run_peer_bench(10, tmp_path / "peer.json")
    assert exited.value.code == 2
    assert "cannot set Marquez up: no Marquez here" in capsys.readouterr().err
