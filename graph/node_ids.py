"""Marquez node ids: ``dataset:<namespace>:<name>``, ``job:<namespace>:<name>``,
``datasetField:<namespace>:<dataset>:<field>``. Pure.

Namespaces are URIs (``postgres://db:5432``, ``s3://bucket``), so a ``:`` followed by ``//`` or a digit belongs to
the namespace, as Marquez reads them; the last part takes whatever remains (a name may hold ``:``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = {"dataset": 3, "job": 3, "datasetField": 4}  # parts, the kind included
_DELIMITER = re.compile(r":(?!//|\d)")


class BadNodeId(ValueError):
    """A nodeId that is not one of the forms above; the message says which forms are accepted."""


@dataclass(frozen=True)
class NodeId:
    kind: str  # dataset | job | datasetField
    namespace: str
    name: str
    field: str | None = None

    def __str__(self) -> str:
        return ":".join([self.kind, self.namespace, self.name, *([self.field] if self.field is not None else [])])


def parse_node_id(value: str, kinds: tuple[str, ...] = tuple(KINDS)) -> NodeId:
    kind = value.split(":", 1)[0]
    if kind not in kinds or kind not in KINDS:
        raise BadNodeId(f"nodeId must start with one of {', '.join(f'{k}:' for k in kinds)} (got {value[:100]!r})")
    rest = value[len(kind) + 1:]
    parts: list[str] = []
    start = 0
    for match in _DELIMITER.finditer(rest):
        if len(parts) == KINDS[kind] - 2:
            break
        parts.append(rest[start:match.start()])
        start = match.end()
    parts.append(rest[start:])
    if len(parts) != KINDS[kind] - 1 or not all(parts):
        form = "datasetField:<namespace>:<dataset>:<field>" if kind == "datasetField" else f"{kind}:<namespace>:<name>"
        raise BadNodeId(f"nodeId must be {form} (got {value[:100]!r})")
    if "#" in parts[-1]:
        raise BadNodeId(f"versioned nodeIds (…#<version>) are not supported (got {value[:100]!r})")
    return NodeId(kind, parts[0], parts[1], parts[2] if kind == "datasetField" else None)


def dataset_id(namespace: str, name: str) -> str:
    return str(NodeId("dataset", namespace, name))


def job_id(namespace: str, name: str) -> str:
    return str(NodeId("job", namespace, name))

