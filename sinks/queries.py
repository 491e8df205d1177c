"""Impact (downstream) and root-cause (upstream) questions over the job-level lineage edges.

``(Dataset)-[:INPUT_TO]->(Job)-[:OUTPUTS]->(Dataset)`` is the traversal graph: one hop from a dataset reaches the
jobs that read it, the next the datasets those jobs write. Depth counts jobs: depth 1 = the readers of the dataset
and what they write. A relationship-count bound cannot be a query parameter in Cypher, so the bound is formatted
from a validated integer — never from data.

Nodes are looked up by their stored keys (``graph_model.stored_key``: a name over 2 KB is keyed by its hash) and
answered with their whole names (``coalesce(n.fullName, n.name)``), so a very long name is found and shown as sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_lineage.sinks.graph_model import stored_key
from neo4j import Driver, Query

MAX_DEPTH = 50


@dataclass(frozen=True, order=True)
class Reached:
    depth: int
    kind: str  # "job" | "dataset"
    namespace: str
    name: str


def _checked_depth(depth: int) -> int:
    """``depth`` once validated: it is formatted into a query, as Cypher takes no parameter for a hop bound."""
    if not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    return depth


def _traversal(direction: str, depth: int) -> str:
    hops = 2 * _checked_depth(depth)
    pattern = f"-[:INPUT_TO|OUTPUTS*1..{hops}]->" if direction == "down" else f"<-[:INPUT_TO|OUTPUTS*1..{hops}]-"
    return (
        f"MATCH path = (start:Dataset {{namespace: $namespace, name: $name}}){pattern}(n) "
        "WITH n, min(length(path)) AS hops "
        "RETURN CASE WHEN n:Job THEN 'job' ELSE 'dataset' END AS kind, "
        "coalesce(n.fullNamespace, n.namespace) AS namespace, coalesce(n.fullName, n.name) AS name, "
        "(hops + 1) / 2 AS depth ORDER BY depth, kind, namespace, name LIMIT $limit"
    )


def _reach(driver: Driver, direction: str, namespace: str, name: str, depth: int, limit: int,
           timeout: float | None = None) -> list[Reached]:
    with driver.session() as session:
        records = session.run(Query(_traversal(direction, depth), timeout=timeout), namespace=stored_key(namespace),
                              name=stored_key(name), limit=limit)
        return [Reached(record["depth"], record["kind"], record["namespace"], record["name"]) for record in records]


def impact(driver: Driver, namespace: str, name: str, depth: int = 5, limit: int = 1000,
           timeout: float | None = None) -> list[Reached]:
    """Jobs and datasets downstream of a dataset, nearest first. ``timeout``: the transaction's, in seconds (the
    server ends the query after it; None = the server's default)."""
    return _reach(driver, "down", namespace, name, depth, limit, timeout)


def upstream(driver: Driver, namespace: str, name: str, depth: int = 5, limit: int = 1000) -> list[Reached]:
    """Jobs and datasets a dataset derives from (root cause candidates), nearest first."""
    return _reach(driver, "up", namespace, name, depth, limit)


def as_rows(reached: list[Reached]) -> list[dict[str, Any]]:
    return [{"depth": r.depth, "kind": r.kind, "namespace": r.namespace, "name": r.name} for r in reached]


@dataclass(frozen=True)
class Neighbourhood:
    """The nodes reached from a dataset and the lineage edges between them, for pictures (``render``)."""

    start: Reached
    nodes: list[Reached]
    edges: list[tuple[tuple[str, str, str], tuple[str, str, str]]]  # ((kind, namespace, name), (kind, ns, name))


def _edges_query(direction: str, depth: int) -> str:
    match = _traversal(direction, depth).split(" WITH ")[0]
    return (f"{match} UNWIND relationships(path) AS rel WITH DISTINCT startNode(rel) AS a, endNode(rel) AS b "
            "RETURN CASE WHEN a:Job THEN 'job' ELSE 'dataset' END AS akind, "
            "coalesce(a.fullNamespace, a.namespace) AS ans, coalesce(a.fullName, a.name) AS aname, "
            "CASE WHEN b:Job THEN 'job' ELSE 'dataset' END AS bkind, "
            "coalesce(b.fullNamespace, b.namespace) AS bns, coalesce(b.fullName, b.name) AS bname")


def neighbourhood(driver: Driver, namespace: str, name: str, depth: int, direction: str = "down",
                  limit: int = 1000) -> Neighbourhood:
    nodes = _reach(driver, direction, namespace, name, depth, limit)
    with driver.session() as session:
        edges = [((r["akind"], r["ans"], r["aname"]), (r["bkind"], r["bns"], r["bname"]))
                 for r in session.run(_edges_query(direction, depth), namespace=stored_key(namespace),
                                      name=stored_key(name), limit=limit)]
    return Neighbourhood(Reached(0, "dataset", namespace, name), nodes, sorted(set(edges)))


@dataclass(frozen=True, order=True)
class ReachedField:
    depth: int
    namespace: str
    name: str
    field: str


def field_lineage(driver: Driver, namespace: str, name: str, field: str, depth: int = 5, direction: str = "down",
                  limit: int = 1000) -> list[ReachedField]:
    """Columns derived from a column (``down``), or the columns it derives from (``up``), nearest first."""
    return _field_reach(driver, namespace, name, [field], depth, direction, limit)


def column_impact(driver: Driver, namespace: str, name: str, fields: list[str], depth: int = 5, limit: int = 1000,
                  timeout: float | None = None) -> list[ReachedField]:
    """Columns derived, through ``(Field)-[:DERIVES_FROM]->(Field)`` (output → input), from any of a dataset's
    ``fields``, each at its smallest hop count, nearest first; the fields themselves are not listed unless one
    derives from another."""
    return _field_reach(driver, namespace, name, fields, depth, "down", limit, timeout)


def _field_reach(driver: Driver, namespace: str, name: str, fields: list[str], depth: int, direction: str,
                 limit: int, timeout: float | None = None) -> list[ReachedField]:
    hops = _checked_depth(depth)
    arrow = f"<-[:DERIVES_FROM*1..{hops}]-" if direction == "down" else f"-[:DERIVES_FROM*1..{hops}]->"
    query = ("UNWIND $fields AS start "
             f"MATCH path = (:Field {{namespace: $namespace, name: $name, field: start}}){arrow}(f:Field) "
             "WITH f, min(length(path)) AS depth RETURN depth, coalesce(f.fullNamespace, f.namespace) AS namespace, "
             "coalesce(f.fullName, f.name) AS name, coalesce(f.fullField, f.field) AS field "
             "ORDER BY depth, namespace, name, field LIMIT $limit")
    with driver.session() as session:
        return [ReachedField(r["depth"], r["namespace"], r["name"], r["field"])
                for r in session.run(Query(query, timeout=timeout), namespace=stored_key(namespace),
                                     name=stored_key(name), fields=[stored_key(f) for f in fields], limit=limit)]
