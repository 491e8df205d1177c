"""Partition states and readiness: what a scheduler asks before it starts a downstream task.

The sink stores facts only (``graph.events``): ``(Dataset)-[:HAS_PARTITION]->(Partition {namespace, name, key})``,
one ``(Partition)-[:HAS_VERSION]->(PartitionVersion {…, runId})`` per writing run with
``(Run)-[:WROTE_PARTITION {rowCount, bytes, assertions, failed, passed, markers, firstSeen}]->(PartitionVersion)``,
``(Run)-[:READ_PARTITION {firstSeen, failed, passed}]->(Partition)``, and on the partition its marker reports
(``markers``: ``"<eventTime> <file>"``) and the dataset's ``requiredMarker``. Every one of them merges order free.
States are computed here, when asked, from those facts: nothing is propagated at write time, so a replay, a late
event or a repeat can only give the state the whole set of events gives (pure functions below, unit tested).

- **Versions** are the writing runs ordered by (start time, run id): the run's START eventTime, else the first
  event that carried the write. Version numbers follow that order, so they come from the events, never from
  arrival order.
- **A version's state**: FAILED when its run FAILed or ABORTed, or an assertion about it failed (named); else
  SUCCESS when the run COMPLETEd and, if the partition requires a marker, the marker was reported for it; else
  RUNNING (started, or complete and waiting for its marker). Assertions about a version are those its writing run
  reported on that output and those of any run that read the partition while this version was the latest (a check
  task). A failure is kept (sets union), so a version once FAILED stays FAILED, and SUCCESS only moves to FAILED.
- **Markers** count for a version when its writing run reported it on the output, or a marker report's time falls
  between the version's start and the next version's start (a rewrite replaces the files). The dataset's
  ``requiredMarker`` is its producer's rule, sent on every report of its partitions (a COMPLETE read before any
  report carried it counts as not requiring one).
- A partition no run wrote has no state; with a marker reported it is ``landed`` (written by a process that sends
  no lineage), which satisfies ``ready`` as an upstream partition but never as the partition asked about: a marker
  report may arrive before the writing run's events, and ready must not answer yes on that.
- **STALE**: the latest version is SUCCESS but an upstream partition its run READ got a version after the read (a
  writing run other than the reader that ended — or, still running, started — after the reader's start), or the
  partition was marked stale (``lineage backfill plan --mark-stale``: a ``stale`` request in its facet) at a time
  later than its latest version's start. A version whose writer started after the mark clears it, so the answer
  does not depend on whether the mark or the rewrite arrived first.
- **Backfill versions**: a run that sent the ``kafkaLineage_backfill`` run facet writes backfill versions.
  The current (latest) version is the latest by writer start among all versions, a live version winning a tie at the
  same start: a backfill that started before a live rewrite of the partition never replaces it, whatever order the
  events arrive in; one that started after it is current (``version_order``).
- **ready**: the partition's latest version is SUCCESS and not STALE, and so is every partition its run read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neo4j import Driver, Query, RoutingControl

from kafka_lineage.graph.keys import stored_key
from kafka_lineage.schemas.partitions import parse_key_text, partition_key_text

__all__ = [
    "STATES",
    "PartitionFacts",
    "PartitionStatus",
    "Version",
    "dataset_partitions",
    "parse_key",
    "partition_status",
    "readiness",
    "ready",
    "run_partitions",
    "version_order",
]

STATES = ("RUNNING", "SUCCESS", "FAILED", "STALE")
MAX_VERSIONS = 100  # the latest versions read per partition (the count is exact)
MAX_PARTITIONS = 10_000  # partitions listed per question


# --- facts ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Version:
    """One writing run of a partition, as stored."""

    run_id: str
    run_state: str | None
    start: str  # the run's START time, else the first event that carried the write ("" if none)
    end: str | None
    failed: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    row_count: int | None = None
    bytes: int | None = None
    assertions: str | None = None  # JSON of the latest assertions list reported with the write
    data_quality: str | None = None  # JSON of the latest dataQualityMetrics
    job: tuple[str, str] | None = None
    backfill: str | None = None  # planId of the writer's kafkaLineage_backfill facet: a backfill version


def version_order(version: Version) -> tuple[str, int, str]:
    """Versions in order, the current one last: writer start, a live version after a backfill one started at the
    same time, then run id."""
    return version.start, 0 if version.backfill else 1, version.run_id


@dataclass(frozen=True)
class Check:
    """Failed assertions a run reported about the partition it read, and when that run started."""

    run_id: str
    start: str
    failed: tuple[str, ...]


@dataclass(frozen=True)
class PartitionFacts:
    namespace: str
    name: str
    key: str
    required_marker: str | None = None
    markers: tuple[tuple[str, str], ...] = ()  # (time, file), oldest first
    version_count: int = 0
    versions: tuple[Version, ...] = ()  # oldest first (the latest MAX_VERSIONS)
    checks: tuple[Check, ...] = ()
    reads: tuple[tuple[str, PartitionFacts], ...] = ()  # (read at, partition) of the latest version's run
    stale_marks: tuple[tuple[str, str], ...] = ()  # (requested at, reason) of --mark-stale requests


@dataclass(frozen=True)
class VersionStatus:
    number: int
    version: Version
    state: str
    reason: str | None
    marker: bool

    def as_dict(self) -> dict[str, Any]:
        v = self.version
        return {"version": self.number, "runId": v.run_id, "runState": v.run_state, "state": self.state,
                "reason": self.reason, "startTime": v.start or None, "endTime": v.end,
                "job": {"namespace": v.job[0], "name": v.job[1]} if v.job else None,
                "rowCount": v.row_count, "bytes": v.bytes, "marker": self.marker,
                "assertions": _loads(v.assertions), "dataQuality": _loads(v.data_quality),
                "failedAssertions": list(v.failed), "backfill": v.backfill}


@dataclass(frozen=True)
class PartitionStatus:
    facts: PartitionFacts
    state: str | None  # None: no run wrote it
    reason: str | None
    stale: tuple[str, ...]  # why it is stale (upstream partitions rewritten after the read)
    versions: tuple[VersionStatus, ...]
    landed: bool = False  # no run wrote it, but its marker was reported

    @property
    def latest(self) -> VersionStatus | None:
        return self.versions[-1] if self.versions else None

    def as_dict(self, versions: bool = False) -> dict[str, Any]:
        f = self.facts
        body: dict[str, Any] = {
            "namespace": f.namespace, "name": f.name, "key": f.key,
            "state": self.state, "reason": self.reason, "landed": self.landed, "stale": bool(self.stale),
            "staleBecause": list(self.stale),
            "versionCount": f.version_count, "requiredMarker": f.required_marker,
            "latest": self.latest.as_dict() if self.latest else None,
            "upstream": [{"namespace": u.namespace, "name": u.name, "key": u.key, "readAt": at}
                         for at, u in f.reads]}
        if versions:
            body["versions"] = [v.as_dict() for v in reversed(self.versions)]
        return body


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


# --- states (pure) -------------------------------------------------------------------------------------------------
def _marker_for(facts: PartitionFacts, version: Version, following: Version | None) -> bool:
    """The partition's marker (the required one, else any) was reported for this version."""
    wanted = facts.required_marker
    if any(wanted is None or name == wanted for name in version.markers):
        return True
    return any((wanted is None or name == wanted) and version.start <= at
               and (following is None or at < following.start) for at, name in facts.markers)


