"""Events that touch every row kind of the graph model (and awkward values): the bulk import's unit and integration
tests build graphs from them."""

from __future__ import annotations

from typing import Any

PRODUCER = "https://github.com/kafka-lineage/tests"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
DATASET_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
FACET_SCHEMA = "https://openlineage.io/spec/facets/1-0-0/Facet.json"
# Quotes, the CSV delimiter, an array delimiter's default (;), a line break, a unit separator, non-ASCII.
AWKWARD = 'we"ird, na\nme;\x1f ü "quoted"'
LONG_NAME = "warehouse/" + "x" * 3000  # over the key limit: stored by hash, the whole name in fullName


def facet(**values: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": FACET_SCHEMA, **values}


def partition(day: str, **extra: Any) -> dict[str, Any]:
    return facet(keys=[{"name": "date", "value": day}], **extra)


def _run_event(event_type: str, time: str, run_id: str, job: str, namespace: str, *, inputs: list[Any],
               outputs: list[Any], run_facets: dict[str, Any] | None = None,
               job_facets: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"eventType": event_type, "eventTime": time, "producer": PRODUCER, "schemaURL": RUN_SCHEMA,
            "run": {"runId": run_id, "facets": run_facets or {}},
            "job": {"namespace": namespace, "name": job, "facets": job_facets or {}},
            "inputs": inputs, "outputs": outputs}


def rich_events(namespace: str) -> list[dict[str, Any]]:
    """Two jobs, four runs (one FAILed, one a backfill, one a child), partitions read and written with markers,
    statistics, data quality, assertions, symlinks, column lineage (field and dataset level, masking), schemas,
    job/dataset facets (one later deleted), a hashed long name, an awkward name, a DatasetEvent marker report."""
    src = {"namespace": f"{namespace}-pg", "name": "shop.public.orders"}
    out = {"namespace": f"{namespace}-s3", "name": "warehouse/orders"}
    schema = facet(fields=[{"name": "id", "type": "BIGINT"}, {"name": "address", "type": "STRUCT",
                                                               "fields": [{"name": "city", "type": "STRING"}]}])
    lineage = facet(fields={"id": {"inputFields": [{**src, "field": "order_id", "transformations": [
        {"type": "DIRECT", "subtype": "IDENTITY"}]}]},
        "address": {"inputFields": [{**src, "field": "email", "transformations": [
            {"type": "DIRECT", "subtype": "HASH", "masking": True}]}]}},
        dataset=[{**src, "field": "status", "transformations": [{"type": "INDIRECT", "subtype": "FILTER"}]}])
    symlinks = facet(identifiers=[{"namespace": "hive://metastore", "name": "dw.orders", "type": "TABLE"}])
    quality = facet(rowCount=10, columnMetrics={"id": {"nullCount": 0}})
    assertions = facet(assertions=[{"assertion": "not_null", "column": "id", "success": True},
                                   {"assertion": "unique", "success": False}])

    def reading(day: str) -> dict[str, Any]:
        return {**src, "facets": {"schema": facet(fields=[{"name": "order_id", "type": "BIGINT"},
                                                          {"name": "email", "type": "STRING"},
                                                          {"name": "status", "type": "STRING"}])},
                "inputFacets": {"inputStatistics": facet(rowCount=100, size=2048), "dataQualityMetrics": quality,
                                "dataQualityAssertions": assertions,
                                "kafkaLineage_partition": partition(day)}}

    def writing(day: str, rows: int, marker: str | None = "_SUCCESS") -> dict[str, Any]:
        return {**out, "facets": {"schema": schema, "columnLineage": lineage, "symlinks": symlinks,
                                  "documentation": facet(description=AWKWARD)},
                "outputFacets": {"outputStatistics": facet(rowCount=rows, size=rows * 10),
                                 "dataQualityAssertions": assertions,
                                 "kafkaLineage_partition": partition(day, **({"marker": marker} if marker else {}),
                                                                     requiredMarker="_SUCCESS")}}

    job_facets = {"jobType": facet(processingType="BATCH", integration="SPARK", jobType="JOB"),
                  "sql": facet(query="SELECT 1")}
    runs = ("aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002",
            "aaaaaaaa-0000-4000-8000-000000000003", "aaaaaaaa-0000-4000-8000-000000000004")
    parent = {"parent": facet(run={"runId": runs[0]}, job={"namespace": namespace, "name": "daily"})}
    events = [
        _run_event("START", "2025-12-24T10:00:00Z", runs[0], "daily", namespace, inputs=[reading("2025-12-24")],
                   outputs=[], job_facets=job_facets,
                   run_facets={"nominalTime": facet(nominalStartTime="2025-12-24T00:00:00Z")}),
        _run_event("COMPLETE", "2025-12-24T11:05:00.123456+01:00", runs[0], "daily", namespace,
                   inputs=[reading("2025-12-24")], outputs=[writing("2025-12-24", 100)], job_facets=job_facets),
        _run_event("START", "2025-12-25T10:00:00Z", runs[1], "daily", namespace, inputs=[reading("2025-12-25")],
                   outputs=[writing("2025-12-25", 5, None)]),
        _run_event("FAIL", "2025-12-25T10:01:00Z", runs[1], "daily", namespace, inputs=[],
                   outputs=[writing("2025-12-25", 7, None)],
                   run_facets={"errorMessage": facet(message=AWKWARD, programmingLanguage="python")}),
        _run_event("COMPLETE", "2025-12-26T09:00:00Z", runs[2], "daily", namespace, inputs=[reading("2025-12-24")],
                   outputs=[writing("2025-12-24", 120)],
                   run_facets={"kafkaLineage_backfill": facet(planId="plan-1", window={
                       "from": "2025-12-24", "to": "2025-12-24"})}),
        _run_event("COMPLETE", "2025-12-26T11:00:00Z", runs[3], AWKWARD, "", run_facets=parent,
                   inputs=[{"namespace": f"{namespace}-s3", "name": LONG_NAME}],
                   outputs=[{"namespace": "", "name": AWKWARD}],
                   job_facets={"sql": facet(_deleted=True)}),
        _run_event("RUNNING", "2025-12-26T11:30:00Z", "aaaaaaaa-0000-4000-8000-000000000005", LONG_NAME, namespace,
                   inputs=[{"namespace": f"{namespace}-s3", "name": LONG_NAME, "facets": {
                       "schema": facet(fields=[{"name": LONG_NAME, "type": "STRING"}])}}], outputs=[]),
        {"eventTime": "2025-12-26T12:00:00Z", "producer": PRODUCER, "schemaURL": DATASET_EVENT_SCHEMA,
         "dataset": {**out, "facets": {"kafkaLineage_partition": partition(
             "2025-12-25", marker="_SUCCESS", stale={"requestedAt": "2025-12-26T12:00:00Z", "reason": "upstream"}),
             "documentation": facet(_deleted=True)}}},
    ]
    return events
