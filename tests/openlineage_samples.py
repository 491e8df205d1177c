"""OpenLineage events produced by the real openlineage-python client (its own classes and serializer)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    data_quality_metrics_input_dataset,
    datasource_dataset,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
    symlinks_dataset,
)
from openlineage.client.serde import Serde

PRODUCER = "https://github.com/kafka-lineage/tests"


def to_json(event: Any) -> dict[str, Any]:
    """The event exactly as the client would put it on the wire."""
    return json.loads(Serde.to_json(event))


def full_run_event(event_type: RunState = RunState.COMPLETE) -> dict[str, Any]:
    return to_json(full_run_event_object(event_type))


def full_run_event_object(event_type: RunState = RunState.COMPLETE) -> RunEvent:
    """A run event with every standard facet and a custom one, as openlineage-python objects."""
    run_id = str(uuid.uuid4())
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name="id", type="BIGINT", description="key"),
            schema_dataset.SchemaDatasetFacetFields(
                name="address",
                type="STRUCT",
                fields=[schema_dataset.SchemaDatasetFacetFields(name="city", type="STRING")],
            ),
        ]
    )
    column_lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "id": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace="postgres://db:5432",
                        name="shop.public.orders",
                        field="order_id",
                        transformations=[column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")],
                    )
                ],
            ),
        }
    )
    custom = {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/custom.json",
        "nested": {"list": [1, 2.5, None, True, "ü"]},
        "big": 2**63 + 1,
    }
    event = RunEvent(
        eventType=event_type,
        eventTime="2024-05-01T12:00:00.123456+00:00",
        producer=PRODUCER,
        run=Run(
            runId=run_id,
            facets={
                "parent": parent_run.ParentRunFacet(
                    run=parent_run.Run(runId=str(uuid.uuid4())),
                    job=parent_run.Job(namespace="airflow", name="dag.task"),
                    root=parent_run.Root(
                        run=parent_run.RootRun(runId=str(uuid.uuid4())),
                        job=parent_run.RootJob(namespace="airflow", name="dag"),
                    ),
                ),
                "nominalTime": nominal_time_run.NominalTimeRunFacet(nominalStartTime="2024-05-01T00:00:00Z"),
                "errorMessage": error_message_run.ErrorMessageRunFacet(
                    message="boom", programmingLanguage="python", stackTrace="Traceback ..."
                ),
                "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
                    version="4.0.0", name="spark", openlineageAdapterVersion="1.54.0"
                ),
            },
        ),
        job=Job(
            namespace="spark",
            name="orders.etl",
            facets={
                "sql": sql_job.SQLJobFacet(query="INSERT INTO t SELECT * FROM s", dialect="postgres"),
                "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType="JOB"),
            },
        ),
        inputs=[
            InputDataset(
                namespace="postgres://db:5432",
                name="shop.public.orders",
                facets={
                    "schema": schema,
                    "dataSource": datasource_dataset.DatasourceDatasetFacet(name="db", uri="postgres://db:5432"),
                    "symlinks": symlinks_dataset.SymlinksDatasetFacet(
                        identifiers=[
                            symlinks_dataset.Identifier(namespace="hive://meta:9083", name="shop.orders", type="TABLE")
                        ]
                    ),
                },
                inputFacets={
                    "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=10),
                    "dataQualityMetrics": data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
                        columnMetrics={"id": data_quality_metrics_input_dataset.ColumnMetrics(nullCount=0, min=1.0)},
                        rowCount=10,
                    ),
                },
            )
        ],
        outputs=[
            OutputDataset(
                namespace="s3://bucket",
                name="warehouse/orders",
                facets={"schema": schema, "columnLineage": column_lineage, "myCompany_custom": custom},
                outputFacets={
                    "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                        rowCount=10, size=2048
                    )
                },
            )
        ],
    )
    return event


def dataset_event() -> dict[str, Any]:
    return to_json(dataset_event_object())


def dataset_event_object() -> DatasetEvent:
    return (
        DatasetEvent(
            eventTime="2024-05-01T12:00:00Z",
            producer=PRODUCER,
            dataset=StaticDataset(
                namespace="kafka://broker:9092",
                name="orders",
                facets={
                    "schema": schema_dataset.SchemaDatasetFacet(
                        fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="long")]
                    )
                },
            ),
        )
    )


def job_event() -> dict[str, Any]:
    return to_json(job_event_object())


def job_event_object() -> JobEvent:
    return (
        JobEvent(
            eventTime="2024-05-01T12:00:00Z",
            producer=PRODUCER,
            job=Job(namespace="dbt", name="model.orders"),
            inputs=[InputDataset(namespace="snowflake://org-acct", name="db.s.t")],
            outputs=[],
        )
    )
