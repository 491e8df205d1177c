"""Column lineage walked downstream with the path to every column reached: per hop the transformation the
column-lineage facet gave (``DIRECT/HASH(masked)``, ``INDIRECT/AGGREGATION``) and the jobs that made it. Shared by
the schema-change gate (``graph/check.py``: who consumes a changed column) and sensitive-tag propagation
(``graph/sensitive.py``: where a tagged column's values go).

Breadth-first from every start column at once, one query per level for the distinct columns of the frontier; each
start keeps its own visited set, so a column fed by two starts is reached from both, each at its shortest path. A
start's twins in its dataset's other names (``SAME_AS``) are walked from too. ``follow`` decides whether the walk
goes on from a hop it reached (a masked hop ends a tag's way, and is still reported). Bounded by depth, columns per
start, rows per level and time; a start whose answer was cut is named.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import READ_ACCESS, Driver, Query

from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.queries import MAX_ROWS_PER_LEVEL, field_aliases_of, known

MAX_JOBS_PER_HOP = 10
_NAMES = "coalesce({0}.fullNamespace, {0}.namespace), coalesce({0}.fullName, {0}.name)"

_START = ("UNWIND $starts AS start MATCH (f:Field {namespace: start[0], name: start[1], field: start[2]}) "
          "RETURN start[3] AS label, elementId(f) AS id")
# The start columns' twins in their datasets' other names (SAME_AS: the table of a path, …).
_START_ALIASES = (f"UNWIND $ids AS id MATCH (a:Field) WHERE elementId(a) = id {field_aliases_of('a', 'x')} "
                  "WITH id, x WHERE elementId(x) <> id RETURN id, elementId(x) AS alias")
# One level: from the frontier's columns (``$ids``) to the columns derived from them and (``$dependents``) the
# datasets depending on them as a whole (joins, filters), each with the edge's transformation and the jobs that read
# the column's dataset and write the consumer's (the column-lineage facet does not name its job; job edges do).
_LEVEL = (
    "UNWIND $ids AS id MATCH (a:Field) WHERE elementId(a) = id "
    "CALL (a) { "
    f"  MATCH (b:Field)-[e:DERIVES_FROM]->(a) WHERE {known('e')} "
    "  RETURN elementId(b) AS target, coalesce(b.fullNamespace, b.namespace) AS namespace, "
    "    coalesce(b.fullName, b.name) AS name, coalesce(b.fullField, b.field) AS column, e.transformation AS how, "
    "    b.namespace AS keyNamespace, b.name AS keyName "
    "  UNION ALL "
    f"  MATCH (d:Dataset)-[e:DEPENDS_ON]->(a) WHERE $dependents AND {known('e')} "
    "  RETURN null AS target, coalesce(d.fullNamespace, d.namespace) AS namespace, "
    "    coalesce(d.fullName, d.name) AS name, null AS column, e.transformation AS how, "
    "    d.namespace AS keyNamespace, d.name AS keyName "
    "} "
    "WITH id, a, target, namespace, name, column, how, keyNamespace, keyName LIMIT $rows "
    "CALL (a, keyNamespace, keyName) { "
    "  MATCH (:Dataset {namespace: a.namespace, name: a.name})-[:INPUT_TO]->(j:Job)"
    "-[:OUTPUTS]->(:Dataset {namespace: keyNamespace, name: keyName}) "
    f"  WITH DISTINCT j ORDER BY j.namespace, j.name LIMIT $jobs RETURN collect([{_NAMES.format('j')}]) AS jobs "
    "} "
    "RETURN collect([id, target, namespace, name, column, how, jobs])")


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a path: the column (or, for a dataset-level dependency, the dataset) it reaches, how (the
    transformation text; "" when the producer gave none) and the jobs that made it."""

    namespace: str
    name: str
    field: str | None
    transformation: str
    jobs: tuple[tuple[str, str], ...]

    @property
    def masked(self) -> bool:
        return "(masked)" in self.transformation

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "field": self.field,
                "transformation": self.transformation, "masked": self.masked,
                "jobs": [{"namespace": ns, "name": name} for ns, name in self.jobs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hop:
        return cls(data["namespace"], data["name"], data.get("field"), data.get("transformation") or "",
                   tuple((job["namespace"], job["name"]) for job in data.get("jobs") or []))


@dataclass(frozen=True)
class Consumer:
    path: tuple[Hop, ...]  # from the start column outwards: path[-1] is what was reached

    @property
    def end(self) -> Hop:
        return self.path[-1]

    def as_dict(self) -> dict[str, Any]:
        end = self.end
        return {"kind": "field" if end.field is not None else "dataset", "namespace": end.namespace,
                "name": end.name, "field": end.field, "depth": len(self.path),
                "path": [hop.as_dict() for hop in self.path]}


@dataclass(frozen=True)
class Start:
    namespace: str
    name: str
    field: str
    label: str  # what the caller knows the start by (a changed column's path, a tag's origin)


def walk_columns(driver: Driver, starts: Sequence[Start], depth: int, limit: int, deadline: float | None, *,
                 follow: Callable[[Hop], bool] = lambda hop: True, dependents: bool = True,
                 as_of: str | None = None) -> tuple[dict[str, list[Consumer]], set[str]]:
    """Per start label, what it reaches nearest first, and the labels whose answer was cut."""
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = [[stored_key(s.namespace), stored_key(s.name), stored_key(s.field), s.label] for s in starts]
        begin = [(record["id"], record["label"]) for record in session.run(
            Query(_START, timeout=_left(deadline)), starts=rows)]
        labels_of: dict[str, list[str]] = {}
        for node, label in begin:
            labels_of.setdefault(node, []).append(label)
        begin += [(record["alias"], label) for record in session.run(
            Query(_START_ALIASES, timeout=_left(deadline)), ids=list(labels_of), asOf=as_of)
            for label in labels_of[record["id"]]]
        visited = set(begin)  # (node id, start label) walked on from
        ended: set[tuple[str, str]] = set()  # reached by a hop ``follow`` refused
        paths: dict[tuple[str, str], tuple[Hop, ...]] = {pair: () for pair in begin}
        found: dict[str, list[Consumer]] = {}
        cut: set[str] = set()
        frontier = begin
        for _level in range(depth):
            if not frontier:
                break
            left = _left(deadline)
            if left is not None and left < 0.001:
                cut.update(label for _node, label in frontier)
                break
            waiting: dict[str, list[str]] = {}  # node id → the start labels it was reached from at this level
            for node, label in frontier:
                waiting.setdefault(node, []).append(label)
            answer = session.run(Query(_LEVEL, timeout=left), ids=list(waiting), rows=MAX_ROWS_PER_LEVEL + 1,
                                 jobs=MAX_JOBS_PER_HOP, dependents=dependents, asOf=as_of).single(strict=True)[0]
            if len(answer) > MAX_ROWS_PER_LEVEL:
                cut.update(label for _node, label in frontier)
                answer = answer[:MAX_ROWS_PER_LEVEL]
            following = []
            for source, target, ns, nm, column, how, jobs in answer:
                hop = Hop(ns, nm, column, how or "", tuple((job[0], job[1]) for job in jobs))
                go_on = target is not None and follow(hop)
                for label in waiting[source]:
                    if target is not None and ((target, label) in visited or (not go_on and (target, label) in ended)):
                        continue
                    reached = found.setdefault(label, [])
                    if len(reached) >= limit:
                        cut.add(label)
                        continue
                    path = paths[(source, label)] + (hop,)
                    reached.append(Consumer(path))
                    if go_on:  # a column reached by a hop not followed may still be reached by one that is
                        visited.add((target, label))
                        paths[(target, label)] = path
                        following.append((target, label))
                    elif target is not None:
                        ended.add((target, label))
            frontier = following
    return found, cut


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
