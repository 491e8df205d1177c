"""Partitions of a dataset: the ``kafkaLineage_partition`` facet and where its keys come from (pure).

A partition is (dataset, ordered key map): ``s3://lake`` + ``events`` with ``date=2025-12-24/region=eu``. It never
becomes a dataset of its own: the table root is the dataset, the keys travel as the custom dataset facet
``kafkaLineage_partition`` (schema: ``schemas/facets/PartitionDatasetFacet.json``) in

- an input's ``inputFacets``: a partition the run read;
- an output's ``outputFacets``: a partition the run wrote;
- a DatasetEvent's ``facets``: with ``marker``, the partition's completion marker file exists.

``{"keys": [{"name": "date", "value": "2025-12-24"}, …], "source": "path" | "facet" | "hook",
"marker": "_SUCCESS", "requiredMarker": "_SUCCESS"}`` plus ``_producer``/``_schemaURL``; keys ordered, 1..32. A
DatasetEvent's facet may carry ``"stale": {"reason", "requestedAt", "upstream": {"namespace", "name", "planId"}}``
(``lineage backfill plan --mark-stale``): the partition counts STALE until a run started after ``requestedAt``
writes it.

Keys come from, in order of precedence: the facet itself (a producer's own), OpenLineage's ``subset`` facet when
its condition names exactly one partition (``PartitionSubsetCondition``; source ``facet``), and the dataset name
under a storage namespace (``split_partition``; source ``path``). No Iceberg or Delta facet carries partition
values (their snapshot ids are versions, not partitions), so none is read.

Path patterns (``LINEAGE_PARTITION_PATTERNS``, ``parse_patterns``): entries separated by ``;`` or newlines, tried in
order at the end of the name, again and again towards the root:

- ``hive``: ``key=value`` segments (key: letters, digits, ``_``; value: non-empty);
- ``date``: ``YYYY-MM-DD`` or ``YYYY/MM/DD`` → ``date=YYYY-MM-DD``, optionally followed by an ``HH`` hour directory
  → ``hour=HH``;
- a template of whole segments, ``/`` between them, with ``<key>`` (any segment text) or ``<key:regex>``
  placeholders and literal text: ``<date:\\d{8}>``, ``dt_<date:\\d{4}-\\d{2}-\\d{2}>``,
  ``region-<region>/<day:\\d{2}>``; a placeholder without a regex matches any segment, so give one a literal or
  a regex unless every directory at that depth is a partition;
- ``default`` = ``hive;date`` (also what an empty setting means), ``none``: no keys from paths.

A trailing data file after partition directories (``part-0001.parquet``, ``_SUCCESS``) is dropped; the partition is
the directory. A segment no pattern matches is never stripped, nor is the last segment of the root: a name made
only of partition segments is left alone rather than becoming empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "BACKFILL_FACET_KEY",
    "BACKFILL_SCHEMA_URL",
    "FACET_KEY",
    "MARKER_FILES",
    "MAX_KEYS",
    "MAX_NAME_LENGTH",
    "MAX_VALUE_LENGTH",
    "SCHEMA_URL",
    "SOURCES",
    "PartitionKeys",
    "PathPartition",
    "PathPatterns",
    "as_keys",
    "parse_key_text",
    "parse_patterns",
    "partition_facet",
    "partition_key_text",
    "partition_keys",
    "split_partition",
    "subset_keys",
]

FACET_KEY = "kafkaLineage_partition"
# The run facet a backfill run sends: {"window": {"from": "2025-12-01", "to": "2025-12-07"}, "planId": "bf-…"}
BACKFILL_FACET_KEY = "kafkaLineage_backfill"
BACKFILL_SCHEMA_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/BackfillRunFacet.json"
                       "#/$defs/BackfillRunFacet")
SCHEMA_URL = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/PartitionDatasetFacet.json"
              "#/$defs/PartitionDatasetFacet")
SOURCES = frozenset({"path", "facet", "hook"})
MAX_KEYS = 32
MAX_NAME_LENGTH = 128
MAX_VALUE_LENGTH = 1024
MAX_MARKER_LENGTH = 256
# File names that mean "this partition is complete" (Hadoop's output committer, Airflow/Oozie conventions).
MARKER_FILES = frozenset({"_SUCCESS", "_DONE", ".DONE"})

PartitionKeys = tuple[tuple[str, str], ...]  # ((name, value), …) in order

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- the facet -----------------------------------------------------------------------------------------------------
def _valid_key(name: Any, value: Any) -> bool:
    return (type(name) is str and type(value) is str and 0 < len(name) <= MAX_NAME_LENGTH
            and 0 < len(value) <= MAX_VALUE_LENGTH and "/" not in name and "=" not in name)


def as_keys(keys: Mapping[str, Any] | Iterable[tuple[str, Any]] | str) -> PartitionKeys:
    """Ordered keys from a mapping, (name, value) pairs or ``date=…/region=…`` text; ``ValueError`` when invalid
    (empty, over the limits, a repeated name). Scalar values become text (``2025`` → ``"2025"``)."""
    if isinstance(keys, str):
        return parse_key_text(keys)
    pairs = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
    out: list[tuple[str, str]] = []
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValueError(f"a partition key must be (name, value), got {pair!r}")
        name, value = pair
        if isinstance(value, bool) or value is None or not isinstance(value, str | int | float):
            raise ValueError(f"partition key {name!r}: a value must be text or a number, got {value!r}")
        out.append((name, str(value)))
    return _checked(tuple(out))


def _checked(keys: PartitionKeys) -> PartitionKeys:
    if not 0 < len(keys) <= MAX_KEYS:
        raise ValueError(f"a partition has 1 to {MAX_KEYS} keys, got {len(keys)}")
    for name, value in keys:
        if not _valid_key(name, value):
            raise ValueError(f"invalid partition key {name!r}={value!r} (name 1-{MAX_NAME_LENGTH} characters "
                             f"without '/' or '=', value 1-{MAX_VALUE_LENGTH} characters)")
    if len({name for name, _ in keys}) != len(keys):
        raise ValueError(f"repeated partition key name in {partition_key_text(keys)!r}")
    return keys


def parse_key_text(text: str) -> PartitionKeys:
    """``date=2025-12-24/region=eu`` → (("date", "2025-12-24"), ("region", "eu")); ``ValueError`` when malformed."""
    pairs = []
    for segment in text.strip().strip("/").split("/"):
        name, eq, value = segment.partition("=")
        if not eq:
            raise ValueError(f"partition text {text!r}: expected name=value segments separated by '/'")
        pairs.append((name.strip(), value.strip()))
    return _checked(tuple(pairs))


def partition_key_text(keys: Iterable[tuple[str, str]]) -> str:
    """The keys as ``date=2025-12-24/region=eu`` (the order they have)."""
    return "/".join(f"{name}={value}" for name, value in keys)


def partition_facet(keys: Mapping[str, Any] | Iterable[tuple[str, Any]] | str, source: str, marker: str | None = None,
                    required_marker: str | None = None, producer: str = "",
                    stale: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``kafkaLineage_partition`` facet as JSON-ready dict (``ValueError`` for invalid keys or source)."""
    if source not in SOURCES:
        raise ValueError(f"partition source must be one of {', '.join(sorted(SOURCES))}, got {source!r}")
    facet: dict[str, Any] = {
        "_producer": producer or "https://github.com/kafka-lineage/kafka-lineage/tree/main/schemas/partitions.py",
        "_schemaURL": SCHEMA_URL,
        "keys": [{"name": name, "value": value} for name, value in as_keys(keys)],
        "source": source,
    }
    for field, value in (("marker", marker), ("requiredMarker", required_marker)):
        if value is not None:
            if not isinstance(value, str) or not 0 < len(value) <= MAX_MARKER_LENGTH or "/" in value:
                raise ValueError(f"{field} must be a file name of 1-{MAX_MARKER_LENGTH} characters, got {value!r}")
            facet[field] = value
    if stale is not None:
        if not isinstance(stale.get("requestedAt"), str):
            raise ValueError(f"stale needs requestedAt (an ISO time), got {stale!r}")
        facet["stale"] = dict(stale)
    return facet