def _version_state(facts: PartitionFacts, version: Version, following: Version | None) -> tuple[str, str | None, bool]:
    """(state, reason, marker) of one version (the module doc's rules)."""
    marker = _marker_for(facts, version, following)
    failed = set(version.failed)
    for check in facts.checks:  # a check of the partition while this version was the latest
        if version.start <= check.start and (following is None or check.start < following.start):
            failed.update(check.failed)
    if version.run_state in ("FAIL", "ABORT"):
        return "FAILED", f"run {version.run_id} ended {version.run_state}", marker
    if failed:
        return "FAILED", "assertion failed: " + ", ".join(sorted(failed)), marker
    if version.run_state == "COMPLETE":
        if facts.required_marker is not None and not marker:
            return "RUNNING", f"run complete, marker {facts.required_marker} not reported", marker
        return "SUCCESS", None, marker
    return "RUNNING", f"run {version.run_id} is {version.run_state or 'not started'}", marker


def _stale(facts: PartitionFacts, latest: Version) -> tuple[str, ...]:
    """Upstream partitions the latest version's run read that got a version after the read, and stale marks made
    after the latest version's start."""
    reasons = [f"marked stale at {at}: {why}" for at, why in facts.stale_marks if at > latest.start][-1:]
    for read_at, upstream in facts.reads:
        for other in upstream.versions:
            changed = other.end or other.start
            if other.run_id != latest.run_id and changed > read_at:
                reasons.append(f"{upstream.namespace} {upstream.name} {upstream.key} rewritten by run "
                               f"{other.run_id} at {changed}, after the read at {read_at}")
                break
    return tuple(reasons)


