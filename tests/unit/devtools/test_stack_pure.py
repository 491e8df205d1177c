"""Pure parts of the stack: POM rendering, JDK selection, pid bookkeeping, fail-fast port checks."""

import json
import os
import socket
from pathlib import Path
from xml.etree import ElementTree

import pytest

from kafka_lineage.runtime.config import ConfigError
from kafka_lineage_devtools.stack import java
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack, StackError
from kafka_lineage_devtools.stack.maven import Coordinate, render_pom
from kafka_lineage_devtools.stack.services import new_password


def test_pom_lists_every_dependency() -> None:
    pom = render_pom("demo", [Coordinate("org.apache.kafka", "kafka_2.13", "4.3.1"), Coordinate("a.b", "c", "1")])
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ElementTree.fromstring(pom).findall("m:dependencies/m:dependency", ns)
    assert [
        (d.find("m:groupId", ns).text, d.find("m:artifactId", ns).text, d.find("m:version", ns).text) for d in deps
    ] == [("org.apache.kafka", "kafka_2.13", "4.3.1"), ("a.b", "c", "1")]


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text(f'IMPLEMENTOR="test"\nJAVA_VERSION="{version}"\n')
    return home


def test_java_is_chosen_by_feature_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(java, "JVM_ROOT", tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    java._candidates.cache_clear()
    _fake_jdk(tmp_path, "jdk-17", "17.0.15")
    _fake_jdk(tmp_path, "jdk-25", "25.0.1")
    try:
        assert java.find_java((), 17, 21) == str(tmp_path / "jdk-17" / "bin" / "java")
        assert java.find_java((), 21) == str(tmp_path / "jdk-25" / "bin" / "java")
        preferred = _fake_jdk(tmp_path / "x", "jdk-21", "21.0.2")
        assert java.find_java((str(preferred),), 17) == str(preferred / "bin" / "java")
        with pytest.raises(ConfigError, match=r"no JDK 26\+ found"):
            java.find_java((), 26)
    finally:
        java._candidates.cache_clear()


def test_a_recycled_pid_is_not_mistaken_for_our_process(tmp_path: Path) -> None:
    stack = Stack(StackSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path)}), report=lambda _: None)
    stack.run_dir.mkdir(parents=True)
    # Our own pid is alive, but with a different start time it is somebody else's process.
    (stack.run_dir / "kafka.pid").write_text(json.dumps({"pid": os.getpid(), "start_time": "1"}))
    assert stack.running_pid("kafka") is None
    row = next(r for r in stack.status() if r.name == "kafka")
    assert row.state == "dead" and "is gone" in row.detail


def test_up_fails_fast_on_a_foreign_port_before_downloading(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        settings = StackSettings.from_env(
            {
                "LINEAGE_STATE_DIR": str(tmp_path),
                "LINEAGE_CACHE_DIR": str(tmp_path / "cache"),
                "LINEAGE_KAFKA_PORT": str(port),
            }
        )
        with pytest.raises(StackError, match=f"kafka: port {port} is taken"):
            Stack(settings, report=lambda _: None).up(["kafka"])
    assert not (tmp_path / "cache").exists()  # nothing was fetched


def test_unknown_service_is_named() -> None:
    with pytest.raises(StackError, match=r"unknown service.*zookeeper"):
        Stack(StackSettings.from_env({}), report=lambda _: None).up(["zookeeper"])


def test_generated_passwords_never_look_like_a_command_line_option() -> None:
    # neo4j-admin's set-initial-password takes the password as an argument; one starting with "-" failed a CI run
    passwords = {new_password() for _ in range(2000)}
    assert len(passwords) == 2000 and all(len(p) >= 32 and not p.startswith("-") for p in passwords)


def test_private_files_are_created_owner_only_even_over_a_readable_one(tmp_path) -> None:
    from kafka_lineage_devtools.stack.services import write_private

    existing = tmp_path / "secret"
    existing.write_text("old")
    existing.chmod(0o644)
    write_private(existing, "new")
    fresh = tmp_path / "dir" / "fresh"
    write_private(fresh, "s3cret")
    assert existing.read_text() == "new" and fresh.read_text() == "s3cret"
    assert (existing.stat().st_mode & 0o777, fresh.stat().st_mode & 0o777) == (0o600, 0o600)


def test_ports_in_the_kernel_s_ephemeral_range_are_named(tmp_path) -> None:
    from kafka_lineage_devtools.stack.manager import ephemeral_ports

    (tmp_path / "range").write_text("32768\t60999\n")
    assert ephemeral_ports([9092, 32768, 39092, 60999, 61000], tmp_path / "range") == [32768, 39092, 60999]
    assert ephemeral_ports([39092], tmp_path / "missing") == []
