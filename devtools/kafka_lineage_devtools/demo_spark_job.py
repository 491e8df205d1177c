"""The demo's PySpark batch pipeline, run with the official OpenLineage listener: raw CSV → cleaned → aggregated.

Usage: python -m kafka_lineage_devtools.demo_spark_job WORKDIR COLLECTOR_URL DAY [--amount-as-string]
``--amount-as-string`` is the upstream change the demo makes: the cleaned table's ``amount`` becomes a string.
``DAY`` (YYYY-MM-DD) is the partition of the daily table ``daily_revenue/date=DAY`` the run writes: the listener
names that path, and the processor makes it the table ``daily_revenue`` with the partition ``date=DAY``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafka_lineage.producers.client.spark import with_openlineage


def main(workdir: Path, collector_url: str, day: str, amount_as_string: bool) -> None:
    raw, lake = workdir / "raw", workdir / "lake"
    builder = (SparkSession.builder.master("local[2]").appName("orders_pipeline")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    spark = with_openlineage(builder, collector_url, namespace="demo-spark").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        orders = spark.read.option("header", True).option("inferSchema", True).csv(str(raw / "orders.csv"))
        customers = spark.read.option("header", True).csv(str(raw / "customers.csv"))
        cleaned = (orders.where(F.col("amount") > 0).join(customers, "customer_id")
                   .select("order_id", "customer_id", "country", F.col("amount").cast("double").alias("amount")))
        if amount_as_string:  # the breaking upstream change
            cleaned = cleaned.withColumn("amount", F.col("amount").cast("string"))
        cleaned.write.mode("overwrite").parquet(str(lake / "orders_cleaned"))
        revenue = (spark.read.parquet(str(lake / "orders_cleaned"))
                   .groupBy("country").agg(F.sum(F.col("amount").cast("double")).alias("revenue")))
        revenue.write.mode("overwrite").parquet(str(lake / "revenue_by_country"))
        revenue.write.mode("overwrite").parquet(str(lake / "daily_revenue" / f"date={day}"))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], "--amount-as-string" in sys.argv[4:])
