"""Imports only point down (docs/ARCHITECTURE.md, "Map"): a test over every module's imports, read with ``ast``.

Layers, lowest first: the contract (schemas) ← the runtime ← the stages (producers, processors, sinks; never each
other) ← replay (composes a stage core with a sink) ← server (the read side over the graph) ← app (CLI, status,
pictures) ← the development tools, a
distribution of their own that nothing in the product imports. The in-job emitter (producers.client) imports only
the contract and the runtime, never the producers' services.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["schemas", "runtime", "graph", "stage", "replay", "server", "app", "devtools"]
STAGES = {"producers", "processors", "sinks"}


def _package_dirs() -> dict[str, Path]:
    """Import prefix -> folder, from the packaging itself (so a new folder cannot escape the test)."""
    dirs = {prefix: ROOT / folder for prefix, folder in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()}
    dirs["kafka_lineage_devtools"] = ROOT / "devtools" / "kafka_lineage_devtools"
    return dirs


def _module_name(path: Path, prefix: str, folder: Path) -> str:
    parts = path.relative_to(folder).with_suffix("").parts
    return ".".join([prefix, *(p for p in parts if p != "__init__")])


def _place(module: str) -> tuple[str, str]:
    """(layer, room): the room is the top folder (e.g. ``sinks``), or ``producers.client`` for the emitter."""
    if module == "kafka_lineage_devtools" or module.startswith("kafka_lineage_devtools."):
        return "devtools", "devtools"
    parts = module.split(".")
    top = parts[1]
    if top in STAGES:
        room = "producers.client" if parts[1:3] == ["producers", "client"] else top
        return "stage", room
    return top, top


def _imports(path: Path, module: str) -> set[str]:
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return {name for name in found if name.split(".")[0] in ("kafka_lineage", "kafka_lineage_devtools")}


def _known_modules() -> dict[str, Path]:
    modules = {}
    for prefix, folder in _package_dirs().items():
        for path in folder.rglob("*.py"):
            modules[_module_name(path, prefix, folder)] = path
    return modules


def _violation(importer: str, imported: str) -> str | None:
    (layer, room), (target_layer, target_room) = _place(importer), _place(imported)
    if LAYERS.index(target_layer) > LAYERS.index(layer):
        return f"{importer} ({layer}) imports {imported} ({target_layer}), a layer above it"
    if layer == "stage" and target_layer == "stage" and room.split(".")[0] != target_room.split(".")[0]:
        return f"{importer} ({room}) imports {imported} ({target_room}): stages never import each other"
    if room == "producers.client" and (target_layer == "graph" or
                                       (target_layer == "stage" and target_room != "producers.client")):
        return f"{importer} runs inside users' jobs and imports {imported}: the emitter may use the contract " \
               f"and the runtime only"
    return None


def test_every_import_points_down() -> None:
    modules = _known_modules()
    assert len(modules) > 60, "the source folders were not found"
    problems = set()
    for module, path in sorted(modules.items()):
        for imported in sorted(_imports(path, module)):
            target = imported
            while target not in modules and "." in target:  # `from pkg import name`: the module holding name
                target = target.rsplit(".", 1)[0]
            if target in modules and (problem := _violation(module, target)):
                problems.add(problem)
    assert not problems, "\n".join(sorted(problems))


@pytest.mark.parametrize(("importer", "imported"), [
    ("kafka_lineage.schemas.schema_diff", "kafka_lineage.processors.ordering"),
    ("kafka_lineage.runtime.kafka_io", "kafka_lineage_devtools.stack.smoke"),
    ("kafka_lineage.sinks.graph.sink", "kafka_lineage.processors.core"),
    ("kafka_lineage.producers.client.publisher", "kafka_lineage.producers.service.collector"),
    ("kafka_lineage.sinks.alerts.sink", "kafka_lineage.replay.local"),
    ("kafka_lineage.app.cli", "kafka_lineage_devtools.commands"),
    ("kafka_lineage.graph.queries", "kafka_lineage.sinks.graph.sink"),
    ("kafka_lineage.producers.client.publisher", "kafka_lineage.graph.driver"),
])
def test_upward_imports_are_caught(importer: str, imported: str) -> None:
    """The rule itself can fail: the two upward imports issue 18 found, and others like them."""
    assert _violation(importer, imported) is not None
