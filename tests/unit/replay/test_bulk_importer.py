"""Where a bulk replay can run (replay/bulk/importer.py): a local Bolt URI and an installation with its tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_lineage.replay.bulk import space
from kafka_lineage.replay.bulk.importer import (
    BulkImportFailed,
    BulkImportUnavailable,
    Neo4jInstallation,
    NotEnoughDisk,
    check_space,
)
from kafka_lineage.runtime.config import ClientSettings


def settings(uri: str, home: str) -> ClientSettings:
    return ClientSettings.from_values({"NEO4J_URI": uri, "NEO4J_PASSWORD": "x", "LINEAGE_NEO4J_HOME": home})


def installation(tmp_path: Path, admin: str = "exit 0") -> Path:
    (tmp_path / "bin").mkdir()
    for name, body in (("neo4j-admin", admin), ("neo4j", "exit 0")):
        script = tmp_path / "bin" / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return tmp_path


@pytest.mark.parametrize("uri", ["bolt://127.0.0.1:7687", "neo4j://localhost:7687", "bolt://[::1]:7687",
                                 "bolt+s://127.0.0.2:7687"])
def test_a_local_database_with_an_installation_is_accepted(tmp_path, uri):
    home = installation(tmp_path)
    found = Neo4jInstallation.of(settings(uri, str(home)))
    assert (found.admin, found.control) == (home / "bin" / "neo4j-admin", home / "bin" / "neo4j")


@pytest.mark.parametrize("uri", ["bolt://db.example.com:7687", "neo4j+s://10.0.0.5:7687"])
def test_a_database_elsewhere_is_refused(tmp_path, uri):
    with pytest.raises(BulkImportUnavailable, match="on this machine"):
        Neo4jInstallation.of(settings(uri, str(installation(tmp_path))))


def test_no_home_or_no_tools_is_refused(tmp_path):
    with pytest.raises(BulkImportUnavailable, match="needs LINEAGE_NEO4J_HOME"):
        Neo4jInstallation.of(settings("bolt://127.0.0.1:7687", ""))
    with pytest.raises(BulkImportUnavailable, match="bin/neo4j-admin not found"):
        Neo4jInstallation.of(settings("bolt://127.0.0.1:7687", str(tmp_path)))


def test_a_failing_tool_says_which_step_and_what_it_said(tmp_path):
    home = installation(tmp_path, admin="echo 'Invalid value for --nodes' >&2; exit 70")
    found = Neo4jInstallation.of(settings("bolt://127.0.0.1:7687", str(home)))
    with pytest.raises(BulkImportFailed, match="import: neo4j-admin exited 70: Invalid value for --nodes"):
        found.run(found.admin, "database", "import", "full", step="import")
    assert found.run(found.control, "stop", step="stop") == ""


def test_the_store_directory_is_read_from_the_servers_conf(tmp_path):
    home = installation(tmp_path)
    assert Neo4jInstallation(home).data == home / "data"  # no conf: Neo4j's default
    (home / "conf").mkdir()
    (home / "conf" / "neo4j.conf").write_text("# stores\nserver.directories.logs=/var/log/neo4j\n"
                                              "server.directories.data=/srv/neo4j/data\n")
    assert Neo4jInstallation(home).data == Path("/srv/neo4j/data")
    (home / "conf" / "neo4j.conf").write_text("server.directories.data = stores\n")
    assert Neo4jInstallation(home).data == home / "stores"


GIB = 1024 ** 3


def test_needs_on_one_filesystem_add_up_and_a_shortfall_names_each_need():
    needs = space.needs_before_fold(200_000, Path("/work"), Path("/neo4j/data"))  # 1 GB of files, 2 GB of store
    assert space.shortfalls(needs, free=lambda _: 4 * GIB, device=lambda _: 1) == []
    problems = space.shortfalls(needs, free=lambda _: 3 * GIB, device=lambda _: 1)  # 3 GB + headroom > 3 GiB
    assert len(problems) == 1
    assert "for the import files in /work" in problems[0] and "for the new store in /neo4j/data" in problems[0]
    assert "only 3.0 GiB free" in problems[0]


def test_needs_on_separate_filesystems_are_checked_each_against_its_own_free_space():
    needs = space.needs_before_fold(200_000, Path("/work"), Path("/neo4j/data"))
    devices = {Path("/work"): 1, Path("/neo4j/data"): 2}
    free = {Path("/work"): 2 * GIB, Path("/neo4j/data"): 2 * GIB}
    problems = space.shortfalls(needs, free=free.__getitem__, device=devices.__getitem__)
    assert len(problems) == 1 and "new store" in problems[0] and "import files" not in problems[0]


def test_a_directory_not_made_yet_is_measured_on_its_nearest_parent(tmp_path):
    assert space.existing(tmp_path / "not" / "yet") == tmp_path
    assert space.free_bytes(tmp_path / "not" / "yet") > 0
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "nodes.csv").write_bytes(b"x" * 1000)
    assert space.files_size(tmp_path) == 1000


def test_not_enough_disk_is_refused_before_anything_is_touched(tmp_path):
    with pytest.raises(NotEnoughDisk, match=r"--bulk needs more disk space than there is \(now\).*--work-dir"):
        check_space([space.Need("the import files", tmp_path, 1 << 60)], "now")
    check_space([space.Need("the import files", tmp_path, 1)], "now")  # fits: nothing raised
    assert issubclass(NotEnoughDisk, BulkImportUnavailable)  # `lineage replay` exits 3, nothing stopped