def partition_status(facts: PartitionFacts) -> PartitionStatus:
    """The partition's versions with their states, and its own state: the latest version's, STALE in place of
    SUCCESS when an upstream partition was rewritten after the read."""
    ordered = sorted(facts.versions, key=version_order)
    first = facts.version_count - len(ordered) + 1
    statuses = []
    for index, version in enumerate(ordered):
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        state, reason, marker = _version_state(facts, version, following)
        statuses.append(VersionStatus(first + index, version, state, reason, marker))
    if not statuses:
        wanted = facts.required_marker
        if any(wanted is None or name == wanted for _, name in facts.markers):
            return PartitionStatus(facts, None, "no run wrote it; its marker was reported", (), (), landed=True)
        return PartitionStatus(facts, None, "no run wrote it and no marker was reported", (), ())
    latest = statuses[-1]
    stale = _stale(facts, latest.version) if latest.state == "SUCCESS" else ()
    if stale:
        return PartitionStatus(facts, "STALE", stale[0], stale, tuple(statuses))
    return PartitionStatus(facts, latest.state, latest.reason, (), tuple(statuses))


def _missing(status: PartitionStatus, role: str) -> dict[str, Any]:
    f = status.facts
    return {"role": role, "namespace": f.namespace, "name": f.name, "key": f.key, "state": status.state,
            "reason": status.reason}


def readiness(partitions: Sequence[PartitionFacts]) -> tuple[bool, list[dict[str, Any]]]:
    """Ready when there is a partition, each is SUCCESS (not STALE) and so is every upstream partition its latest
    version's run read (or that upstream partition is ``landed``); otherwise the list of what is missing or failed
    (``role``: partition or upstream)."""
    missing: list[dict[str, Any]] = []
    for facts in partitions:
        status = partition_status(facts)
        if status.state != "SUCCESS":
            missing.append(_missing(status, "partition"))
        for _, upstream in facts.reads:
            up = partition_status(upstream)
            if up.state != "SUCCESS" and not up.landed:
                missing.append(_missing(up, "upstream"))
    return bool(partitions) and not missing, missing


# --- keys ------------------------------------------------------------------------------------------------------------
def parse_key(text: str) -> tuple[tuple[str, str], ...]:
    """``date=2025-12-24/region=eu`` → ordered pairs; ``ValueError`` names what is wrong."""
    return parse_key_text(text)


def _matches(stored: str, wanted: tuple[tuple[str, str], ...]) -> bool:
    """A stored key holds every wanted name=value pair (in any order)."""
    try:
        pairs = set(parse_key_text(stored))
    except ValueError:
        return False
    return set(wanted) <= pairs


# --- Cypher ---------------------------------------------------------------------------------------------------------
def _facts(p: str, level: int, reads: int) -> str:
    """A list expression of a partition's facts (``_facts_of`` reads it); ``reads`` levels of upstream partitions
    (their facts) through the latest version's run. Each level names its own variables: subqueries may not redeclare
    an outer one."""
    n = str(level)
    versions = (
        f"COLLECT {{ MATCH ({p})-[:HAS_VERSION]->(:PartitionVersion)<-[w{n}:WROTE_PARTITION]-(r{n}:Run) "
        f"WITH r{n}, w{n}, coalesce(r{n}.startTime, w{n}.firstSeen, '') AS s{n} "
        f"ORDER BY s{n} DESC, r{n}.backfillPlanId IS NULL DESC, r{n}.runId DESC LIMIT $maxVersions "
        f"RETURN [r{n}.runId, r{n}.state, s{n}, r{n}.endTime, w{n}.failed, w{n}.markers, w{n}.rowCount, w{n}.bytes, "
        f"w{n}.assertions, w{n}.dataQuality, [(r{n})-[:OF_JOB]->(j{n}:Job) | "
        f"[coalesce(j{n}.fullNamespace, j{n}.namespace), coalesce(j{n}.fullName, j{n}.name)]][0], "
        f"r{n}.backfillPlanId] }}")
    checks = (f"COLLECT {{ MATCH (c{n}:Run)-[e{n}:READ_PARTITION]->({p}) WHERE e{n}.failed IS NOT NULL "
              f"RETURN [c{n}.runId, coalesce(c{n}.startTime, e{n}.firstSeen, ''), e{n}.failed] }}")
    upstream = "[]"
    if reads > 0:
        child = f"u{n}"
        upstream = (
            f"COLLECT {{ MATCH ({p})-[:HAS_VERSION]->(:PartitionVersion)<-[x{n}:WROTE_PARTITION]-(lr{n}:Run) "
            f"WITH lr{n}, x{n} ORDER BY coalesce(lr{n}.startTime, x{n}.firstSeen, '') DESC, "
            f"lr{n}.backfillPlanId IS NULL DESC, lr{n}.runId DESC LIMIT 1 "
            f"MATCH (lr{n})-[rp{n}:READ_PARTITION]->({child}:Partition) "
            f"RETURN [coalesce(lr{n}.startTime, rp{n}.firstSeen, ''), {_facts(child, level + 1, reads - 1)}] }}")
    names = (f"[({p})<-[:HAS_PARTITION]-(d{n}:Dataset) | [coalesce(d{n}.fullNamespace, d{n}.namespace), "
             f"coalesce(d{n}.fullName, d{n}.name)]][0]")
    return (f"[{names}, {p}.key, {p}.requiredMarker, {p}.markers, COUNT {{ ({p})-[:HAS_VERSION]->() }}, "
            f"{versions}, {checks}, {upstream}, {p}.staleMarks]")


