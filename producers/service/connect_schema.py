"""Pure core of the Connect hook's column lineage: registry Avro schemas → fields, a connector's SMT chain applied.

No I/O here. ``connect_lineage`` asks :func:`avro_root` for a topic's ``<topic>-value`` schema (fetched by the
watcher), :func:`apply_chain` for what a sink connector's ``transforms`` make of it, :func:`source_paths` for which
pre-transform field a source connector's topic field came from, and :func:`schema_facet` / :func:`column_lineage`
for the facets.

* **Fields.** A record value is a tree of :class:`Field`; the root (name ``""``) is the record value itself, so a
  primitive value (a FileStream line before ``HoistField``) is a root without children. Avro types map to the
  spellings the drift detector understands (``string``, ``int``, ``long``, ``decimal(p,s)``, ``timestamp``,
  ``array<…>``, ``map<string,…>``, ``struct`` with nested fields); a field that cannot be null is marked
  ``NOT NULL`` (Avro: not a union with ``null``), so a nullability change is drift too. Field paths join names with
  ``.`` (``address.zip``), as the drift detector and the graph do.
* **Provenance.** Every field carries the topic field paths it was computed from (``origin``), whether the value was
  changed on the way (``Cast``, ``TimestampConverter``: a TRANSFORMATION) and whether it was masked (``MaskField``).
  Fields an SMT creates from record metadata or constants (``InsertField``) have no origin.
* **SMTs** (``org.apache.kafka.connect.transforms``, ``$Value``): ReplaceField (``include``/``exclude`` and the old
  ``whitelist``/``blacklist``, ``renames``), ExtractField (``field``; a dotted path with ``field.syntax.version=V2``),
  HoistField, Flatten (``delimiter``), Cast (``spec``), InsertField (topic/partition/offset/timestamp/static
  fields, ``!``/``?`` suffixes), MaskField, TimestampConverter. ``$Key`` variants change only the key, which this
  lineage does not describe, and SMTs that route or filter records or touch only headers (Filter, RegexRouter,
  TimestampRouter, InsertHeader, DropHeaders, SetSchemaMetadata, ValueToKey …) leave the value's fields as they are.
  Any other class passes the fields through unchanged and is reported by name (``unknown``), never guessed at.
  Predicates are ignored: a conditional SMT is applied as if it always ran (the schema has to allow both).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

ROOT = ""
_SMT_PREFIX = "org.apache.kafka.connect.transforms."
DEBEZIUM_UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
# SMTs that change neither the value's fields nor where its columns come from.
_VALUE_NEUTRAL = {"Filter", "RegexRouter", "TimestampRouter", "InsertHeader", "DropHeaders", "HeaderFrom",
                  "SetSchemaMetadata", "ValueToKey", "HoistField$Key", "ExtractField$Key", "ReplaceField$Key",
                  "Flatten$Key", "Cast$Key", "InsertField$Key", "MaskField$Key", "TimestampConverter$Key",
                  "SetSchemaMetadata$Key", "SetSchemaMetadata$Value"}


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # without nullability
    nullable: bool = True
    fields: tuple[Field, ...] = ()
    origin: tuple[str, ...] = ()  # topic field paths the value is computed from ("" = the whole record value)
    transformed: bool = False  # the value was changed on the way (not an identity)
    masked: bool = False
    description: str | None = None

    def child(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


# --- Avro → fields ----------------------------------------------------------------------------------------------
_PRIMITIVES = {"string": "string", "int": "int", "long": "long", "float": "float", "double": "double",
               "boolean": "boolean", "bytes": "bytes", "null": "null"}
_CONNECT_TYPES = {"int8": "tinyint", "int16": "smallint"}  # Connect's AvroData keeps the narrower type here
_LOGICAL = {"date": "date", "time-millis": "time", "time-micros": "time", "timestamp-millis": "timestamp",
            "timestamp-micros": "timestamp", "local-timestamp-millis": "timestamp",
            "local-timestamp-micros": "timestamp", "uuid": "uuid"}
_CONNECT_LOGICAL = {"org.apache.kafka.connect.data.Date": "date", "org.apache.kafka.connect.data.Time": "time",
                    "org.apache.kafka.connect.data.Timestamp": "timestamp"}


def _avro(schema: Any, path: str, name: str, named: dict[str, Any]) -> Field:
    nullable = False
    if isinstance(schema, list):  # a union: ["null", T] is an optional T; other unions are kept as written
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if len(branches) == 1:
            return replace(_avro(branches[0], path, name, named), nullable=nullable)
        types = [_avro(b, path, name, named).type for b in branches]
        return Field(name, f"union<{','.join(types)}>", nullable, origin=(path,))
    if isinstance(schema, str):
        if schema in named:
            return _avro(named[schema], path, name, named)
        return Field(name, _PRIMITIVES.get(schema, schema), False, origin=(path,))
    kind = schema.get("type")
    if isinstance(kind, (list, dict)):
        return _avro(kind, path, name, named)
    logical = schema.get("logicalType")
    if kind == "record":
        full = ".".join(p for p in (schema.get("namespace"), schema.get("name")) if p)
        named.setdefault(full, schema)
        named.setdefault(schema.get("name", ""), schema)
        children = tuple(
            _avro(f.get("type"), f"{path}.{f['name']}" if path else f["name"], f["name"], named)
            for f in schema.get("fields", ()))
        children = tuple(replace(c, description=f.get("doc")) if f.get("doc") else c
                         for c, f in zip(children, schema.get("fields", ()), strict=True))
        return Field(name, "struct", False, children, origin=(path,), description=schema.get("doc"))
    if kind == "enum":
        named.setdefault(schema.get("name", ""), schema)
        return Field(name, "string", False, origin=(path,))
    if kind == "fixed" and logical != "decimal":
        return Field(name, "bytes", False, origin=(path,))
    if kind == "array":
        return Field(name, f"array<{_avro(schema.get('items'), path, name, named).type}>", False, origin=(path,))
    if kind == "map":
        return Field(name, f"map<string,{_avro(schema.get('values'), path, name, named).type}>", False,
                     origin=(path,))
    if logical == "decimal":
        return Field(name, f"decimal({schema.get('precision', 0)},{schema.get('scale', 0)})", False, origin=(path,))
    connect_name = schema.get("connect.name")
    type_ = (_CONNECT_LOGICAL.get(str(connect_name)) or _LOGICAL.get(str(logical))
             or _CONNECT_TYPES.get(str(schema.get("connect.type"))) or _PRIMITIVES.get(str(kind), str(kind)))
    return Field(name, type_, False, origin=(path,))


def avro_root(schema: str | Mapping[str, Any] | Sequence[Any]) -> Field:
    """A registry schema (its JSON text or parsed) → the record value as a root :class:`Field`."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    return _avro(parsed, ROOT, ROOT, {})


