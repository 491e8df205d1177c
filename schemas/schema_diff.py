"""Schema drift of a dataset: compare ``schema`` facets, classify each field change, and version schemas.

What counts as drift is what a consumer of the data would notice: fields added, removed, retyped, or changing
nullability, nested ``fields`` included (``address.zip``). Field order and descriptions are not drift, and neither are
spellings of one type (``INT``/``integer``/``int32``, ``LONG``/``bigint``, ``VARCHAR``/``STRING``/``text``, any
case). ``schema_version`` hashes exactly what ``diff_schemas`` compares, so two schemas have the same version if and
only if they have no differences.

Severity: REMOVED is BREAKING, ADDED is COMPATIBLE (readers ignore new fields); a type change is COMPATIBLE only
for a safe widening (wider integer, float→double, small integer→double, decimal with room for every old value,
longer varchar or unbounded string, date→timestamp, the same inside array/map), else BREAKING. The schema facet has
no nullability field, so it is read from the markers producers put into the type: ``NOT NULL``/``NULL`` suffixes,
ClickHouse's ``Nullable(T)``, GraphQL's trailing ``!`` (and a non-standard boolean ``nullable`` key, if present). An
unmarked type counts as nullable (the SQL default), except next to a ``Nullable(T)`` (ClickHouse, where unmarked
means required). nullable→required is BREAKING, required→nullable COMPATIBLE.

Which versions follow which is a matter of event time, not of arrival (``schemas/schema_history``); ``drift_between``
diffs two of them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kafka_lineage.schemas.openlineage import FacetCache

__all__ = [
    "DriftFinding",
    "FieldChange",
    "diff_schemas",
    "drift_between",
    "overall_severity",
    "partial_schema",
    "schema_fields",
    "schema_version",
    "written_schemas",
]

BREAKING, COMPATIBLE, UNKNOWN = "BREAKING", "COMPATIBLE", "UNKNOWN"
ADDED, REMOVED, TYPE_CHANGED, NULLABILITY_CHANGED, OTHER = (
    "ADDED", "REMOVED", "TYPE_CHANGED", "NULLABILITY_CHANGED", "OTHER")


@dataclass(frozen=True, slots=True)
class FieldChange:
    path: str  # dotted: address.zip
    kind: str  # ADDED | REMOVED | TYPE_CHANGED | NULLABILITY_CHANGED | OTHER
    old_type: str | None
    new_type: str | None
    severity: str  # BREAKING | COMPATIBLE | UNKNOWN

    def as_record(self) -> dict[str, Any]:
        """The ``FieldChange`` record of ``normalized_event.avsc`` (and of the drift alert)."""
        return {"path": self.path, "kind": self.kind, "oldType": self.old_type, "newType": self.new_type,
                "severity": self.severity}


def overall_severity(changes: Iterable[FieldChange]) -> str:
    """The worst severity: BREAKING > UNKNOWN > COMPATIBLE (COMPATIBLE for no changes)."""
    severities = {change.severity for change in changes}
    return BREAKING if BREAKING in severities else UNKNOWN if UNKNOWN in severities else COMPATIBLE


# --- types ---------------------------------------------------------------------------------------------------------
_ALIASES = {
    **dict.fromkeys(("tinyint", "byte", "int1"), "tinyint"),
    **dict.fromkeys(("smallint", "short", "int2", "int16"), "smallint"),
    **dict.fromkeys(("int", "integer", "int4", "int32"), "int"),
    # `int8` is read as Postgres's 8-byte integer (ClickHouse's Int8 is a byte; type names are case-insensitive)
    **dict.fromkeys(("bigint", "long", "int8", "int64"), "bigint"),
    **dict.fromkeys(("hugeint", "int128"), "hugeint"),
    **dict.fromkeys(("float", "real", "float4", "float32"), "float"),
    **dict.fromkeys(("double", "double precision", "float8", "float64"), "double"),
    **dict.fromkeys(("decimal", "numeric", "number", "dec"), "decimal"),
    **dict.fromkeys(("string", "text", "str", "utf8", "clob", "longtext", "mediumtext"), "string"),
    **dict.fromkeys(("varchar", "character varying", "nvarchar", "varchar2", "nvarchar2"), "varchar"),
    **dict.fromkeys(("char", "character", "nchar", "bpchar", "fixedstring"), "char"),
    **dict.fromkeys(("boolean", "bool", "bit"), "boolean"),
    **dict.fromkeys(("date", "date32"), "date"),
    **dict.fromkeys(("timestamp", "datetime", "datetime2", "datetime64", "timestamp without time zone",
                     "timestamp_ntz"), "timestamp"),
    **dict.fromkeys(("timestamptz", "timestamp with time zone", "timestamp_ltz", "timestamp_tz"), "timestamptz"),
    **dict.fromkeys(("binary", "bytes", "bytea", "varbinary", "blob"), "binary"),
    **dict.fromkeys(("struct", "record", "row"), "struct"),
    **dict.fromkeys(("array", "list"), "array"),
}
_INT_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "hugeint": 5}
_INT_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19, "hugeint": 39}
_FLOAT_EXACT_INTS = {"float": 2, "double": 3}  # the widest integer rank each float type holds exactly

_SPACES = re.compile(r"\s+")
_PUNCT_SPACES = re.compile(r"\s*([(),<>:])\s*")
_NULLABLE_WRAPPER = re.compile(r"(?i)nullable\((.*)\)")
_NOT_NULL = re.compile(r"(?i)\s+not\s+null$")
_NULL = re.compile(r"(?i)\s+null$")
_CALL = re.compile(r"([a-z_][a-z0-9_ ]*?)\s*(?:\((.*)\)|<(.*)>)?")


@dataclass(frozen=True, slots=True)
class _Type:
    base: str  # canonical name (bigint, decimal, varchar, array, …) or the unknown type's own lower-case text
    args: tuple[Any, ...]  # ints (precision, scale, length) or nested _Type (array/map)
    text: str  # canonical spelling: what the version hash and equality use
    nullable: bool | None  # None: unmarked


def _split_top(text: str) -> list[str]:
    """``a,map<b,c>,d`` → ['a', 'map<b,c>', 'd']: commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


