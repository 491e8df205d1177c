"""A PyFlink Table API job with the OpenLineage listener (``kafka_lineage.producers.client.flink``): Kafka topic →
Kafka topic + a partitioned filesystem table, in one job. Run by the Flink integration test, and by hand:

    python orders_job.py MODE BOOTSTRAP SOURCE_TOPIC SINK_TOPIC TABLE_PATH COLLECTOR_URL REST_PORT JOB_NAME

MODE: ``bounded`` (reads the topic up to its end offsets, then finishes), ``streaming`` (unbounded: runs until
SIGTERM, then cancels the job), ``failing`` (a record that is not JSON fails the job) or ``detached`` (unbounded,
submitted to the session cluster at ``FLINK_REMOTE``=host:port; the script ends once the job runs, as a detached
submission's client does, and the job runs on; a record that is not JSON fails it later). After the job's end the
script stays up ``LINGER`` seconds (env, default 8) so the listener's REST tracking (and ``lineage flink watch``)
can still send the job's end (SIGTERM ends that wait). Prints ``JOB_ID <id>``
when submitted and ``JOB_STATE <state>`` at the end.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment

from kafka_lineage.producers.client.flink import with_openlineage
from kafka_lineage_devtools.engine_jobs import TERMINAL, job_state, linger, supervise


def main() -> int:
    mode, bootstrap, source, sink, table_path, collector, rest_port, job_name = sys.argv[1:9]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    config = with_openlineage(Configuration(), collector, job_name=job_name, rest_port=int(rest_port),
                              tracking_interval_s=2)
    config.set_string("pipeline.name", job_name)
    config.set_string("parallelism.default", "1")
    config.set_string("execution.checkpointing.interval", "2 s")
    config.set_string("restart-strategy.type", "none")
    if remote := os.environ.get("FLINK_REMOTE"):
        host, _, port = remote.rpartition(":")
        config.set_string("execution.target", "remote")
        config.set_string("rest.address", host)
        config.set_string("rest.port", port)
    env = TableEnvironment.create(EnvironmentSettings.new_instance().in_streaming_mode()
                                  .with_configuration(config).build())
    bounded = "'scan.bounded.mode' = 'latest-offset'," if mode in ("bounded", "failing") else ""
    env.execute_sql(f"""
        CREATE TABLE orders (order_id STRING, country STRING, amount DOUBLE) WITH (
          'connector' = 'kafka', 'topic' = '{source}', 'properties.bootstrap.servers' = '{bootstrap}',
          'properties.group.id' = '{job_name}', 'scan.startup.mode' = 'earliest-offset', {bounded}
          'format' = 'json', 'json.ignore-parse-errors' = 'false')""")
    env.execute_sql(f"""
        CREATE TABLE orders_clean (order_id STRING, country STRING, amount DOUBLE) WITH (
          'connector' = 'kafka', 'topic' = '{sink}', 'properties.bootstrap.servers' = '{bootstrap}',
          'format' = 'json')""")
    env.execute_sql(f"""
        CREATE TABLE orders_by_country (order_id STRING, amount DOUBLE, country STRING)
        PARTITIONED BY (country) WITH ('connector' = 'filesystem', 'path' = '{table_path}', 'format' = 'csv')""")
    statements = env.create_statement_set()
    statements.add_insert_sql("INSERT INTO orders_clean SELECT order_id, UPPER(country), amount FROM orders "
                              "WHERE amount > 0")
    statements.add_insert_sql("INSERT INTO orders_by_country SELECT order_id, amount, UPPER(country) FROM orders")
    result = statements.execute()
    client = result.get_job_client()
    print(f"JOB_ID {client.get_job_id()}", flush=True)
    if mode == "detached":
        while job_state(client) != "RUNNING":
            time.sleep(0.5)
        print("DETACHED", flush=True)
        return 0
    state, cancelled = supervise(client, stop)  # the job's end, or SIGTERM (then the job is cancelled)
    try:
        client.get_job_execution_result().result()
        state = "FINISHED"
    except Exception as error:
        state = state if state in TERMINAL else ("CANCELED" if "cancel" in str(error).lower() else "FAILED")
    print(f"JOB_STATE {state}", flush=True)
    linger(stop, 5.0 if cancelled else float(os.environ.get("LINGER", "8")))  # cancelled: for the listener's ABORT
    return 0


if __name__ == "__main__":
    sys.exit(main())
