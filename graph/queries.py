"""Impact (downstream) and root-cause (upstream) questions over the job-level lineage edges.

``(Dataset)-[:INPUT_TO]->(Job)-[:OUTPUTS]->(Dataset)`` is the traversal graph: one hop from a dataset reaches the
jobs that read it, the next the datasets those jobs write. Depth counts jobs: depth 1 = the readers of the dataset
and what they write. Column lineage walks ``(Field)-[:DERIVES_FROM]->(Field)`` (output → input), one hop per depth.

Every traversal is breadth-first with a visited set: one parameterized query per depth level expands the frontier
(the nodes first reached at the previous level; for datasets both hops, to the jobs and on to their datasets), so
the cost follows the nodes and edges visited. A variable-length pattern enumerated every *path* before deduplicating:
on a DAG with fan-in 2-3 per job, upstream at depth 10 took 36-71 s. Limits are explicit: depth, nodes (a traversal
stops once it has more than ``limit``, keeps the nearest ``limit`` in the order depth, kind, namespace, name and says
``truncated``), rows per level, and time (each level's query carries the remaining budget as its server-side
timeout; ``traverse`` answers what it found before the budget ran out, flagged, while the functions that answer a
bare list raise ``TraversalTimeout``, since a partial list would pass for the whole answer).

Nodes are looked up by their stored keys (``graph.keys.stored_key``: a name over 2 KB is keyed by its hash) and
answered with their whole names (``coalesce(n.fullName, n.name)``), so a very long name is found and shown as sent.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neo4j import READ_ACCESS, Driver, Query, Session
from neo4j.exceptions import ClientError

from kafka_lineage.graph.keys import stored_key

MAX_DEPTH = 50
# Nodes per lineage answer unless a caller says otherwise: a 2,000-job layered DAG's depth-10 upstream answer holds
# ~2,600 nodes (decision 89), whole in ~120 ms; more is cut to the nearest and flagged truncated.
NODE_LIMIT = 10_000
# A walk's time budget unless the caller sets one: each level's query carries what is left of it as its server-side
# timeout, so no question can keep Neo4j busy for longer (None = no budget, the server's own limit only).
DEFAULT_TIMEOUT = 30.0
# One level's query returns at most this many rows (edges): a hub read by more jobs than this truncates the walk
# (flagged) instead of streaming an unbounded answer into memory.
MAX_ROWS_PER_LEVEL = 200_000


def _names(node: str, field: bool = False) -> str:
    columns = (f"elementId({node}), coalesce({node}.fullNamespace, {node}.namespace), "
               f"coalesce({node}.fullName, {node}.name)")
    return columns + (f", coalesce({node}.fullField, {node}.field)" if field else "")


# Each level's answer is ONE record holding a list of edge rows: the driver decodes one big list ~5x faster than as
# many records (635 rows: 3 ms instead of 14 ms). A row is [frontier id, (id, namespace, name[, field]) per hop].
def known(edge: str) -> str:
    """The edge was known at ``$asOf`` (an event carrying it had happened by then); every edge when ``$asOf`` is
    null. An edge written before the sink kept first-seen times counts as always known."""
    return f"($asOf IS NULL OR {edge}.firstSeen IS NULL OR {edge}.firstSeen <= $asOf)"


# A dataset's other names (``SAME_AS``, from ``symlinks`` facets, either direction, up to this many links away) are
# the same data: a walk reaches them with the dataset, at its depth, and goes on from them too.
MAX_ALIAS_LINKS = 4


def aliases_of(node: str, alias: str) -> str:
    """A ``CALL`` subquery: ``node`` itself and every dataset ``SAME_AS``-linked to it by edges known at ``$asOf``,
    as ``alias``, one row each (``node`` null: one null row)."""
    return (f"CALL ({node}) {{ RETURN {node} AS {alias} UNION MATCH p = ({node}:Dataset)"
            f"-[:SAME_AS*1..{MAX_ALIAS_LINKS}]-({alias}:Dataset) "
            f"WHERE all(link IN relationships(p) WHERE {known('link')}) RETURN {alias} }}")


def field_aliases_of(node: str, alias: str) -> str:
    """``aliases_of`` for a column: ``node`` itself and the same-named column of every dataset ``SAME_AS``-linked
    to its dataset."""
    return (f"CALL ({node}) {{ RETURN {node} AS {alias} UNION MATCH p = (:Dataset {{namespace: {node}.namespace, "
            f"name: {node}.name}})-[:SAME_AS*1..{MAX_ALIAS_LINKS}]-(twin:Dataset) "
            f"WHERE all(link IN relationships(p) WHERE {known('link')}) "
            f"MATCH ({alias}:Field {{namespace: twin.namespace, name: twin.name, field: {node}.field}}) "
            f"RETURN {alias} }}")


def _dataset_level(reads: str, writes: str) -> str:
    """One depth level from the frontier datasets (``$ids``): the jobs next to them, the datasets next to those
    jobs, and those datasets' aliases (``x``; the dataset itself among them), one row per (edge, edge, alias); a job
    without one still comes as a row (OPTIONAL MATCH). The patterns name their edges ``e1`` and ``e2``: only edges
    known at ``$asOf`` are followed."""
    return (f"UNWIND $ids AS id MATCH {reads} WHERE elementId(a) = id AND {known('e1')} "
            f"OPTIONAL MATCH {writes} WHERE {known('e2')} "
            f"{aliases_of('o', 'x')} "
            f"WITH id, j, o, x LIMIT $rows RETURN collect([id, {_names('j')}, {_names('o')}, {_names('x')}])")


# The start's aliases: reached at depth 0, and walked from like the start.
_START_ALIASES = (f"MATCH (a:Dataset) WHERE elementId(a) = $id {aliases_of('a', 'x')} WITH x WHERE x <> a "
                  f"RETURN collect([{_names('x')}])")


def _field_level(pattern: str) -> str:
    """One column level: the columns next to the frontier's (``b``) and their aliases' (``x``, ``b`` among them)."""
    return (f"UNWIND $ids AS id MATCH {pattern} WHERE elementId(a) = id AND {known('e')} "
            f"{field_aliases_of('b', 'x')} "
            f"WITH id, b, x LIMIT $rows RETURN collect([id, {_names('b', True)}, {_names('x', True)}])")


# The start columns' aliases: walked from like the starts, not reported.
_START_FIELD_ALIASES = (f"UNWIND $ids AS id MATCH (a:Field) WHERE elementId(a) = id {field_aliases_of('a', 'x')} "
                        "WITH x WHERE NOT elementId(x) IN $ids RETURN collect(DISTINCT elementId(x))")


class TraversalTimeout(TimeoutError):
    """A list-answering traversal (``impact``, ``upstream``, column lineage) ran out of its time budget: a partial
    list without a flag would pass for the whole answer. ``traverse`` answers partially instead, flagged."""


@dataclass(frozen=True)
class _Level:
    """One depth level's query, the kind each of its hops reaches, the values per reached node in a row (id and
    names), and whether the stored edges point from the frontier outwards (edges are answered as stored)."""

    query: str
    kinds: tuple[str, ...]
    width: int
    outward: bool


_DATASET_LEVELS = {
    "down": _Level(_dataset_level("(a:Dataset)-[e1:INPUT_TO]->(j:Job)", "(j)-[e2:OUTPUTS]->(o:Dataset)"),
                   ("job", "dataset", "alias"), 3, True),
    "up": _Level(_dataset_level("(a:Dataset)<-[e1:OUTPUTS]-(j:Job)", "(j)<-[e2:INPUT_TO]-(o:Dataset)"),
                 ("job", "dataset", "alias"), 3, False),
}
_FIELD_LEVELS = {  # DERIVES_FROM points from the derived (output) column to its input
    "down": _Level(_field_level("(a:Field)<-[e:DERIVES_FROM]-(b:Field)"), ("field", "alias"), 4, False),
    "up": _Level(_field_level("(a:Field)-[e:DERIVES_FROM]->(b:Field)"), ("field", "alias"), 4, True),
}


# Which of the datasets (``$ids``) some completed run wrote (by ``$asOf``): a declared output of a failed run is not
# a write.
_WRITTEN = ("UNWIND $ids AS id MATCH (d:Dataset) WHERE elementId(d) = id "
            "RETURN collect(CASE WHEN EXISTS { (d)<-[:WROTE]-(r:Run {state: 'COMPLETE'}) "
            "WHERE $asOf IS NULL OR r.endTime <= $asOf } THEN id END)")


@dataclass(frozen=True, order=True)
class Reached:
    depth: int
    kind: str  # "job" | "dataset"
    namespace: str
    name: str


def _checked_depth(depth: int) -> int:
    """``depth`` once validated (1..``MAX_DEPTH``)."""
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    return depth


@dataclass
class _Walk:
    """What a breadth-first walk found: node id → (depth, kind, names), the stored edges among visited nodes, and
    why it stopped early (None: it did not)."""

    found: dict[str, tuple[int, str, list[str]]] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # node id → the node it was first reached from
    edges: set[tuple[str, str]] = field(default_factory=set)
    stopped: str | None = None


def _walk(session: Session, start: Sequence[str], level: _Level, depth: int, limit: int, deadline: float | None,
          as_of: str | None = None, aliases: dict[str, list[str]] | None = None) -> _Walk:
    """Breadth-first from the ``start`` node ids, one query per depth level, at most ``depth`` levels.

    Within a level the second hop may start from a job visited at an earlier level: its neighbours were all found
    then, so the visited set drops them again and every node keeps its shortest depth. A start node is reported
    only when some edge reaches it (a cycle), as the path query did. The walk ends after a level that brought the
    count over ``limit``: every node at that depth is known, so the nearest ``limit`` are exact. A level's
    ``alias`` hop reaches the aliases of the dataset before it, at that dataset's depth; ``aliases`` (id → names)
    are the first start's, reported at depth 0 and walked from.
    """
    walk = _Walk()
    starts = set(start)
    visited = set(start)
    frontier = list(start)
    for alias, names in (aliases or {}).items():
        walk.found[alias], walk.parent[alias] = (0, "dataset", names), start[0]
        walk.edges.add((start[0], alias))
        visited.add(alias)
        frontier.append(alias)
    for depth_now in range(1, depth + 1):
        if not frontier:
            break
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining < 0.001:  # the driver sends milliseconds, and 0 means no timeout
            walk.stopped = "time"
            break
        try:
            rows = session.run(Query(level.query, timeout=remaining), ids=frontier,
                               rows=MAX_ROWS_PER_LEVEL + 1, asOf=as_of).single(strict=True)[0]
        except ClientError as exc:
            if "TransactionTimedOut" not in (exc.code or ""):
                raise
            walk.stopped = "time"  # the server ended the level's query at the budget: keep what the others found
            break
        if len(rows) > MAX_ROWS_PER_LEVEL:
            walk.stopped = "edges"
            rows = rows[:MAX_ROWS_PER_LEVEL]
        following = []
        for row in rows:
            source = row[0]
            for hop, kind in enumerate(level.kinds):
                at = 1 + hop * level.width
                target = row[at]
                if target is None:
                    break
                alias = kind == "alias"
                if alias and target == source:
                    continue  # the dataset itself
                walk.edges.add((source, target) if level.outward or alias else (target, source))
                if target not in walk.found and (target not in visited or target in starts):
                    walk.found[target] = (depth_now, level.kinds[hop - 1] if alias else kind,
                                          row[at + 1:at + level.width])
                    walk.parent[target] = source
                    if target not in visited:
                        visited.add(target)
                        if kind != "job":  # the walk goes on from datasets (and their aliases) and fields
                            following.append(target)
                source = target
        frontier = following
        if walk.stopped:
            break
        if len(walk.found) > limit:
            walk.stopped = "nodes"
            break
    return walk


Key = tuple[str, str, str]  # (kind, namespace, name)


@dataclass(frozen=True)
class Traversal:
    """Nodes reached from a dataset (nearest first, at most ``limit``) and the lineage edges among them and the
    start, as stored. ``truncated``: more nodes exist within the depth than were returned, or a row/time limit
    ended the walk early (``stopped`` says which: "nodes", "edges" or "time"). ``found``: the start exists."""

    start: Reached
    nodes: list[Reached]
    edges: list[tuple[Key, Key]]
    found: bool = True
    limit: int = NODE_LIMIT
    stopped: str | None = None
    parents: dict[Key, Key] = field(default_factory=dict)  # node → the node it was first reached from
    # Returned datasets no completed run has written: declared outputs only (of runs that failed, were aborted or
    # are still running, or of static lineage). A run writes its outputs when it completes (ARCHITECTURE 42).
    unwritten: frozenset[Key] = frozenset()

    @property
    def truncated(self) -> bool:
        return self.stopped is not None

    def path(self, kind: str, namespace: str, name: str) -> list[Key]:
        """One shortest path from the start to a returned node, start first ([] if the node was not returned)."""
        node: Key = (kind, namespace, name)
        start: Key = (self.start.kind, self.start.namespace, self.start.name)
        if node not in self.parents:
            return []
        path = [node]
        while path[-1] != start or len(path) == 1:
            path.append(self.parents[path[-1]])
            if len(path) > 2 * MAX_DEPTH + 1:  # cannot happen for a breadth-first tree; a guard, not a loop
                break
        return path[::-1]


def traverse(driver: Driver, namespace: str, name: str, depth: int = 5, direction: str = "down",
             limit: int = NODE_LIMIT, timeout: float | None = DEFAULT_TIMEOUT, as_of: str | None = None) -> Traversal:
    """Jobs and datasets downstream (``down``) or upstream (``up``) of a dataset within ``depth`` jobs.
    ``timeout``: the whole walk's time budget in seconds (None = the server's own limit only). ``as_of`` (a
    ``graph.keys.utc_time``): the graph as it was then, only edges an event had carried by that time."""
    if direction not in _DATASET_LEVELS:
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
    depth = _checked_depth(depth)
    deadline = None if timeout is None else time.monotonic() + timeout
    start = Reached(0, "dataset", namespace, name)
    with driver.session(default_access_mode=READ_ACCESS) as session:
        record = session.run(Query("MATCH (d:Dataset {namespace: $namespace, name: $name}) RETURN elementId(d) AS id",
                                   timeout=timeout), namespace=stored_key(namespace), name=stored_key(name)).single()
        if record is None:
            return Traversal(start, [], [], False, limit)
        start_id = record["id"]
        aliases = {row[0]: row[1:] for row in session.run(Query(_START_ALIASES, timeout=timeout), id=start_id,
                                                            asOf=as_of).single(strict=True)[0]}
        walk = _walk(session, [start_id], _DATASET_LEVELS[direction], depth, limit, deadline, as_of, aliases)
    reached = {node: Reached(level, kind, *names) for node, (level, kind, names) in walk.found.items()}
    nodes = sorted(reached.values())[:limit]
    returned = set(nodes)
    named = {node: (r.kind, r.namespace, r.name) for node, r in reached.items() if r in returned}
    named[start_id] = ("dataset", namespace, name)
    edges = sorted((named[a], named[b]) for a, b in walk.edges if a in named and b in named)
    stopped = walk.stopped if walk.stopped != "nodes" or len(reached) > limit else None
    known = {**{node: (r.kind, r.namespace, r.name) for node, r in reached.items()}, start_id: named[start_id]}
    parents = {known[node]: known[parent] for node, parent in walk.parent.items()}
    datasets = [node for node, r in reached.items() if r.kind == "dataset" and r in returned]
    with driver.session(default_access_mode=READ_ACCESS) as session:
        written = set(session.run(Query(_WRITTEN, timeout=timeout), ids=datasets, asOf=as_of
                                  ).single(strict=True)[0])
    unwritten = frozenset(named[node] for node in datasets if node not in written)
    return Traversal(start, nodes, edges, True, limit, stopped, parents, unwritten)


def impact(driver: Driver, namespace: str, name: str, depth: int = 5, limit: int = NODE_LIMIT,
           timeout: float | None = DEFAULT_TIMEOUT, as_of: str | None = None) -> list[Reached]:
    """Jobs and datasets downstream of a dataset, nearest first (``as_of``: as the graph was then). ``timeout``: the
    walk's time budget, in seconds (each level's query carries what is left of it as its server-side timeout)."""
    return _whole(traverse(driver, namespace, name, depth, "down", limit, timeout, as_of), timeout)


def upstream(driver: Driver, namespace: str, name: str, depth: int = 5, limit: int = NODE_LIMIT,
             timeout: float | None = DEFAULT_TIMEOUT) -> list[Reached]:
    """Jobs and datasets a dataset derives from (root cause candidates), nearest first."""
    return _whole(traverse(driver, namespace, name, depth, "up", limit, timeout), timeout)


def _whole(walk: Traversal, timeout: float | None) -> list[Reached]:
    if walk.stopped == "time":
        raise TraversalTimeout(f"the traversal ran out of its {timeout} s budget")
    return walk.nodes


def as_rows(reached: list[Reached], unwritten: frozenset[Key] | None = None) -> list[dict[str, Any]]:
    """Plain rows; with ``unwritten`` (a traversal's), each dataset row also says whether a completed run wrote it."""
    rows: list[dict[str, Any]] = [{"depth": r.depth, "kind": r.kind, "namespace": r.namespace, "name": r.name}
                                  for r in reached]
    if unwritten is not None:
        for row in rows:
            if row["kind"] == "dataset":
                row["written"] = ("dataset", row["namespace"], row["name"]) not in unwritten
    return rows


# Stored facet documents of listed nodes (``$nodes``: [label, namespace, name, [facet keys], index], stored keys),
# deleted ones (null JSON) included: one row per document, each found through the ``facet_key`` constraint's index.
_FACETS_OF = ("UNWIND $nodes AS n UNWIND n[3] AS key "
              "MATCH (f:Facet {of: n[0], namespace: n[1], name: n[2], key: key}) "
              "RETURN collect([n[4], key, f.json, f.facetOrder])")
FacetKey = tuple[str, str, str, str]  # (label "Job" or "Dataset", namespace, name, facet key)


def node_facets(driver: Driver, nodes: Sequence[tuple[str, str, str, Sequence[str]]],
                timeout: float | None = DEFAULT_TIMEOUT) -> dict[FacetKey, tuple[str | None, str]]:
    """Facet documents of ``nodes`` (label, namespace, name as answered, facet keys), in one query: (label,
    namespace, name, key) → (the document's JSON, ``{key: facet}``, None when the facet was deleted; the eventTime it
    came with as ``graph.keys.utc_time``, "" if none). A facet never sent is absent. The first ``NODE_LIMIT`` nodes
    only, at most a few keys each: every document is bounded (``facets.RUN_FACETS_MAX_BYTES``)."""
    listed = list(nodes)[:NODE_LIMIT]
    if not listed:
        return {}
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = session.run(Query(_FACETS_OF, timeout=timeout), nodes=[
            [label, stored_key(namespace), stored_key(name), list(keys), index]
            for index, (label, namespace, name, keys) in enumerate(listed)]).single(strict=True)[0]
    found: dict[FacetKey, tuple[str | None, str]] = {}
    for index, key, text, order in rows:
        label, namespace, name, _keys = listed[index]
        found[(label, namespace, name, key)] = (text, (order or "").split("|", 1)[0])
    return found


@dataclass(frozen=True, order=True)
class ReachedField:
    depth: int
    namespace: str
    name: str
    field: str


def field_lineage(driver: Driver, namespace: str, name: str, field: str, depth: int = 5, direction: str = "down",
                  limit: int = NODE_LIMIT) -> list[ReachedField]:
    """Columns derived from a column (``down``), or the columns it derives from (``up``), nearest first."""
    return _field_reach(driver, namespace, name, [field], depth, direction, limit)


def column_impact(driver: Driver, namespace: str, name: str, fields: list[str], depth: int = 5, limit: int = NODE_LIMIT,
                  timeout: float | None = DEFAULT_TIMEOUT) -> list[ReachedField]:
    """Columns derived, through ``(Field)-[:DERIVES_FROM]->(Field)`` (output → input), from any of a dataset's
    ``fields``, each at its smallest hop count, nearest first; the fields themselves are not listed unless one
    derives from another."""
    return _field_reach(driver, namespace, name, fields, depth, "down", limit, timeout)


def _field_reach(driver: Driver, namespace: str, name: str, fields: list[str], depth: int, direction: str,
                 limit: int, timeout: float | None = DEFAULT_TIMEOUT) -> list[ReachedField]:
    if direction not in _FIELD_LEVELS:
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
    depth = _checked_depth(depth)
    deadline = None if timeout is None else time.monotonic() + timeout
    with driver.session(default_access_mode=READ_ACCESS) as session:
        starts = [record["id"] for record in session.run(
            Query("UNWIND $fields AS start MATCH (f:Field {namespace: $namespace, name: $name, field: start}) "
                  "RETURN elementId(f) AS id", timeout=timeout),
            namespace=stored_key(namespace), name=stored_key(name), fields=[stored_key(f) for f in fields])]
        starts += session.run(Query(_START_FIELD_ALIASES, timeout=timeout), ids=starts, asOf=None
                              ).single(strict=True)[0]
        walk = _walk(session, starts, _FIELD_LEVELS[direction], depth, limit, deadline, None)
    if walk.stopped == "time":
        raise TraversalTimeout(f"the column traversal ran out of its {timeout} s budget")
    return sorted(ReachedField(level, *names) for level, _kind, names in walk.found.values())[:limit]


# Candidates the "did you mean" answer ranks: nodes of the same namespace or whose name shares the last path segment.
MAX_NAME_CANDIDATES = 2000


def field_exists(driver: Driver, namespace: str, name: str, field: str) -> bool:
    with driver.session(default_access_mode=READ_ACCESS) as session:
        return session.run(Query("MATCH (f:Field {namespace: $namespace, name: $name, field: $field}) RETURN 1 LIMIT 1",
                                 timeout=DEFAULT_TIMEOUT), namespace=stored_key(namespace), name=stored_key(name),
                           field=stored_key(field)).single() is not None


def closest_datasets(driver: Driver, namespace: str, name: str, count: int = 5) -> list[tuple[str, str]]:
    """Existing datasets whose namespace and name are most like the ones asked for (an unknown node's hints)."""
    tail = name.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1] or name
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = session.run(Query("MATCH (d:Dataset) WHERE d.namespace = $namespace OR d.name CONTAINS $tail "
                                 "RETURN coalesce(d.fullNamespace, d.namespace) AS namespace, "
                                 "coalesce(d.fullName, d.name) AS name LIMIT $candidates", timeout=5.0),
                           namespace=stored_key(namespace), tail=tail[:200], candidates=MAX_NAME_CANDIDATES).values()
    return _ranked([(row[0], row[1]) for row in rows], (namespace, name), count)


def closest_fields(driver: Driver, namespace: str, name: str, field: str, count: int = 5) -> list[str]:
    """Existing columns of the dataset most like the one asked for."""
    with driver.session(default_access_mode=READ_ACCESS) as session:
        rows = session.run(Query("MATCH (f:Field {namespace: $namespace, name: $name}) "
                                 "RETURN coalesce(f.fullField, f.field) LIMIT $candidates", timeout=5.0),
                           namespace=stored_key(namespace), name=stored_key(name),
                           candidates=MAX_NAME_CANDIDATES).values()
    return [found for (found,) in _ranked([(row[0],) for row in rows], (field,), count)]


def _ranked(candidates: list[tuple[str, ...]], asked: tuple[str, ...], count: int) -> list[tuple[str, ...]]:
    target = " ".join(asked)
    scored = [(difflib.SequenceMatcher(None, target, " ".join(c)).ratio(), c) for c in set(candidates)]
    return [c for score, c in sorted(scored, key=lambda item: (-item[0], item[1])) if score >= 0.5][:count]
