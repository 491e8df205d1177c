"""The Avro schemas of every topic, shipped as package data in ``schemas/avro/*.avsc``.

A schema may use a named type defined in another file by its full name (e.g. the normalized event embeds
``io.kafka_lineage.openlineage.OpenLineageEvent``). Each topic's schema is registered standalone, so such references
are inlined at load time: every contract is written once, and the registry still gets self-contained schemas.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

_NAMED = ("record", "enum", "fixed")


def _schema_files() -> dict[str, Any]:
    folder = resources.files("kafka_lineage.schemas").joinpath("avro")
    return {
        entry.name.removesuffix(".avsc"): json.loads(entry.read_text())
        for entry in folder.iterdir()
        if entry.name.endswith(".avsc")
    }


def _full_name(node: dict[str, Any], namespace: str) -> tuple[str, str]:
    """(full name, namespace for the node's children) of a named type."""
    name = node["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    space = node.get("namespace", namespace)
    return (f"{space}.{name}" if space else name), space


def _collect(node: Any, namespace: str, catalog: dict[str, dict[str, Any]]) -> None:
    """Every named type in ``node`` by full name, each made standalone (explicit namespace)."""
    if isinstance(node, list):
        for item in node:
            _collect(item, namespace, catalog)
    elif isinstance(node, dict):
        if node.get("type") in _NAMED:
            full, namespace = _full_name(node, namespace)
            catalog[full] = {**node, "namespace": namespace, "name": full.rsplit(".", 1)[-1]}
        for key in ("type", "items", "values", "fields"):
            if key in node:
                _collect(node[key], namespace, catalog)


def _inline(node: Any, namespace: str, catalog: dict[str, dict[str, Any]], defined: set[str]) -> Any:
    """Replace the first use of each foreign named type with its definition (Avro: define before reference)."""
    if isinstance(node, str):
        full = node if "." in node else f"{namespace}.{node}"
        if full in catalog and full not in defined:
            return _inline(copy.deepcopy(catalog[full]), namespace, catalog, defined)
        return node
    if isinstance(node, list):
        return [_inline(item, namespace, catalog, defined) for item in node]
    if isinstance(node, dict):
        if node.get("type") in _NAMED:
            full, namespace = _full_name(node, namespace)
            defined.add(full)
        return {
            key: _inline(value, namespace, catalog, defined) if key in ("type", "items", "values", "fields") else value
            for key, value in node.items()
        }
    return node


@functools.cache
def _catalog() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    files = _schema_files()
    catalog: dict[str, dict[str, Any]] = {}
    for schema in files.values():
        _collect(schema, "", catalog)
    return files, catalog


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """The self-contained JSON of ``schemas/avro/<name>.avsc`` (references to other files inlined)."""
    files, catalog = _catalog()
    if name not in files:
        raise KeyError(f"no Avro schema named {name!r}; known: {', '.join(sorted(files))}")
    return _inline(files[name], "", catalog, set())


def schema_text(name: str) -> str:
    return json.dumps(load_schema(name))
