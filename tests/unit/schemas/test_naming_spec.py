"""The naming spec's table, row by row: every identity as OpenLineage's own naming helpers format it
(``openlineage.client.naming``) is canonical here (the processor keeps it as it is), and the spellings producers
really send of it (other schemes of one platform, case, default ports left out, paths in the namespace, a leading
``/`` on an object key, metastore URIs, Snowflake locators) become that identity — never a name it never had."""

from __future__ import annotations

import pytest
from openlineage.client.naming import dataset as ol

from kafka_lineage.processors.normalize import canonical_identity
from kafka_lineage.schemas.naming import canonical_dataset

SPEC_ROWS = [
    ol.Athena(region_name="us-east-1", catalog="awsdatacatalog", database="sales", table="orders"),
    ol.AWSGlue(region_name="us-east-1", account_id="123456789012", database_name="sales", table_name="orders"),
    ol.AzureCosmosDB(host="acct.documents.azure.com", database="shop", table="orders"),
    ol.AzureDataExplorer(host="cluster.westeurope", database="shop", table="orders"),
    ol.AzureSynapse(host="ws.sql.azuresynapse.net", port="1433", schema="dbo", table="orders"),
    ol.BigQuery(project_id="my-project", dataset_name="sales", table_name="orders"),
    ol.Cassandra(host="cassandra", port="9042", keyspace="shop", table="orders"),
    ol.CrateDB(host="crate", port="5432", database="doc", schema="shop", table="orders"),
    ol.DB2(host="db2", port="50000", database="SAMPLE", schema="SHOP", table="ORDERS"),
    ol.MySQL(host="mysql", port="3306", database="shop", table="orders"),
    ol.OceanBase(host="ob", port="2881", database="shop", table="orders"),
    ol.Oracle(host="oracle", port="1521", service_name="ORCLPDB1", schema="SHOP", table="ORDERS"),
    ol.Postgres(host="db", port="5432", database="shop", schema="public", table="orders"),
    ol.Teradata(host="td", port="1025", database="shop", table="orders"),
    ol.Redshift(cluster_identifier="analytics", region="us-east-1", port="5439", database="dev", schema="public",
                table="orders"),
    ol.Snowflake(organization_name="myorg", account_name="myaccount", database="DB", schema="SCH", table="T"),
    ol.Trino(host="trino", port="8080", catalog="hive", schema="web", table="clicks"),
    ol.ABFSS(container="data", service="acct", path="raw/orders"),
    ol.DBFS(workspace="ws", path="/mnt/raw/orders"),
    ol.GCS(bucket_name="bucket", object_key="raw/orders.parquet"),
    ol.HDFS(namenode_host="nn", namenode_port="8020", path="/warehouse/orders"),
    ol.Hive(host="metastore", port="9083", database="shop", table="orders"),
    ol.Kafka(bootstrap_server_host="broker", port="9092", topic="orders"),
    ol.LocalFileSystem(path="/data/orders.csv"),
    ol.RemoteFileSystem(host="fileserver", path="/data/orders.csv"),
    ol.S3(bucket_name="bucket", object_key="raw/orders.parquet"),
    ol.WASBS(container="data", service_name="acct", object_key="raw/orders"),
]


@pytest.mark.parametrize("row", SPEC_ROWS, ids=lambda row: type(row).__name__)
def test_every_identity_the_spec_names_is_canonical(row: ol.DatasetNaming) -> None:
    identity = (row.get_namespace(), row.get_name())
    assert canonical_identity(*identity)[:2] == identity


@pytest.mark.parametrize(("sent", "canonical"), [
    # other schemes and spellings of one platform
    (("postgresql://DB", "shop.public.orders"), ("postgres://db:5432", "shop.public.orders")),
    (("jdbc:postgresql://db:5432/shop", "public.orders"), ("postgres://db:5432", "shop.public.orders")),
    (("mysql://MySQL", "shop.orders"), ("mysql://mysql:3306", "shop.orders")),
    (("s3a://bucket", "raw/orders.parquet"), ("s3://bucket", "raw/orders.parquet")),
    (("s3://bucket", "/raw/orders.parquet"), ("s3://bucket", "raw/orders.parquet")),  # an object key has no `/`
    (("s3://bucket/raw", "orders.parquet"), ("s3://bucket", "raw/orders.parquet")),
    (("gs://bucket", "/raw/orders.parquet"), ("gs://bucket", "raw/orders.parquet")),
    (("hdfs://nn", "/warehouse/orders"), ("hdfs://nn:8020", "/warehouse/orders")),
    (("file", "file:///data/orders.csv"), ("file", "/data/orders.csv")),
    (("kafka://b2:9092,B1:9092", "orders"), ("kafka://b1:9092", "orders")),
    # SQL Server: the JDBC driver's `sqlserver://` and SQLAlchemy's/dbt's `mssql://` are both kept as sent
    (("mssql://SQL:1433", "dw.dbo.orders"), ("mssql://sql:1433", "dw.dbo.orders")),
    (("sqlserver://sql", "dw.dbo.orders"), ("sqlserver://sql:1433", "dw.dbo.orders")),
    # Hive: named by its metastore; a thrift:// metastore URI is that namespace, no HiveServer2 port is invented
    (("thrift://Metastore", "shop.orders"), ("hive://metastore:9083", "shop.orders")),
    (("thrift://metastore:9083", "shop.orders"), ("hive://metastore:9083", "shop.orders")),
    (("hive://metastore", "shop.orders"), ("hive://metastore", "shop.orders")),
    # Snowflake: account locators completed with their region and cloud, as OpenLineage names them
    (("snowflake://XY12345", "DB.SCH.T"), ("snowflake://xy12345.us-west-1.aws", "DB.SCH.T")),
    (("snowflake://xy12345.us-east-2", "DB.SCH.T"), ("snowflake://xy12345.us-east-2.aws", "DB.SCH.T")),
    (("snowflake://xy12345.east-us-2.azure", "DB.SCH.T"), ("snowflake://xy12345.east-us-2.azure", "DB.SCH.T")),
    (("snowflake://MyOrg-MyAccount.snowflakecomputing.com", "DB.SCH.T"), ("snowflake://myorg-myaccount", "DB.SCH.T")),
])
def test_spellings_producers_send_become_the_spec_identity(sent: tuple[str, str], canonical: tuple[str, str]
                                                          ) -> None:
    assert canonical_dataset(*sent) == canonical
    assert canonical_dataset(*canonical) == canonical  # and the canonical form is a fixed point
