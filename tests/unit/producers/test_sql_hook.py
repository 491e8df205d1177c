"""SQL hook: lineage from SQL text (openlineage-sql) and the events emitted around a SQL task."""

from __future__ import annotations

import logging

import pytest

from kafka_lineage.producers.client.hooks import sql_lineage, sql_task
from kafka_lineage.producers.client.hooks.sql import FieldRef, parser_dialect, split_statements
from kafka_lineage.schemas.openlineage import validate_event
from tests.unit.ol_capture import capturing_client

PG = "jdbc:postgresql://db.example:5432/shop?user=etl&password=secret"
PG_NS = "postgres://db.example:5432"

INSERT_JOIN = """
INSERT INTO analytics.daily_sales (day, customer, total)
SELECT o.day, c.name AS customer, SUM(o.amount * o.qty) AS total
FROM sales.orders o
JOIN crm.customers c ON o.customer_id = c.id
WHERE o.status = 'paid'
GROUP BY o.day, c.name
"""


def test_insert_select_with_join_and_aggregate() -> None:
    lineage = sql_lineage(INSERT_JOIN, "postgres", PG)
    assert lineage.errors == ()
    assert set(lineage.inputs) == {(PG_NS, "shop.sales.orders"), (PG_NS, "shop.crm.customers")}
    assert lineage.outputs == ((PG_NS, "shop.analytics.daily_sales"),)
    columns = lineage.column_lineage[PG_NS, "shop.analytics.daily_sales"]
    assert columns["day"] == (FieldRef(PG_NS, "shop.sales.orders", "day"),)
    assert columns["customer"] == (FieldRef(PG_NS, "shop.crm.customers", "name"),)
    assert set(columns["total"]) == {FieldRef(PG_NS, "shop.sales.orders", "amount"),
                                     FieldRef(PG_NS, "shop.sales.orders", "qty")}  # derived + aggregated


def test_unqualified_tables_use_default_schema_then_platform_default() -> None:
    lineage = sql_lineage("INSERT INTO out SELECT a FROM inp", "postgres", PG)
    assert lineage.inputs == ((PG_NS, "shop.public.inp"),)
    staged = sql_lineage("INSERT INTO out SELECT a FROM inp", "postgres", PG, default_schema="staging")
    assert staged.outputs == ((PG_NS, "shop.staging.out"),)


def test_ctas_snowflake() -> None:
    url = "jdbc:snowflake://myorg-acct.snowflakecomputing.com/?db=ANALYTICS&schema=PUBLIC&warehouse=WH"
    lineage = sql_lineage("CREATE TABLE marts.orders_by_day AS SELECT order_date, COUNT(*) AS n, SUM(amount) AS amt "
                          "FROM raw.orders GROUP BY order_date", "snowflake", url)
    assert lineage.inputs == (("snowflake://myorg-acct", "ANALYTICS.raw.orders"),)
    assert lineage.outputs == (("snowflake://myorg-acct", "ANALYTICS.marts.orders_by_day"),)
    columns = lineage.column_lineage["snowflake://myorg-acct", "ANALYTICS.marts.orders_by_day"]
    assert columns["amt"] == (FieldRef("snowflake://myorg-acct", "ANALYTICS.raw.orders", "amount"),)
    assert columns["order_date"] == (FieldRef("snowflake://myorg-acct", "ANALYTICS.raw.orders", "order_date"),)


def test_bigquery_backticked_names() -> None:
    lineage = sql_lineage("INSERT INTO `proj.mart.out` (id, v) SELECT id, UPPER(v) AS v FROM `proj.raw.inp`",
                          "bigquery", "bigquery")
    assert lineage.inputs == (("bigquery", "proj.raw.inp"),)
    assert lineage.outputs == (("bigquery", "proj.mart.out"),)
    assert lineage.column_lineage["bigquery", "proj.mart.out"]["v"] == (FieldRef("bigquery", "proj.raw.inp", "v"),)


def test_bigquery_default_project_and_dataset_from_url() -> None:
    lineage = sql_lineage("INSERT INTO out SELECT x FROM other.inp", "bigquery", "bigquery://proj/ds")
    assert lineage.inputs == (("bigquery", "proj.other.inp"),)
    assert lineage.outputs == (("bigquery", "proj.ds.out"),)


