"""Secured connections against the real stack: the broker's SASL/PLAIN listener end to end, wrong credentials fail
fast with a message naming the settings (and never the secret), Neo4j authentication likewise."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.kafka_io import prepare_pipeline
from kafka_lineage_devtools.processes import processor_process
from kafka_lineage_devtools.stack.config import StackSettings
from tests.integration.conftest import consume, lineage
from tests.openlineage_samples import PRODUCER

pytestmark = pytest.mark.integration


def _sasl_env(stack: StackSettings, password: str, prefix: str) -> dict[str, str]:
    return {"KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{stack.kafka_sasl_port}",
            "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN",
            "KAFKA_SASL_USERNAME": "lineage", "KAFKA_SASL_PASSWORD": password,
            "LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_PROCESSOR_GROUP": f"{prefix}.group", "LINEAGE_PARTITIONS": "2"}


def _events_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({
        "eventType": "START", "eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "sasl-test", "name": f"job-{i}"},
        "inputs": [], "outputs": []}) + "\n" for i in range(count)))
    return path


def test_emit_and_processor_over_sasl_plain(stack_settings: StackSettings, tmp_path: Path) -> None:
    password = stack_settings.kafka_sasl_password_file.read_text().strip()
    env = {**_sasl_env(stack_settings, password, f"test.sasl.{uuid.uuid4().hex[:8]}"),
           "LINEAGE_PROCESSOR_DATA_DIR": str(tmp_path / "processor")}
    with processor_process(env):  # creates the topics and registers the schemas, over SASL
        emitted = lineage("emit", str(_events_file(tmp_path, 20)), env=env)
        assert "published 20 events" in emitted.stdout, emitted.stdout + emitted.stderr
        secured = ClientSettings.from_env({**os.environ, **env})
        normalized = consume(secured.kafka_config(), secured.normalized_topic, 20, timeout=60)
    assert len(normalized) == 20
    assert password not in emitted.stdout + emitted.stderr


def test_a_wrong_sasl_password_fails_fast_naming_the_settings(stack_settings: StackSettings,
                                                               tmp_path: Path) -> None:
    env = _sasl_env(stack_settings, "not-the-password", f"test.sasl.{uuid.uuid4().hex[:8]}")
    topics_only = {key: value for key, value in env.items() if key.startswith("LINEAGE_")}
    prepare_pipeline(ClientSettings.from_env({**os.environ, **topics_only}), 2)  # over the plaintext listener
    started = time.monotonic()
    result = lineage("emit", str(_events_file(tmp_path, 1)), env=env, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and time.monotonic() - started < 60, output
    assert "KAFKA_SASL_PASSWORD" in output and "not-the-password" not in output


def test_a_wrong_neo4j_password_is_one_clear_line(clients: ClientSettings) -> None:
    result = lineage("impact", "s3://lake", "anything", env={"NEO4J_PASSWORD": "not-the-password"}, check=False)
    assert result.returncode != 0
    assert "Neo4j" in result.stderr and "authentication" in result.stderr.lower(), result.stderr
    assert "not-the-password" not in result.stdout + result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_stacks_secrets_are_private_files_and_on_no_command_line(stack_settings: StackSettings) -> None:
    """What the stack generates (the SASL and Neo4j passwords) is readable by its owner only and never appears in a
    world-readable file of the state directory or in a process's command line (any local user can read those)."""
    secrets = [stack_settings.kafka_sasl_password_file.read_text().strip(),
               stack_settings.neo4j_password_file.read_text().strip()]
    assert all(len(secret) >= 8 for secret in secrets)
    for path in (stack_settings.kafka_sasl_password_file, stack_settings.neo4j_password_file):
        assert path.stat().st_mode & 0o077 == 0, path
    for path in stack_settings.state_dir.rglob("*"):
        if path.is_file() and path.stat().st_mode & 0o004 and path.stat().st_size < 10_000_000:
            text = path.read_bytes()
            assert not any(secret.encode() in text for secret in secrets), f"a password in world-readable {path}"
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = cmdline.read_bytes()
        except OSError:  # the process ended meanwhile
            continue
        assert not any(secret.encode() in arguments for secret in secrets), f"a password on {cmdline}"
