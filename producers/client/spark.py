"""PySpark: turn on the official OpenLineage Spark listener and route its events into the pipeline.

Route: the listener's own HTTP transport → ``lineage collector`` → Avro on the events topic. No Java code of ours
runs inside Spark, every Spark version the agent supports works, and the collector applies the same validation,
Avro contract and partition key as every other emitter (the agent's Kafka transport would write JSON, bypassing
the registry). The agent jar comes from Maven Central through Spark's own ``spark.jars.packages``::

    builder = SparkSession.builder.appName("orders-daily")
    spark = with_openlineage(builder, namespace="spark-prod").getOrCreate()

Settings not passed default to the pipeline's environment (``LINEAGE_COLLECTOR_HOST/PORT/TOKEN``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPENLINEAGE_SPARK_VERSION = "1.53.0"
OPENLINEAGE_SPARK_PACKAGE = f"io.openlineage:openlineage-spark_2.13:{OPENLINEAGE_SPARK_VERSION}"
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"


def openlineage_spark_conf(
    collector_url: str | None = None,
    *,
    namespace: str = "spark",
    token: str | None = None,
    parent_job: tuple[str, str] | None = None,
    parent_run_id: str | None = None,
    mirror_file: str | None = None,
    timeout_ms: int = 30_000,
) -> dict[str, str]:
    """Spark settings for the listener.

    ``parent_job``/``parent_run_id`` link the Spark application to an orchestrating run (e.g. an Airflow task), so
    its events share that root's partition key. ``mirror_file`` additionally writes every event as JSON lines to a
    local file (the agent's composite transport) — for audits and for proving the route is lossless.
    """
    if collector_url is None:  # the standard OpenLineage variables, else the collector's own settings
        env = os.environ
        collector_url = env.get("OPENLINEAGE_URL") or (
            f"http://{env.get('LINEAGE_COLLECTOR_HOST', '127.0.0.1')}:{env.get('LINEAGE_COLLECTOR_PORT', '5000')}")
        if token is None:
            token = env.get("OPENLINEAGE_API_KEY") or env.get("LINEAGE_COLLECTOR_TOKEN") or None
    http = {
        "type": "http",
        "url": collector_url.rstrip("/"),
        "endpoint": "/api/v1/lineage",
        "compression": "gzip",
        "timeoutInMillis": str(timeout_ms),
        **({"auth.type": "api_key", "auth.apiKey": token} if token else {}),  # sent as "Authorization: Bearer …"
    }
    conf = {"spark.extraListeners": LISTENER, "spark.openlineage.namespace": namespace}
    if mirror_file:
        conf["spark.openlineage.transport.type"] = "composite"
        conf.update({f"spark.openlineage.transport.transports.collector.{k}": v for k, v in http.items()})
        conf["spark.openlineage.transport.transports.mirror.type"] = "file"
        conf["spark.openlineage.transport.transports.mirror.location"] = mirror_file
    else:
        conf.update({f"spark.openlineage.transport.{k}": v for k, v in http.items()})
    if parent_job:
        conf["spark.openlineage.parentJobNamespace"], conf["spark.openlineage.parentJobName"] = parent_job
    if parent_run_id:
        conf["spark.openlineage.parentRunId"] = parent_run_id
    return conf


def with_openlineage(builder: SparkSession.Builder, collector_url: str | None = None, **options: object
                     ) -> SparkSession.Builder:
    """The builder with the agent package added to ``spark.jars.packages`` and the listener configured."""
    # The builder keeps options set so far in ``_options``; merging keeps the job's own packages.
    existing = getattr(builder, "_options", {}).get("spark.jars.packages", "")
    packages = [p for p in existing.split(",") if p.strip() and not p.startswith("io.openlineage:openlineage-spark")]
    builder = builder.config("spark.jars.packages", ",".join([*packages, OPENLINEAGE_SPARK_PACKAGE]))
    for key, value in openlineage_spark_conf(collector_url, **options).items():  # type: ignore[arg-type]
        builder = builder.config(key, value)
    return builder