def partition_keys(facet: Any) -> PartitionKeys | None:
    """The keys of a ``kafkaLineage_partition`` facet, or None when it is not one a reader can trust (no keys,
    wrong types, over the limits, a repeated name)."""
    items = facet.get("keys") if isinstance(facet, dict) else None
    if not isinstance(items, list) or not 0 < len(items) <= MAX_KEYS:
        return None
    keys = []
    for item in items:
        if not isinstance(item, dict) or not _valid_key(item.get("name"), item.get("value")):
            return None
        keys.append((item["name"], item["value"]))
    return tuple(keys) if len({name for name, _ in keys}) == len(keys) else None


def subset_keys(facet: Any, namespace: str | None = None, name: str | None = None,
                patterns: PathPatterns | None = None) -> PartitionKeys | None:
    """Keys of OpenLineage's ``subset`` input/output facet when its condition names exactly one partition: a
    ``partition`` condition with text or number dimension values, or a ``location`` condition with one location
    under the dataset ``namespace``/``name`` whose extra directories are partition segments (``patterns``) — what
    the Spark integration sends when it names a write to ``table/date=…`` by the table root. None otherwise (several
    partitions are not one partition, and a filter on fields names none)."""
    if not isinstance(facet, dict):
        return None
    condition = facet.get("inputCondition", facet.get("outputCondition"))
    if isinstance(condition, dict) and condition.get("type") == "location":
        return _location_keys(condition.get("locations"), namespace, name,
                              DEFAULT_PATTERNS if patterns is None else patterns)
    if not isinstance(condition, dict) or condition.get("type") != "partition":
        return None
    partitions = condition.get("partitions")
    if not isinstance(partitions, list) or len(partitions) != 1 or not isinstance(partitions[0], dict):
        return None
    dimensions = partitions[0].get("dimensions")
    if not isinstance(dimensions, dict) or not dimensions:
        return None
    try:
        return as_keys(dimensions)
    except ValueError:
        return None