def test_merge_and_update() -> None:
    merge = sql_lineage("MERGE INTO dim.customers t USING staging.customers s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET name = s.name "
                        "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)", "postgres", PG)
    assert merge.inputs == ((PG_NS, "shop.staging.customers"),)
    assert merge.outputs == ((PG_NS, "shop.dim.customers"),)
    update = sql_lineage("UPDATE sales.orders o SET status = p.status FROM sales.payments p WHERE o.id = p.order_id",
                         "postgres", PG)
    assert update.inputs == ((PG_NS, "shop.sales.payments"),)
    assert update.outputs == ((PG_NS, "shop.sales.orders"),)


def test_multi_statement_script_attributes_columns_to_each_output() -> None:
    script = """
    CREATE TABLE tmp_orders AS SELECT id, amount FROM sales.orders;  -- first; with a comment
    INSERT INTO mart.big_orders (id, amount) SELECT id, amount FROM tmp_orders WHERE amount > ';not a split';
    """
    lineage = sql_lineage(script, "postgres", PG)
    assert lineage.errors == () and lineage.statements == 2
    assert set(lineage.outputs) == {(PG_NS, "shop.public.tmp_orders"), (PG_NS, "shop.mart.big_orders")}
    assert (PG_NS, "shop.sales.orders") in lineage.inputs
    assert lineage.column_lineage[PG_NS, "shop.public.tmp_orders"]["amount"] == (
        FieldRef(PG_NS, "shop.sales.orders", "amount"),)
    assert lineage.column_lineage[PG_NS, "shop.mart.big_orders"]["amount"] == (
        FieldRef(PG_NS, "shop.public.tmp_orders", "amount"),)


def test_split_statements_respects_quotes_comments_and_dollar_bodies() -> None:
    sql = "SELECT ';'; /* ; */ SELECT \"a;b\" FROM t; -- trailing ;\nCREATE FUNCTION f() AS $$ a; b $$;;"
    assert split_statements(sql) == ["SELECT ';'", "/* ; */ SELECT \"a;b\" FROM t",
                                     "-- trailing ;\nCREATE FUNCTION f() AS $$ a; b $$"]
    assert split_statements("") == []


def test_broken_sql_gives_no_datasets_and_names_the_parser_error() -> None:
    lineage = sql_lineage("SELEC * FORM nowhere", "postgres", PG)
    assert lineage.inputs == lineage.outputs == ()
    assert lineage.errors and "SELEC" in lineage.errors[0]


def test_select_only_reads() -> None:
    lineage = sql_lineage("SELECT a, b FROM sales.orders", "postgres", PG)
    assert lineage.inputs == ((PG_NS, "shop.sales.orders"),) and lineage.outputs == ()
    assert dict(lineage.column_lineage) == {}


@pytest.mark.parametrize(("dialect", "expected"), [("Postgres", "postgres"), ("postgresql", "postgres"),
                                                   ("sqlserver", "mssql"), ("trino", "generic"),
                                                   ("snowflake", "snowflake"), ("bigquery", "bigquery")])
def test_dialect_names(dialect: str, expected: str) -> None:
    assert parser_dialect(dialect) == expected


def test_unknown_dialect_or_url_fails_at_call_time() -> None:
    with pytest.raises(ValueError, match="unknown SQL dialect 'cobol'"):
        sql_task("SELECT 1", dialect="cobol", url=PG, job_name="j")
    with pytest.raises(ValueError, match="unsupported connection URL scheme 'mongodb'") as raised:
        sql_task("SELECT 1", dialect="postgres", url="mongodb://u:hunter2@h/db", job_name="j")
    assert "hunter2" not in str(raised.value)


