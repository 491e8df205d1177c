"""A PySpark batch job with the OpenLineage Spark listener: the Kafka topic Flink writes (JSON values) read through
Spark's Kafka source (``spark-sql-kafka`` through ``spark.jars.packages``, beside the listener's package), parsed,
written as a Parquet catalog table. Run by the streaming-engines scenario (``kafka_lineage_devtools.engines``):

    python -m kafka_lineage_devtools.engine_jobs.spark_orders_lake \
        BOOTSTRAP TOPIC WAREHOUSE_DIR METASTORE_URI COLLECTOR_URL APP_NAME

The table is ``lake.orders_clean`` in the session catalog, stored under WAREHOUSE_DIR; METASTORE_URI
(``thrift://host:9083``) is the metastore the listener names the table by (its ``symlinks``). Prints ``ROWS <n>``.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafka_lineage.producers.client.spark import with_openlineage

# Spark's Kafka source for the installed PySpark: 4.3.0 is on PyPI but not on Maven Central (no Spark 4.3.0 artifact
# there at all), so the newest published 4.x connector; its Spark dependencies are `provided` (the running Spark's).
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"


def main(bootstrap: str, topic: str, warehouse: str, metastore: str, collector: str, app: str) -> None:
    builder = (SparkSession.builder.master("local[1]").appName(app)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.warehouse.dir", warehouse)
               .config("spark.hadoop.hive.metastore.uris", metastore)
               .config("spark.jars.packages", KAFKA_PACKAGE)
               # Spark ships slf4j; Ivy fails on a local Maven repository holding only its POM (a Maven-resolved
               # parent of another build), a known Ivy limitation, so it is not resolved again.
               .config("spark.jars.excludes", "org.slf4j:slf4j-api"))
    spark = with_openlineage(builder, collector, namespace="spark-engines",
                             mirror_file=os.environ.get("SPARK_LINEAGE_MIRROR")).getOrCreate()
    try:
        value = "order_id STRING, country STRING, amount DOUBLE, origin STRING"
        orders = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                  .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                  .select(F.from_json(F.col("value").cast("string"), value).alias("o")).select("o.*"))
        spark.sql("CREATE DATABASE IF NOT EXISTS lake")
        orders.write.mode("overwrite").format("parquet").saveAsTable("lake.orders_clean")
        print(f"ROWS {spark.table('lake.orders_clean').count()}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
