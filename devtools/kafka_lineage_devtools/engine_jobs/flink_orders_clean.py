"""A streaming PyFlink Table API job with the OpenLineage listener reading what a Kafka Connect source writes: Avro
values through the schema registry (Flink's ``avro-confluent`` format, against Apicurio's Confluent-compatible API),
each record ``{line: "order_id,country,amount", origin}`` as the Connect SMTs shaped it. Writes the parsed orders as
JSON to a Kafka topic and to a filesystem table partitioned by country. Run by the streaming-engines scenario
(``kafka_lineage_devtools.engines``):

    python -m kafka_lineage_devtools.engine_jobs.flink_orders_clean \
        BOOTSTRAP REGISTRY_URL SOURCE SINK TABLE_PATH COLLECTOR_URL REST_PORT JOB_NAME

Runs until SIGTERM, then cancels the job and stays up 5 s for the listener's ABORT. Prints ``JOB_ID <id>`` when
submitted and ``JOB_STATE <state>`` at the end.
"""

from __future__ import annotations

import signal
import sys

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment

from kafka_lineage.producers.client.flink import default_cache_dir, resolve_jars, with_openlineage
from kafka_lineage_devtools.engine_jobs import linger, supervise

# Flink's Avro format with the Confluent registry client, shaded (the 2.0 line; no 2.0.1 release of it exists).
AVRO_CONFLUENT_PACKAGE = "org.apache.flink:flink-sql-avro-confluent-registry:2.0.0"


def main() -> int:
    bootstrap, registry, source, sink, table_path, collector, rest_port, job_name = sys.argv[1:9]
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    avro_jars = resolve_jars([AVRO_CONFLUENT_PACKAGE], cache_dir=default_cache_dir() / "avro-confluent")
    config = with_openlineage(Configuration(), collector, jars=avro_jars, job_name=job_name,
                              rest_port=int(rest_port), tracking_interval_s=2)
    config.set_string("pipeline.name", job_name)
    config.set_string("parallelism.default", "1")
    config.set_string("execution.checkpointing.interval", "2 s")
    config.set_string("restart-strategy.type", "none")
    env = TableEnvironment.create(EnvironmentSettings.new_instance().in_streaming_mode()
                                  .with_configuration(config).build())
    env.execute_sql(f"""
        CREATE TABLE orders (line STRING NOT NULL, origin STRING) WITH (
          'connector' = 'kafka', 'topic' = '{source}', 'properties.bootstrap.servers' = '{bootstrap}',
          'properties.group.id' = '{job_name}', 'scan.startup.mode' = 'earliest-offset',
          'value.format' = 'avro-confluent', 'value.avro-confluent.url' = '{registry}')""")
    env.execute_sql(f"""
        CREATE TABLE orders_clean (order_id STRING, country STRING, amount DOUBLE, origin STRING) WITH (
          'connector' = 'kafka', 'topic' = '{sink}', 'properties.bootstrap.servers' = '{bootstrap}',
          'format' = 'json')""")
    env.execute_sql(f"""
        CREATE TABLE orders_by_country (order_id STRING, amount DOUBLE, country STRING)
        PARTITIONED BY (country) WITH ('connector' = 'filesystem', 'path' = '{table_path}', 'format' = 'csv')""")
    env.execute_sql("""
        CREATE TEMPORARY VIEW parsed AS SELECT SPLIT_INDEX(line, ',', 0) AS order_id,
          UPPER(SPLIT_INDEX(line, ',', 1)) AS country, CAST(SPLIT_INDEX(line, ',', 2) AS DOUBLE) AS amount, origin
        FROM orders""")
    statements = env.create_statement_set()
    statements.add_insert_sql("INSERT INTO orders_clean SELECT order_id, country, amount, origin FROM parsed "
                              "WHERE amount > 0")
    statements.add_insert_sql("INSERT INTO orders_by_country SELECT order_id, amount, country FROM parsed")
    result = statements.execute()
    client = result.get_job_client()
    print(f"JOB_ID {client.get_job_id()}", flush=True)
    state, _ = supervise(client, stop)
    print(f"JOB_STATE {state}", flush=True)
    linger(stop, 5.0)  # the listener's ABORT (its REST tracking) before the mini-cluster goes
    return 0


if __name__ == "__main__":
    sys.exit(main())
