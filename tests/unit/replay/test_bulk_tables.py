"""GraphBatch → neo4j-admin CSV (replay/bulk/tables.py): every row kind mapped, properties as the statements set
them on an empty graph, CSV quoting, arrays, ids and the import arguments."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from kafka_lineage.graph.batch import GraphBatch
from kafka_lineage.graph.coverage import Coverage
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.keys import stored_key
from kafka_lineage.graph.statements import STATEMENTS
from kafka_lineage.replay.bulk.tables import (
    KNOWN_KINDS,
    CsvFiles,
    ImportTables,
    Table,
    TableError,
    csv_line,
    import_tables,
    with_coverage,
    write_csv,
)
from tests.unit.replay.bulk_events import AWKWARD, LONG_NAME, rich_events

NS = "bulk-unit"


def table(tables: ImportTables, name: str) -> list[dict[str, Any]]:
    """A table's rows as {property: value}, without nulls (they set nothing)."""
    found = next(t for t in (*tables.nodes, *tables.relationships) if t.name == name)
    names = [column.split(":")[0] or column for column in found.header]
    return [{name: value for name, value in zip(names, row, strict=True) if value is not None} for row in found.rows]


@pytest.fixture(scope="module")
def tables() -> ImportTables:
    return import_tables(graph_batch(rich_events(NS)))


def test_every_statement_kind_is_mapped():
    assert set(STATEMENTS) <= KNOWN_KINDS


def test_every_row_kind_is_in_the_sample(tables):
    assert set(graph_batch(rich_events(NS)).rows) == set(STATEMENTS)
    assert all(count > 0 for count in tables.counts().values())


def test_runs_state_times_groups_and_totals(tables):
    runs = {row["runId"]: row for row in table(tables, "Run")}
    first = runs["aaaaaaaa-0000-4000-8000-000000000001"]
    assert first["state"] == "COMPLETE" and first["stateRank"] == 2
    assert first["startTime"] == "2025-12-24T10:00:00.000000Z"
    assert first["endTime"] == first["lastEventTime"] == "2025-12-24T10:05:00.123456Z"  # +01:00 → UTC
    assert first["nominalStartTime"] == "2025-12-24T00:00:00.000000Z" and "nominalEndTime" not in first
    assert first["nominalTimeOrder"].startswith("0|2025-12-24T10:00:00.000000Z|")
    # totals over the run's READ (one dataset: 100 rows) and WROTE edges
    assert (first["inputRowCount"], first["inputBytes"], first["outputRowCount"], first["outputBytes"]) == (
        100, 2048, 100, 1000)
    failed = runs["aaaaaaaa-0000-4000-8000-000000000002"]
    assert failed["state"] == "FAIL" and failed["errorMessage"] == AWKWARD and failed["errorLanguage"] == "python"
    assert failed["outputRowCount"] == 7  # the latest (terminal) statistics
    backfill = runs["aaaaaaaa-0000-4000-8000-000000000003"]
    assert (backfill["backfillPlanId"], backfill["backfillFrom"], backfill["backfillTo"]) == (
        "plan-1", "2025-12-24", "2025-12-24")
    assert "backfillPlanId" not in first and "backfillOrder" not in first
    child = runs["aaaaaaaa-0000-4000-8000-000000000004"]
    assert "inputRowCount" not in child  # no statistics: no totals set


def test_jobs_search_key_latest_run_and_type(tables):
    jobs = {row["name"]: row for row in table(tables, "Job")}
    daily = jobs["daily"]
    assert daily["searchKey"] == "daily"
    assert (daily["processingType"], daily["integration"], daily["jobType"]) == ("BATCH", "SPARK", "JOB")
    assert "eventContentMode" not in daily and daily["jobTypeOrder"].startswith("2025-12-24T10:05:00.123456Z|")
    # the run with the latest start, else last event time: the backfill (no START) at 2025-12-26T09:00
    assert daily["latestRunId"] == "aaaaaaaa-0000-4000-8000-000000000003"
    assert daily["latestRunKey"] == "2025-12-26T09:00:00.000000Z"
    assert jobs[AWKWARD]["namespace"] == "" and jobs[AWKWARD]["searchKey"] == AWKWARD.lower()


def test_hashed_keys_keep_the_whole_value(tables):
    stored = stored_key(LONG_NAME)
    assert stored != LONG_NAME
    job = next(row for row in table(tables, "Job") if row["name"] == stored)
    assert job["fullName"] == LONG_NAME and "fullNamespace" not in job
    field = next(row for row in table(tables, "Field") if row["field"] == stored)
    assert field["fullField"] == LONG_NAME and field["fullName"] == LONG_NAME
    assert any(row.get("fullName") == LONG_NAME for row in table(tables, "SchemaVersion"))
    assert any(row.get("fullName") == LONG_NAME for row in table(tables, "Dataset"))


def test_partitions_unions_and_latest_groups(tables):
    partitions = {row["key"]: row for row in table(tables, "Partition") if row["name"] == "warehouse/orders"}
    reported = partitions["date=2025-12-25"]
    assert reported["markers"] == ["2025-12-26T12:00:00.000000Z _SUCCESS"]
    assert reported["staleMarks"] == ["2025-12-26T12:00:00.000000Z upstream"]
    assert reported["requiredMarker"] == "_SUCCESS"
    versions = table(tables, "WROTE_PARTITION")
    assert {tuple(row["failed"]) for row in versions} == {("unique",)}
    assert {tuple(row["passed"]) for row in versions} == {("not_null(id)",)}
    written = [row for row in versions if row.get("markers")]
    assert {row["rowCount"] for row in written} == {100, 120}


