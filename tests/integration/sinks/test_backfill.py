"""Backfill plans on the real stack (issue 22): a layered DAG of daily-partitioned jobs sent as OpenLineage events
through the real pipeline (processor and graph sink) → `lineage backfill plan --json` equals the expected plan and
the server's backfill-plan endpoint answers the same; `--mark-stale` (through the pipeline) makes `lineage ready` say
not ready for the planned partitions until backfill runs (with the kafkaLineage_backfill facet) rewrite them."""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.partitions import BACKFILL_SCHEMA_URL as BACKFILL_URL
from kafka_lineage_devtools.processes import pipeline_env, processor_process, server_process, sink_process
from tests.integration.conftest import lineage
from tests.integration.sinks.test_graph_sink import _settings, _wait_for
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration
FACET_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/PartitionDatasetFacet.json"
             "#/$defs/PartitionDatasetFacet")
DAYS = ["2025-12-01", "2025-12-02", "2025-12-03", "2025-12-04"]
WINDOW = DAYS[1:3]
# job → (inputs, outputs, partition facts?); clean and enrich fan out of raw, join closes the diamond, blind sends
# no partition facets (planned by window)
DAG = {"clean": (["raw"], ["clean"], True), "enrich": (["raw"], ["enrich"], True),
       "join": (["clean", "enrich"], ["mart"], True), "blind": (["mart"], ["summary"], False)}
HOUR = {"clean": 1, "enrich": 1, "join": 2, "blind": 3}


def _facet(day: str) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": FACET_URL, "keys": [{"name": "date", "value": day}],
            "source": "hook"}


class Dag:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns, self.jobs = f"s3://bf-{tag}", f"airflow-bf-{tag}"
        self.runs: dict[str, dict[str, Any]] = {}  # label → {runId, start}

    def run(self, label: str, job: str, day: str | None, start: datetime,
            backfill: dict[str, Any] | None = None) -> list[dict]:
        run_id = str(uuid.uuid4())
        self.runs[label] = {"runId": run_id, "start": start}
        ins, outs, partitioned = DAG[job]

        def io(names: list[str], facet_key: str) -> list[dict]:
            return [{"namespace": self.ns, "name": name,
                     **({facet_key: {"kafkaLineage_partition": _facet(day)}} if partitioned and day else {})}
                    for name in names]

        facets = {"kafkaLineage_backfill": {"_producer": PRODUCER, "_schemaURL": BACKFILL_URL,
                                            **backfill}} if backfill else {}
        return [{"eventType": kind, "eventTime": (start + timedelta(minutes=minutes)).isoformat().replace(
                    "+00:00", "Z"), "producer": PRODUCER,
                 "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                 "run": {"runId": run_id, **({"facets": facets} if facets else {})},
                 "job": {"namespace": self.jobs, "name": job},
                 "inputs": io(ins, "inputFacets"), "outputs": io(outs, "outputFacets")}
                for kind, minutes in (("START", 0), ("COMPLETE", 10))]

    def live(self) -> list[dict]:
        events = [{"eventTime": f"{day}T00:10:00Z", "producer": PRODUCER,
                   "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                   "dataset": {"namespace": self.ns, "name": "raw", "facets": {
                       "kafkaLineage_partition": {**_facet(day), "marker": "_SUCCESS"}}}} for day in DAYS]
        for day in DAYS:
            for job in ("clean", "enrich", "join"):
                events += self.run(f"{job} {day}", job, day, datetime.fromisoformat(f"{day}T0{HOUR[job]}:00:00+00:00"))
        return events + self.run("blind", "blind", None, datetime(2025, 12, 5, 3, tzinfo=UTC))

    def expected_plan(self, plan_id: str) -> dict[str, Any]:
        def ref(name: str, day: str | None) -> dict[str, Any]:
            return {"namespace": self.ns, "name": name, "key": f"date={day}" if day else None}

        def item(job: str, day: str) -> dict[str, Any]:
            ins, outs, partitioned = DAG[job]
            run = self.runs[f"{job} {day}" if partitioned else "blind"]
            upstream = {"join": ["clean", "enrich"], "blind": ["join"]}.get(job, [])
            return {"job": {"namespace": self.jobs, "name": job}, "key": f"date={day}",
                    "partitions": "known" if partitioned else "unknown",
                    "derivation": "partition" if partitioned else "window",
                    "rebuild": [ref(name, day) for name in outs],
                    "inputs": [ref(name, day if partitioned else None) for name in ins],
                    "after": sorted(f"{self.jobs} {u} date={d}" for u in upstream
                                    for d in (WINDOW if job == "blind" else [day])),
                    "lastRun": {"runId": run["runId"], "state": "COMPLETE",
                                "startTime": run["start"].strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                                "endTime": (run["start"] + timedelta(minutes=10)).strftime(
                                    "%Y-%m-%dT%H:%M:%S.000000Z"), "backfill": None}}

        return {"planId": plan_id, "dataset": {"namespace": self.ns, "name": "raw"},
                "window": {"from": WINDOW[0], "to": WINDOW[-1]}, "depth": 10, "truncated": False,
                "partitions": [f"date={d}" for d in WINDOW],
                "jobs": [{"namespace": self.jobs, "name": j} for j in ("clean", "enrich", "join", "blind")],
                "itemCount": 8,
                "stages": [{"stage": 0, "items": [item(j, d) for j in ("clean", "enrich") for d in WINDOW]},
                           {"stage": 1, "items": [item("join", d) for d in WINDOW]},
                           {"stage": 2, "items": [item("blind", d) for d in WINDOW]}],
                "cycles": []}


