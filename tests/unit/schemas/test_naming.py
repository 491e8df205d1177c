"""Dataset naming per the OpenLineage naming spec: connection URLs, tables, paths, Kafka bootstrap lists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_lineage.schemas.naming import (
    kafka_namespace,
    namespace_for_url,
    parse_connection,
    path_dataset,
    redact_url,
    table_dataset,
)


@pytest.mark.parametrize(("url", "namespace"), [
    # Postgres: JDBC and SQLAlchemy forms, default port, lower-cased host, parameters dropped
    ("jdbc:postgresql://Host:5432/db?ssl=true", "postgres://host:5432"),
    ("jdbc:postgresql://HOST/db", "postgres://host:5432"),
    ("postgresql://user:pw@db.example.com:6543/app", "postgres://db.example.com:6543"),
    ("postgresql+psycopg2://user:pw@db.example.com/app", "postgres://db.example.com:5432"),
    ("postgres://db/app", "postgres://db:5432"),
    ("JDBC:PostgreSQL://DB/app", "postgres://db:5432"),
    ("  jdbc:postgresql://db/app  ", "postgres://db:5432"),
    ("jdbc:postgresql://h2:5433,H1:5432/db", "postgres://h1:5432"),
    ("jdbc:postgresql://h1:5432,h2:5433/db", "postgres://h1:5432"),
    ("jdbc:postgresql://[::1]:5432/db", "postgres://[::1]:5432"),
    ("jdbc:postgresql://10.0.0.7/db", "postgres://10.0.0.7:5432"),
    # MySQL / MariaDB
    ("jdbc:mysql://Host:3306/db", "mysql://host:3306"),
    ("jdbc:mysql://host/db?useSSL=false", "mysql://host:3306"),
    ("mysql+pymysql://u:p@host/db", "mysql://host:3306"),
    ("jdbc:mariadb://host/db", "mysql://host:3306"),
    # SQL Server
    ("jdbc:sqlserver://host:1433;databaseName=x", "sqlserver://host:1433"),
    ("jdbc:sqlserver://HOST;databaseName=x;user=u;password=p", "sqlserver://host:1433"),
    ("jdbc:sqlserver://host\\SQLEXPRESS:1434;databaseName=x", "sqlserver://host:1434"),
    ("jdbc:sqlserver://;serverName=Host;portNumber=1500;databaseName=x", "sqlserver://host:1500"),
    ("mssql+pyodbc://u:p@host:1433/db?driver=ODBC+Driver+18", "mssql://host:1433"),  # SQLAlchemy's, dbt's scheme
    # Oracle thin: service, //service, SID, credentials, TNS descriptor, SQLAlchemy
    ("jdbc:oracle:thin:@host:1521/svc", "oracle://host:1521"),
    ("jdbc:oracle:thin:@//Host:1521/svc", "oracle://host:1521"),
    ("jdbc:oracle:thin:@host/svc", "oracle://host:1521"),
    ("jdbc:oracle:thin:@host:1522:ORCL", "oracle://host:1522"),
    ("jdbc:oracle:thin:scott/tiger@host:1521/svc", "oracle://host:1521"),
    ("jdbc:oracle:thin:@(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=Db.X)(PORT=1523))(CONNECT_DATA=(SERVICE_NAME=s)))",
     "oracle://db.x:1523"),
    ("oracle+oracledb://u:p@host:1521/?service_name=svc", "oracle://host:1521"),
    # Redshift: cluster.region from the endpoint, IAM form, default port
    ("jdbc:redshift://examplecluster.abc123xyz789.us-west-2.redshift.amazonaws.com:5439/dev",
     "redshift://examplecluster.us-west-2:5439"),
    ("jdbc:redshift://examplecluster.abc123xyz789.us-west-2.redshift.amazonaws.com/dev",
     "redshift://examplecluster.us-west-2:5439"),
    ("jdbc:redshift://wg.123456789012.eu-west-1.redshift-serverless.amazonaws.com:5439/dev",
     "redshift://wg.eu-west-1:5439"),
    ("jdbc:redshift:iam://examplecluster:us-west-2/dev", "redshift://examplecluster.us-west-2:5439"),
    ("redshift+psycopg2://u:p@proxy.internal:5440/dev", "redshift://proxy.internal:5440"),
    # Snowflake: the account, whatever the URL form
    ("jdbc:snowflake://MyOrg-MyAccount.snowflakecomputing.com/?db=DB&warehouse=W", "snowflake://myorg-myaccount"),
    ("jdbc:snowflake://myorg-acct.privatelink.snowflakecomputing.com:443/?db=DB", "snowflake://myorg-acct"),
    ("snowflake://user:pw@myorg-acct/db/schema?warehouse=w", "snowflake://myorg-acct"),
    # BigQuery: one global namespace
    ("bigquery", "bigquery"),
    ("bigquery://my-project/dataset", "bigquery"),
    ("jdbc:bigquery://https://www.googleapis.com/bigquery/v2:443;ProjectId=p;OAuthType=3", "bigquery"),
    # Trino / Presto / DB2 / Teradata / ClickHouse / Hive
    ("jdbc:trino://Trino.example:8443/hive/sales?SSL=true", "trino://trino.example:8443"),
    ("jdbc:trino://trino/hive", "trino://trino:8080"),
    ("jdbc:presto://presto:8081/hive/default", "presto://presto:8081"),
    ("jdbc:db2://Db2Host:50001/SAMPLE:currentSchema=S;", "db2://db2host:50001"),
    ("jdbc:db2://db2host/SAMPLE", "db2://db2host:50000"),
    ("jdbc:teradata://TD.example/DATABASE=sales,DBS_PORT=1026", "teradata://td.example:1026"),
    ("jdbc:teradata://td.example/DATABASE=sales", "teradata://td.example:1025"),
    ("teradatasql://u:p@td.example", "teradata://td.example:1025"),
    ("jdbc:clickhouse://CH:8123/analytics", "clickhouse://ch:8123"),
    ("jdbc:ch://ch/analytics", "clickhouse://ch:8123"),
    ("jdbc:hive2://hive:10000/default;ssl=true", "hive://hive:10000"),
])
def test_namespace_for_url(url: str, namespace: str) -> None:
    assert namespace_for_url(url) == namespace


@pytest.mark.parametrize("url", [
    "jdbc:postgresql://admin:Sup3rS3cret@db/app",
    "postgresql://admin:Sup3r/S3cret@db/app",
    "postgresql://admin:Sup3r@S3cret@db/app",
    "jdbc:postgresql://db/app?user=admin&password=Sup3rS3cret",
    "jdbc:sqlserver://db:1433;databaseName=x;user=admin;password=Sup3rS3cret",
    "jdbc:oracle:thin:admin/Sup3rS3cret@db:1521/svc",
    "snowflake://admin:Sup3rS3cret@acct/db",
    "jdbc:snowflake://acct.snowflakecomputing.com/?private_key_pwd=Sup3rS3cret",
])
def test_namespaces_never_carry_credentials(url: str) -> None:
    assert "Sup3r" not in namespace_for_url(url) and "admin" not in namespace_for_url(url)


@pytest.mark.parametrize(("url", "needle"), [
    ("mongodb://admin:Sup3rS3cret@db:27017/app", "'mongodb'"),
    ("foo:admin:Sup3rS3cret@db", "'foo'"),
    ("jdbc:oracle:thin:admin/Sup3rS3cret@", "missing host"),
    ("jdbc:postgresql://admin:Sup3r?S3cret@db/app", "invalid port"),  # unencoded `?` in a password
    ("jdbc:postgresql://db:99999/app?password=Sup3rS3cret", "invalid port"),
    ("jdbc:postgresql://db:abc/app;password=Sup3rS3cret", "invalid port"),
    ("jdbc:postgresql://bad host/app?password=Sup3rS3cret", "invalid host"),
    ("jdbc:postgresql://[::1/app?pwd=Sup3rS3cret", "invalid IPv6"),
    ("jdbc:mysql:db?password=Sup3rS3cret", "expected //host"),
    ("jdbc:postgresql:", "no host"),
    ("sqlite:///tmp/x.db?password=Sup3rS3cret", "'sqlite'"),
])
def test_bad_urls_raise_value_errors_without_secrets(url: str, needle: str) -> None:
    with pytest.raises(ValueError) as raised:
        namespace_for_url(url)
    message = str(raised.value)
    assert needle in message
    assert "Sup3r" not in message and "S3cret" not in message


@pytest.mark.parametrize("url", ["", "   ", "://x", "jdbc:", "no scheme here", "jdbc:postgresql://db/app\n; DROP"])
def test_garbage_urls_raise_value_error(url: str) -> None:
    with pytest.raises(ValueError):
        namespace_for_url(url)


def test_non_string_url_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        namespace_for_url(None)  # type: ignore[arg-type]


def test_redact_url_masks_userinfo_and_secret_parameters() -> None:
    assert redact_url("postgres://u:pw@h/db") == "postgres://***@h/db"
    assert redact_url("jdbc:oracle:thin:scott/tiger@h:1521/s") == "jdbc:oracle:thin:***@h:1521/s"
    assert redact_url("jdbc:sqlserver://h;user=u;password=pw;x=1") == "jdbc:sqlserver://h;user=u;password=***;x=1"
    assert redact_url("jdbc:postgresql://h/db?PWD=pw&token=t") == "jdbc:postgresql://h/db?PWD=***&token=***"
    assert redact_url("jdbc:postgresql://h/db") == "jdbc:postgresql://h/db"


def test_parse_connection_keeps_database_and_schema() -> None:
    conn = parse_connection("jdbc:postgresql://h/shop?currentSchema=sales,public&password=x")
    assert (conn.platform, conn.database, conn.schema) == ("postgres", "shop", "sales")
    assert parse_connection("jdbc:db2://h/SAMPLE:currentSchema=S;").schema == "S"
    assert parse_connection("jdbc:trino://h/hive/web").database == "hive"
    assert parse_connection("jdbc:oracle:thin:@h:1521:ORCL").database == "ORCL"


@pytest.mark.parametrize(("url", "table", "default_schema", "expected"), [
    ("jdbc:postgresql://db/shop", "orders", None, ("postgres://db:5432", "shop.public.orders")),
    ("jdbc:postgresql://db/shop", "sales.orders", None, ("postgres://db:5432", "shop.sales.orders")),
    ("jdbc:postgresql://db/shop", "orders", "staging", ("postgres://db:5432", "shop.staging.orders")),
    ("jdbc:postgresql://db/shop?currentSchema=sales", "orders", None, ("postgres://db:5432", "shop.sales.orders")),
    ("jdbc:postgresql://db/shop", "other.sales.orders", None, ("postgres://db:5432", "other.sales.orders")),
    ("jdbc:postgresql://db/shop", '"My Schema"."Orders.2024"', None,
     ("postgres://db:5432", "shop.My Schema.Orders.2024")),
    ("jdbc:postgresql://db/", "sales.orders", None, ("postgres://db:5432", "sales.orders")),
    ("jdbc:mysql://db:3306/shop", "orders", None, ("mysql://db:3306", "shop.orders")),
    ("jdbc:mysql://db:3306/shop", "crm.customers", None, ("mysql://db:3306", "crm.customers")),
    ("jdbc:mysql://db:3306/shop", "`orders`", "crm", ("mysql://db:3306", "crm.orders")),
    ("jdbc:sqlserver://h;databaseName=dw", "orders", None, ("sqlserver://h:1433", "dw.dbo.orders")),
    ("jdbc:sqlserver://h;databaseName=dw", "[sales].[orders]", None, ("sqlserver://h:1433", "dw.sales.orders")),
    ("jdbc:oracle:thin:@h:1521/svc", "hr.emp", None, ("oracle://h:1521", "svc.hr.emp")),
    ("jdbc:oracle:thin:@h:1521:ORCL", "emp", "HR", ("oracle://h:1521", "ORCL.HR.emp")),
    ("jdbc:redshift://c.x.us-east-1.redshift.amazonaws.com/dev", "events", None,
     ("redshift://c.us-east-1:5439", "dev.public.events")),
    ("jdbc:snowflake://org-acct.snowflakecomputing.com/?db=DB&schema=RAW", "T", None,
     ("snowflake://org-acct", "DB.RAW.T")),
    ("snowflake://u:p@org-acct/DB/RAW", "OTHER.T", None, ("snowflake://org-acct", "DB.OTHER.T")),
    ("bigquery", "proj.ds.t", None, ("bigquery", "proj.ds.t")),
    ("bigquery", "`proj.ds.t`", None, ("bigquery", "proj.ds.t")),
    ("bigquery://proj/ds", "t", None, ("bigquery", "proj.ds.t")),
    ("jdbc:trino://h:8080/hive/web", "clicks", None, ("trino://h:8080", "hive.web.clicks")),
    ("jdbc:teradata://td/DATABASE=sales", "orders", None, ("teradata://td:1025", "sales.orders")),
    ("jdbc:clickhouse://ch/analytics", "hits", None, ("clickhouse://ch:8123", "analytics.hits")),
    ("jdbc:db2://h/SAMPLE:currentSchema=S;", "T", None, ("db2://h:50000", "SAMPLE.S.T")),
    ("jdbc:postgresql://db/shop", ("sales", "orders"), None, ("postgres://db:5432", "shop.sales.orders")),
    ("jdbc:postgresql://db/shop", ["my.schema", "t"], None, ("postgres://db:5432", "shop.my.schema.t")),
])
def test_table_dataset(url: str, table, default_schema: str | None, expected: tuple[str, str]) -> None:
    assert table_dataset(url, table, default_schema) == expected


@pytest.mark.parametrize(("url", "table"), [
    ("jdbc:postgresql://db/shop", ""),
    ("jdbc:postgresql://db/shop", "a..b"),
    ("jdbc:postgresql://db/shop", ".orders"),
    ("jdbc:postgresql://db/shop", "a.b.c.d"),
    ("jdbc:mysql://db/shop", "a.b.c"),
    ("jdbc:postgresql://db/shop", '"unbalanced'),
    ("jdbc:postgresql://db/shop", "orders\x00"),
])
def test_bad_table_names_raise(url: str, table: str) -> None:
    with pytest.raises(ValueError):
        table_dataset(url, table)


@pytest.mark.parametrize(("path", "expected"), [
    ("/data/clean/orders.parquet", ("file", "/data/clean/orders.parquet")),
    ("/data/x/../clean//orders.csv", ("file", "/data/clean/orders.csv")),
    ("file:/data/x.csv", ("file", "/data/x.csv")),
    ("file:///data/x.csv", ("file", "/data/x.csv")),
    ("file://localhost/data/x.csv", ("file", "/data/x.csv")),
    ("file:///data/with%20space.csv", ("file", "/data/with space.csv")),
    ("file://FileServer/share/x.csv", ("file://fileserver", "/share/x.csv")),
    ("s3://bucket/raw/orders.csv", ("s3://bucket", "raw/orders.csv")),
    ("s3a://bucket/raw/orders.csv", ("s3://bucket", "raw/orders.csv")),
    ("s3n://bucket/raw/orders.csv", ("s3://bucket", "raw/orders.csv")),
    ("S3A://Bucket/raw/Orders.csv", ("s3://bucket", "raw/Orders.csv")),
    ("s3://bucket", ("s3://bucket", "/")),
    ("s3://bucket/", ("s3://bucket", "/")),
    ("s3://AKIAKEY:secret@bucket/k", ("s3://bucket", "k")),
    ("gs://bucket/a/b.json", ("gs://bucket", "a/b.json")),
    ("hdfs://NameNode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
    ("hdfs://namenode/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
    ("hdfs://nn:9000/", ("hdfs://nn:9000", "/")),
    ("abfss://container@account.dfs.core.windows.net/p/x.parquet",
     ("abfss://container@account.dfs.core.windows.net", "p/x.parquet")),
    ("abfs://Container@Account.dfs.core.windows.net/p", ("abfss://container@account.dfs.core.windows.net", "p")),
    ("wasbs://c@acct.blob.core.windows.net/k/o.csv", ("wasbs://c@acct.dfs.core.windows.net", "k/o.csv")),
    ("wasb://c@acct.blob.core.windows.net/k", ("wasbs://c@acct.dfs.core.windows.net", "k")),
])
def test_path_dataset(path: str, expected: tuple[str, str]) -> None:
    assert path_dataset(path) == expected


def test_relative_and_pathlike_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert path_dataset("out/x.csv") == ("file", os.path.join(str(tmp_path), "out", "x.csv"))
    assert path_dataset(tmp_path / "y.csv") == ("file", str(tmp_path / "y.csv"))


@pytest.mark.parametrize("path", [
    "", "  ", "http://example.com/x.csv", "ftp://h/x", "s3:/bucket/k", "s3:///k", "s3://bad bucket/k",
    "hdfs:///warehouse/t", "hdfs://nn:0/p", "abfss://account.dfs.core.windows.net/p",
    "abfss://c@evil.example.com/p", "C:\\data\\x.csv", "/data/\nx",
])
def test_bad_paths_raise(path: str) -> None:
    with pytest.raises(ValueError):
        path_dataset(path)


@pytest.mark.parametrize(("servers", "namespace"), [
    ("localhost:9092", "kafka://localhost:9092"),
    ("B:9092,a:9093", "kafka://a:9093"),
    ("a:9093,B:9092", "kafka://a:9093"),
    (" b:9092 , A:9092 ,", "kafka://a:9092"),
    ("broker", "kafka://broker:9092"),
    ("SASL_SSL://Broker-1.prod:9094,PLAINTEXT://broker-2.prod:9094", "kafka://broker-1.prod:9094"),
    ("[::1]:9092", "kafka://[::1]:9092"),
    ("10.0.0.2:9092,10.0.0.10:9092", "kafka://10.0.0.10:9092"),
])
def test_kafka_namespace(servers: str, namespace: str) -> None:
    assert kafka_namespace(servers) == namespace


def test_kafka_namespace_is_order_independent() -> None:
    brokers = ["k3.prod:9092", "K1.prod:9092", "k2.prod:9092"]
    assert len({kafka_namespace(",".join(brokers[i:] + brokers[:i])) for i in range(3)}) == 1


@pytest.mark.parametrize("servers", ["", ",", "bad host:9092", "h:notaport", "h:70000"])
def test_bad_bootstrap_lists_raise(servers: str) -> None:
    with pytest.raises(ValueError):
        kafka_namespace(servers)
