"""The steps of a rebuild for a Neo4j elsewhere: a script that runs neo4j-admin on files relative to its directory."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from kafka_lineage.graph.coverage import Coverage
from kafka_lineage.replay.bulk.export import import_script, import_steps, relative
from kafka_lineage.replay.bulk.tables import CsvFiles

COVERAGE = Coverage("abc", "lineage.events", {0: 5, 1: 7})


def test_the_script_imports_the_files_relative_to_its_directory_into_the_database_named(tmp_path: Path) -> None:
    files = CsvFiles((("Job", tmp_path / "files" / "nodes-Job-00000.csv"),
                      ("Dataset", tmp_path / "files" / "nodes-Dataset it's-00001.csv")),
                     (("OF_JOB", tmp_path / "files" / "relationships-OF_JOB-00000.csv"),), "\x1f", False)
    script = import_script(relative(files, tmp_path), COVERAGE)
    (tmp_path / "import.sh").write_text(script)
    assert subprocess.run(["sh", "-n", str(tmp_path / "import.sh")]).returncode == 0  # valid shell
    assert "below offsets 0:5, 1:7 (rebuild abc)" in script
    # run with a neo4j-admin that prints its arguments: the command the script runs, word by word
    admin = tmp_path / "neo4j" / "bin" / "neo4j-admin"
    admin.parent.mkdir(parents=True)
    admin.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\npwd\n')
    admin.chmod(0o755)
    home = {"NEO4J_HOME": str(tmp_path / "neo4j"), "PATH": "/usr/bin:/bin"}
    ran = subprocess.run(["sh", str(tmp_path / "import.sh"), "lineage"], cwd="/", env=home, capture_output=True,
                         text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    words = ran.stdout.splitlines()
    assert words[:4] == ["database", "import", "full", "lineage"]
    assert "--nodes=Dataset=files/nodes-Dataset it's-00001.csv" in words
    assert "--relationships=OF_JOB=files/relationships-OF_JOB-00000.csv" in words
    assert "--report-file=import.report" in words and words[-1] == str(tmp_path)  # ran in its own directory
    without_home = subprocess.run(["sh", str(tmp_path / "import.sh")], env={"PATH": "/usr/bin:/bin"},
                                  capture_output=True, text=True, check=False)
    assert without_home.returncode != 0 and "set NEO4J_HOME" in without_home.stderr
    default = subprocess.run(["sh", "import.sh"], cwd=tmp_path, env=home, capture_output=True, text=True, check=True)
    assert default.stdout.splitlines()[3] == "neo4j"


def test_the_steps_name_the_directory_the_offsets_and_the_order() -> None:
    steps = import_steps(Path("/var/tmp/export"), 3 * 1024 ** 2, COVERAGE)
    order = [steps.index(step) for step in ("Keep Neo4j stopped", "Copy this directory", "sh import.sh",
                                            "Start Neo4j", "lineage graph indexes")]
    assert order == sorted(order)
    assert "--export /var/tmp/export" in steps and "0:5, 1:7" in steps and "(3 MiB)" in steps
    assert shlex.split("rsync -a /var/tmp/export/ neo4j-host:/var/tmp/lineage-import/")[0] in steps
