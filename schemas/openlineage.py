"""OpenLineage event <-> Avro record, lossless, and validation with messages that name the field.

Core fields are typed in Avro; each facet travels as its JSON text, and any key the core does not know (or a known
key whose value has an unexpected type, such as an explicit ``null``) is kept verbatim in the object's ``extra``
JSON. Hence ``record_to_event(event_to_record(e)) == e`` for every valid event, custom facets included.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")


class InvalidEvent(ValueError):
    """The event breaks the OpenLineage spec; the message names the offending field(s)."""


# --- Avro mapping ------------------------------------------------------------------------------------------------
# Field kinds: "str", "event_type", "facets" (map of facet JSON), a nested object name, or [object name] for a list.
_FACETS = "facets"
_LAYOUT: dict[str, dict[str, Any]] = {
    "event": {
        "eventTime": "str",
        "producer": "str",
        "schemaURL": "str",
        "eventType": "event_type",
        "run": "run",
        "job": "job",
        "inputs": ["input"],
        "outputs": ["output"],
        "dataset": "dataset",
    },
    "run": {"runId": "str", "facets": _FACETS},
    "job": {"namespace": "str", "name": "str", "facets": _FACETS},
    "dataset": {"namespace": "str", "name": "str", "facets": _FACETS},
    "input": {"namespace": "str", "name": "str", "facets": _FACETS, "inputFacets": _FACETS},
    "output": {"namespace": "str", "name": "str", "facets": _FACETS, "outputFacets": _FACETS},
}
# Avro record of each object that sits in a ["null", record] union. Writing ("full name", record) tells fastavro the
# branch, which saves it from matching the dict against the union's records on every event.
_UNION_RECORD = {
    "run": "io.kafka_lineage.openlineage.Run",
    "job": "io.kafka_lineage.openlineage.Job",
    "dataset": "io.kafka_lineage.openlineage.StaticDataset",
}
_EVENT_TYPES = frozenset(EVENT_TYPES)
_COLLECTIONS = {
    name: tuple(key for key, kind in layout.items() if kind == _FACETS or isinstance(kind, list))
    for name, layout in _LAYOUT.items()
}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _encode(obj: dict[str, Any], layout_name: str) -> dict[str, Any]:
    """Known keys of the right JSON type go to typed Avro fields; anything else is kept verbatim in ``extra``.

    Collections (facet maps, dataset lists) are plain Avro maps/arrays rather than ``["null", …]`` unions, which
    halves fastavro's write time; a collection the object did not have is listed in ``absent`` instead.
    """
    layout = _LAYOUT[layout_name]
    record: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        kind = layout.get(key)
        if kind == "str":
            if isinstance(value, str):
                record[key] = value
                continue
        elif kind == _FACETS:
            if isinstance(value, dict):
                record[key] = {name: _dumps(facet) for name, facet in value.items()} if value else {}
                continue
        elif kind == "event_type":
            if value in _EVENT_TYPES:
                record[key] = value
                continue
        elif isinstance(kind, list):
            if isinstance(value, list) and all(isinstance(item, dict) for item in value):
                record[key] = [_encode(item, kind[0]) for item in value]
                continue
        elif kind is not None and isinstance(value, dict):
            record[key] = (_UNION_RECORD[kind], _encode(value, kind))
            continue
        extra[key] = value
    absent = [key for key in _COLLECTIONS[layout_name] if key not in record]
    for key in absent:
        record[key] = {} if layout[key] == _FACETS else []
    record["absent"] = absent
    record["extra"] = _dumps(extra) if extra else None
    return record


def _decode(record: dict[str, Any], layout_name: str) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    absent = record.get("absent") or ()
    for key, kind in _LAYOUT[layout_name].items():
        value = record.get(key)
        if value is None or key in absent:
            continue
        if isinstance(value, tuple):  # an encoder-side record with fastavro's (branch name, value) union hint
            value = value[1]
        if kind in ("str", "event_type"):
            obj[key] = value
        elif kind == _FACETS:
            obj[key] = {name: json.loads(text) for name, text in value.items()}
        elif isinstance(kind, list):
            obj[key] = [_decode(item, kind[0]) for item in value]
        else:
            obj[key] = _decode(value, kind)
    if record.get("extra"):
        obj.update(json.loads(record["extra"]))
    return obj


def event_to_record(event: dict[str, Any]) -> dict[str, Any]:
    """An OpenLineage event (parsed JSON) as a record of ``schemas/avro/openlineage_event.avsc``."""
    return _encode(event, "event")


def record_to_event(record: dict[str, Any]) -> dict[str, Any]:
    """The exact OpenLineage event (parsed JSON) that ``event_to_record`` was given."""
    return _decode(record, "event")


# --- validation ----------------------------------------------------------------------------------------------------
class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Facets(_Open):
    facets: dict[str, dict[str, Any]] | None = None


class _JobRef(_Facets):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)


class _RunRef(_Facets):
    runId: UUID


class _InputDataset(_JobRef):
    inputFacets: dict[str, dict[str, Any]] | None = None


class _OutputDataset(_JobRef):
    outputFacets: dict[str, dict[str, Any]] | None = None


class _BaseEvent(_Open):
    eventTime: datetime
    producer: str = Field(min_length=1)
    schemaURL: str = Field(min_length=1)

    @field_validator("eventTime", mode="before")
    @classmethod
    def _iso_string_with_time(cls, value: Any) -> Any:
        if not isinstance(value, str) or "T" not in value.upper():
            raise ValueError("must be an ISO-8601 date-time string such as 2024-05-01T12:00:00.000Z")
        return value


EventTypeName = Enum("EventTypeName", {name: name for name in EVENT_TYPES})


class _RunEvent(_BaseEvent):
    eventType: EventTypeName | None = None
    run: _RunRef
    job: _JobRef
    inputs: list[_InputDataset] | None = None
    outputs: list[_OutputDataset] | None = None


class _DatasetEvent(_BaseEvent):
    dataset: _JobRef


class _JobEvent(_BaseEvent):
    job: _JobRef
    inputs: list[_InputDataset] | None = None
    outputs: list[_OutputDataset] | None = None


def event_kind(event: dict[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent, by the spec's shape (run → RunEvent, dataset → DatasetEvent)."""
    if "run" in event:
        return "RunEvent"
    if "dataset" in event:
        return "DatasetEvent"
    if "job" in event:
        return "JobEvent"
    raise InvalidEvent("event: not an OpenLineage event (none of run, job, dataset is present)")


