"""Partitions on the real stack (issue 22): events carrying the ``kafkaLineage_partition`` facet, published shuffled
to a normalized topic, through the real graph sink (a subprocess) into Neo4j → `lineage partitions`, `lineage ready`
(exit codes), `lineage run`, and the lineage server's partition endpoints — then an upstream rewrite makes the
downstream partition STALE, and the same events again change nothing (fingerprint)."""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, graph_fingerprint
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.processes import server_process, sink_process
from tests.integration.conftest import lineage
from tests.integration.sinks.test_graph_sink import _publish, _settings, _wait_for
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
FACET_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/PartitionDatasetFacet.json"
             "#/$defs/PartitionDatasetFacet")
D1, D2, D3 = "2025-12-24", "2025-12-25", "2025-12-26"


@pytest.fixture
def sink_env(clients: ClientSettings, tmp_path: Path) -> dict[str, str]:
    prefix = f"test.partitions.{uuid.uuid4().hex[:8]}"
    return {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_SINK_GROUP": f"{prefix}.sink", "LINEAGE_PARTITIONS": "3", "LINEAGE_SINK_POLL_SECONDS": "0.2"}


def _facet(day: str, **extra: str) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": FACET_URL, "keys": [{"name": "date", "value": day}],
            "source": "path", **extra}


class Lake:
    """raw (landed: marker events only) → clean (job clean, marker required) → mart (job report, assertions)."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns, self.jobs = f"s3://lake-{tag}", f"airflow-{tag}"
        self.runs: dict[str, str] = {}

    def run(self, label: str, kind: str, time_: str, job: str, reads: list[tuple[str, str]],
            writes: list[tuple[str, str]], assertions: list[dict] | None = None, marker: bool = False) -> dict:
        run_id = self.runs.setdefault(label, str(uuid.uuid4()))
        required = {"requiredMarker": "_SUCCESS"} if job == "clean" else {}
        outputs = []
        for name, day in writes:
            facets: dict[str, Any] = {"kafkaLineage_partition": _facet(day, **required,
                                                                       **({"marker": "_SUCCESS"} if marker else {}))}
            if kind == "COMPLETE":
                facets["outputStatistics"] = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/"
                                              "1-0-2/OutputStatisticsOutputDatasetFacet.json", "rowCount": 100,
                                              "size": 4096}
            if assertions is not None:
                facets["dataQualityAssertions"] = {
                    "_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/"
                    "DataQualityAssertionsDatasetFacet.json", "assertions": assertions}
            outputs.append({"namespace": self.ns, "name": name, "outputFacets": facets})
        return {"eventType": kind, "eventTime": time_, "producer": PRODUCER,
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "run": {"runId": run_id}, "job": {"namespace": self.jobs, "name": job},
                "inputs": [{"namespace": self.ns, "name": name, "inputFacets": {
                    "kafkaLineage_partition": _facet(day)}} for name, day in reads],
                "outputs": outputs}

    def marker(self, name: str, day: str, time_: str) -> dict:
        return {"eventTime": time_, "producer": PRODUCER,
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                "dataset": {"namespace": self.ns, "name": name, "facets": {
                    "kafkaLineage_partition": _facet(day, marker="_SUCCESS",
                                                     **({"requiredMarker": "_SUCCESS"} if name == "clean" else {}))}}}

    def first_days(self) -> list[dict]:
        ok = [{"assertion": "not_null", "column": "id", "success": True}]
        bad = [*ok, {"assertion": "row_count_between", "success": False}]
        return [
            self.marker("raw", D1, f"{D1}T00:10:00Z"),
            self.run("c1", "START", f"{D1}T01:00:00Z", "clean", [("raw", D1)], [("clean", D1)]),
            self.marker("clean", D1, f"{D1}T01:20:00Z"),  # the marker file, reported apart from the run
            self.run("c1", "COMPLETE", f"{D1}T01:30:00Z", "clean", [("raw", D1)], [("clean", D1)]),
            self.run("m1", "START", f"{D1}T02:00:00Z", "report", [("clean", D1)], [("mart", D1)]),
            self.run("m1", "COMPLETE", f"{D1}T02:10:00Z", "report", [("clean", D1)], [("mart", D1)], ok),
            self.run("m1", "COMPLETE", f"{D1}T02:10:00Z", "report", [("clean", D1)], [("mart", D1)], ok),  # repeat
            self.run("m2", "START", f"{D2}T02:00:00Z", "report", [], [("mart", D2)]),
            self.run("m2", "FAIL", f"{D2}T02:05:00Z", "report", [], [("mart", D2)]),
            self.run("m3", "START", f"{D3}T02:00:00Z", "report", [], [("mart", D3)]),
            self.run("m3", "COMPLETE", f"{D3}T02:10:00Z", "report", [], [("mart", D3)], bad),
        ]

    def rewrite_of_clean(self) -> list[dict]:
        """A backfill of clean's first day, after mart read it."""
        return [self.run("c2", "START", f"{D2}T09:00:00Z", "clean", [("raw", D1)], [("clean", D1)]),
                self.run("c2", "COMPLETE", f"{D2}T09:30:00Z", "clean", [("raw", D1)], [("clean", D1)], marker=True)]