@lru_cache(maxsize=4096)
def _parse_type(raw: str) -> _Type:
    text = _SPACES.sub(" ", raw).strip()
    nullable: bool | None = None
    wrapper = _NULLABLE_WRAPPER.fullmatch(text)
    if wrapper:
        text, nullable = wrapper[1].strip(), True
    elif _NOT_NULL.search(text):
        text, nullable = _NOT_NULL.sub("", text), False
    elif _NULL.search(text):
        text, nullable = _NULL.sub("", text), True
    elif text.endswith("!"):
        text, nullable = text[:-1].rstrip(), False
    low = _PUNCT_SPACES.sub(r"\1", text.lower())
    call = _CALL.fullmatch(low)
    if not call:
        return _Type(low, (), low, nullable)
    base = _ALIASES.get(call[1], call[1])
    params, generic = call[2], call[3]
    args: tuple[Any, ...] = ()
    if generic is not None and base in ("array", "map"):
        args = tuple(_parse_type(part) for part in _split_top(generic))
        if len(args) != (1 if base == "array" else 2):
            return _Type(low, (), low, nullable)
        inner = ",".join(arg.text for arg in args)
        return _Type(base, args, f"{base}<{inner}>", nullable)
    if generic is not None:  # struct<a:int,…> and other inline definitions: compared as written
        return _Type(low, (), low, nullable)
    if params is not None:
        values = [p.strip() for p in params.split(",")]
        if base in ("varchar", "string") and values == ["max"]:
            return _Type("string", (), "string", nullable)
        if not all(v.isdigit() for v in values):
            return _Type(low, (), low, nullable)
        args = tuple(int(v) for v in values)
        if base == "decimal" and len(args) == 1:
            args = (args[0], 0)
        if base in ("decimal", "varchar", "char", "timestamp", "timestamptz", "datetime64"):
            return _Type(base, args, f"{base}({','.join(map(str, args))})", nullable)
        return _Type(low, (), low, nullable)
    if base == "varchar":  # no length: unbounded, the same as string
        base = "string"
    return _Type(base, (), base, nullable)


def _type_of(field: dict[str, Any]) -> _Type:
    raw = field.get("type")
    parsed = _parse_type(raw) if isinstance(raw, str) else _Type("", (), "", None)
    explicit = field.get("nullable")
    if isinstance(explicit, bool) and explicit is not parsed.nullable:
        parsed = _Type(parsed.base, parsed.args, parsed.text, explicit)
    return parsed


