"""A real PySpark job with the official OpenLineage Spark agent, through the collector, onto the events topic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.openlineage import partition_key
from tests.integration.conftest import decoded_events, running_collector

pytestmark = pytest.mark.integration
JOB = Path(__file__).parents[1] / "jobs" / "spark_orders.py"


def test_spark_job_events_arrive_losslessly_with_datasets_and_column_lineage(
    clients: ClientSettings, events_topic: str, tmp_path: Path
) -> None:
    mirror = tmp_path / "agent-events.ndjson"
    with running_collector(events_topic, LINEAGE_COLLECTOR_TOKEN="spark-token") as url:
        job = subprocess.run([sys.executable, str(JOB), str(tmp_path), url, "spark-token", str(mirror)],
                             capture_output=True, text=True, timeout=600)
        assert job.returncode == 0, job.stderr[-3000:]
    sent = [json.loads(line) for line in mirror.read_text().splitlines() if line.strip()]
    assert len(sent) >= 4, "the agent wrote too few events"

    received = decoded_events(clients, events_topic, len(sent) + 1, timeout=20)
    # Every event the agent sent is on the topic, exactly as sent (lossless), and nothing else is.
    canonical = sorted(json.dumps(e, sort_keys=True) for e in sent)
    assert sorted(json.dumps(event, sort_keys=True) for _, event in received) == canonical
    # One Spark application, one key: the application run is the root of every query's run.
    assert {key for key, _ in received} == {"run:spark-tests/orders_by_country"}
    assert all(key == partition_key(event) for key, event in received)

    written = [e for _, e in received if e.get("eventType") == "COMPLETE" and e.get("outputs")]
    assert written, "no COMPLETE event with an output dataset"
    event = written[-1]
    inputs = {(d["namespace"], d["name"]) for d in event["inputs"]}
    assert inputs == {("file", str(tmp_path / "raw" / "orders.csv")), ("file", str(tmp_path / "raw" / "customers.csv"))}
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", str(tmp_path / "mart" / "revenue_by_country"))
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["country", "revenue"]
    lineage = output["facets"]["columnLineage"]["fields"]
    assert {(f["name"], f["field"]) for f in lineage["revenue"]["inputFields"]} == {
        (str(tmp_path / "raw" / "orders.csv"), "amount")}
    assert {(f["name"], f["field"]) for f in lineage["country"]["inputFields"]} == {
        (str(tmp_path / "raw" / "customers.csv"), "country")}
