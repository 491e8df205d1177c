"""A small real PySpark batch job: read two CSV files, join them, aggregate, write Parquet — with OpenLineage on.

Usage: python spark_orders.py WORKDIR COLLECTOR_URL TOKEN MIRROR_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafka_lineage.producers.client.spark import with_openlineage


def main(workdir: Path, collector_url: str, token: str, mirror_file: str) -> None:
    raw = workdir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "orders.csv").write_text("order_id,customer_id,amount\n1,1,10.5\n2,2,20.0\n3,1,7.25\n")
    (raw / "customers.csv").write_text("customer_id,name,country\n1,Ada,UK\n2,Linus,FI\n")
    builder = (SparkSession.builder.master("local[2]").appName("orders_by_country")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    spark = with_openlineage(builder, collector_url, namespace="spark-tests", token=token,
                             mirror_file=mirror_file).getOrCreate()
    try:
        orders = spark.read.option("header", True).option("inferSchema", True).csv(str(raw / "orders.csv"))
        customers = spark.read.option("header", True).csv(str(raw / "customers.csv"))
        (orders.join(customers, "customer_id")
         .groupBy("country").agg(F.sum("amount").alias("revenue"))
         .write.mode("overwrite").parquet(str(workdir / "mart" / "revenue_by_country")))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