def _widens(old: _Type, new: _Type) -> bool:
    """Whether every value of ``old`` is a value of ``new`` (a reader of the new type can read old data)."""
    if old.text == new.text:
        return True
    o, n = old.base, new.base
    if o in _INT_RANK:
        if n in _INT_RANK:
            return _INT_RANK[o] <= _INT_RANK[n]
        if n in _FLOAT_EXACT_INTS:
            return _INT_RANK[o] <= _FLOAT_EXACT_INTS[n]
        if n == "decimal" and new.args:
            precision, scale = new.args[:2]
            return precision - scale >= _INT_DIGITS[o]
        return False
    if o == "float":
        return n == "double"
    if o == "decimal" and n == "decimal" and len(old.args) == 2 and len(new.args) == 2:
        (p, s), (p2, s2) = old.args, new.args
        return s2 >= s and p2 - s2 >= p - s
    if o in ("varchar", "char") and old.args:
        return n == "string" or (n in ("varchar", "char") and bool(new.args) and new.args[0] >= old.args[0]
                                 and (n == "varchar" or o == "char"))
    if o == "date":
        return n in ("timestamp", "timestamptz", "datetime64")
    if o in ("timestamp", "timestamptz") and n == o:
        return not new.args or (bool(old.args) and new.args[0] >= old.args[0])
    if o == n == "array":
        return _widens(old.args[0], new.args[0])
    if o == n == "map":
        return old.args[0].text == new.args[0].text and _widens(old.args[1], new.args[1])
    return False


def _nullability_severity(old: bool | None, new: bool | None) -> str | None:
    """Severity of a nullability change, None if there is none. Unmarked reads as the opposite of a Nullable(T)."""
    if old == new:
        return None
    if old is None:
        old = new is not True  # unmarked next to Nullable(T): required (ClickHouse); otherwise nullable (SQL)
    if new is None:
        new = old is not True
    if old == new:
        return None
    return BREAKING if old and not new else COMPATIBLE


# --- fields --------------------------------------------------------------------------------------------------------
def schema_fields(event_dataset: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The dataset's ``schema`` facet fields, or None when it has none.

    An empty field list is treated as no schema: integrations send it when they could not infer one, and reading it
    as "every field removed" would raise false BREAKING alerts.
    """
    if not isinstance(event_dataset, dict):
        return None
    facets = event_dataset.get("facets")
    schema = facets.get("schema") if isinstance(facets, dict) else None
    fields = schema.get("fields") if isinstance(schema, dict) else None
    return fields if isinstance(fields, list) and fields else None


def _by_name(fields: Any) -> dict[str, dict[str, Any]]:
    """Named fields by name; later duplicates and nameless or malformed entries are ignored."""
    named: dict[str, dict[str, Any]] = {}
    if isinstance(fields, list):
        for field in fields:
            if isinstance(field, dict) and isinstance(field.get("name"), str):
                named.setdefault(field["name"], field)
    return named


def _canonical(fields: Any) -> list[list[Any]]:
    out = []
    for name, field in sorted(_by_name(fields).items()):
        kind = _type_of(field)
        out.append([name, kind.text, kind.nullable, _canonical(field.get("fields"))])
    return out


def schema_version(fields: Sequence[dict[str, Any]] | None) -> str:
    """Hex SHA-256 of the schema as ``diff_schemas`` sees it: order, descriptions and type spellings left out."""
    canonical = json.dumps(_canonical(fields or []), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


# Producers whose schema facet may list only some columns: dbt-ol builds it from catalog.json when the project has
# one (every column, typed) and otherwise from the documented columns of the manifest (untyped unless documented
# with a data_type). An untyped field in such a facet marks it partial (ARCHITECTURE 86).
PARTIAL_SCHEMA_PRODUCERS = ("/integration/dbt",)


def partial_schema(event: dict[str, Any], fields: Sequence[Any]) -> bool:
    """Whether ``fields`` (a schema facet of one of ``event``'s datasets) may describe only some of the columns: it
    comes from a producer of ``PARTIAL_SCHEMA_PRODUCERS`` and a field has no type. A partial facet describes columns;
    it never adds or removes one from a dataset's schema history (no drift)."""
    producer = event.get("producer")
    if not isinstance(producer, str) or not any(marker in producer for marker in PARTIAL_SCHEMA_PRODUCERS):
        return False
    return any(not isinstance(field, dict) or not isinstance(field.get("type"), str) or not field["type"].strip()
               for field in fields)


def written_schemas(event: dict[str, Any], facets: FacetCache | None = None
                    ) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], str]]:
    """(dataset, fields, version) of each dataset the event writes (its outputs, or a dataset event's dataset) with a
    complete schema (``partial_schema`` facets are left out); the version is computed once per facet object
    ``facets`` caches (every run of a job repeats it)."""
    datasets = list(event.get("outputs") or [])
    if isinstance(event.get("dataset"), dict):
        datasets.append(event["dataset"])
    for dataset in datasets:
        fields = schema_fields(dataset) if isinstance(dataset, dict) else None
        if not fields or partial_schema(event, fields):
            continue
        schema = dataset["facets"]["schema"]
        version = facets.derived(schema, "schema-version", lambda s: schema_version(s["fields"])) \
            if facets is not None else schema_version(fields)
        yield dataset, fields, version