def _location_keys(locations: Any, namespace: str | None, name: str | None, patterns: PathPatterns
                   ) -> PartitionKeys | None:
    if not isinstance(locations, list) or len(locations) != 1 or type(locations[0]) is not str or not name:
        return None
    root, location = name.rstrip("/"), locations[0]
    if not root:
        return None
    # A location may carry the scheme and authority the namespace holds: the name starts at a segment boundary
    # (`s3://bucket/t/…` for `t`, not at the `t` of `bucket`) and is followed by a directory.
    at = location.find(root)
    while at >= 0 and not ((at == 0 or location[at - 1] == "/" or root.startswith("/"))
                           and location[at + len(root):].startswith("/")):
        at = location.find(root, at + 1)
    if at < 0:
        return None
    found = split_partition(namespace or "", location[at:], patterns)
    return found.keys if found is not None and found.root.rstrip("/") == root else None


# --- keys from paths -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Template:
    regex: re.Pattern[str]  # over `seg/seg/…`, one group per key
    width: int  # segments
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class PathPatterns:
    """Parsed ``LINEAGE_PARTITION_PATTERNS``. Empty ``entries``: paths give no keys. Compared and hashed by identity
    (it keys caches on every name, so hashing must cost nothing): parse once per process."""

    entries: tuple[str | _Template, ...] = ("hive", "date")
    text: str = "default"

    def __bool__(self) -> bool:
        return bool(self.entries)


DEFAULT_PATTERNS = PathPatterns()
NO_PATTERNS = PathPatterns((), "none")

_PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)(?::((?:[^<>\\]|\\.)+))?>")


def _template(text: str) -> _Template:
    segments = text.strip().strip("/").split("/")
    parts, names = [], []
    for segment in segments:
        pos, pattern = 0, []
        for match in _PLACEHOLDER.finditer(segment):
            pattern.append(re.escape(segment[pos:match.start()]))
            regex = match[2] or "[^/]+"
            try:
                compiled = re.compile(regex)
            except re.error as exc:
                raise ValueError(f"partition pattern {text!r}: bad regex {regex!r}: {exc}") from None
            if compiled.groups:
                raise ValueError(f"partition pattern {text!r}: use (?:…) instead of groups in {regex!r}")
            pattern.append(f"((?:{regex}))")
            names.append(match[1])
            pos = match.end()
        literal = segment[pos:]
        if "<" in literal or ">" in literal:
            raise ValueError(f"partition pattern {text!r}: malformed placeholder in {segment!r}")
        pattern.append(re.escape(literal))
        if not segment:
            raise ValueError(f"partition pattern {text!r}: empty segment")
        parts.append("".join(pattern))
    if not names:
        raise ValueError(f"partition pattern {text!r} has no <key> placeholder")
    if len(set(names)) != len(names):
        raise ValueError(f"partition pattern {text!r} repeats a key")
    return _Template(re.compile("/".join(parts)), len(segments), tuple(names))


def parse_patterns(text: str | None) -> PathPatterns:
    """``LINEAGE_PARTITION_PATTERNS`` → patterns (syntax in the module doc); ``ValueError`` names a bad entry."""
    entries: list[str | _Template] = []
    stripped = (text or "").strip()
    if stripped.lower() == "none":
        return NO_PATTERNS
    for raw in re.split(r"[;\n]", stripped or "default"):
        entry = raw.strip()
        if not entry:
            continue
        low = entry.lower()
        if low == "default":
            entries += ["hive", "date"]
        elif low in ("hive", "date"):
            entries.append(low)
        elif low == "none":
            raise ValueError("partition patterns: 'none' cannot be combined with other patterns")
        else:
            entries.append(_template(entry))
    return PathPatterns(tuple(dict.fromkeys(entries)), stripped or "default")


_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_HOUR = re.compile(r"\d{2}")
_YEAR = re.compile(r"\d{4}")
_TWO = re.compile(r"\d{2}")


def _date(year: str, month: str, day: str) -> str | None:
    return f"{year}-{month}-{day}" if 1 <= int(month) <= 12 and 1 <= int(day) <= 31 else None


