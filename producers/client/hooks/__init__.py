"""OpenLineage hooks for job authors: SQL tasks (``sql_task``), file/load tasks (``lineage_task``, ``load_task``),
partition completion markers (``report_marker``).

Events are built with openlineage-python's classes and sent through an ``OpenLineageClient`` — by default the one
configured by openlineage.yml / ``OPENLINEAGE_CONFIG`` (e.g. the Kafka Avro transport of this project).
"""

from .runs import PRODUCER, PartitionDatasetFacet, RunRef, TaskRun, current_run, default_job_namespace
from .sql import SqlLineage, partition_specs, sql_lineage, sql_task
from .tasks import lineage_task, load_task, report_marker

__all__ = [
    "PRODUCER",
    "PartitionDatasetFacet",
    "RunRef",
    "SqlLineage",
    "TaskRun",
    "current_run",
    "default_job_namespace",
    "lineage_task",
    "load_task",
    "partition_specs",
    "report_marker",
    "sql_lineage",
    "sql_task",
]
