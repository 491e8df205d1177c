"""Lineage for non-SQL tasks (copies, exports, bulk loads): START/COMPLETE/FAIL around a block or a function.

    with lineage_task("copy-orders", inputs=["s3a://raw/orders.csv"], outputs=["/data/clean/orders.parquet"]) as t:
        rows = copy(...)
        t.set_output_statistics(row_count=rows)

    @lineage_task("nightly-export", inputs=["/data/in.csv"])
    def export() -> None:
        current_run().add_output("gs://exports/out.csv", row_count=10)

    with load_task("load-orders", "/data/orders.csv", "jdbc:postgresql://db:5432/shop", "staging.orders") as t:
        t.set_output_statistics(row_count=copy_into_postgres(...))

    with load_task("load-orders", "s3://raw/orders/2025-12-24/orders.csv", "hive://metastore:9083", "mart.orders",
                   partition={"date": "2025-12-24"}, required_marker="_SUCCESS") as t:
        ...
    report_marker("s3://lake/mart/orders/date=2025-12-24/_SUCCESS")

Datasets are named by ``kafka_lineage.schemas.naming`` (paths/URIs by ``path_dataset``, tables by
``table_dataset``); a ``(namespace, name)`` pair is taken as it is. Partitions (``schemas.partitions``): a path
ending in partition directories is named by its table root and reports the partition as the
``kafkaLineage_partition`` facet; a ``partition=`` argument says it where the path does not (a table), and
``required_marker=`` declares that the partition counts as written only once its completion marker is reported
(``report_marker``, a DatasetEvent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import DatasetEvent, StaticDataset

from kafka_lineage.schemas.naming import table_dataset
from kafka_lineage.schemas.partitions import FACET_KEY, MARKER_FILES, as_keys

from .runs import (
    PRODUCER,
    Parent,
    PartitionArg,
    TaskRun,
    dataset_partition,
    dataset_state,
    default_client,
    job_type_facet,
    partition_dataset_facet,
    statistics_facet,
)

log = logging.getLogger(__name__)
INTEGRATION = "PYTHON"


def lineage_task(job_name: str, inputs: Iterable[Any] = (), outputs: Iterable[Any] = (), *,
                 job_namespace: str | None = None, client: OpenLineageClient | None = None,
                 parent: Parent | None = None, job_type: str = "TASK", partition: PartitionArg | None = None,
                 required_marker: str | None = None) -> TaskRun:
    """A run of ``job_name`` reading ``inputs`` and writing ``outputs`` (paths/URIs or ``(namespace, name)``).

    Use it as a context manager (one run) or a decorator (one run per call). Job namespace: ``job_namespace``, else
    ``$OPENLINEAGE_NAMESPACE``, else ``default``; client: ``client``, else one ``OpenLineageClient()`` per process.
    ``partition`` / ``required_marker``: the partition every output is written in, and the marker it requires
    (partitioned paths say their own; add partitioned inputs with ``add_input(path, partition=…)``).
    """
    return TaskRun(job_name, job_namespace=job_namespace, client=client, parent=parent,
                   job_facets={"jobType": job_type_facet(INTEGRATION, job_type)},
                   inputs=[dataset_state(d) for d in inputs],
                   outputs=[dataset_state(d, partition, required_marker) for d in outputs])


def load_task(job_name: str, source_path: Any, target_url: str, target_table: str, *,
              default_schema: str | None = None, row_count: int | None = None, job_namespace: str | None = None,
              client: OpenLineageClient | None = None, parent: Parent | None = None,
              partition: PartitionArg | None = None, required_marker: str | None = None) -> TaskRun:
    """A bulk load of a file into a table: input ``path_dataset(source_path)`` (a partitioned path: its table root
    and partition), output ``table_dataset(...)``.

    ``row_count`` (if known up front, or later via ``set_output_statistics``) becomes the output's
    ``outputStatistics.rowCount``; ``partition`` (``{"date": "2025-12-24"}`` or ``"date=2025-12-24/…"``) the
    partition of the table loaded, ``required_marker`` (``_SUCCESS``) the marker it needs before it counts as
    written.
    """
    output = dataset_state(table_dataset(target_url, target_table, default_schema), partition, required_marker)
    if row_count is not None:
        output.io_facets["outputStatistics"] = statistics_facet(row_count)
    return TaskRun(job_name, job_namespace=job_namespace, client=client, parent=parent,
                   job_facets={"jobType": job_type_facet(INTEGRATION, "LOAD")},
                   inputs=[dataset_state(source_path)], outputs=[output])


def marker_event(dataset: Any, partition: PartitionArg | None = None, *, marker: str | None = None,
                 event_time: datetime | None = None) -> DatasetEvent:
    """The DatasetEvent ``report_marker`` sends (pure: pass ``event_time`` for a fixed time)."""
    (namespace, name), path_keys, file = dataset_partition(dataset)
    keys, source = (as_keys(partition), "hook") if partition is not None else (path_keys, "path")
    if keys is None:
        raise ValueError(f"a completion marker belongs to a partition: {dataset!r} names none and no partition= "
                         "was given")
    marker = marker or (file if file in MARKER_FILES else "_SUCCESS")
    return DatasetEvent(eventTime=(event_time or datetime.now(UTC)).isoformat(), producer=PRODUCER,
                        dataset=StaticDataset(namespace=namespace, name=name, facets={
                            FACET_KEY: partition_dataset_facet(keys, source, marker=marker)}))


def report_marker(dataset: Any, partition: PartitionArg | None = None, *, marker: str | None = None,
                  client: OpenLineageClient | None = None) -> DatasetEvent:
    """Report that a partition's completion marker exists: a DatasetEvent with the partition facet and ``marker``.

    ``dataset``: the marker file's path (``s3://lake/t/date=2025-12-24/_SUCCESS``: table root, partition and marker
    from the path), the partition's directory, or a table (path, ``(namespace, name)``) with ``partition``;
    ``marker`` defaults to the file named, else ``_SUCCESS``. Bad arguments raise ``ValueError``; an emit that
    fails is logged, never raised (lineage does not break the job). Returns the event.
    """
    event = marker_event(dataset, partition, marker=marker)
    try:
        emitter = client or default_client()
        if emitter is not None:
            emitter.emit(event)
    except Exception as exc:  # lineage must never break the job
        log.warning("OpenLineage marker event for %s/%s not emitted: %s", event.dataset.namespace,
                    event.dataset.name, exc)
    return event
