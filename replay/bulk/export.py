"""The steps of a bulk rebuild whose Neo4j is on another machine (``lineage replay --fresh --bulk --export DIR``):
the import files go into ``DIR/files``, and beside them ``import.sh``, the exact ``neo4j-admin`` command with paths
relative to ``DIR``, and ``IMPORT.md``, what to do in which order. Pure: text from the files written."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from kafka_lineage.graph.coverage import Coverage
from kafka_lineage.replay.bulk.tables import CsvFiles

SCRIPT = "import.sh"
STEPS = "IMPORT.md"
_DATABASE = "\0database"  # stands for the script's database argument in the command


def relative(files: CsvFiles, base: Path) -> CsvFiles:
    """``files`` with paths relative to ``base`` (the directory is copied to the Neo4j server as a whole)."""
    return dataclasses.replace(files, nodes=tuple((label, path.relative_to(base)) for label, path in files.nodes),
                               relationships=tuple((kind, path.relative_to(base)) for kind, path in
                                                   files.relationships))


def _offsets(coverage: Coverage) -> str:
    return ", ".join(f"{partition}:{end}" for partition, end in sorted(coverage.ends.items())) or "(none)"


def import_script(files: CsvFiles, coverage: Coverage) -> str:
    """``sh import.sh [database]`` on the Neo4j server, Neo4j stopped, ``NEO4J_HOME`` its installation."""
    arguments = ['"$database"' if argument == _DATABASE else shlex.quote(argument)
                 for argument in files.admin_arguments(_DATABASE, Path("import.report"))]
    return "\n".join([
        "#!/bin/sh",
        f"# The lineage graph rebuilt from {coverage.topic} below offsets {_offsets(coverage)} (rebuild "
        f"{coverage.rebuild}).",
        "# Run on the Neo4j server, with Neo4j stopped: NEO4J_HOME=/path/to/neo4j sh import.sh [database]",
        "set -eu",
        'cd "$(dirname "$0")"',
        'database="${1:-neo4j}"',
        '"${NEO4J_HOME:?set NEO4J_HOME to the Neo4j installation}/bin/neo4j-admin" database import full \\',
        *(f"  {argument} \\" for argument in arguments[:-1]),
        f"  {arguments[-1]}",
        "",
    ])


def import_steps(directory: Path, files_bytes: int, coverage: Coverage) -> str:
    """IMPORT.md: the steps from these files to the live graph, in order."""
    size = f"{files_bytes / 1024 ** 2:,.0f} MiB"
    return f"""# Importing the rebuilt lineage graph

Made by `lineage replay --fresh --bulk --export {directory}`: the graph of `{coverage.topic}` below offsets
{_offsets(coverage)} (rebuild `{coverage.rebuild}`), as `neo4j-admin database import full` files ({size}).

1. **Keep Neo4j stopped** until step 4. It was stopped before the export took the offsets above: a graph sink that
   is running waits, and takes over at those offsets once the imported graph answers (the graph holds them).
2. **Copy this directory** to the Neo4j server, whole (`{SCRIPT}` names the files relative to it), e.g.
   `rsync -a {directory}/ neo4j-host:/var/tmp/lineage-import/`.
3. **Import** there: `NEO4J_HOME=/path/to/neo4j sh {SCRIPT} [database]` (default database `neo4j`; Neo4j 5's
   `neo4j-admin`). It replaces the database; it needs about twice the files' size free for the new store.
4. **Start Neo4j** (`neo4j start`, or its service).
5. **Constraints and indexes**, from where `lineage` runs: `lineage graph indexes` (returns when they are online).
"""