# --- events ----------------------------------------------------------------------------------------------------
def test_sql_task_emits_start_and_complete_with_datasets_and_facets() -> None:
    client, transport = capturing_client()
    with sql_task(INSERT_JOIN, dialect="postgres", url=PG, job_name="daily-sales", job_namespace="etl",
                  client=client) as run:
        run.set_output_statistics(row_count=42)
    start, complete = transport.events
    assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    assert start["run"]["runId"] == complete["run"]["runId"] == run.run_id
    for event in (start, complete):
        validate_event(event)
        assert event["job"]["namespace"] == "etl" and event["job"]["name"] == "daily-sales"
        assert event["producer"].startswith("https://github.com/kafka-lineage/")
        assert event["job"]["facets"]["sql"]["query"] == INSERT_JOIN
        assert event["job"]["facets"]["sql"]["dialect"] == "postgres"
        job_type = event["job"]["facets"]["jobType"]
        assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == ("BATCH", "SQL", "QUERY")
        assert {(d["namespace"], d["name"]) for d in event["inputs"]} == {
            (PG_NS, "shop.sales.orders"), (PG_NS, "shop.crm.customers")}
        (output,) = event["outputs"]
        fields = output["facets"]["columnLineage"]["fields"]
        assert fields["customer"]["inputFields"] == [
            {"namespace": PG_NS, "name": "shop.crm.customers", "field": "name", "transformations": []}]
        assert output["facets"]["columnLineage"]["_schemaURL"].endswith("ColumnLineageDatasetFacet")
    assert "outputStatistics" not in start["outputs"][0]["outputFacets"]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 42


def test_sql_task_failure_emits_fail_with_error_and_reraises() -> None:
    client, transport = capturing_client()
    with pytest.raises(RuntimeError, match="relation does not exist"), \
            sql_task(INSERT_JOIN, dialect="postgres", url=PG, job_name="daily-sales", client=client):
        raise RuntimeError("relation does not exist")
    start, fail = transport.events
    assert fail["eventType"] == "FAIL" and fail["run"]["runId"] == start["run"]["runId"]
    error = fail["run"]["facets"]["errorMessage"]
    assert error["message"] == "RuntimeError: relation does not exist"
    assert error["programmingLanguage"] == "python" and "Traceback" in error["stackTrace"]
    assert fail["outputs"][0]["facets"]["columnLineage"]


def test_unparseable_sql_still_runs_the_task_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    client, transport = capturing_client()
    ran = []
    with caplog.at_level(logging.WARNING), \
            sql_task("SELEC broken FROM", dialect="postgres", url=PG, job_name="broken", client=client):
        ran.append(True)
    assert ran == [True]
    assert [e["eventType"] for e in transport.events] == ["START", "COMPLETE"]
    assert all(e["inputs"] == [] and e["outputs"] == [] for e in transport.events)
    assert "broken" in caplog.text and "Expected: an SQL statement" in caplog.text
    extraction = transport.events[0]["run"]["facets"]["extractionError"]
    assert extraction["failedTasks"] == 1 and "SELEC" in extraction["errors"][0]["errorMessage"]


def test_job_namespace_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    client, transport = capturing_client()
    monkeypatch.setenv("OPENLINEAGE_NAMESPACE", "from-env")
    with sql_task("SELECT 1", dialect="postgres", url=PG, job_name="j", client=client):
        pass
    monkeypatch.delenv("OPENLINEAGE_NAMESPACE")
    with sql_task("SELECT 1", dialect="postgres", url=PG, job_name="j", client=client):
        pass
    assert [e["job"]["namespace"] for e in transport.events] == ["from-env", "from-env", "default", "default"]


def test_unaliased_expressions_get_no_invented_column_names() -> None:
    lineage = sql_lineage("INSERT INTO out SELECT x, y + 1 FROM inp", "postgres", PG)
    assert set(lineage.column_lineage[PG_NS, "shop.public.out"]) == {"x"}


def test_a_column_named_by_its_table_comes_from_the_table_read_not_a_phantom_in_the_default_schema() -> None:
    lineage = sql_lineage("INSERT INTO out SELECT x.a FROM s.x", "postgres", PG)
    assert lineage.inputs == ((PG_NS, "shop.s.x"),)
    assert lineage.column_lineage[PG_NS, "shop.public.out"]["a"] == (FieldRef(PG_NS, "shop.s.x", "a"),)
    # two tables of that name in different schemas: which one is not ours to guess
    both = sql_lineage("INSERT INTO out SELECT x.a FROM s.x JOIN t.x ON s.x.id = t.x.id", "postgres", PG)
    assert set(both.inputs) == {(PG_NS, "shop.s.x"), (PG_NS, "shop.t.x")}
