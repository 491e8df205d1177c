"""Where a bulk replay can run (replay/bulk/importer.py): a local Bolt URI and an installation with its tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_lineage.replay.bulk.importer import BulkImportFailed, BulkImportUnavailable, Neo4jInstallation
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