# --- the SMT chain ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Transform:
    alias: str
    type: str  # the class as configured
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.type.removeprefix(_SMT_PREFIX)


def transforms_of(config: Mapping[str, str]) -> list[Transform]:
    """The connector's ``transforms`` chain in order, each with its own ``transforms.<alias>.*`` settings."""
    chain = []
    for alias in (a.strip() for a in config.get("transforms", "").split(",")):
        if not alias:
            continue
        prefix = f"transforms.{alias}."
        settings = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        chain.append(Transform(alias, settings.pop("type", ""), settings))
    return chain


def _csv(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _pairs(value: str | None) -> dict[str, str]:
    return dict(tuple(p.split(":", 1)) for p in _csv(value) if ":" in p)  # type: ignore[misc]


def _with_fields(root: Field, fields: Iterable[Field]) -> Field:
    return replace(root, fields=tuple(fields))


def _replace_field(root: Field, c: Mapping[str, str]) -> Field:
    if root.type != "struct":
        return root
    exclude = set(_csv(c.get("exclude") or c.get("blacklist")))
    include = set(_csv(c.get("include") or c.get("whitelist")))
    renames = _pairs(c.get("renames"))
    kept = (f for f in root.fields if f.name not in exclude and (not include or f.name in include))
    return _with_fields(root, (replace(f, name=renames.get(f.name, f.name)) for f in kept))


def _extract_field(root: Field, c: Mapping[str, str]) -> Field:
    name = c.get("field", "")
    path = name.split(".") if c.get("field.syntax.version", "V1").upper() == "V2" else [name]
    current: Field | None = root
    for part in path:
        current = current.child(part) if current is not None else None
    if current is None:  # Connect would fail the record; the lineage says what it can: nothing comes through
        return Field(ROOT, "null", True)
    return replace(current, name=ROOT)


def _hoist_field(root: Field, c: Mapping[str, str]) -> Field:
    return Field(ROOT, "struct", False, (replace(root, name=c.get("field", "")),), origin=root.origin)


def _flatten(root: Field, c: Mapping[str, str]) -> Field:
    if root.type != "struct":
        return root
    delimiter = c.get("delimiter", ".")

    def leaves(f: Field, prefix: str, optional: bool) -> Iterable[Field]:
        name = f"{prefix}{delimiter}{f.name}" if prefix else f.name
        if f.type == "struct" and f.fields:  # an optional struct makes all its flattened fields optional
            for child in f.fields:
                yield from leaves(child, name, optional or f.nullable)
        else:
            yield replace(f, name=name, nullable=f.nullable or optional)

    return _with_fields(root, (leaf for f in root.fields for leaf in leaves(f, "", False)))


_CAST_TYPES = {"int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "long", "float32": "float",
               "float64": "double", "boolean": "boolean", "string": "string"}


def _retype(f: Field, type_: str) -> Field:
    return replace(f, type=type_, fields=(), transformed=True, origin=_leaf_origin(f))


def _leaf_origin(f: Field) -> tuple[str, ...]:
    """A struct turned into one value (cast to string …) comes from all of its fields."""
    if not f.fields:
        return f.origin
    return tuple(dict.fromkeys(o for child in f.fields for o in _leaf_origin(child)))


def _cast(root: Field, c: Mapping[str, str]) -> Field:
    spec = _csv(c.get("spec"))
    if len(spec) == 1 and ":" not in spec[0]:  # the whole value
        return _retype(root, _CAST_TYPES.get(spec[0], spec[0]))
    casts = _pairs(c.get("spec"))
    return _with_fields(root, (_retype(f, _CAST_TYPES.get(casts[f.name], casts[f.name])) if f.name in casts else f
                               for f in root.fields))


def _insert_field(root: Field, c: Mapping[str, str]) -> Field:
    if root.type != "struct":
        return root
    added = []
    for key, type_ in (("topic.field", "string"), ("partition.field", "int"), ("offset.field", "long"),
                       ("timestamp.field", "timestamp"), ("static.field", "string")):
        name = c.get(key, "").strip()
        if not name:
            continue
        required = name.endswith("!")
        name = name.rstrip("!?")
        added.append(Field(name, type_, not required, origin=()))
    names = {f.name for f in added}
    return _with_fields(root, (*(f for f in root.fields if f.name not in names), *added))


def _mask_field(root: Field, c: Mapping[str, str]) -> Field:
    masked = set(_csv(c.get("fields")))
    return _with_fields(root, (replace(f, masked=True, transformed=True) if f.name in masked else f
                               for f in root.fields))


_TIMESTAMP_TARGETS = {"string": "string", "unix": "long", "date": "date", "time": "time", "timestamp": "timestamp"}


def _timestamp_converter(root: Field, c: Mapping[str, str]) -> Field:
    target = _TIMESTAMP_TARGETS.get(c.get("target.type", "").lower(), c.get("target.type", "").lower())
    name = c.get("field", "")
    if not name:
        return _retype(root, target)
    return _with_fields(root, (_retype(f, target) if f.name == name else f for f in root.fields))


_VALUE_SMTS = {
    "ReplaceField$Value": _replace_field,
    "ExtractField$Value": _extract_field,
    "HoistField$Value": _hoist_field,
    "Flatten$Value": _flatten,
    "Cast$Value": _cast,
    "InsertField$Value": _insert_field,
    "MaskField$Value": _mask_field,
    "TimestampConverter$Value": _timestamp_converter,
}


@dataclass(frozen=True)
class ChainResult:
    root: Field
    unknown: tuple[str, ...] = ()  # SMT classes passed through without knowing what they do to the fields


def apply_chain(root: Field, chain: Sequence[Transform]) -> ChainResult:
    """What the record value looks like after ``chain`` (sink connectors: topic → what the sink writes)."""
    for transform in chain:
        smt = _VALUE_SMTS.get(transform.short)
        if transform.type == DEBEZIUM_UNWRAP:
            after = root.child("after")
            root = replace(after, name=ROOT, nullable=False) if after is not None else root
        elif smt is not None:
            root = smt(root, transform.config)
    return ChainResult(root, unknown_transforms(chain))


def unknown_transforms(chain: Sequence[Transform]) -> tuple[str, ...]:
    """SMT classes in ``chain`` whose effect on the value's fields is not modelled (passed through unchanged)."""
    return tuple(dict.fromkeys(t.type for t in chain if t.short not in _VALUE_SMTS and t.short not in _VALUE_NEUTRAL
                               and t.type != DEBEZIUM_UNWRAP))


# --- source connectors: back from the topic's fields to the record the connector produced -----------------------
@dataclass(frozen=True)
class SourcePath:
    path: str  # the field in the record before the chain ("" = the whole value)
    transformed: bool = False
    masked: bool = False


def _back(t: Transform, path: str, step: SourcePath) -> SourcePath | None:
    c, short = t.config, t.short
    head, _, rest = path.partition(".")
    if short == "ReplaceField$Value":
        original = {new: old for old, new in _pairs(c.get("renames")).items()}.get(head, head)
        return replace(step, path=".".join(p for p in (original, rest) if p))
    if short == "HoistField$Value":
        if path == c.get("field", "") or path.startswith(c.get("field", "") + "."):
            return replace(step, path=path[len(c.get("field", "")) + 1:])
        return None
    if short == "ExtractField$Value":
        return replace(step, path=".".join(p for p in (c.get("field", ""), path) if p))
    if short == "InsertField$Value":
        inserted = {c.get(k, "").rstrip("!?") for k in ("topic.field", "partition.field", "offset.field",
                                                          "timestamp.field", "static.field")}
        return None if head in inserted else step
    if short == "Flatten$Value":  # a.b flattened to a<delimiter>b: the first split that names a source path
        return replace(step, path=path.replace(c.get("delimiter", "."), "."))
    if short == "Cast$Value":
        casts = _pairs(c.get("spec"))
        whole = ":" not in c.get("spec", "") and c.get("spec", "").strip()
        return replace(step, transformed=step.transformed or bool(whole) or head in casts)
    if short == "MaskField$Value":
        masked = head in _csv(c.get("fields"))
        return replace(step, transformed=step.transformed or masked, masked=step.masked or masked)
    if short == "TimestampConverter$Value":
        changed = c.get("field", "") in ("", head)
        return replace(step, transformed=step.transformed or changed)
    if t.type == DEBEZIUM_UNWRAP:  # the row state: the envelope's ``after`` (fields it adds come from nowhere)
        added = {f"__{name.strip().split(':')[0]}" for name in _csv(c.get("add.fields"))}
        return None if head in added else replace(step, path=f"after.{path}" if path else "after")
    return step  # neutral and unknown SMTs: the field passes through


def source_paths(path: str, chain: Sequence[Transform]) -> SourcePath | None:
    """Which field of the record the source connector produced became the topic's field ``path``; None when an
    SMT created it (InsertField) rather than carried it."""
    step: SourcePath | None = SourcePath(path)
    for t in reversed(chain):
        if step is None:
            return None
        step = _back(t, step.path, step)
    return step


# --- facets -----------------------------------------------------------------------------------------------------
def leaves(root: Field) -> list[tuple[str, Field]]:
    """(path, field) of every field without children (nested ones as ``a.b``); the root only when it is a struct."""
    out: list[tuple[str, Field]] = []

    def walk(f: Field, prefix: str) -> None:
        for child in f.fields:
            path = f"{prefix}.{child.name}" if prefix else child.name
            if child.fields:
                walk(child, path)
            else:
                out.append((path, child))

    walk(root, "")
    return out


def facet_fields(root: Field) -> list[dict[str, Any]]:
    """The record's fields as ``schema`` facet fields (nested records as nested fields); [] for a primitive value."""

    def one(f: Field) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": f.name, "type": f.type if f.nullable else f"{f.type} NOT NULL"}
        if f.description:
            entry["description"] = f.description
        if f.fields:
            entry["fields"] = [one(c) for c in f.fields]
        return entry

    return [one(f) for f in root.fields] if root.type == "struct" else []
