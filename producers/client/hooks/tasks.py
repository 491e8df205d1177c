"""Lineage for non-SQL tasks (copies, exports, bulk loads): START/COMPLETE/FAIL around a block or a function.

    with lineage_task("copy-orders", inputs=["s3a://raw/orders.csv"], outputs=["/data/clean/orders.parquet"]) as t:
        rows = copy(...)
        t.set_output_statistics(row_count=rows)

    @lineage_task("nightly-export", inputs=["/data/in.csv"])
    def export() -> None:
        current_run().add_output("gs://exports/out.csv", row_count=10)

    with load_task("load-orders", "/data/orders.csv", "jdbc:postgresql://db:5432/shop", "staging.orders") as t:
        t.set_output_statistics(row_count=copy_into_postgres(...))

Datasets are named by ``kafka_lineage.schemas.naming`` (paths/URIs by ``path_dataset``, tables by
``table_dataset``); a ``(namespace, name)`` pair is taken as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openlineage.client import OpenLineageClient

from kafka_lineage.schemas.naming import table_dataset

from .runs import DatasetState, Parent, TaskRun, dataset_ref, job_type_facet, statistics_facet

INTEGRATION = "PYTHON"


def lineage_task(job_name: str, inputs: Iterable[Any] = (), outputs: Iterable[Any] = (), *,
                 job_namespace: str | None = None, client: OpenLineageClient | None = None,
                 parent: Parent | None = None, job_type: str = "TASK") -> TaskRun:
    """A run of ``job_name`` reading ``inputs`` and writing ``outputs`` (paths/URIs or ``(namespace, name)``).

    Use it as a context manager (one run) or a decorator (one run per call). Job namespace: ``job_namespace``, else
    ``$OPENLINEAGE_NAMESPACE``, else ``default``; client: ``client``, else one ``OpenLineageClient()`` per process.
    """
    return TaskRun(job_name, job_namespace=job_namespace, client=client, parent=parent,
                   job_facets={"jobType": job_type_facet(INTEGRATION, job_type)},
                   inputs=[DatasetState(*dataset_ref(d)) for d in inputs],
                   outputs=[DatasetState(*dataset_ref(d)) for d in outputs])


def load_task(job_name: str, source_path: Any, target_url: str, target_table: str, *,
              default_schema: str | None = None, row_count: int | None = None, job_namespace: str | None = None,
              client: OpenLineageClient | None = None, parent: Parent | None = None) -> TaskRun:
    """A bulk load of a file into a table: input ``path_dataset(source_path)``, output ``table_dataset(...)``.

    ``row_count`` (if known up front, or later via ``set_output_statistics``) becomes the output's
    ``outputStatistics.rowCount``.
    """
    output = DatasetState(*table_dataset(target_url, target_table, default_schema))
    if row_count is not None:
        output.io_facets["outputStatistics"] = statistics_facet(row_count)
    return TaskRun(job_name, job_namespace=job_namespace, client=client, parent=parent,
                   job_facets={"jobType": job_type_facet(INTEGRATION, "LOAD")},
                   inputs=[DatasetState(*dataset_ref(source_path))], outputs=[output])