def _ready(dag: Dag, name: str, day: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    result = lineage("ready", dag.ns, name, "--key", f"date={day}", "--json", check=False, env=env)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def _until(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def _publish(settings: ClientSettings, events: list[dict]) -> None:
    publisher = EventPublisher.from_settings(settings)
    try:
        assert publisher.send([publisher.encode(event) for event in events]).result() == len(events)
    finally:
        publisher.close()


def test_backfill_plan_mark_stale_and_backfill_runs_through_the_real_pipeline(clients: ClientSettings,
                                                                               tmp_path: Path) -> None:
    prefix = f"test.backfill.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = _settings(env)
    dag = Dag()
    events = dag.live()
    random.Random(41).shuffle(events)
    args = ("backfill", "plan", dag.ns, "raw", "--from", WINDOW[0], "--to", WINDOW[-1])
    with processor_process(env), sink_process(env), driver_for(settings) as driver:
        _publish(settings, events)
        done = "MATCH (j:Job {namespace: $jobs})<-[:OF_JOB]-(r:Run) WHERE r.state = 'COMPLETE' RETURN count(r)"
        assert _wait_for(driver, done, {"jobs": dag.jobs}, 13, timeout=90) == 13

        plan = json.loads(lineage(*args, "--json", env=env).stdout)
        assert plan == dag.expected_plan(plan["planId"])
        table = lineage(*args, env=env).stdout
        assert "stage 2 (2 in parallel)" in table and "partitions: unknown, by window" in table
        assert lineage("backfill", "plan", dag.ns, "nope", "--from", WINDOW[0], "--to", WINDOW[0], check=False,
                       env=env).returncode == 2
        with server_process() as server:
            url = f"{server.url}/api/v2/datasets/{quote(dag.ns, safe='')}/raw/backfill-plan"
            answer = requests.get(url, params={"from": WINDOW[0], "to": WINDOW[-1]}, timeout=30)
            assert answer.status_code == 200 and answer.json() == plan

        # every planned partition ready before; marked stale through the pipeline, not ready until rewritten
        assert all(_ready(dag, name, day, env)[0] == 0 for name in ("clean", "enrich", "mart") for day in DAYS)
        marked = json.loads(lineage(*args, "--mark-stale", "--json", env=env).stdout)["markStale"]
        assert (marked["published"], marked["skipped"]) == (6, 2)
        planned = [(name, day) for name in ("clean", "enrich", "mart") for day in WINDOW]
        assert _until(lambda: all(_ready(dag, n, d, env)[0] == 1 for n, d in planned)), "marks never arrived"
        _, answer = _ready(dag, "mart", WINDOW[0], env)
        assert answer["missing"][0]["state"] == "STALE" and plan["planId"] in answer["missing"][0]["reason"]
        assert all(_ready(dag, name, day, env)[0] == 0 for name in ("clean", "enrich", "mart")
                   for day in (DAYS[0], DAYS[3]))  # outside the window: untouched

        # the scheduler runs the plan's stages as backfill runs (started after the mark): ready again
        facet = {"planId": plan["planId"], "window": plan["window"]}
        now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        rewrites: list[dict] = []
        for offset, stage in enumerate(plan["stages"][:2]):
            for item in stage["items"]:
                job, day = item["job"]["name"], item["key"].removeprefix("date=")
                rewrites += dag.run(f"bf {job} {day}", job, day, now + timedelta(minutes=20 * offset), facet)
        _publish(settings, rewrites)
        assert _until(lambda: all(_ready(dag, n, d, env)[0] == 0 for n, d in planned)), "rewrites never arrived"
        listed = json.loads(lineage("partitions", dag.ns, "clean", "--key", f"date={WINDOW[0]}", "--json",
                                    env=env).stdout)
        assert listed[0]["versionCount"] == 2 and listed[0]["latest"]["backfill"] == plan["planId"]
        assert listed[0]["latest"]["runId"] == dag.runs[f"bf clean {WINDOW[0]}"]["runId"]