def _ready(lake: Lake, name: str, day: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    result = lineage("ready", lake.ns, name, "--key", f"date={day}", "--json", check=False, env=env)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def _api(server: Any, path: str, status: int = 200, **params: Any) -> Any:
    answer = requests.get(f"{server.url}{path}", params=params, timeout=30)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_partition_states_ready_and_stale_through_the_real_sink(clients: ClientSettings,
                                                                sink_env: dict[str, str]) -> None:
    settings = _settings(sink_env)
    prepare_pipeline(settings, 3)
    lake = Lake()
    events = lake.first_days()
    random.Random(22).shuffle(events)
    base = f"/api/v2/datasets/{quote(lake.ns, safe='')}"
    with sink_process(sink_env) as sink, driver_for(settings) as driver:
        _publish(settings, events)
        wait = ("MATCH (r:Run)-[:WROTE_PARTITION]->(v:PartitionVersion {namespace: $ns}) "
                "RETURN count(DISTINCT r.runId) + sum(CASE WHEN r.state IN ['COMPLETE', 'FAIL'] THEN 10 ELSE 0 END)")
        assert _wait_for(driver, wait, {"ns": lake.ns}, 4 + 40) == 44

        # ready: mart's first day and what it was built from (clean, whose marker came apart; raw, landed)
        code, answer = _ready(lake, "mart", D1, sink_env)
        assert (code, answer) == (0, {"ready": True, "missing": []})
        code, answer = _ready(lake, "mart", D2, sink_env)
        assert code == 1 and answer["missing"][0]["state"] == "FAILED" and "FAIL" in answer["missing"][0]["reason"]
        code, answer = _ready(lake, "mart", D3, sink_env)
        assert code == 1 and answer["missing"][0]["reason"] == "assertion failed: row_count_between"
        text = lineage("ready", lake.ns, "mart", "--key", f"date={D3}", check=False, env=sink_env)
        assert text.returncode == 1 and "row_count_between" in text.stdout
        assert lineage("ready", lake.ns, "nope", "--key", f"date={D1}", check=False, env=sink_env).returncode == 2
        assert lineage("ready", lake.ns, "mart", "--key", "2025", check=False, env=sink_env).returncode == 2
        missing_day = _ready(lake, "mart", "2025-01-01", sink_env)
        assert missing_day[0] == 1 and missing_day[1]["missing"][0]["reason"] == "no such partition in the graph"

        # partitions: state, versions, rows, quality, writer
        listed = json.loads(lineage("partitions", lake.ns, "mart", "--json", env=sink_env).stdout)
        assert [(p["key"], p["state"], p["versionCount"]) for p in listed] == [
            (f"date={D1}", "SUCCESS", 1), (f"date={D2}", "FAILED", 1), (f"date={D3}", "FAILED", 1)]
        first = listed[0]["latest"]
        assert first["runId"] == lake.runs["m1"] and first["job"] == {"namespace": lake.jobs, "name": "report"}
        assert (first["rowCount"], first["bytes"], first["startTime"]) == (100, 4096, f"{D1}T02:00:00.000000Z")
        assert first["assertions"] == [{"assertion": "not_null", "column": "id", "success": True}]
        failed = json.loads(lineage("partitions", lake.ns, "mart", "--state", "FAILED", "--json",
                                    env=sink_env).stdout)
        assert [p["key"] for p in failed] == [f"date={D2}", f"date={D3}"]
        clean = json.loads(lineage("partitions", lake.ns, "clean", "--json", env=sink_env).stdout)
        assert clean[0]["state"] == "SUCCESS" and clean[0]["requiredMarker"] == "_SUCCESS"
        assert clean[0]["latest"]["marker"] is True

        # the same answers from the lineage server
        with server_process() as server:
            assert _api(server, f"{base}/mart/partitions/ready", key=f"date={D1}")["ready"] is True
            not_ready = _api(server, f"{base}/mart/partitions/ready", key=f"date={D3}")
            assert not_ready["ready"] is False and not_ready["missing"][0]["state"] == "FAILED"
            _api(server, f"{base}/nope/partitions/ready", 404, key=f"date={D1}")
            _api(server, f"{base}/mart/partitions/ready", 400, key="2025")
            api_list = _api(server, f"{base}/mart/partitions", versions="true")["partitions"]
            assert [(p["key"], p["state"]) for p in api_list] == [(p["key"], p["state"]) for p in listed]
            assert api_list[0]["versions"][0]["runId"] == lake.runs["m1"]
            run = _api(server, f"/api/v2/runs/{lake.runs['c1']}/partitions")
            assert [(w["name"], w["key"], w["state"]) for w in run["wrote"]] == [("clean", f"date={D1}", "SUCCESS")]
            assert [(r["name"], r["key"]) for r in run["read"]] == [("raw", f"date={D1}")]
            assert "/api/v2/datasets/{namespace}/{dataset}/partitions/ready" in _api(server, "/openapi.json")["paths"]

        # what did run c1 write and read (CLI)
        c1 = json.loads(lineage("run", lake.runs["c1"], "--json", env=sink_env).stdout)
        assert [w["key"] for w in c1["wrote"]] == [f"date={D1}"] and c1["read"][0]["name"] == "raw"

        # a backfill of clean's first day after mart read it: mart's partition is STALE, not ready
        _publish(settings, lake.rewrite_of_clean())
        assert _wait_for(driver, "MATCH (p:Partition {namespace: $ns, name: 'clean'})-[:HAS_VERSION]->(v) "
                                 "MATCH (r:Run {runId: v.runId}) WHERE r.state = 'COMPLETE' RETURN count(v)",
                         {"ns": lake.ns}, 2) == 2
        code, answer = _ready(lake, "mart", D1, sink_env)
        assert code == 1 and answer["missing"][0]["state"] == "STALE" and "clean" in answer["missing"][0]["reason"]
        versions = json.loads(lineage("partitions", lake.ns, "clean", "--runs", "--json", env=sink_env).stdout)
        assert [(v["version"], v["runId"]) for v in versions[0]["versions"]] == [(2, lake.runs["c2"]),
                                                                                (1, lake.runs["c1"])]
        stale = json.loads(lineage("partitions", lake.ns, "mart", "--state", "STALE", "--json", env=sink_env).stdout)
        assert [p["key"] for p in stale] == [f"date={D1}"]

        # every event again, in another order: nothing changes
        before = graph_fingerprint(driver)
        again = events + lake.rewrite_of_clean()
        random.Random(7).shuffle(again)
        _publish(settings, again)
        time.sleep(3)
        assert graph_fingerprint(driver) == before
    assert sink.returncode == 0
