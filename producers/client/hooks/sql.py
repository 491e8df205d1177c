"""Lineage of SQL tasks: datasets and column lineage from the SQL text (openlineage-sql), emitted around the task.

    with sql_task(sql, dialect="postgres", url="jdbc:postgresql://db:5432/shop", job_name="daily-sales") as run:
        cursor.execute(sql)
        run.set_output_statistics(row_count=cursor.rowcount)

``sql_lineage`` is the pure part: tables named by ``table_dataset`` (namespace from the connection URL, database
from the URL where the platform has one), column lineage as the ``columnLineage`` facet (spec 1-2-0: ``fields →
inputFields``). openlineage-sql reports no transformation kinds, so ``transformations`` stays empty rather than
guessed; the output column is the SELECT item's name or alias (the parser ignores an INSERT's column list, and
unaliased expressions get no lineage). SQL it cannot parse yields no datasets, a logged warning and an
``extractionError`` run facet; the task still runs and its START/COMPLETE/FAIL are still emitted.

``INSERT OVERWRITE|INTO [TABLE] t PARTITION (date='2025-12-24', region='eu')`` writes one partition: its static
spec becomes the ``kafkaLineage_partition`` facet (source ``hook``) on that output. openlineage-sql does not return
the clause, so ``partition_specs`` reads it from the text; a dynamic column (``PARTITION (date)``, no value) writes
any number of partitions, so such a statement reports none.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import openlineage_sql
from openlineage.client import OpenLineageClient
from openlineage.client.facet_v2 import column_lineage_dataset, extraction_error_run, sql_job

from kafka_lineage.schemas.naming import parse_connection, table_dataset
from kafka_lineage.schemas.partitions import FACET_KEY, PartitionKeys, as_keys

from .runs import PRODUCER, DatasetState, Parent, TaskRun, job_type_facet, partition_dataset_facet

log = logging.getLogger(__name__)

# Dialect names openlineage-sql 1.54 knows. It silently parses any other name as `generic`, so we reject unknown
# names ourselves; platforms without a dialect of their own map to `generic` explicitly.
PARSER_DIALECTS = frozenset({"ansi", "bigquery", "databricks", "generic", "hive", "mssql", "mysql", "postgres",
                             "redshift", "snowflake", "sqlite"})
DIALECT_ALIASES = {
    "postgresql": "postgres", "sqlserver": "mssql", "tsql": "mssql", "spark": "databricks", "sparksql": "databricks",
    "mariadb": "mysql", "trino": "generic", "presto": "generic", "oracle": "generic", "db2": "generic",
    "teradata": "generic", "clickhouse": "generic",
}

TableKey = tuple[str, str]  # (namespace, name)


def parser_dialect(dialect: str) -> str:
    """The openlineage-sql dialect for ``dialect`` (case-insensitive, aliases allowed); ``ValueError`` if unknown."""
    name = str(dialect).strip().lower()
    name = DIALECT_ALIASES.get(name, name)
    if name not in PARSER_DIALECTS:
        known = ", ".join(sorted(PARSER_DIALECTS | DIALECT_ALIASES.keys()))
        raise ValueError(f"unknown SQL dialect {dialect!r}; known: {known}")
    return name


@dataclass(frozen=True)
class FieldRef:
    namespace: str
    name: str
    field: str


@dataclass(frozen=True)
class SqlLineage:
    inputs: tuple[TableKey, ...] = ()
    outputs: tuple[TableKey, ...] = ()
    column_lineage: Mapping[TableKey, Mapping[str, tuple[FieldRef, ...]]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # parser (or naming) errors; lineage is partial or empty when set
    statements: int = 1
    partitions: Mapping[TableKey, PartitionKeys] = field(default_factory=dict)  # outputs written one partition at once

    def column_lineage_facet(self, output: TableKey) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
        columns = self.column_lineage.get(output)
        if not columns:
            return None
        return column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={column: column_lineage_dataset.Fields(inputFields=[
                column_lineage_dataset.InputField(namespace=f.namespace, name=f.name, field=f.field) for f in refs])
                for column, refs in columns.items()},
            producer=PRODUCER,
        )


# --- statement splitting (only to attribute column lineage when a script writes several tables) -------------------
_TOKEN = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|(\$[A-Za-z_0-9]*\$).*?\1|;",
                    re.DOTALL)


def split_statements(sql: str) -> list[str]:
    """Statements of a script: split on ``;`` outside strings, quoted names, comments and $$-bodies."""
    statements, start = [], 0
    for match in _TOKEN.finditer(sql):
        if match[0] == ";":
            statements.append(sql[start:match.start()])
            start = match.end()
    statements.append(sql[start:])
    return [s.strip() for s in statements if _TOKEN.sub(lambda m: "" if m[0].startswith(("--", "/*")) else m[0],
                                                        s).strip()]


# --- static partition specs ---------------------------------------------------------------------------------------
_NAME_PART = r"(?:`[^`]*`|\"[^\"]*\"|\[[^\]]*\]|[\w$]+)"
_INSERT_PARTITION = re.compile(
    rf"\bINSERT\s+(?:OVERWRITE|INTO)\s+(?:TABLE\s+)?(?P<table>{_NAME_PART}(?:\s*\.\s*{_NAME_PART})*)\s+PARTITION\s*\(",
    re.IGNORECASE)
_SPEC_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")|(?P<name>`[^`]*`|[\w$.+-]+)"
                         r"|(?P<op>[=,)]))", re.DOTALL)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`[^`]*`", re.DOTALL)
_TYPED_LITERALS = frozenset({"date", "timestamp", "timestamp_ntz", "timestamp_ltz"})


def _unquote(text: str) -> str:
    quote = text[0]
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body.replace(quote * 2, quote))


def _value(tokens: list[re.Match[str]]) -> str | None:
    """A static partition value: a string, a number or bare word, or a typed literal (``DATE '2025-12-24'``)."""
    if len(tokens) == 1:
        token = tokens[0]
        if token["str"]:
            return _unquote(token["str"])
        return token["name"] if token["name"] and token["name"].lower() != "null" else None
    if len(tokens) == 2 and tokens[0]["name"] and tokens[0]["name"].lower() in _TYPED_LITERALS and tokens[1]["str"]:
        return _unquote(tokens[1]["str"])
    return None


def _spec(text: str, start: int) -> PartitionKeys | None:
    """The ``PARTITION (…)`` body from ``start`` (after the parenthesis) → its keys; None when a column is dynamic
    (no value), a value is NULL, or the clause is not one this reader understands."""
    pairs: list[tuple[str, str]] = []
    pos = start
    while True:
        tokens: list[re.Match[str]] = []
        while (match := _SPEC_TOKEN.match(text, pos)) is not None and match["op"] not in (",", ")"):
            tokens.append(match)
            pos = match.end()
        if match is None:
            return None
        pos = match.end()
        if len(tokens) < 3 or not tokens[0]["name"] or tokens[1]["op"] != "=":
            return None  # `PARTITION (date)` or `(date, region='eu')`: dynamic, any number of partitions
        value = _value(tokens[2:])
        if value is None:
            return None
        pairs.append((tokens[0]["name"].strip("`").lower(), value))  # Hive and Spark keep column names lower-cased
        if match["op"] == ")":
            try:
                return as_keys(pairs)
            except ValueError:
                return None


def partition_specs(sql: str) -> list[tuple[str, PartitionKeys | None]]:
    """Each ``INSERT … [TABLE] t PARTITION (…)`` of ``sql``: (the table as written, its static keys or None when a
    column is dynamic). Comments are skipped; strings and quoted names are not searched."""
    text = _COMMENT.sub(lambda m: " " if m[0].startswith(("--", "/*")) else m[0], sql)
    specs = []
    for match in _INSERT_PARTITION.finditer(text):
        if not _outside_quotes(text, match.start()):
            continue
        specs.append((match["table"], _spec(text, match.end())))
    return specs


def _outside_quotes(text: str, index: int) -> bool:
    return all(not (m.start() < index < m.end()) for m in _COMMENT.finditer(text))


def _partitions(url: str, default_schema: str | None, sql: str, outputs: tuple[TableKey, ...]
                ) -> dict[TableKey, PartitionKeys]:
    """Outputs written one static partition at a time: a table written with differing or dynamic specs gets none."""
    found: dict[TableKey, PartitionKeys | None] = {}
    for table, keys in partition_specs(sql):
        try:
            key = table_dataset(url, table, default_schema)
        except ValueError:
            continue
        if key in outputs:
            found[key] = keys if found.get(key, keys) == keys else None
    return {key: keys for key, keys in found.items() if keys is not None}


# --- lineage ------------------------------------------------------------------------------------------------------
def _parse(sql: str, dialect: str, default_schema: str | None) -> tuple[Any, list[str]]:
    try:
        meta = openlineage_sql.parse([sql], dialect=dialect, default_schema=default_schema)
    except BaseException as exc:  # the Rust parser can panic (a BaseException); lineage must not take the job down
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        return None, [f"{type(exc).__name__}: {exc}"]
    return meta, [f"statement {e.index + 1}: {e.message}" for e in meta.errors]


def _table_key(url: str, table: Any, default_schema: str | None, errors: list[str]) -> TableKey | None:
    parts = [p for p in (table.database, table.schema, table.name) if p]
    try:
        return table_dataset(url, parts, default_schema)
    except ValueError as exc:
        errors.append(str(exc))
        return None


def _keys(url: str, tables: Any, default_schema: str | None, errors: list[str]) -> list[TableKey]:
    keys = (_table_key(url, t, default_schema, errors) for t in tables)
    return list(dict.fromkeys(k for k in keys if k is not None))


_POSITIONAL = re.compile(r"_\d+")


def _input_table(origin: Any, tables: Any) -> Any:
    """The input table a column comes from. openlineage-sql names it as the query wrote the column (``x`` in
    ``SELECT x.a FROM s.x``), which qualified with the default schema named a table the query never read
    (``public.x``): an unqualified origin is the input table of that name when exactly one has it. (An unqualified
    column of a join is attributed by openlineage-sql to its first table; that is passed on as it comes.)"""
    if origin is None or origin.database or origin.schema:
        return origin
    same = [t for t in tables if t.name.lower() == origin.name.lower()]
    return same[0] if len(same) == 1 else origin


def _add_columns(target: dict[TableKey, dict[str, list[FieldRef]]], output: TableKey | None, meta: Any, url: str,
                 default_schema: str | None, errors: list[str]) -> None:
    for lineage in meta.column_lineage:
        descendant = lineage.descendant
        if _POSITIONAL.fullmatch(descendant.name):  # an unaliased expression: the parser invents `_0`, not a column
            continue
        owner = _table_key(url, descendant.origin, default_schema, errors) if descendant.origin else output
        if owner is None:
            continue
        refs = target.setdefault(owner, {}).setdefault(descendant.name, [])
        for column in lineage.lineage:
            origin = _input_table(column.origin, meta.in_tables)
            source = origin and _table_key(url, origin, default_schema, errors)
            if source and FieldRef(*source, column.name) not in refs:
                refs.append(FieldRef(*source, column.name))


def sql_lineage(sql: str, dialect: str, url: str, default_schema: str | None = None) -> SqlLineage:
    """Inputs, outputs and column lineage of ``sql`` run against ``url`` (pure; parse errors land in ``errors``)."""
    name = parser_dialect(dialect)
    parse_connection(url)  # an unusable URL is the caller's bug: raise now, not per table
    statements = split_statements(sql)
    meta, errors = _parse(sql, name, default_schema)
    if meta is None:
        return SqlLineage(errors=tuple(errors), statements=len(statements))
    inputs = _keys(url, meta.in_tables, default_schema, errors)
    outputs = _keys(url, meta.out_tables, default_schema, errors)
    columns: dict[TableKey, dict[str, list[FieldRef]]] = {}
    if len(outputs) == 1:
        _add_columns(columns, outputs[0], meta, url, default_schema, errors)
    elif len(outputs) > 1:  # the parser does not say which output a column belongs to: ask statement by statement
        for statement in statements:
            part, _ = _parse(statement, name, default_schema)
            if part is not None:
                own = _keys(url, part.out_tables, default_schema, [])
                _add_columns(columns, own[0] if len(own) == 1 else None, part, url, default_schema, [])
    column_lineage = {out: {col: tuple(refs) for col, refs in cols.items() if refs} for out, cols in columns.items()}
    return SqlLineage(tuple(inputs), tuple(outputs), {k: v for k, v in column_lineage.items() if v},
                      tuple(dict.fromkeys(errors)), len(statements),
                      _partitions(url, default_schema, sql, tuple(outputs)))


def _extraction_error_facet(lineage: SqlLineage) -> extraction_error_run.ExtractionErrorRunFacet:
    return extraction_error_run.ExtractionErrorRunFacet(
        totalTasks=max(lineage.statements, 1), failedTasks=min(len(lineage.errors), max(lineage.statements, 1)),
        errors=[extraction_error_run.Error(errorMessage=e) for e in lineage.errors], producer=PRODUCER)


def sql_task(sql: str, *, dialect: str, url: str, job_name: str, job_namespace: str | None = None,
             client: OpenLineageClient | None = None, parent: Parent | None = None,
             default_schema: str | None = None) -> TaskRun:
    """A run of a SQL job: a context manager (or decorator) emitting START, then COMPLETE or FAIL.

    Events carry the ``sql`` and ``jobType`` (BATCH / SQL / QUERY) job facets, the tables read and written, and
    ``columnLineage`` on the outputs. Unknown dialect or URL scheme → ``ValueError`` now; SQL that does not parse →
    a warning naming the parser error, and events without datasets.
    """
    lineage = sql_lineage(sql, dialect, url, default_schema)
    if lineage.errors:
        log.warning("SQL lineage of job %s is incomplete (%s parser): %s", job_name, parser_dialect(dialect),
                    "; ".join(lineage.errors))
    outputs = []
    for key in lineage.outputs:
        facet = lineage.column_lineage_facet(key)
        partition = lineage.partitions.get(key)
        outputs.append(DatasetState(*key, facets={"columnLineage": facet} if facet else {},
                                    io_facets={FACET_KEY: partition_dataset_facet(partition, "hook")} if partition
                                    else {}))
    run_facets = {"extractionError": _extraction_error_facet(lineage)} if lineage.errors else {}
    return TaskRun(
        job_name, job_namespace=job_namespace, client=client, parent=parent,
        job_facets={"sql": sql_job.SQLJobFacet(query=sql, dialect=str(dialect).strip().lower(), producer=PRODUCER),
                    "jobType": job_type_facet("SQL", "QUERY")},
        run_facets=run_facets,
        inputs=[DatasetState(*key) for key in lineage.inputs], outputs=outputs,
    )