def _split(text: str) -> tuple[str, str]:
    at, _, rest = text.partition(" ")
    return at, rest


def _facts_of(row: Sequence[Any]) -> PartitionFacts:
    names, key, required, markers, count, versions, checks, reads, stale = row
    return PartitionFacts(
        names[0] if names else "", names[1] if names else "", key, required,
        tuple((text[:text.index(" ")], text[text.index(" ") + 1:]) for text in markers or () if " " in text),
        count,
        tuple(Version(v[0], v[1], v[2], v[3], tuple(v[4] or ()), tuple(v[5] or ()), v[6], v[7], v[8], v[9],
                      tuple(v[10]) if v[10] else None, v[11]) for v in versions),
        tuple(Check(c[0], c[1], tuple(c[2] or ())) for c in checks),
        tuple((at, _facts_of(u)) for at, u in reads),
        tuple(_split(text) for text in stale or () if " " in text))


_DATASET_FOUND = "OPTIONAL MATCH (d:Dataset {namespace: $namespace, name: $name}) WITH d "
# ready: the asked partitions (by exact key), two levels of upstream (their staleness needs their own reads).
_READY = (_DATASET_FOUND + "RETURN d IS NOT NULL, COLLECT { UNWIND $keys AS k "
          "MATCH (p:Partition {namespace: $namespace, name: $name, key: k}) RETURN " + _facts("p", 0, 2) + " }")
_KEYS = _DATASET_FOUND + "RETURN d IS NOT NULL, COLLECT { MATCH (d)-[:HAS_PARTITION]->(q:Partition) RETURN q.key }"
# the partitions of a dataset (listing: one level of upstream, for STALE)
_LIST = (_DATASET_FOUND + "RETURN d IS NOT NULL, COLLECT { MATCH (d)-[:HAS_PARTITION]->(p:Partition) "
         "WHERE $keys IS NULL OR p.key IN $keys WITH p ORDER BY p.key LIMIT $limit RETURN " + _facts("p", 0, 1) + " }")
# a run's written and read partitions
_RUN = ("OPTIONAL MATCH (r:Run {runId: $runId}) WITH r "
        "RETURN r IS NOT NULL, [(r)-[:OF_JOB]->(j:Job) | [coalesce(j.fullNamespace, j.namespace), "
        "coalesce(j.fullName, j.name)]][0], r.state, "
        "COLLECT { MATCH (r)-[:WROTE_PARTITION]->(v:PartitionVersion)<-[:HAS_VERSION]-(p:Partition) "
        "RETURN " + _facts("p", 0, 1) + " }, "
        "COLLECT { MATCH (r)-[:READ_PARTITION]->(p:Partition) RETURN " + _facts("p", 0, 1) + " }")


class UnknownDataset(LookupError):
    """The dataset asked about is not in the graph."""


def _read(driver: Driver, text: str, timeout: float, **params: Any) -> list[Any]:
    records, _, _ = driver.execute_query(Query(text, timeout=timeout), params, routing_=RoutingControl.READ)
    return list(records[0].values())


