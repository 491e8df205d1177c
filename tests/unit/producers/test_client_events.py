"""The transport's fast object→dict conversion gives exactly what openlineage-python's own serializer gives."""

from __future__ import annotations

import datetime
import uuid

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import error_message_run, schema_dataset
from openlineage.client.serde import Serde

from kafka_lineage.producers.client.client_events import event_dict
from kafka_lineage_devtools.bench import sample_events
from tests.openlineage_samples import dataset_event_object, full_run_event_object, job_event_object


def _odd_event() -> RunEvent:
    """Enums, a datetime, a UUID, explicit Nones, None and empty entries in lists, tuples."""
    fields = [schema_dataset.SchemaDatasetFacetFields(name="a", type=None, fields=[]), None]
    return RunEvent(
        eventType=RunState.FAIL, eventTime=datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC).isoformat(),
        producer="p", run=Run(runId=str(uuid.uuid4()), facets={
            "errorMessage": error_message_run.ErrorMessageRunFacet(message="x", programmingLanguage="PYTHON"),
            "custom": {"when": datetime.date(2024, 1, 2), "id": uuid.UUID(int=7), "list": [None, {}, 1, (2, 3)],
                       "state": RunState.START, "none": None},
        }),
        job=Job(namespace="n", name="j", facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}),
    )


@pytest.mark.parametrize("make", [full_run_event_object, dataset_event_object, job_event_object, _odd_event])
def test_same_wire_json_as_the_client_serializer(make) -> None:
    event = make()
    assert event_dict(event) == Serde.to_dict(event)


def test_dicts_pass_through_untouched() -> None:
    event = {"eventTime": "t", "run": {"facets": {"x": None}}}
    assert event_dict(event) is event


def test_bench_events_convert_identically() -> None:
    events = sample_events(200)
    assert [event_dict(e) for e in events] == [Serde.to_dict(e) for e in events]
