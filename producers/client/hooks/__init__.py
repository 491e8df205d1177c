"""OpenLineage hooks for job authors: SQL tasks (``sql_task``), file/load tasks (``lineage_task``, ``load_task``).

Events are built with openlineage-python's classes and sent through an ``OpenLineageClient`` — by default the one
configured by openlineage.yml / ``OPENLINEAGE_CONFIG`` (e.g. the Kafka Avro transport of this project).
"""

from .runs import PRODUCER, RunRef, TaskRun, current_run, default_job_namespace
from .sql import SqlLineage, sql_lineage, sql_task
from .tasks import lineage_task, load_task

__all__ = [
    "PRODUCER",
    "RunRef",
    "SqlLineage",
    "TaskRun",
    "current_run",
    "default_job_namespace",
    "lineage_task",
    "load_task",
    "sql_lineage",
    "sql_task",
]
