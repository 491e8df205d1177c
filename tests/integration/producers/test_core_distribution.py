"""The core distribution (the contract and the in-job emitter) installed alone into a fresh environment: it pulls
neither pyspark, Faust nor the Neo4j driver, ships no development tools, and emits events through the
openlineage-python transport into Kafka (issue 18)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kafka_lineage.runtime.config import ClientSettings
from tests.integration.conftest import decoded_events

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
HEAVY = {"pyspark", "faust-streaming", "neo4j", "aiokafka", "kafka-lineage-devtools", "pytest"}


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # from a copy: setuptools writes its build/ folder beside the sources
    source = shutil.copytree(ROOT, tmp_path_factory.mktemp("source") / "kafka-lineage", ignore=shutil.ignore_patterns(
        ".git", ".venv", ".lineage", "build", "*.egg-info", "__pycache__", ".*_cache", "tests", "devtools",
        "node_modules"))
    # the build tools of this venv (pinned in constraints.txt): no index needed to build
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                  str(source)])
    assert "warning" not in (built.stdout + built.stderr).lower(), built.stdout + built.stderr  # setuptools': none
    (wheel,) = out.glob("kafka_lineage-*.whl")
    return wheel


def test_the_wheel_ships_the_product_only(core_wheel: Path) -> None:
    names = zipfile.ZipFile(core_wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.startswith("kafka_lineage-")}
    assert packages == {"kafka_lineage"}
    assert not [n for n in names if "devtools" in n or n.startswith("tests/") or "/stack/" in n]
    assert "kafka_lineage/schemas/avro/openlineage_event.avsc" in names
    metadata = zipfile.ZipFile(core_wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    required = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in required if "extra ==" not in r]
    assert not [r for r in core if r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() in HEAVY]


def test_core_install_emits_through_the_transport(core_wheel: Path, tmp_path: Path, clients: ClientSettings,
                                                  events_topic: str) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "-c", str(ROOT / "constraints.txt"), str(core_wheel)])
    installed = {entry["name"].lower() for entry in json.loads(
        _run([str(python), "-m", "pip", "list", "--format", "json"]).stdout)}
    assert "kafka-lineage" in installed
    assert not installed & HEAVY, f"the core distribution pulled {sorted(installed & HEAVY)}"

    config = tmp_path / "openlineage.yml"
    config.write_text("transport:\n  type: kafka_lineage.producers.client.kafka_avro_transport.KafkaAvroTransport\n"
                      f"  topic: {events_topic}\n")
    script = ("import uuid\n"
              "from openlineage.client import OpenLineageClient\n"
              "from openlineage.client.event_v2 import Job, Run, RunEvent, RunState\n"
              "client = OpenLineageClient()\n"
              "client.emit(RunEvent(eventType=RunState.START, eventTime='2024-05-01T12:00:00Z', producer='p',\n"
              "                     run=Run(runId=str(uuid.uuid4())), job=Job(namespace='core', name='only')))\n"
              "assert client.transport.close() is True\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env.update({"OPENLINEAGE_CONFIG": str(config), "KAFKA_BOOTSTRAP_SERVERS": clients.kafka_bootstrap_servers,
                "SCHEMA_REGISTRY_URL": clients.schema_registry_url})
    _run([str(python), "-c", script], cwd=tmp_path, env=env)
    ((key, event),) = decoded_events(clients, events_topic, 1)
    assert key == "run:core/only" and event["eventType"] == "START"