def _match_date(segments: list[str], end: int) -> tuple[int, PartitionKeys] | None:
    """A date directory (``YYYY-MM-DD`` or ``YYYY/MM/DD``) ending at ``end``, or one followed by an ``HH`` hour."""
    for hour in (True, False):
        stop = end - 1 if hour else end
        if hour and (stop < 1 or not _HOUR.fullmatch(segments[stop]) or int(segments[stop]) > 23):
            continue
        extra = ((("hour", segments[stop]),) if hour else ())
        day = _DAY.fullmatch(segments[stop - 1]) if stop >= 1 else None
        if day and (value := _date(*day.groups())):
            return 1 + int(hour), (("date", value), *extra)
        if stop >= 3 and _YEAR.fullmatch(segments[stop - 3]) and _TWO.fullmatch(segments[stop - 2]) \
                and _TWO.fullmatch(segments[stop - 1]) and (value := _date(*segments[stop - 3:stop])):
            return 3 + int(hour), (("date", value), *extra)
    return None


def _match(entry: str | _Template, segments: list[str], end: int) -> tuple[int, PartitionKeys] | None:
    """(segments used, keys) of ``entry`` matching the segments that end at ``end``."""
    if entry == "hive":
        name, eq, value = segments[end - 1].partition("=")
        return (1, ((name, value),)) if eq and _NAME.fullmatch(name) and value else None
    if entry == "date":
        return _match_date(segments, end)
    assert isinstance(entry, _Template)
    if entry.width > end:
        return None
    match = entry.regex.fullmatch("/".join(segments[end - entry.width:end]))
    return (entry.width, tuple(zip(entry.names, match.groups(), strict=True))) if match else None


def _partition_tail(segments: list[str], end: int, patterns: PathPatterns) -> tuple[int, PartitionKeys]:
    """Where the root ends and the keys after it, matching patterns from ``end`` towards the start (0: the whole
    name is partition segments)."""
    keys: PartitionKeys = ()
    while end > 0:
        for entry in patterns.entries:
            found = _match(entry, segments, end)
            if found:
                width, new = found
                names = {name for name, _ in keys}
                if len(keys) + len(new) > MAX_KEYS or any(name in names or not _valid_key(name, value)
                                                          for name, value in new):
                    return -1, ()  # a repeated key (`t/date=1/date=2`) or too many: ambiguous, strip nothing
                keys, end = (*new, *keys), end - width
                break
        else:
            break
    return end, keys


def _looks_like_file(segment: str) -> bool:
    stem, dot, ext = segment.rpartition(".")
    return segment in MARKER_FILES or segment.startswith(("part-", "_")) or bool(dot and stem and ext)


# Namespaces whose names are paths (canonical forms and the spellings producers send before canonicalization).
_PATH_SCHEMES = frozenset({"file", "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "abfs", "abfss", "wasb", "wasbs"})


def _is_path_namespace(namespace: str) -> bool:
    scheme, sep, _ = namespace.partition("://")
    if not sep:
        return namespace.strip().lower() == "file"
    return scheme.strip().lower() in _PATH_SCHEMES


@dataclass(frozen=True, slots=True)
class PathPartition:
    """A name split into its table root and partition keys; ``file``: the data file name dropped after them."""

    root: str
    keys: PartitionKeys
    file: str | None = None

    @property
    def marker(self) -> str | None:
        """The dropped file when it is a completion marker (``_SUCCESS``)."""
        return self.file if self.file in MARKER_FILES else None


@lru_cache(maxsize=8192)
def split_partition(namespace: str, name: str, patterns: PathPatterns = DEFAULT_PATTERNS) -> PathPartition | None:
    """The table root and keys of a dataset name under a storage namespace, or None when it names no partition
    (no pattern matches its last directories, or the namespace is not a storage location)."""
    if not patterns or type(namespace) is not str or type(name) is not str or not _is_path_namespace(namespace):
        return None
    if "=" not in name and not any(c.isdigit() for c in name) and not any(isinstance(e, _Template)
                                                                         for e in patterns.entries):
        return None  # the common case, decided without splitting: no hive segment and no date
    leading = "/" if name.startswith("/") else ""
    body = name.rstrip("/")
    segments = body[len(leading):].split("/")
    if any(not s for s in segments):
        return None  # `a//b`: not a plain path, leave it
    end, keys = _partition_tail(segments, len(segments), patterns)
    file = None
    if not keys and len(segments) > 2 and _looks_like_file(segments[-1]):
        end, keys = _partition_tail(segments, len(segments) - 1, patterns)
        file = segments[-1]
    if not keys or end <= 0:
        return None  # no partition, nothing but partitions (no table root to name), or ambiguous
    return PathPartition(leading + "/".join(segments[:end]), keys, file)
