"""Every topic's schema is self-contained (cross-file references inlined) and carries its records through Avro."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import fastavro
import pytest

from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.avro_schemas import load_schema
from kafka_lineage.schemas.openlineage import event_to_record, record_to_event
from tests.openlineage_samples import full_run_event


def _round_trip(schema_name: str, record: dict) -> dict:
    schema = fastavro.parse_schema(load_schema(schema_name))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    buffer.seek(0)
    return fastavro.schemaless_reader(buffer, schema, schema)


def _names(node, found: list[str]) -> list[str]:
    if isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed"):
            found.append(node["name"])
        for value in node.values():
            _names(value, found)
    elif isinstance(node, list):
        for item in node:
            _names(item, found)
    return found


TOPIC_SCHEMAS = sorted(ClientSettings("", "", "", "", "", "").value_schemas().values())


@pytest.mark.parametrize("name", TOPIC_SCHEMAS)
def test_each_topic_schema_parses_standalone_and_defines_each_type_once(name: str) -> None:
    schema = load_schema(name)
    fastavro.parse_schema(json.loads(json.dumps(schema)))  # no reference left to another file
    names = _names(schema, [])
    assert len(names) == len(set(names)), names


def test_normalized_event_embeds_the_event_and_its_schema_changes() -> None:
    event = full_run_event()
    change = {"path": "address.zip", "kind": "TYPE_CHANGED", "oldType": "int", "newType": "string",
              "severity": "BREAKING"}
    record = {
        "event": event_to_record(event),
        "processing": {"dedupeId": "ab" * 32, "processedAt": 1_700_000_000_000, "late": True, "sourceTopic": "t",
                       "sourcePartition": 2, "sourceOffset": 7, "producedAt": None,
                       "renamedDatasets": [{"originalNamespace": "s3a://b", "originalName": "k", "namespace": "s3://b",
                                            "name": "k", "rule": "s3a-scheme"}]},
        "schemaChanges": [{"namespace": "s3://b", "name": "k", "previousVersion": "1", "newVersion": "2",
                           "previousSchema": "[]", "newSchema": "[]", "previousEventTime": "2024-01-01T00:00:00Z",
                           "changes": [change], "severity": "BREAKING"}],
    }
    decoded = _round_trip("normalized_event", record)
    assert record_to_event(decoded["event"]) == event
    assert decoded["schemaChanges"][0]["changes"] == [change]
    assert decoded["processing"]["late"] is True


def test_drift_alert_reuses_the_change_types_of_the_normalized_event() -> None:
    alert = {"alertId": "x", "dataset": {"namespace": "n", "name": "d"}, "job": {"namespace": "n", "name": "j"},
             "runId": "r", "previousVersion": "1", "newVersion": "2", "previousSchema": "[]", "newSchema": "[]",
             "changes": [{"path": "a", "kind": "REMOVED", "oldType": "int", "newType": None, "severity": "BREAKING"}],
             "severity": "BREAKING", "eventTime": "2024-01-01T00:00:00Z",
             "detectedAt": datetime(2024, 1, 1, tzinfo=UTC),
             "impactDepth": 5,
             "impactedJobs": [{"namespace": "n", "name": "down", "depth": 1}], "impactedDatasets": [],
             "impactTruncated": False, "changeId": "c", "impactComplete": False,
             "impactedColumns": [{"namespace": "n", "name": "down", "field": "a", "depth": 1}],
             "changedAt": "2024-01-01T00:00:00Z", "late": True,
             "supersedes": {"previousVersion": "1", "newVersion": "3", "changedAt": "2024-01-02T00:00:00Z"},
             "beyondHistory": False}
    # an alert written without the fields added later reads with their defaults
    assert _round_trip("schema_drift_alert", alert) == {
        **alert, "kind": "schemaDrift", "exposure": None, "datasetOwners": [], "datasetTags": [],
        "impactedJobs": [{"namespace": "n", "name": "down", "depth": 1, "owners": []}]}


def test_unknown_schema_name_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="no Avro schema named 'nope'"):
        load_schema("nope")