_MODELS: dict[str, type[_BaseEvent]] = {"RunEvent": _RunEvent, "DatasetEvent": _DatasetEvent, "JobEvent": _JobEvent}


def validate_event(event: Any) -> str:
    """Check an event against the OpenLineage 2-0-x core; returns its kind or raises InvalidEvent naming fields."""
    if not isinstance(event, dict):
        raise InvalidEvent(f"event: expected a JSON object, got {type(event).__name__}")
    kind = event_kind(event)
    try:
        _MODELS[kind].model_validate(event)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "event"
            message = error["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {message}")
        raise InvalidEvent(f"invalid {kind}: " + "; ".join(problems)) from None
    return kind


def partition_key(event: dict[str, Any]) -> str:
    """Kafka key that keeps one application's events on one partition, in order (openlineage-python's convention).

    RunEvent: ``run:{ns}/{name}`` of the parent facet's root job, else the parent job, else the event's job.
    DatasetEvent: ``dataset:{ns}/{name}``; JobEvent: ``job:{ns}/{name}``.
    """
    if "run" in event:
        parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
        for job in ((parent.get("root") or {}).get("job"), parent.get("job"), event.get("job")):
            if isinstance(job, dict) and job.get("namespace") and job.get("name"):
                return f"run:{job['namespace']}/{job['name']}"
    if isinstance(event.get("dataset"), dict):
        return f"dataset:{event['dataset'].get('namespace')}/{event['dataset'].get('name')}"
    job = event.get("job") or {}
    return f"job:{job.get('namespace')}/{job.get('name')}"


# The lifecycle order of a run's events, shared by the processor (reordering) and the sinks (state only moves forward).
_RANKS = {"START": 0, "RUNNING": 1, "OTHER": 1, "COMPLETE": 2, "FAIL": 2, "ABORT": 2}


def lifecycle_rank(event_type: str | None) -> int:
    """START=0 < RUNNING=1 < COMPLETE/FAIL/ABORT=2.

    OTHER and a missing/unknown eventType rank as RUNNING: the spec allows OTHER (and no type) at any point of a run
    for extra facets, so they need a START before them but must not be held back behind a terminal event.
    """
    return _RANKS.get(event_type, 1) if isinstance(event_type, str) else 1