def _diff(old: Any, new: Any, prefix: str, out: list[FieldChange]) -> None:
    old_fields, new_fields = _by_name(old), _by_name(new)
    for name, field in old_fields.items():
        path = prefix + name
        if name not in new_fields:
            out.append(FieldChange(path, REMOVED, _raw_type(field), None, BREAKING))
            _diff(field.get("fields"), None, path + ".", out)
            continue
        other = new_fields[name]
        old_type, new_type = _type_of(field), _type_of(other)
        if old_type.text != new_type.text:
            severity = COMPATIBLE if _widens(old_type, new_type) else BREAKING
            out.append(FieldChange(path, TYPE_CHANGED, _raw_type(field), _raw_type(other), severity))
        nullability = _nullability_severity(old_type.nullable, new_type.nullable)
        if nullability is not None:
            out.append(FieldChange(path, NULLABILITY_CHANGED, _raw_type(field), _raw_type(other), nullability))
        _diff(field.get("fields"), other.get("fields"), path + ".", out)
    for name, field in new_fields.items():
        if name not in old_fields:
            out.append(FieldChange(prefix + name, ADDED, None, _raw_type(field), COMPATIBLE))
            _diff(None, field.get("fields"), prefix + name + ".", out)


def _raw_type(field: dict[str, Any]) -> str | None:
    raw = field.get("type")
    return raw if isinstance(raw, str) else None


def diff_schemas(old_fields: Sequence[dict[str, Any]] | None,
                 new_fields: Sequence[dict[str, Any]] | None) -> list[FieldChange]:
    """Field changes from ``old_fields`` to ``new_fields`` (schema facet ``fields`` lists), nested fields included.

    Order: the old schema's fields in their order (removed / changed, each followed by its nested changes), then
    the added ones. Types are reported as the producer wrote them.
    """
    out: list[FieldChange] = []
    _diff(old_fields, new_fields, "", out)
    return out


# --- drift over time (the order of versions: schemas/schema_history.py) -----------------------------------------
@dataclass(frozen=True, slots=True)
class DriftFinding:
    """A new schema version of one dataset: what the ``schemaChanges`` item and the drift alert carry."""

    namespace: str
    name: str
    previous_version: str
    new_version: str
    previous_schema: str  # JSON of the previous fields
    new_schema: str
    previous_event_time: str
    event_time: str
    changes: tuple[FieldChange, ...]
    severity: str
    late: bool = False  # revealed by an observation older than the newest known (schema_history)
    supersedes: tuple[str, str, str] | None = None  # (previous version, new version, changedAt) it splits
    beyond_history: bool = False

    def as_record(self) -> dict[str, Any]:
        """The ``DatasetSchemaChange`` record of ``normalized_event.avsc``."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "previousVersion": self.previous_version,
            "newVersion": self.new_version,
            "previousSchema": self.previous_schema,
            "newSchema": self.new_schema,
            "previousEventTime": self.previous_event_time,
            "changes": [change.as_record() for change in self.changes],
            "severity": self.severity,
            "changedAt": self.event_time,
            "late": self.late,
            "supersedes": None if self.supersedes is None else dict(zip(
                ("previousVersion", "newVersion", "changedAt"), self.supersedes, strict=True)),
            "beyondHistory": self.beyond_history,
        }


def _json(fields: Any) -> str:
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def drift_between(old_fields: Sequence[dict[str, Any]] | None, new_fields: Sequence[dict[str, Any]],
                  old_version: str, new_version: str, previous_time: str, changed_at: str, namespace: str = "",
                  name: str = "") -> DriftFinding:
    """The finding for a change from ``old_fields`` (last seen at ``previous_time``) to ``new_fields`` (first seen at
    ``changed_at``); ``old_fields`` None: not known any more (a missing chunk), the change unclassified."""
    if old_fields is None:
        changes = [FieldChange("", OTHER, None, None, UNKNOWN)]
        return DriftFinding(namespace, name, old_version, new_version, "", _json(new_fields), previous_time,
                            changed_at, tuple(changes), UNKNOWN)
    changes = diff_schemas(old_fields, new_fields)
    if not changes:  # versions differ but no field-level difference found: still report, unclassified
        changes = [FieldChange("", OTHER, None, None, UNKNOWN)]
    return DriftFinding(namespace, name, old_version, new_version, _json(old_fields), _json(new_fields),
                        previous_time, changed_at, tuple(changes), overall_severity(changes))