def test_schema_version_keeps_its_first_observation_and_edges_their_times(tables):
    versions = [row for row in table(tables, "SchemaVersion") if row["name"] == "warehouse/orders"]
    assert [row["firstSeen"] for row in versions] == ["2025-12-24T10:05:00.123456Z"]
    derives = table(tables, "DERIVES_FROM")
    assert {row["transformation"] for row in derives} == {"DIRECT/IDENTITY", "DIRECT/HASH(masked)"}
    assert {(row["firstSeen"], row["lastSeen"]) for row in derives} == {
        ("2025-12-24T10:05:00.123456Z", "2025-12-26T09:00:00.000000Z")}
    assert [row["type"] for row in table(tables, "SAME_AS")] == ["TABLE"]
    facets = {(row["name"], row["key"]): row for row in table(tables, "Facet")}
    assert "json" not in facets[(AWKWARD, "sql")] and "facetOrder" in facets[(AWKWARD, "sql")]  # deleted
    assert "json" not in facets[("warehouse/orders", "documentation")]  # a later DatasetEvent deleted it


def test_relationship_ends_are_node_ids_of_their_labels(tables):
    runs = {row[":ID(Run)"]: row["runId"] for row in table(tables, "Run")}
    jobs = {row[":ID(Job)"]: row["name"] for row in table(tables, "Job")}
    pairs = {(runs[row[":START_ID(Run)"]], jobs[row[":END_ID(Job)"]]) for row in table(tables, "OF_JOB")}
    assert ("aaaaaaaa-0000-4000-8000-000000000001", "daily") in pairs
    assert ("aaaaaaaa-0000-4000-8000-000000000004", AWKWARD) in pairs
    child = {(runs[row[":START_ID(Run)"]], runs[row[":END_ID(Run)"]]) for row in table(tables, "CHILD_OF")}
    assert child == {("aaaaaaaa-0000-4000-8000-000000000004", "aaaaaaaa-0000-4000-8000-000000000001")}


def test_unknown_kinds_columns_and_ends_are_refused():
    batch = graph_batch(rich_events(NS))
    with pytest.raises(TableError, match="row kinds"):
        import_tables(GraphBatch({**batch.rows, "new_kind": ({"x": 1},)}))
    jobs = tuple({**row, "newProperty": 1} for row in batch["jobs"])
    with pytest.raises(TableError, match="newProperty"):
        import_tables(GraphBatch({**batch.rows, "jobs": jobs}))
    with pytest.raises(TableError, match="OF_JOB"):
        import_tables(GraphBatch({**batch.rows, "jobs": batch["jobs"][1:]}))


def test_csv_line_quotes_strings_and_leaves_nulls_empty():
    assert csv_line([0, "", None, 'a"b,c\nd', 2**40, ["x", "y;z"]], "\x1f") == (
        '0,"",,"a""b,c\nd",1099511627776,"x\x1fy;z"\n')
    with pytest.raises(TableError):
        csv_line([True], "\x1f")


def read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_write_csv_round_trips_and_names_the_options(tmp_path, tables):
    files = write_csv(tables, tmp_path)
    assert files.multiline  # AWKWARD holds a line break
    assert files.array_delimiter == "\x1f" or "\x1f" not in files.array_delimiter
    labels = dict(files.nodes)
    rows = read_csv(labels["Job"])
    header = rows[0]
    assert header[0] == ":ID(Job)" and "latestRunId:string" in header
    name = header.index("name:string")
    assert AWKWARD in [row[name] for row in rows[1:]]
    types = dict(files.relationships)
    assert set(types) == {t.name for t in tables.relationships}
    arguments = files.admin_arguments("neo4j", tmp_path / "report")
    assert arguments[0] == "neo4j"  # before the options that take any number of files
    assert f"--nodes=Job={labels['Job']}" in arguments
    assert f"--relationships=OF_JOB={types['OF_JOB']}" in arguments
    assert "--multiline-fields=true" in arguments and "--id-type=STRING" in arguments


def test_array_delimiter_avoids_characters_in_values(tmp_path):
    tables = ImportTables([Table("Partition", [":ID(Partition)", "markers:string[]"], [[0, ["a\x1fb"]]])], [])
    files = write_csv(tables, tmp_path)
    assert files.array_delimiter == "\x1e" and not files.multiline
    assert read_csv(dict(files.nodes)["Partition"])[1] == ["0", "a\x1fb"]
    assert "--array-delimiter=U+001E" in files.admin_arguments("neo4j", tmp_path / "r")


def test_empty_tables_are_left_out(tmp_path):
    files = write_csv(ImportTables([Table("Job", [":ID(Job)"])], [Table("OF_JOB", [":START_ID(Run)"])]), tmp_path)
    assert files == CsvFiles((), (), "\x1f", False)


def test_the_coverage_node_goes_with_the_files(tmp_path):
    files = with_coverage(write_csv(ImportTables([], []), tmp_path), Coverage("r1", "lineage.events", {1: 7, 0: 12}),
                          tmp_path)
    (label, path), = files.nodes
    assert label == "RebuildCoverage" and f"--nodes=RebuildCoverage={path}" in files.admin_arguments("neo4j", tmp_path)
    header, row = read_csv(path)
    assert header == [":ID(RebuildCoverage)", "rebuild:string", "topic:string", "partitions:int[]", "ends:long[]"]
    assert row == ["coverage", "r1", "lineage.events", "0\x1f1", "12\x1f7"]
