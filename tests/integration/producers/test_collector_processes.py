"""The collector as several worker processes on one port (LINEAGE_COLLECTOR_PROCESSES), real Kafka and registry."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import free_port, http_live
from tests.integration.conftest import decoded_events, running_collector
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration


def _event(job: str) -> dict:
    return {"eventType": "START", "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "collector-processes", "name": job}}


def test_two_workers_share_the_port_publish_after_ack_and_answer_summed_metrics(
        clients: ClientSettings, events_topic: str) -> None:
    with running_collector(events_topic, LINEAGE_COLLECTOR_PROCESSES="2") as url:
        for index in range(40):  # a new connection each: the kernel spreads them over both workers
            answer = requests.post(f"{url}/api/v1/lineage", json=_event(f"w-{index}"), timeout=30)
            assert answer.status_code == 200 and answer.json() == {"accepted": 1}
        bad = requests.post(f"{url}/api/v1/lineage", json={**_event("bad"), "run": {"runId": "nope"}}, timeout=30)
        assert bad.status_code == 400
        for _ in range(4):  # whichever worker answers, the counts are both workers' together
            text = requests.get(f"{url}/metrics", timeout=10).text
            assert 'lineage_events_out_total{stage="collector"} 40.0' in text
            assert 'lineage_dead_letters_total{reason="http-400",stage="collector"} 1.0' in text
            assert len(set(re.findall(r'lineage_last_event_timestamp_seconds\{pid="(\d+)"', text))) == 2
        assert requests.get(f"{url}/health/ready", timeout=10).json()["status"] == "ready"
    received = decoded_events(clients, events_topic, 40)
    assert sorted(event["job"]["name"] for _, event in received) == sorted(f"w-{index}" for index in range(40))


def test_a_worker_that_dies_fails_the_supervisor_at_once_and_stops_the_others(events_topic: str,
                                                                              tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "collector.log"
    with log.open("w") as sink:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "kafka_lineage.app.cli", "collector", "--port", str(port)],
            env={**os.environ, "LINEAGE_EVENTS_TOPIC": events_topic, "LINEAGE_COLLECTOR_PROCESSES": "2"},
            stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        # both workers up (one stopped while still starting would end without its last line)
        while not (http_live(f"http://127.0.0.1:{port}") and log.read_text().count(") serving") == 2):
            assert time.monotonic() < deadline and supervisor.poll() is None
            time.sleep(0.2)
        workers = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(supervisor.pid)], capture_output=True,
                                                      text=True).stdout.split()]
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        killed = time.monotonic()
        assert supervisor.wait(timeout=60) == 1
        output = log.read_text()
        assert time.monotonic() - killed < 30  # the survivor's graceful stop included
        assert f"(pid {workers[0]}) exited with code -9; stopping the others" in output
        assert output.count("stopped: 0 events accepted") == 1  # the other worker, stopped cleanly
        assert not http_live(f"http://127.0.0.1:{port}")
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
