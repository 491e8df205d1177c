"""The schema-change gate's questions to the graph: each proposed schema diffed against its dataset's current schema
version, and every changed column's consumers found along column lineage (``lineage check``,
``POST /api/v2/check``).

Changes are classified by the rules drift alerts use (``schemas/schema_diff``); an ``ALTER TABLE … RENAME COLUMN``
is a RENAMED change (BREAKING: readers of the old name lose it). A column's consumers are what derives from it
downstream: columns through ``(Field)<-[:DERIVES_FROM]-(Field)`` hops, each hop with its transformation as the
column-lineage facet gave it (``DIRECT/HASH(masked)``, ``INDIRECT/AGGREGATION``) and the jobs that made it, and
datasets that depend on it as a whole (``DEPENDS_ON``: joins, filters, grouping); the walk is
``graph/column_walk.py``. Jobs that read the dataset but
never reported column lineage from it may use the column or not: they are listed as *unknown readers*, and count
as consumers unless the caller says otherwise (a gate that passes what it cannot see would pass everything).

The verdict: ``BREAKING_WITH_CONSUMERS`` when a BREAKING change that is not allowed has a consumer (the gate's exit
1), else ``PASS``. Every walk is bounded (depth, consumers per change, time), and a cut answer says so.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import READ_ACCESS, Driver, Query

from kafka_lineage.graph.column_walk import Consumer, Hop, Start, walk_columns
from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.queries import DEFAULT_TIMEOUT, _checked_depth, closest_datasets
from kafka_lineage.graph.store import GraphStore, NotFound, schema_fields
from kafka_lineage.schemas.proposals import ProposedSchema, apply_operations
from kafka_lineage.schemas.schema_diff import BREAKING, COMPATIBLE, FieldChange, diff_schemas

RENAMED = "RENAMED"
PASS, BREAKING_WITH_CONSUMERS = "PASS", "BREAKING_WITH_CONSUMERS"
# Consumers listed per changed column (nearest first) and jobs named per hop: a hub column feeding thousands of
# columns is cut there, flagged.
MAX_CONSUMERS = 1000
MAX_UNKNOWN_READERS = 200
_NAMES = "coalesce({0}.fullNamespace, {0}.namespace), coalesce({0}.fullName, {0}.name)"

# Jobs reading the dataset that reported no column lineage from it (no output column derives from one of its
# columns, no output depends on one).
_UNKNOWN_READERS = (
    "MATCH (d:Dataset {namespace: $namespace, name: $name})-[:INPUT_TO]->(j:Job) "
    "WHERE NOT EXISTS { MATCH (j)-[:OUTPUTS]->(o:Dataset) "
    "  MATCH (:Field {namespace: o.namespace, name: o.name})-[:DERIVES_FROM]->"
    "(:Field {namespace: d.namespace, name: d.name}) } "
    "AND NOT EXISTS { MATCH (j)-[:OUTPUTS]->(:Dataset)-[:DEPENDS_ON]->(:Field {namespace: d.namespace, "
    "name: d.name}) } "
    f"WITH DISTINCT j ORDER BY j.namespace, j.name LIMIT $limit RETURN {_NAMES.format('j')}")


@dataclass(frozen=True)
class Finding:
    """One proposed change of a column and who consumes the column."""

    change: FieldChange
    consumers: tuple[Consumer, ...] = ()
    allowed: bool = False
    truncated: bool = False  # more consumers than listed, or the walk ran out of time
    renamed_to: str | None = None  # a RENAMED change's new name
    line: int | None = None  # the line of the statement that makes the change (an ALTER's), when known

    @property
    def breaking(self) -> bool:
        return self.change.severity == BREAKING

    def jobs(self) -> list[tuple[str, str]]:
        """Every job on a consumer's path, in the order first met."""
        return list(dict.fromkeys(job for consumer in self.consumers for hop in consumer.path for job in hop.jobs))

    def as_dict(self) -> dict[str, Any]:
        return {**self.change.as_record(), "renamedTo": self.renamed_to, "line": self.line, "allowed": self.allowed,
                "truncated": self.truncated,
                "consumers": [consumer.as_dict() for consumer in self.consumers],
                "jobs": [{"namespace": ns, "name": name} for ns, name in self.jobs()]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        change = FieldChange(data["path"], data["kind"], data.get("oldType"), data.get("newType"), data["severity"])
        consumers = tuple(Consumer(tuple(Hop.from_dict(hop) for hop in c["path"])) for c in data.get("consumers") or [])
        return cls(change, consumers, bool(data.get("allowed")), bool(data.get("truncated")), data.get("renamedTo"),
                   data["line"] if isinstance(data.get("line"), int) else None)


@dataclass(frozen=True)
class DatasetCheck:
    """A proposal's outcome. ``status``: ``checked`` (diffed against the current version), ``new`` (no such dataset
    in the graph: nothing consumes it yet; ``closest`` lists similar names, in case of a typo), ``no-schema`` (the
    dataset has no schema version to compare with)."""

    proposal: ProposedSchema
    status: str
    current_version: str | None = None
    findings: tuple[Finding, ...] = ()
    unknown_readers: tuple[tuple[str, str], ...] = ()
    closest: tuple[tuple[str, str], ...] = ()

    def fails(self, finding: Finding, unknown_readers_count: bool = True) -> bool:
        """Whether ``finding`` (one of this check's) is BREAKING, not allowed and has a consumer (or, when
        ``unknown_readers_count``, a reader that reported no column lineage)."""
        return finding.breaking and not finding.allowed and bool(
            finding.consumers or (unknown_readers_count and self.unknown_readers))

    def failing(self, unknown_readers_count: bool = True) -> list[Finding]:
        return [f for f in self.findings if self.fails(f, unknown_readers_count)]

    def as_dict(self, unknown_readers_count: bool = True) -> dict[str, Any]:
        proposal = self.proposal
        return {"namespace": proposal.namespace, "name": proposal.name, "status": self.status,
                "origin": proposal.origin, "source": proposal.source or None, "line": proposal.line,
                "complete": proposal.complete, "currentVersion": self.current_version,
                "breaking": bool(self.failing(unknown_readers_count)),
                "changes": [finding.as_dict() for finding in self.findings],
                "unknownReaders": [{"namespace": ns, "name": name} for ns, name in self.unknown_readers],
                "closest": [{"namespace": ns, "name": name} for ns, name in self.closest]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetCheck:
        proposal = ProposedSchema(data["namespace"], data["name"], complete=data.get("complete", True) is not False,
                                  source=data.get("source") or "", line=data.get("line"),
                                  origin=data.get("origin") or "")
        return cls(proposal, data["status"], data.get("currentVersion"),
                   tuple(Finding.from_dict(item) for item in data.get("changes") or []),
                   tuple((r["namespace"], r["name"]) for r in data.get("unknownReaders") or []),
                   tuple((r["namespace"], r["name"]) for r in data.get("closest") or []))


@dataclass(frozen=True)
class CheckReport:
    datasets: tuple[DatasetCheck, ...]
    unknown_readers_count: bool = True

    @property
    def verdict(self) -> str:
        return BREAKING_WITH_CONSUMERS if any(d.failing(self.unknown_readers_count) for d in self.datasets) else PASS

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "unknownReadersCount": self.unknown_readers_count,
                "datasets": [d.as_dict(self.unknown_readers_count) for d in self.datasets]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckReport:
        """The report a server answered (``as_dict``'s JSON), to render it as ``lineage check`` does."""
        return cls(tuple(DatasetCheck.from_dict(item) for item in data["datasets"]),
                   data.get("unknownReadersCount", True) is not False)


def allowed(patterns: Sequence[str], namespace: str, name: str, path: str) -> bool:
    """Whether an ``--allow`` pattern (shell-style, ``*`` and ``?``) accepts a change: matched against
    ``NAMESPACE/NAME:COLUMN``, ``NAME:COLUMN`` and, for the whole dataset, ``NAMESPACE/NAME`` and ``NAME``."""
    targets = (f"{namespace}/{name}:{path}", f"{name}:{path}", f"{namespace}/{name}", name)
    return any(fnmatch.fnmatchcase(target, pattern) for pattern in patterns for target in targets)


def proposed_changes(proposal: ProposedSchema, current: list[dict[str, Any]]
                     ) -> tuple[list[FieldChange], dict[str, str]]:
    """The changes ``proposal`` makes to the ``current`` schema (pure) and its renames (old → new column name). A
    proposed column without a type keeps the current one's, a current column without one takes the proposed type (a
    type nobody stated did not change); a partial proposal changes only the columns it names; a column an ALTER
    renames is one RENAMED change, not a removal and an addition."""
    renames: dict[str, str] = {}
    if proposal.fields is None:
        proposed, renames = apply_operations(current, proposal.operations)
    else:
        by_name = {item.get("name"): item for item in current}
        proposed = [{**item, "type": by_name[item["name"]].get("type")}
                    if item.get("type") is None and item.get("name") in by_name else item
                    for item in proposal.fields]
        if not proposal.complete:
            named = {item.get("name") for item in proposed}
            proposed = [item for item in current if item.get("name") not in named] + proposed
    typed = {item.get("name"): item.get("type") for item in proposed if item.get("type") is not None}
    current = [{**item, "type": typed[item.get("name")]} if item.get("type") is None and item.get("name") in typed
               else item for item in current]  # a type the graph never knew (dbt's docs) is no type change
    changes = diff_schemas(current, proposed)
    if not renames:
        return changes, renames
    renamed_to = set(renames.values())
    out = []
    for change in changes:
        head = change.path.split(".", 1)[0]
        if change.kind == "REMOVED" and head in renames:
            if change.path == head:
                out.append(FieldChange(head, RENAMED, change.old_type, change.old_type, BREAKING))
            continue  # nested fields of a renamed struct move with it
        if change.kind == "ADDED" and head in renamed_to:
            continue
        out.append(change)
    return out, renames


def check(driver: Driver, proposals: Iterable[ProposedSchema], *, depth: int = 10,
          allow: Sequence[str] = (), unknown_readers_count: bool = True, max_consumers: int = MAX_CONSUMERS,
          timeout: float | None = DEFAULT_TIMEOUT) -> CheckReport:
    """Each proposal diffed against its dataset's current schema and each changed column's consumers, within
    ``depth`` column hops. ``timeout`` bounds each proposal's walks (what is found before it is kept, flagged)."""
    depth = _checked_depth(depth)
    store = GraphStore(driver)
    results = []
    for proposal in proposals:
        try:
            row = store.dataset(proposal.namespace, proposal.name)
        except NotFound:
            results.append(DatasetCheck(proposal, "new", closest=tuple(
                closest_datasets(driver, proposal.namespace, proposal.name))))
            continue
        version, current = row[2], schema_fields(row[3])
        if not current:
            results.append(DatasetCheck(proposal, "no-schema", version))
            continue
        changes, renames = proposed_changes(proposal, current)
        walked = set(change.path for change in changes if change.severity != COMPATIBLE)
        deadline = None if timeout is None else time.monotonic() + timeout
        starts = [Start(proposal.namespace, proposal.name, column, column) for column in sorted(walked)]
        reach, cut = walk_columns(driver, starts, depth, max_consumers, deadline) if walked else ({}, set())
        lines = {name: op.line for op in proposal.operations for name in (op.column, op.new_name)
                 if name and op.line is not None}  # a column's last ALTER
        findings = tuple(Finding(change, tuple(reach.get(change.path, ())),
                                 allowed(allow, proposal.namespace, proposal.name, change.path),
                                 change.path in cut, renames.get(change.path) if change.kind == RENAMED else None,
                                 lines.get(change.path.split(".", 1)[0], proposal.line))
                         for change in changes)
        readers = _unknown_readers(driver, proposal.namespace, proposal.name) \
            if any(f.breaking for f in findings) else []
        results.append(DatasetCheck(proposal, "checked", version, findings, tuple(readers)))
    return CheckReport(tuple(results), unknown_readers_count)


def _unknown_readers(driver: Driver, namespace: str, name: str) -> list[tuple[str, str]]:
    with driver.session(default_access_mode=READ_ACCESS) as session:
        return [(record[0], record[1]) for record in session.run(
            Query(_UNKNOWN_READERS, timeout=DEFAULT_TIMEOUT), namespace=stored_key(namespace),
            name=stored_key(name), limit=MAX_UNKNOWN_READERS)]