def ready(driver: Driver, namespace: str, name: str, key: str, timeout: float = 10.0
          ) -> tuple[bool, list[dict[str, Any]], list[PartitionStatus]]:
    """Is the partition ``key`` (``date=2025-12-24``) of the dataset ready? (ready, missing, the partitions asked).

    ``key`` names one partition exactly (keys in their order), or a set of pairs every matching partition must hold
    (``date=…`` of a dataset keyed by date and region: all its regions must be ready, and there must be one).
    Raises ``UnknownDataset``, ``ValueError`` for a malformed key."""
    wanted = parse_key(key)
    ns, nm = stored_key(namespace), stored_key(name)
    exact = stored_key(partition_key_text(wanted))
    found, rows = _read(driver, _READY, timeout, namespace=ns, name=nm, keys=[exact], maxVersions=MAX_VERSIONS)
    if not found:
        raise UnknownDataset(f"dataset {namespace} {name} is not in the graph")
    if not rows:  # not that exact key: the partitions holding every pair asked for
        _, keys = _read(driver, _KEYS, timeout, namespace=ns, name=nm)
        matching = [k for k in keys if _matches(k, wanted)][:MAX_PARTITIONS]
        if matching:
            rows = _read(driver, _READY, timeout, namespace=ns, name=nm, keys=matching, maxVersions=MAX_VERSIONS)[1]
    partitions = [_facts_of(row) for row in rows]
    ok, missing = readiness(partitions)
    if not partitions:
        missing = [{"role": "partition", "namespace": namespace, "name": name, "key": partition_key_text(wanted),
                    "state": None, "reason": "no such partition in the graph"}]
    return ok, missing, [partition_status(p) for p in partitions]


def dataset_partitions(driver: Driver, namespace: str, name: str, key: str | None = None, state: str | None = None,
                       limit: int = MAX_PARTITIONS, timeout: float = 10.0) -> list[PartitionStatus]:
    """The dataset's partitions (those holding every pair of ``key``; in ``state``), by key. Raises
    ``UnknownDataset``, ``ValueError`` for a malformed key or state."""
    if state is not None and state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, got {state!r}")
    ns, nm = stored_key(namespace), stored_key(name)
    keys = None
    if key is not None:
        wanted = parse_key(key)
        found, stored = _read(driver, _KEYS, timeout, namespace=ns, name=nm)
        if not found:
            raise UnknownDataset(f"dataset {namespace} {name} is not in the graph")
        keys = [k for k in stored if _matches(k, wanted)]
    # a state filter is decided here, after the states are computed: list them all, then cut
    found, rows = _read(driver, _LIST, timeout, namespace=ns, name=nm, keys=keys,
                        limit=MAX_PARTITIONS if state else limit, maxVersions=MAX_VERSIONS)
    if not found:
        raise UnknownDataset(f"dataset {namespace} {name} is not in the graph")
    statuses = [partition_status(_facts_of(row)) for row in rows]
    return [s for s in statuses if state is None or s.state == state][:limit]


@dataclass
class RunPartitions:
    found: bool
    job: tuple[str, str] | None = None
    state: str | None = None
    wrote: list[dict[str, Any]] = field(default_factory=list)  # each written partition's version by this run
    read: list[dict[str, Any]] = field(default_factory=list)  # each read partition's current state


def run_partitions(driver: Driver, run_id: str, timeout: float = 10.0) -> RunPartitions:
    """What run ``run_id`` wrote (its own version of each partition, with that version's state) and read (each
    partition as it is now)."""
    found, job, state, wrote, read = _read(driver, _RUN, timeout, runId=run_id, maxVersions=MAX_VERSIONS)
    if not found:
        return RunPartitions(False)
    written = []
    for row in wrote:
        status = partition_status(_facts_of(row))
        own = next((v for v in status.versions if v.version.run_id == run_id), None)
        written.append({"namespace": status.facts.namespace, "name": status.facts.name, "key": status.facts.key,
                        "partitionState": status.state, **(own.as_dict() if own else {})})
    reads = [partition_status(_facts_of(row)) for row in read]
    return RunPartitions(True, tuple(job) if job else None, state,
                         sorted(written, key=lambda w: (w["namespace"], w["name"], w["key"])),
                         sorted(({"namespace": s.facts.namespace, "name": s.facts.name, "key": s.facts.key,
                                  "state": s.state, "reason": s.reason} for s in reads),
                                key=lambda r: (r["namespace"], r["name"], r["key"])))
