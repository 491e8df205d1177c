"""Proposed schemas for the schema-change gate (``lineage check``), read from where a change is made.

A proposal names one dataset (namespace and name, as events name it) and says what its schema is to become: a
whole field list (``fields``, as an OpenLineage ``schema`` facet holds it) or, for ``ALTER TABLE``, operations
applied to the dataset's current schema (``operations``). A proposal is ``complete`` when its field list is the
whole table; a partial one (dbt's documented columns without its catalog) only describes the columns it lists, so
a column it leaves out is not a removal.

Readers, each pure (text or parsed JSON in, proposals out):

- ``from_openlineage``: an OpenLineage event (or a list, or NDJSON), one proposal per output (or a dataset event's
  dataset) carrying a ``schema`` facet; a bare ``schema`` facet with ``dataset=(namespace, name)``.
- ``from_avro``: an Avro record schema (``.avsc``), with ``dataset``.
- ``from_json_schema``: a JSON Schema object, with ``dataset``.
- ``from_ddl``: ``CREATE TABLE`` and ``ALTER TABLE`` statements, parsed by sqlglot (the ``check`` extra) in a SQL
  dialect; the table's dotted name is the dataset name, ``namespace`` its namespace.

Nullability: only DDL's explicit ``ALTER COLUMN … SET/DROP NOT NULL`` proposes a nullability change. Avro, JSON
Schema and ``CREATE TABLE`` state it for every column while most producers' schema facets leave it unmarked (read
as nullable, ``schemas/schema_diff``), so taking it from them would report every required column as a change.
Every size is bounded by the limits events have (``schemas/limits``); anything unreadable raises
``ProposalError`` with the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from kafka_lineage.schemas.limits import MAX_NAME_CHARS, MAX_SCHEMA_FIELD_DEPTH, MAX_SCHEMA_FIELDS

__all__ = [
    "ColumnOperation",
    "ProposalError",
    "ProposedSchema",
    "apply_operations",
    "from_avro",
    "from_dbt",
    "from_ddl",
    "from_json_schema",
    "from_openlineage",
    "proposals_of",
    "read_proposals",
]

# One input file (or request body) of proposals is read whole: bounded like a collector request.
MAX_PROPOSAL_BYTES = 64 * 1024 * 1024
# Proposals of one check (dbt projects of thousands of models exist).
MAX_PROPOSALS = 20_000

ADD, DROP, RENAME, RETYPE, REQUIRE, ALLOW_NULL, RENAME_TABLE = (
    "ADD", "DROP", "RENAME", "RETYPE", "REQUIRE", "ALLOW_NULL", "RENAME_TABLE")


class ProposalError(ValueError):
    """The input holds no readable proposal (the gate's exit 2: fix the input, a retry will not help)."""


@dataclass(frozen=True, slots=True)
class ColumnOperation:
    """One ``ALTER TABLE`` action: ``kind`` ADD (``column``, ``type``), DROP, RENAME (to ``new_name``), RETYPE
    (``type``), REQUIRE / ALLOW_NULL (SET / DROP NOT NULL), RENAME_TABLE (``new_name``: the table's new name)."""

    kind: str
    column: str = ""
    new_name: str = ""
    type: str | None = None
    line: int | None = None  # the line of its ALTER statement (1-based), when known


@dataclass(frozen=True)
class ProposedSchema:
    namespace: str
    name: str
    fields: list[dict[str, Any]] | None = None  # the whole proposed schema (schema facet ``fields``)
    operations: tuple[ColumnOperation, ...] = ()  # or changes to the current one (ALTER TABLE)
    complete: bool = True  # False: the fields describe some columns, the others are not removed
    source: str = ""  # the file the proposal came from (for CI annotations)
    line: int | None = None  # its line there, when known (1-based)
    origin: str = ""  # what it was read from, for people: "DDL ALTER TABLE", "dbt model orders", …
    tags: dict[str, list[str]] = field(default_factory=dict)  # column → tags the proposal gives it

    @property
    def dataset(self) -> str:
        return f"{self.namespace}/{self.name}"


def apply_operations(current: list[dict[str, Any]], operations: Iterable[ColumnOperation]
                     ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The schema ``current`` becomes under ``operations`` and the renames among them (old name → new name).
    Column names match as written, else case-insensitively (unquoted SQL identifiers are case-insensitive)."""
    fields = [dict(item) for item in current if isinstance(item, dict)]
    renames: dict[str, str] = {}

    def find(column: str) -> int:
        for exact in (True, False):
            for index, item in enumerate(fields):
                name = item.get("name")
                if isinstance(name, str) and (name == column if exact else name.lower() == column.lower()):
                    return index
        raise ProposalError(f"ALTER TABLE names column {column!r}, which the dataset's current schema does not have "
                            f"(it has: {', '.join(str(item.get('name')) for item in fields[:20])}"
                            f"{', …' if len(fields) > 20 else ''})")

    for op in operations:
        if op.kind == ADD:
            fields.append({"name": op.column, **({"type": op.type} if op.type else {})})
        elif op.kind == DROP:
            fields.pop(find(op.column))
        elif op.kind == RENAME:
            index = find(op.column)
            renames[fields[index]["name"]] = op.new_name
            fields[index] = {**fields[index], "name": op.new_name}
        elif op.kind in (RETYPE, REQUIRE, ALLOW_NULL):
            index = find(op.column)
            kind = op.type if op.kind == RETYPE else _base_type(fields[index].get("type"))
            if op.kind == REQUIRE:
                kind = f"{kind} NOT NULL"
            elif op.kind == ALLOW_NULL:
                kind = f"{kind} NULL"
            fields[index] = {**fields[index], "type": kind}
        elif op.kind == RENAME_TABLE:
            fields = []  # the dataset of this name is gone: every consumer of it loses every column
    return fields, renames


def _base_type(raw: Any) -> str:
    text = raw.strip() if isinstance(raw, str) else ""
    for suffix in (" not null", " null"):
        if text.lower().endswith(suffix):
            return text[:-len(suffix)].rstrip()
    return text


FORMATS = ("openlineage", "avro", "json-schema", "ddl")


def read_proposals(text: str, *, source: str = "", format: str = "auto", dataset: tuple[str, str] | None = None,
                   namespace: str = "", dialect: str | None = None) -> list[ProposedSchema]:
    """Proposals from one input's text. ``format`` ``auto`` goes by the file's extension (``.sql``/``.ddl`` DDL,
    ``.avsc`` Avro, ``.ndjson``/``.jsonl`` OpenLineage events) and then by the JSON's shape."""
    if len(text) > MAX_PROPOSAL_BYTES:
        raise ProposalError(f"{source or 'the input'} is over {MAX_PROPOSAL_BYTES:,} characters")
    lower = source.lower()
    if format == "auto":
        if lower.endswith((".sql", ".ddl")):
            format = "ddl"
        elif lower.endswith(".avsc"):
            format = "avro"
        elif lower.endswith((".ndjson", ".jsonl")):
            format = "openlineage"
    if format == "ddl":
        return from_ddl(text, namespace, dialect, source)
    if format not in ("auto", *FORMATS):
        raise ProposalError(f"unknown format {format!r}: one of auto, {', '.join(FORMATS)}")
    document = _json_document(text, source, lines=lower.endswith((".ndjson", ".jsonl")))
    if format == "auto":
        format = _shape(document, source)
    if format == "avro":
        return from_avro(document, dataset, source)
    if format == "json-schema":
        return from_json_schema(document, dataset, source)
    return from_openlineage(document, source, dataset)


def proposals_of(body: Any) -> tuple[list[ProposedSchema], dict[str, Any]]:
    """A check request's JSON (``POST /api/v2/check``): its proposals (``proposals``: datasets with schema facet
    fields; ``documents``: texts read like ``lineage check``'s files) and options (allow, depth,
    knownConsumersOnly)."""
    if not isinstance(body, dict):
        raise ProposalError("the body is a JSON object: {\"proposals\": [...], \"documents\": [...]}")
    proposals = []
    for number, item in enumerate(_list(body, "proposals"), 1):
        if not isinstance(item, dict):
            raise ProposalError(f"proposals[{number}] is not an object")
        where = f"proposals[{number}]"
        proposals.append(ProposedSchema(*_dataset((item.get("namespace"), item.get("name")), where),
                                        _facet_fields(item, where), complete=item.get("complete", True) is not False,
                                        source=str(item.get("source") or ""),
                                        line=item["line"] if isinstance(item.get("line"), int) else None,
                                        origin=str(item.get("origin") or "schema proposal")))
    for number, item in enumerate(_list(body, "documents"), 1):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ProposalError(f"documents[{number}] needs a text")
        dataset = item.get("dataset")
        proposals += read_proposals(
            item["text"], source=str(item.get("source") or f"documents[{number}]"),
            format=str(item.get("format") or "auto"),
            dataset=(dataset[0], dataset[1]) if isinstance(dataset, list) and len(dataset) == 2 else None,
            namespace=str(item.get("namespace") or ""), dialect=item.get("dialect") or None)
    if not proposals:
        raise ProposalError("nothing to check: give proposals or documents")
    allow, depth = _list(body, "allow"), body.get("depth", 10)
    if not all(isinstance(pattern, str) for pattern in allow):
        raise ProposalError("allow: a list of patterns (strings)")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ProposalError(f"depth: a positive integer, got {depth!r}")
    return _bounded(proposals), {"allow": allow, "depth": depth,
                                 "knownConsumersOnly": body.get("knownConsumersOnly") is True}


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key) or []
    if not isinstance(value, list):
        raise ProposalError(f"{key}: a list")
    return value


def _json_document(text: str, source: str, lines: bool) -> Any:
    try:
        if lines:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProposalError(f"{source or 'the input'} is not JSON{' lines' if lines else ''}: {exc}") from None


def _shape(document: Any, source: str) -> str:
    if isinstance(document, list) or (isinstance(document, dict) and {"eventType", "run", "job", "outputs",
                                                                      "dataset"} & document.keys()):
        return "openlineage"
    if isinstance(document, dict) and document.get("type") == "record":
        return "avro"
    if isinstance(document, dict) and ("properties" in document or "$schema" in document):
        return "json-schema"
    if isinstance(document, dict) and "fields" in document:
        return "openlineage"  # a schema facet
    raise ProposalError(f"{source or 'the input'}: not an OpenLineage event or schema facet, an Avro record "
                        "schema or a JSON Schema (say which with --format)")


# --- dbt -----------------------------------------------------------------------------------------------------------
DBT_RESOURCES = ("model", "seed", "snapshot")


def from_dbt(manifest: Any, catalog: Any | None, namespace: str, source: str = "") -> list[ProposedSchema]:
    """A dbt project's models, seeds and snapshots as the branch builds them: names as ``dbt-ol`` names their
    datasets (``database.schema.alias`` in the namespace of the profile's warehouse, e.g. ``duckdb:///path`` or
    ``postgres://host:5432``), columns from ``catalog.json`` (``dbt docs generate`` on the branch's build: every
    column with its type, complete) or else from the manifest's documented columns (partial: a column the docs leave
    out is not removed). Column tags and ``meta`` classifications ride along in ``tags``."""
    if not namespace:
        raise ProposalError("dbt artifacts name tables, not their warehouse: give the namespace dbt-ol uses "
                            "(--namespace, e.g. postgres://host:5432 or duckdb:///path/to.duckdb)")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("nodes"), dict):
        raise ProposalError("not a dbt manifest.json (no \"nodes\")")
    columns_of = (catalog or {}).get("nodes") if isinstance(catalog, dict) else None
    if catalog is not None and not isinstance(columns_of, dict):
        raise ProposalError("not a dbt catalog.json (no \"nodes\")")
    proposals = []
    for unique_id, node in sorted(manifest["nodes"].items()):
        if not isinstance(node, dict) or node.get("resource_type") not in DBT_RESOURCES:
            continue
        name = ".".join(str(part) for part in (node.get("database"), node.get("schema"),
                                                node.get("alias") or node.get("name")) if part)
        documented = node.get("columns") if isinstance(node.get("columns"), dict) else {}
        built = (columns_of or {}).get(unique_id)
        if isinstance(built, dict) and isinstance(built.get("columns"), dict):
            ordered = sorted(built["columns"].values(), key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
            fields = [{"name": c["name"], **({"type": c["type"]} if isinstance(c.get("type"), str) else {})}
                      for c in ordered if isinstance(c, dict) and isinstance(c.get("name"), str)]
            complete = True
        elif documented:
            fields = [{"name": c["name"], **({"type": c["data_type"]} if isinstance(c.get("data_type"), str) else {})}
                      for c in documented.values() if isinstance(c, dict) and isinstance(c.get("name"), str)]
            complete = False
        else:
            continue
        _check_width(fields, f"dbt {node.get('resource_type')} {node.get('name')}")
        where = node.get("original_file_path") if isinstance(node.get("original_file_path"), str) else ""
        proposals.append(ProposedSchema(namespace, name, fields, complete=complete,
                                        source=f"{source.rstrip('/')}/{where}" if source and where else where or source,
                                        origin=f"dbt {node.get('resource_type')} {node.get('name')}",
                                        tags=_dbt_column_tags(documented)))
    if not proposals:
        raise ProposalError("no model, seed or snapshot with columns in the dbt artifacts (run `dbt docs generate` "
                            "for catalog.json)")
    return _bounded(proposals)


def _dbt_column_tags(columns: dict[str, Any]) -> dict[str, list[str]]:
    """Per documented column: its dbt tags and its ``meta`` classification (``meta: {classification: pii}``)."""
    tags: dict[str, list[str]] = {}
    for column in columns.values():
        if not isinstance(column, dict) or not isinstance(column.get("name"), str):
            continue
        found = [tag for tag in column.get("tags") or [] if isinstance(tag, str)]
        meta = column.get("meta") if isinstance(column.get("meta"), dict) else {}
        if isinstance(meta.get("classification"), str):
            found.append(meta["classification"])
        if found:
            tags[column["name"]] = sorted(set(found))
    return tags


# --- OpenLineage ---------------------------------------------------------------------------------------------------
def from_openlineage(document: Any, source: str = "", dataset: tuple[str, str] | None = None) -> list[ProposedSchema]:
    """Proposals from an OpenLineage event, a list of events, or a ``schema`` facet (``{"fields": [...]}``, with
    ``dataset``). Only outputs propose schemas: an event's inputs describe what it read."""
    if isinstance(document, dict) and "fields" in document and not {"eventType", "run", "job"} & document.keys():
        if dataset is None:
            raise ProposalError("a bare schema facet needs the dataset it is for (--dataset NAMESPACE NAME)")
        return [ProposedSchema(*_dataset(dataset), _facet_fields(document, "the schema facet"), source=source,
                               origin="OpenLineage schema facet")]
    events = document if isinstance(document, list) else [document]
    proposals = []
    for number, event in enumerate(events, 1):
        if not isinstance(event, dict):
            raise ProposalError(f"item {number}: an OpenLineage event is a JSON object, not {type(event).__name__}")
        datasets = list(event.get("outputs") or [])
        if isinstance(event.get("dataset"), dict):
            datasets.append(event["dataset"])
        for item in datasets:
            facets = item.get("facets") if isinstance(item, dict) else None
            schema = facets.get("schema") if isinstance(facets, dict) else None
            if not isinstance(schema, dict):
                continue
            where = f"event {number}, dataset {item.get('namespace')!r} {item.get('name')!r}"
            proposals.append(ProposedSchema(*_dataset((item.get("namespace"), item.get("name")), where),
                                            _facet_fields(schema, where), source=source,
                                            origin="OpenLineage event"))
    if not proposals:
        raise ProposalError("no output dataset with a schema facet in the OpenLineage input")
    return _bounded(proposals)


def _facet_fields(schema: dict[str, Any], where: str) -> list[dict[str, Any]]:
    fields = schema.get("fields")
    if not isinstance(fields, list) or not all(isinstance(item, dict) and isinstance(item.get("name"), str)
                                               for item in fields):
        raise ProposalError(f"{where}: schema fields must be a list of objects with a name")
    _check_width(fields, where)
    return fields


# --- Avro ----------------------------------------------------------------------------------------------------------
_AVRO_LOGICAL = {"timestamp-millis": "timestamp", "timestamp-micros": "timestamp", "timestamp-nanos": "timestamp",
                 "local-timestamp-millis": "timestamp", "local-timestamp-micros": "timestamp", "date": "date",
                 "time-millis": "time", "time-micros": "time", "uuid": "string"}


def from_avro(document: Any, dataset: tuple[str, str] | None, source: str = "") -> list[ProposedSchema]:
    """The record schema's fields (nested records as nested fields, ``["null", T]`` as T)."""
    if dataset is None:
        raise ProposalError("an Avro schema needs the dataset it is for (--dataset NAMESPACE NAME)")
    if not isinstance(document, dict) or document.get("type") != "record" or not isinstance(document.get("fields"),
                                                                                           list):
        raise ProposalError("an Avro schema for a dataset is a record: {\"type\": \"record\", \"fields\": [...]}")
    named: dict[str, Any] = {}
    fields = [_avro_field(item, named, 1) for item in document["fields"]]
    _check_width(fields, "the Avro schema")
    return [ProposedSchema(*_dataset(dataset), fields, source=source, origin="Avro schema")]


def _avro_field(item: Any, named: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "type" not in item:
        raise ProposalError(f"an Avro record field needs a name and a type, got {json.dumps(item)[:200]}")
    kind, nested = _avro_type(item["type"], named, depth)
    return {"name": item["name"], "type": kind, **({"fields": nested} if nested else {}),
            **({"description": item["doc"]} if isinstance(item.get("doc"), str) else {})}


def _avro_type(schema: Any, named: dict[str, Any], depth: int) -> tuple[str, list[dict[str, Any]]]:
    if depth > MAX_SCHEMA_FIELD_DEPTH:
        raise ProposalError(f"the Avro schema nests records deeper than {MAX_SCHEMA_FIELD_DEPTH} levels")
    if isinstance(schema, list):
        branches = [branch for branch in schema if branch != "null"]
        if len(branches) == 1:
            return _avro_type(branches[0], named, depth)
        return "union<" + ",".join(_avro_type(b, named, depth)[0] for b in branches) + ">", []
    if isinstance(schema, str):
        if schema in named:
            return _avro_type(named[schema], named, depth)
        return schema, []
    if not isinstance(schema, dict):
        raise ProposalError(f"not an Avro type: {json.dumps(schema)[:200]}")
    if isinstance(schema.get("name"), str) and schema.get("type") in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
    logical, kind = schema.get("logicalType"), schema.get("type")
    if logical == "decimal":
        return f"decimal({int(schema.get('precision', 38))},{int(schema.get('scale', 0))})", []
    if logical in _AVRO_LOGICAL:
        return _AVRO_LOGICAL[logical], []
    if kind == "record":
        return "struct", [_avro_field(item, named, depth + 1) for item in schema.get("fields") or []]
    if kind == "array":
        return f"array<{_avro_type(schema.get('items'), named, depth + 1)[0]}>", []
    if kind == "map":
        return f"map<string,{_avro_type(schema.get('values'), named, depth + 1)[0]}>", []
    if kind == "enum":
        return "string", []
    if kind == "fixed":
        return "binary", []
    return _avro_type(kind, named, depth)


# --- JSON Schema ---------------------------------------------------------------------------------------------------
_JSON_FORMATS = {"date-time": "timestamp", "date": "date", "time": "time"}
_JSON_TYPES = {"integer": "bigint", "number": "double", "string": "string", "boolean": "boolean"}


def from_json_schema(document: Any, dataset: tuple[str, str] | None, source: str = "") -> list[ProposedSchema]:
    """An object schema's properties (nested objects as nested fields; local ``$ref``s followed)."""
    if dataset is None:
        raise ProposalError("a JSON Schema needs the dataset it is for (--dataset NAMESPACE NAME)")
    if not isinstance(document, dict) or not isinstance(document.get("properties"), dict):
        raise ProposalError("a JSON Schema for a dataset is an object schema with \"properties\"")
    fields = _json_properties(document, document, 1)
    _check_width(fields, "the JSON Schema")
    return [ProposedSchema(*_dataset(dataset), fields, source=source, origin="JSON Schema")]


def _json_properties(schema: dict[str, Any], root: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    fields = []
    for name, prop in schema.get("properties", {}).items():
        kind, nested = _json_type(prop, root, depth)
        fields.append({"name": name, "type": kind, **({"fields": nested} if nested else {}),
                       **({"description": prop["description"]} if isinstance(prop, dict)
                          and isinstance(prop.get("description"), str) else {})})
    return fields


def _json_type(prop: Any, root: dict[str, Any], depth: int) -> tuple[str, list[dict[str, Any]]]:
    if depth > MAX_SCHEMA_FIELD_DEPTH:
        raise ProposalError(f"the JSON Schema nests objects (or $refs) deeper than {MAX_SCHEMA_FIELD_DEPTH} levels")
    if not isinstance(prop, dict):
        return "any", []
    if isinstance(prop.get("$ref"), str):
        return _json_type(_json_ref(prop["$ref"], root), root, depth + 1)
    for combined in ("anyOf", "oneOf"):
        if isinstance(prop.get(combined), list):
            branches = [b for b in prop[combined] if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(branches) == 1:
                return _json_type(branches[0], root, depth)
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object":
        return "struct", _json_properties(prop, root, depth + 1) if isinstance(prop.get("properties"), dict) else []
    if kind == "array":
        return f"array<{_json_type(prop.get('items'), root, depth + 1)[0]}>", []
    if kind == "string" and prop.get("format") in _JSON_FORMATS:
        return _JSON_FORMATS[prop["format"]], []
    return _JSON_TYPES.get(kind, "any") if isinstance(kind, str) else "any", []


def _json_ref(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        raise ProposalError(f"only local $refs (#/…) are followed, not {ref[:200]!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ProposalError(f"$ref {ref[:200]!r} points at nothing")
        node = node[part]
    return node


# --- DDL -----------------------------------------------------------------------------------------------------------
def from_ddl(text: str, namespace: str, dialect: str | None = None, source: str = "") -> list[ProposedSchema]:
    """``CREATE TABLE`` (a whole schema) and ``ALTER TABLE`` (operations) statements; other statements are left out.
    ``namespace``: the namespace of the tables (as the events of their producers name it, e.g.
    ``postgres://db:5432``). Raises ``ProposalError`` on a statement sqlglot cannot parse."""
    try:
        import sqlglot
        from sqlglot import exp
        from sqlglot.errors import ParseError, TokenError
    except ImportError as exc:  # the `check` extra
        raise ProposalError("reading DDL needs sqlglot: pip install 'kafka-lineage[check]'") from exc
    if not namespace:
        raise ProposalError("DDL names tables, not their namespace: give it (--namespace, e.g. postgres://db:5432)")
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its fallback warning: the error below says it instead
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect or None) if s is not None]
        lines = _statement_lines(text, dialect)
    except (ParseError, TokenError) as exc:
        raise ProposalError(f"the DDL does not parse{f' as {dialect}' if dialect else ''}: {str(exc)[:500]}") from None
    proposals: dict[str, ProposedSchema] = {}
    for index, statement in enumerate(statements):
        line = lines[index] if len(lines) == len(statements) else None
        if isinstance(statement, exp.Command) and str(statement.this).upper() in ("ALTER", "CREATE"):
            raise ProposalError(f"line {line or '?'}: {str(statement.this).upper()} statement sqlglot cannot read "
                                f"{'in dialect ' + dialect if dialect else '(try --dialect)'}: "
                                f"{statement.sql()[:300]}")
        if isinstance(statement, exp.Create) and str(statement.args.get("kind") or "").upper() == "TABLE":
            schema = statement.this
            if not isinstance(schema, exp.Schema):  # CREATE TABLE … AS SELECT: its columns are a query's
                continue
            name = _table_name(schema.this)
            fields = [{"name": column.name, "type": _sql_type(column.args.get("kind"), dialect)}
                      for column in schema.expressions if isinstance(column, exp.ColumnDef)]
            _check_width(fields, f"CREATE TABLE {name}")
            proposals[name] = ProposedSchema(namespace, name, fields, source=source, line=line,
                                             origin="DDL CREATE TABLE")
        elif isinstance(statement, exp.Alter) and str(statement.args.get("kind") or "").upper() == "TABLE":
            name = _table_name(statement.this)
            operations = tuple(replace(op, line=line)
                               for op in _operations(statement.args.get("actions") or [], dialect, name))
            earlier = proposals.get(name)
            if earlier is not None and earlier.fields is not None:  # CREATE then ALTER in one file: the result
                fields, _renames = apply_operations(earlier.fields, operations)
                proposals[name] = ProposedSchema(namespace, name, fields, source=source, line=earlier.line,
                                                 origin="DDL CREATE TABLE")
            else:
                before = earlier.operations if earlier is not None else ()
                proposals[name] = ProposedSchema(namespace, name, None, before + operations, source=source,
                                                 line=earlier.line if earlier is not None else line,
                                                 origin="DDL ALTER TABLE")
    if not proposals:
        raise ProposalError("no CREATE TABLE (with columns) or ALTER TABLE statement in the DDL")
    return _bounded(list(proposals.values()))


def _operations(actions: list[Any], dialect: str | None, table: str) -> Iterator[ColumnOperation]:
    from sqlglot import exp

    for action in actions:
        if isinstance(action, exp.ColumnDef):
            yield ColumnOperation(ADD, action.name, type=_sql_type(action.args.get("kind"), dialect))
        elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            for column in action.args.get("tables") or [action.this]:
                yield ColumnOperation(DROP, column.name)
        elif isinstance(action, exp.RenameColumn):
            yield ColumnOperation(RENAME, action.this.name, action.args["to"].name)
        elif isinstance(action, exp.AlterColumn):
            if action.args.get("dtype") is not None:
                yield ColumnOperation(RETYPE, action.name, type=_sql_type(action.args["dtype"], dialect))
            elif action.args.get("allow_null") is not None:
                yield ColumnOperation(ALLOW_NULL if action.args["allow_null"] else REQUIRE, action.name)
            elif action.args.get("drop") is not None or action.args.get("default") is not None:
                continue  # defaults change no reader's schema
            else:
                raise ProposalError(f"ALTER TABLE {table}: a column change the gate cannot read: {action.sql()[:300]}")
        elif isinstance(action, exp.AlterRename):
            yield ColumnOperation(RENAME_TABLE, new_name=_table_name(action.this))
        elif isinstance(action, exp.Schema):  # ADD COLUMNS (a b, c d): Spark, Hive
            for column in action.expressions:
                if isinstance(column, exp.ColumnDef):
                    yield ColumnOperation(ADD, column.name, type=_sql_type(column.args.get("kind"), dialect))
        else:
            raise ProposalError(f"ALTER TABLE {table}: an action the gate cannot read: {action.sql()[:300]}")


def _table_name(table: Any) -> str:
    parts = [part.name for part in table.parts] if hasattr(table, "parts") else [table.name]
    return ".".join(part for part in parts if part)


def _sql_type(kind: Any, dialect: str | None) -> str | None:
    return kind.sql(dialect=dialect or None) if kind is not None else None


def _statement_lines(text: str, dialect: str | None) -> list[int]:
    """The line each non-empty statement starts on, in order (sqlglot keeps no positions on parsed nodes, but its
    tokens have lines: statements are the runs of tokens between semicolons)."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    lines, start = [], None
    for token in Dialect.get_or_raise(dialect or None).tokenize(text):
        if token.token_type == TokenType.SEMICOLON:
            start = None
        elif start is None:
            start = token.line
            lines.append(start)
    return lines


# --- shared --------------------------------------------------------------------------------------------------------
def _dataset(dataset: tuple[Any, Any], where: str = "the dataset") -> tuple[str, str]:
    namespace, name = dataset
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        raise ProposalError(f"{where}: a dataset needs a namespace and a name")
    if len(namespace) > MAX_NAME_CHARS or len(name) > MAX_NAME_CHARS:
        raise ProposalError(f"{where}: a namespace or name is over {MAX_NAME_CHARS:,} characters")
    return namespace, name


def _check_width(fields: list[dict[str, Any]], where: str) -> None:
    count, stack = 0, [(fields, 1)]
    while stack:
        items, depth = stack.pop()
        if depth > MAX_SCHEMA_FIELD_DEPTH:
            raise ProposalError(f"{where}: fields nest deeper than {MAX_SCHEMA_FIELD_DEPTH} levels")
        count += len(items)
        if count > MAX_SCHEMA_FIELDS:
            raise ProposalError(f"{where}: more than {MAX_SCHEMA_FIELDS:,} fields")
        stack += [(item["fields"], depth + 1) for item in items
                  if isinstance(item, dict) and isinstance(item.get("fields"), list)]


def _bounded(proposals: list[ProposedSchema]) -> list[ProposedSchema]:
    if len(proposals) > MAX_PROPOSALS:
        raise ProposalError(f"more than {MAX_PROPOSALS:,} proposed schemas in one check")
    return proposals
