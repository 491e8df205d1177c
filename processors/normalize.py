"""Canonical dataset identities on an event: naming-spec forms and the user's alias map.

Every place an event names a dataset is rewritten: ``inputs``, ``outputs``, ``dataset``, the ``symlinks`` facet's
identifiers and the ``columnLineage`` facet's references (``fields.*.inputFields`` and the 1-2-0 dataset-level
``dataset`` list). Steps per identity, each recorded in a ``Rename``:

1. canonical form via ``schemas.naming.canonical_dataset`` (the hooks' own naming, so both stages agree);
2. the alias map: canonical namespace → the namespace the user wants (several broker lists → ``kafka://prod``);
3. partitions (``schemas.partitions``): a name under a storage namespace that ends in partition segments
   (``events/date=2025-12-24/region=eu``, date directories, the configured patterns) becomes its table root; a
   partition is never a dataset of its own.

A dataset of ``inputs``/``outputs`` (or a DatasetEvent's ``dataset``) whose partition is known gets the
``kafkaLineage_partition`` facet in its ``inputFacets``/``outputFacets`` (``facets``): the producer's own facet wins
and is kept as sent, else the keys of OpenLineage's ``subset`` facet when it names one partition (source
``facet``), else the keys from the name (source ``path``; a DatasetEvent naming a ``_SUCCESS``-style file under a
partition reports that marker). References in facets (column lineage, symlinks) only lose the partition segments.

A dataset keeps its own identity: a ``symlinks`` identifier (a table name of a path, a catalog name of a topic) is
another name of the same data, which the graph sink records as a ``SAME_AS`` relationship that every lineage query
follows (ARCHITECTURE 52), never a name the dataset is given instead; that would invent identities such as a table
path that does not exist.

Namespaces of no form the naming module knows are kept as they are: an event that passed validation always
normalizes. The result shares unchanged sub-objects with the input (which is never modified): treat both as
read-only. Normalizing a normalized event changes nothing.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kafka_lineage.schemas.naming import canonical_dataset
from kafka_lineage.schemas.openlineage import FacetCache
from kafka_lineage.schemas.partitions import (
    DEFAULT_PATTERNS,
    FACET_KEY,
    PartitionKeys,
    PathPartition,
    PathPatterns,
    partition_facet,
    split_partition,
    subset_keys,
)

__all__ = ["NormalizeCache", "Rename", "canonical_identity", "normalize_event", "parse_aliases"]

Identity = tuple[str, str]
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/processors/normalize.py"
# The facet map a dataset's partition goes in, per place of the event: what a run read, wrote; a DatasetEvent's.
_PARTITION_MAPS = {"inputs": "inputFacets", "outputs": "outputFacets", "dataset": "facets"}


@dataclass(frozen=True, slots=True)
class Rename:
    """One dataset identity the processor changed; ``rule`` lists the steps applied, joined by ``+``."""

    original_namespace: str
    original_name: str
    namespace: str
    name: str
    rule: str

    def as_record(self) -> dict[str, str]:
        """The ``DatasetRename`` record of ``normalized_event.avsc``."""
        return {"originalNamespace": self.original_namespace, "originalName": self.original_name,
                "namespace": self.namespace, "name": self.name, "rule": self.rule}


# --- one identity --------------------------------------------------------------------------------------------------
_PROTOCOL = re.compile(r"[A-Za-z_]+://")


def _has_upper_host(namespace: str) -> bool:
    """Whether the authority has upper-case letters (protocol prefixes such as ``SASL_SSL://`` and userinfo aside)."""
    _, sep, rest = namespace.partition("://")
    authority = re.split(r"[/?;#]", _PROTOCOL.sub("", rest), maxsplit=1)[0].rpartition("@")[2] if sep else ""
    return authority != authority.lower()
_HOST_PORT = re.compile(r"(?:^|://)([^/:@,;]+):(\d+)$")


def _rules(namespace: str, name: str, canonical: Identity) -> tuple[str, ...]:
    """Why ``(namespace, name)`` became ``canonical``: rule names for the audit trail (at least one if changed)."""
    low = namespace.strip().lower()
    scheme = low.partition(":")[0] if ":" in low else low
    rules: list[str] = []
    if scheme == "jdbc":
        rules.append("jdbc-url")
    elif scheme in ("s3a", "s3n"):
        rules.append("s3a-scheme")
    elif scheme == "gcs":
        rules.append("gcs-scheme")
    elif scheme in ("abfs", "wasb") or (scheme in ("abfss", "wasbs") and ".blob." in low):
        rules.append("azure-scheme")
    elif scheme == "file" or name[:5].lower() == "file:":
        rules.append("file-uri")
    elif scheme == "kafka" and ("," in low or low.count("://") > 1):
        rules.append("kafka-bootstrap-order")
    elif canonical[0].partition(":")[0] != scheme or any(c in low for c in "?;@") or low.count("/") > 2:
        rules.append("jdbc-url")  # a connection URL: other scheme spelling, database path, credentials, params
    elif canonical[1] != name and "://" in name:
        rules.append("name-uri")
    elif canonical[1] != name and scheme in ("s3", "gs", "hdfs", "abfss", "wasbs"):
        rules.append("namespace-path")
    if _has_upper_host(namespace) and canonical[0] != namespace.strip():
        rules.append("host-case")
    host_port = _HOST_PORT.search(canonical[0])
    if host_port and host_port[0].removeprefix("://") not in low and host_port[1] in low:
        rules.append("default-port")
    if not rules:
        rules.append("canonical-form")
    return tuple(rules)


@lru_cache(maxsize=8192)
def _canonical(namespace: str, name: str) -> tuple[str, str, tuple[str, ...]]:
    # Cached: a stream names the same few thousand datasets over and over, and parsing is the costly part.
    try:
        canonical = canonical_dataset(namespace, name)
    except (ValueError, TypeError):
        return namespace, name, ()  # unknown form: kept as it is
    if canonical == (namespace, name):
        return namespace, name, ()
    return canonical[0], canonical[1], _rules(namespace, name, canonical)


@lru_cache(maxsize=8192)
def _resolved(namespace: str, name: str, patterns: PathPatterns) -> tuple[str, str, tuple[str, ...],
                                                                         PathPartition | None]:
    # Canonical form and partition split in one cached step (one lookup per identity, as before partitions). The
    # split reads the canonical namespace before any alias: an alias may name a storage bucket `lake`.
    ns, nm, rules = _canonical(namespace, name)
    return ns, nm, rules, split_partition(ns, nm, patterns) if patterns else None


def canonical_identity(namespace: str, name: str, aliases: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(namespace, name, rule) after canonical form and alias map; rule is ``""`` when nothing changed."""
    if not isinstance(namespace, str) or not isinstance(name, str):
        return namespace, name, ""
    if aliases and namespace in aliases.values():
        return namespace, name, ""  # already aliased (`kafka://prod`): the user's name is final, keep it idempotent
    ns, nm, rules = _canonical(namespace, name)
    if aliases:
        alias = aliases.get(ns)
        if alias is not None and alias != ns:
            ns, rules = alias, (*rules, "alias")
    return ns, nm, "+".join(rules)


# --- the event -----------------------------------------------------------------------------------------------------
_LOCATION_SCHEMES = frozenset({"file", "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "abfs", "abfss", "wasb", "wasbs"})


def _warehouse_table(ident: Any) -> bool:
    """A ``symlinks`` identifier of type TABLE whose namespace is a storage location (kept as sent)."""
    if not isinstance(ident, dict) or str(ident.get("type", "")).upper() != "TABLE":
        return False
    namespace = ident.get("namespace")
    return isinstance(namespace, str) and namespace.partition(":")[0].strip().lower() in _LOCATION_SCHEMES


@lru_cache(maxsize=4096)
def _partition_facet(keys: PartitionKeys, source: str, marker: str | None) -> dict[str, Any]:
    # One object per partition: plans and events share it (read-only), so its JSON is computed once.
    return partition_facet(keys, source, marker, producer=PRODUCER)


class _Normalizer:
    """State of one ``normalize_event`` call: the renames found so far."""

    def __init__(self, aliases: Mapping[str, str] | None, patterns: PathPatterns = DEFAULT_PATTERNS) -> None:
        self.aliases = aliases
        self.patterns = patterns
        self.renames: dict[tuple[str, str, str, str], Rename] = {}

    def identity(self, obj: Mapping[str, Any]) -> Identity:
        """The final identity of a dataset or a reference to one (renames recorded)."""
        return self.split(obj)[0]

    def split(self, obj: Mapping[str, Any]) -> tuple[Identity, PathPartition | None]:
        """The final identity and, when the name carried partition segments, what they were (``canonical_identity``
        then the partition split)."""
        original = (obj.get("namespace"), obj.get("name"))
        if type(original[0]) is not str or type(original[1]) is not str:
            return original, None  # type: ignore[return-value]
        aliases = self.aliases
        if aliases and original[0] in aliases.values():  # already aliased: only the partition may still split
            ns, nm, rules = original[0], original[1], ()
            found = split_partition(ns, nm, self.patterns) if self.patterns else None
        else:
            ns, nm, rules, found = _resolved(original[0], original[1], self.patterns)
            if aliases and (alias := aliases.get(ns)) is not None and alias != ns:
                ns, rules = alias, (*rules, "alias")
        if found is not None:
            nm, rules = found.root, (*rules, "partition")
        if (ns, nm) != original and (key := (*original, ns, nm)) not in self.renames:
            self.renames[key] = Rename(original[0], original[1], ns, nm, "+".join(rules))
        return (ns, nm), found

    def ref(self, obj: Any) -> Any:
        """A facet's reference to a dataset (a dict with namespace and name) → the same or a rewritten copy."""
        if not isinstance(obj, dict) or not all(isinstance(obj.get(key), str) for key in ("namespace", "name")):
            return obj
        final = self.identity(obj)
        return obj if final == (obj["namespace"], obj["name"]) else {**obj, "namespace": final[0], "name": final[1]}

    def refs(self, items: Any) -> Any:
        if not isinstance(items, list):
            return items
        new = [self.ref(item) for item in items]
        return new if any(a is not b for a, b in zip(new, items, strict=True)) else items

    def column_lineage(self, facet: Any) -> Any:
        if not isinstance(facet, dict):
            return facet
        changed: dict[str, Any] = {}
        fields = facet.get("fields")
        if isinstance(fields, dict):
            new_fields = {}
            for column, spec in fields.items():
                if isinstance(spec, dict) and "inputFields" in spec:
                    refs = self.refs(spec["inputFields"])
                    spec = spec if refs is spec["inputFields"] else {**spec, "inputFields": refs}
                new_fields[column] = spec
            if any(new_fields[k] is not fields[k] for k in fields):
                changed["fields"] = new_fields
        if "dataset" in facet:
            refs = self.refs(facet["dataset"])
            if refs is not facet["dataset"]:
                changed["dataset"] = refs
        return {**facet, **changed} if changed else facet

    def symlinks(self, facet: Any) -> Any:
        # Identifiers are other names of the dataset itself: canonical form and alias, as every identity, except a
        # table named under its warehouse location (Spark: ``file:/tmp/delta`` + ``default.tbl``), which is a table
        # name, not a path inside that location.
        identifiers = facet.get("identifiers") if isinstance(facet, dict) else None
        if not isinstance(identifiers, list):
            return facet
        new = [ident if _warehouse_table(ident) else self.ref(ident) for ident in identifiers]
        if all(a is b for a, b in zip(new, identifiers, strict=True)):
            return facet
        return {**facet, "identifiers": new}

    def changes(self, dataset: Any, final: Identity | None, found: PathPartition | None = None,
                place: str = "dataset") -> _Changes | None:
        """Pass 2 for a dataset: its final identity and rewritten or added facets (None: not a dataset, left as it
        is); ``found``: the partition its name carried, ``place``: ``inputs``, ``outputs`` or ``dataset``."""
        if not isinstance(dataset, dict) or final is None:
            return None
        changed: dict[str, dict[str, Any]] = {}
        facets = dataset.get("facets")
        if isinstance(facets, dict):
            symlinks, lineage = facets.get("symlinks"), facets.get("columnLineage")
            if symlinks is not None and (new := self.symlinks(symlinks)) is not symlinks:
                changed.setdefault("facets", {})["symlinks"] = new
            if lineage is not None and (new := self.column_lineage(lineage)) is not lineage:
                changed.setdefault("facets", {})["columnLineage"] = new
        map_key = _PARTITION_MAPS[place]
        if (partition := _partition(dataset.get(map_key), found, map_key, final, self.patterns)) is not None:
            changed.setdefault(map_key, {})[FACET_KEY] = partition
        return final, changed


def _partition(io: Any, found: PathPartition | None, map_key: str, final: Identity,
               patterns: PathPatterns) -> dict[str, Any] | None:
    """The partition facet to add to a dataset's ``map_key`` facets (None: none, or the producer sent its own)."""
    if isinstance(io, dict) and FACET_KEY in io:
        return None  # the producer's own facet wins, as sent
    if map_key != "facets" and isinstance(io, dict) and (
            keys := subset_keys(io.get("subset"), *final, patterns)) is not None:
        return _partition_facet(keys, "facet", None)
    if found is None:
        return None
    return _partition_facet(found.keys, "path", found.marker if map_key == "facets" else None)


# A dataset's final identity, and per facet map (``facets``, ``inputFacets``, ``outputFacets``) the facets rewritten
# or added.
_Changes = tuple[Identity, dict[str, dict[str, Any]]]


def _merged(current: Any, entries: dict[str, Any]) -> dict[str, Any]:
    """A facet map with ``entries`` rewritten or added."""
    return {**current, **entries} if isinstance(current, dict) else dict(entries)


def _changed(dataset: Any, changes: _Changes | None,
             merged: Callable[[Any, dict[str, Any]], dict[str, Any]] = _merged) -> Any:
    """The dataset with its changes applied: a new object, or the same one if nothing changed."""
    if changes is None:
        return dataset
    (ns, nm), changed = changes
    out: dict[str, Any] | None = None
    if (dataset.get("namespace"), dataset.get("name")) != (ns, nm):
        out = {**dataset, "namespace": ns, "name": nm}
    if changed:
        out = out if out is not None else dict(dataset)
        for map_key, entries in changed.items():
            out[map_key] = merged(dataset.get(map_key), entries)
    return dataset if out is None else out


@dataclass(frozen=True, slots=True)
class _Plan:
    """What normalizing an event changes: each dataset's changes (per list and position, and the single dataset's)
    and the renames, in the order they were found."""

    lists: dict[str, list[_Changes | None]]
    single: _Changes | None
    renames: tuple[Rename, ...]


def _plan(event: dict[str, Any], aliases: Mapping[str, str] | None, patterns: PathPatterns = DEFAULT_PATTERNS
          ) -> _Plan:
    norm = _Normalizer(aliases, patterns)
    lists = {key: event[key] for key in ("inputs", "outputs") if isinstance(event.get(key), list)}
    single = event.get("dataset") if isinstance(event.get("dataset"), dict) else None
    # Pass 1: every dataset's identity first, so column lineage references reuse the renames found for them.
    identities: dict[int, tuple[Identity, PathPartition | None]] = {}
    for item in _datasets(lists.values(), single):
        identities[id(item)] = norm.split(item)
    changes = {key: [norm.changes(item, *identities.get(id(item), (None, None)), key) for item in items]
               for key, items in lists.items()}
    single_changes = norm.changes(single, *identities.get(id(single), (None, None))) if single is not None else None
    return _Plan(changes, single_changes, tuple(norm.renames.values()))


def _apply(event: dict[str, Any], plan: _Plan, changed: Callable[[Any, _Changes | None], Any] = _changed
           ) -> dict[str, Any]:
    out = dict(event)
    for key, changes in plan.lists.items():
        items = event[key]
        new = [changed(item, change) for item, change in zip(items, changes, strict=True)]
        if any(a is not b for a, b in zip(new, items, strict=True)):
            out[key] = new
    if plan.single is not None:
        out["dataset"] = changed(event["dataset"], plan.single)
    return out


def normalize_event(event: dict[str, Any], aliases: Mapping[str, str] | None = None,
                    patterns: PathPatterns = DEFAULT_PATTERNS) -> tuple[dict[str, Any], list[Rename]]:
    """A new event with canonical dataset identities, and the renames applied (one per identity changed).

    ``aliases`` maps canonical namespaces to the namespace to use instead (``parse_aliases`` builds it);
    ``patterns``: the partition path patterns (``schemas.partitions.parse_patterns``). The input is not modified;
    unchanged parts are shared with it.
    """
    if not isinstance(event, dict):
        return event, []
    plan = _plan(event, aliases, patterns)
    return _apply(event, plan), list(plan.renames)


def _datasets(lists: Iterable[list[Any]], single: dict[str, Any] | None) -> Iterable[dict[str, Any]]:
    for items in lists:
        yield from (item for item in items if isinstance(item, dict))
    if single is not None:
        yield single


class NormalizeCache:
    """``normalize_event`` for a stream: each combination of dataset identities is worked out once.

    What normalizing changes depends only on the datasets' namespaces and names, their ``symlinks`` and
    ``columnLineage`` facets, whether their input/output facets hold a partition facet and their ``subset`` facet,
    the alias map and the partition patterns. When those facets are objects of ``facets`` (decoded once per
    distinct text and shared by every event carrying it), a combination seen before is answered from memory, and
    its rewritten facets and datasets are the same objects again, so their JSON and records are computed once too.
    Exact: an entry keeps the facet objects it is keyed on (by id) alive, so no other object can take their ids;
    facets are read-only. Bounded to ``maxsize`` combinations, least recently used first out.
    """

    def __init__(self, facets: FacetCache, aliases: Mapping[str, str] | None = None, maxsize: int = 512,
                 patterns: PathPatterns = DEFAULT_PATTERNS) -> None:
        self.facets = facets
        self.aliases = aliases
        self.patterns = patterns
        self.maxsize = maxsize
        self._plans: OrderedDict[tuple[Any, ...], tuple[_Plan, list[Any]]] = OrderedDict()  # key → (plan, its ids)

    def __len__(self) -> int:
        return len(self._plans)

    def normalize(self, event: dict[str, Any]) -> tuple[dict[str, Any], list[Rename]]:
        """Exactly ``normalize_event(event, aliases, patterns)``."""
        kept: list[Any] = []
        key = self._key(event, kept) if isinstance(event, dict) else None
        if key is None:
            return normalize_event(event, self.aliases, self.patterns)
        hit = self._plans.get(key)
        if hit is None:
            plan = _plan(event, self.aliases, self.patterns)
            for changes in (*(c for items in plan.lists.values() for c in items), plan.single):
                for entries in changes[1].values() if changes is not None else ():
                    for facet in entries.values():
                        self.facets.adopt(facet)  # a rewritten facet recurs with its plan: cache its JSON as well
            self._plans[key] = (plan, kept)
            if len(self._plans) > self.maxsize:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
            plan = hit[0]
        return _apply(event, plan, self._changed), list(plan.renames)

    def _changed(self, dataset: Any, changes: _Changes | None) -> Any:
        """A dataset of the cache changed as before: the same new object (remembered with the dataset, and holding
        on to the changes it was made with, so that their id stays theirs). A dataset not in the cache (an output
        with its run's statistics) is a new object, but its rewritten facet map, when that map is in the cache, is
        the same one again: what is derived from a map (its record, the graph's rows) is computed once."""
        if changes is None:
            return dataset
        if not self.facets.holds(dataset):
            return _changed(dataset, changes, self._merged)
        done = self.facets.derived(dataset, f"normalized:{id(changes)}", lambda _: (changes, self._adopted(
            _changed(dataset, changes, self._merged), dataset)))
        return done[1] if done[0] is changes else _changed(dataset, changes)

    def _merged(self, current: Any, entries: dict[str, Any]) -> dict[str, Any]:
        if not self.facets.holds(current):
            return _merged(current, entries)
        done = self.facets.derived(current, f"merged:{id(entries)}", lambda _: (entries, self._adopted(
            _merged(current, entries), current)))
        return done[1] if done[0] is entries else _merged(current, entries)

    def _adopted(self, new: Any, dataset: Any) -> Any:
        if new is not dataset:
            self.facets.adopt(new, self.facets.size(dataset))  # its record and canonical JSON: computed once
        return new

    def _key(self, event: dict[str, Any], kept: list[Any]) -> tuple[Any, ...] | None:
        """Everything ``_plan`` reads of the event, hashable; None when some of it is not (then no memory is used)."""
        parts: list[Any] = []
        for key in ("inputs", "outputs"):
            items = event.get(key)
            if not isinstance(items, list):
                parts.append(None)
                continue
            part = []
            for item in items:
                item_key = self._dataset_key(item, kept, _PARTITION_MAPS[key]) if isinstance(item, dict) else ()
                if item_key is None:
                    return None
                part.append(item_key)
            parts.append(tuple(part))
        single = event.get("dataset")
        single_key = self._dataset_key(single, kept, "facets") if isinstance(single, dict) else ()  # (): left as is
        if single_key is None:
            return None
        parts.append(single_key)
        return tuple(parts)

    def _dataset_key(self, dataset: dict[str, Any], kept: list[Any], map_key: str) -> tuple[Any, ...] | None:
        namespace, name, facets = dataset.get("namespace"), dataset.get("name"), dataset.get("facets")
        if type(namespace) is not str or type(name) is not str:
            return None
        # The partition facet's presence (its content is kept as sent, not read) and the subset facet (read).
        partition: Any = None
        io = dataset.get(map_key)
        if io:
            if type(io) is not dict:
                return None
            if FACET_KEY in io:
                partition = FACET_KEY
            elif map_key != "facets" and (subset := io.get("subset")) is not None:
                if not self.facets.holds(subset):
                    return None
                kept.append(subset)
                partition = id(subset)
        if not isinstance(facets, dict):
            return namespace, name, partition
        ids: list[Any] = [partition]
        for facet in (facets.get("symlinks"), facets.get("columnLineage")):
            if facet is None:
                ids.append(None)
            elif self.facets.holds(facet):
                ids.append(id(facet))
                kept.append(facet)
            else:
                return None
        return namespace, name, *ids


# --- configuration -------------------------------------------------------------------------------------------------
# A new source starts at `scheme://` or `scheme:scheme` (jdbc:…); `b2:9092` continues a Kafka broker list.
_SOURCE_START = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*:(?://|[A-Za-z])|(?:file|bigquery)\s*(?:,|$))")


def parse_aliases(text: str) -> dict[str, str]:
    """``src[,src…]=target; …`` (``;`` or newlines between entries) → {canonical source namespace: target}.

    Sources are namespaces in any form the naming module knows (``kafka://b2:9092,b1:9092`` is one source: a broker
    list continues until the next ``scheme://``); they are stored canonical, which is what ``normalize_event`` looks
    up. Targets are used verbatim. Aliases apply once (no chains). ``ValueError`` names the offending entry.
    """
    if not isinstance(text, str):
        raise TypeError(f"aliases must be a string, not {type(text).__name__}")
    aliases: dict[str, str] = {}
    for raw in re.split(r"[;\n]", text):
        entry = raw.strip()
        if not entry:
            continue
        sources_text, eq, target = entry.rpartition("=")
        target = target.strip()
        if not eq or not sources_text.strip() or not target:
            raise ValueError(f"alias entry {entry!r}: expected source[,source…]=target")
        for source in _SOURCE_START.split(sources_text):
            source = source.strip()
            if not source:
                raise ValueError(f"alias entry {entry!r}: empty source namespace")
            canonical, _, _ = canonical_identity(source, "")
            if canonical == target:
                continue
            if aliases.get(canonical, target) != target:
                raise ValueError(f"alias entry {entry!r}: {canonical} is already aliased to {aliases[canonical]}")
            aliases[canonical] = target
    chained = sorted(set(aliases) & set(aliases.values()))
    if chained:
        raise ValueError(f"alias targets must not be aliased themselves: {', '.join(chained)}")
    return aliases
