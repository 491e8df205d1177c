"""Conformance with OpenLineage's own model: every facet openlineage-python can build (each generated facet class,
its required fields filled by type, serialized by the client's own Serde) is accepted inside a minimal event, under
its standard key and under a custom one; the same facet with a required field of the wrong type is refused, naming
that field. Plus the spec's rules the hand-written validation used to get wrong (issue 20)."""

from __future__ import annotations

import copy
import enum
import uuid
from typing import Any

import attr
import pytest
from openlineage.client.generated import base
from openlineage.client.serde import Serde

from kafka_lineage.schemas import spec
from kafka_lineage.schemas.openlineage import InvalidEvent, event_to_record, record_to_event, validate_event

PRODUCER = "https://github.com/kafka-lineage/tests"
FACET_CLASSES = {cls.__name__: cls for cls in spec._generated_classes()
                 if issubclass(cls, base.BaseFacet) and cls.__module__ != base.__name__}
KEY_OF = {name: key for (owner, key), name in spec.STANDARD_KEYS.items()}
OWNER_OF = {name: owner for (owner, _key), name in spec.STANDARD_KEYS.items()}


def _value(hint: Any, namespace: dict[str, Any], field_name: str) -> Any:
    """A valid value of a type hint of the generated model (strings shaped for their format)."""
    import types
    import typing

    if isinstance(hint, str | typing.ForwardRef):
        hint = eval(hint if isinstance(hint, str) else hint.__forward_arg__, namespace)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), namespace, field_name)
    if origin is list:
        return [_value(args[0], namespace, field_name)]
    if origin is dict:
        return {"key": _value(args[1], namespace, field_name)}
    if origin is typing.Literal:
        return args[0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if isinstance(hint, type) and attr.has(hint):
        return _instance(hint)
    if hint is str:
        if field_name.lower().endswith("runid"):
            return str(uuid.uuid4())
        if any(word in field_name.lower() for word in ("time", "date", "updated")):
            return "2024-05-01T12:00:00.000Z"
        return "https://example.com/x" if field_name in ("uri", "url") else "x"
    return {int: 3, float: 1.5, bool: True}.get(hint, "x") if hint is not typing.Any else {}


def _instance(cls: type) -> Any:
    hints, namespace = spec._field_types(cls), spec._namespace(cls)
    values = {field.alias: _value(hints[field.name], namespace, field.name)
              for field in attr.fields(cls) if field.default is attr.NOTHING and field.init}
    return cls(**values)


def _event_with(facet: dict[str, Any], owner: str, key: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventType": "COMPLETE", "eventTime": "2024-05-01T12:00:00.000Z", "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "ns", "name": "job"},
        "inputs": [{"namespace": "ns", "name": "in"}], "outputs": [{"namespace": "ns", "name": "out"}]}
    target, facets = {"run": (event["run"], "facets"), "job": (event["job"], "facets"),
                      "dataset": (event["outputs"][0], "facets"), "input": (event["inputs"][0], "inputFacets"),
                      "output": (event["outputs"][0], "outputFacets")}[owner]
    target[facets] = {key: facet}
    return event


def _owner(cls: type) -> str:
    for klass, owner in ((base.RunFacet, "run"), (base.JobFacet, "job"), (base.InputDatasetFacet, "input"),
                         (base.OutputDatasetFacet, "output"), (base.DatasetFacet, "dataset")):
        if issubclass(cls, klass):
            return owner
    raise AssertionError(cls)


def test_the_model_has_every_facet_and_the_key_table_names_real_facets() -> None:
    assert len(FACET_CLASSES) >= 35
    assert set(spec.STANDARD_KEYS.values()) <= set(FACET_CLASSES)


@pytest.mark.parametrize("name", sorted(FACET_CLASSES))
def test_every_facet_the_official_client_builds_is_accepted_and_a_broken_one_refused(name: str) -> None:
    cls = FACET_CLASSES[name]
    facet = Serde.to_dict(_instance(cls))
    owner = OWNER_OF.get(name, _owner(cls))
    for key in {KEY_OF.get(name, "custom_key"), "custom_key"}:
        validate_event(_event_with(facet, owner, key))  # accepted
    required = [f for f in attr.fields(cls) if f.default is attr.NOTHING and f.init]
    if required:  # the same facet with a required field of the wrong type: refused, naming it
        broken = {**facet, required[0].name: {"not": "this"} if not isinstance(facet[required[0].name], dict)
                  else "not an object"}
        with pytest.raises(InvalidEvent, match=f"{required[0].name}"):
            validate_event(_event_with(broken, owner, KEY_OF.get(name, "custom_key")))


def test_a_standard_key_is_checked_as_its_facet_whatever_the_schema_url_says() -> None:
    parent = {"_producer": PRODUCER, "_schemaURL": "https://example.com/custom.json", "run": {"runId": "x"},
              "job": {"namespace": "a", "name": "b"}}
    with pytest.raises(InvalidEvent, match=r"run\.facets\.parent\.run\.runId: .*not a UUID"):
        validate_event(_event_with(parent, "run", "parent"))
    validate_event(_event_with(parent, "run", "my_parent_like_facet"))  # a custom key: base facet rules only


@pytest.mark.parametrize("event_time", ["2021-11-03T10:53:52.427", "2021-11-03T10:53:52+0200", "2021-11-03T10:53Z",
                                        "2021-11-03T10:53:52,427Z", "2021-11-03T10:53:52.123456789Z"])
def test_iso_8601_event_times_are_accepted_and_read_alike(event_time: str) -> None:
    event = _event_with({"_producer": PRODUCER, "_schemaURL": "u"}, "run", "x")
    event["eventTime"] = event_time
    validate_event(event)


@pytest.mark.parametrize(("mutate", "says"), [
    (lambda e: e.update(eventTime="2021-11-03"), "eventTime"),
    (lambda e: e.update(eventTime="yesterday T"), "eventTime"),
    (lambda e: e.update(eventType=None), "eventType"),
    (lambda e: e["run"].update(runId=e["run"]["runId"].replace("-", "")), "run.runId"),
    (lambda e: e["run"].update(runId="urn:uuid:" + e["run"]["runId"]), "run.runId"),
    (lambda e: e["run"].update(facets={"nominalTime": {"_producer": PRODUCER, "_schemaURL": "u",
                                                       "nominalStartTime": 5}}), "run.facets.nominalTime"),
    (lambda e: e["outputs"][0].update(facets={"schema": {"_producer": PRODUCER, "_schemaURL": "u",
                                                         "fields": "id INT"}}), "outputs.0.facets.schema.fields"),
    (lambda e: e["job"].update(facets={"sql": {"query": "SELECT 1"}}), "job.facets.sql._producer"),
])
def test_what_the_spec_refuses_is_refused_naming_the_field(mutate: Any, says: str) -> None:
    event = _event_with({"_producer": PRODUCER, "_schemaURL": "u"}, "run", "x")
    mutate(event)
    with pytest.raises(InvalidEvent, match=says.replace(".", r"\.")):
        validate_event(event)


def test_what_the_spec_allows_is_accepted() -> None:
    event = _event_with({"_producer": PRODUCER, "_schemaURL": "u"}, "run", "x")
    event["job"]["name"] = ""  # the schema sets no minimum length
    event["outputs"][0]["name"] = ""
    validate_event(event)
    deleted = _event_with({"_producer": PRODUCER, "_schemaURL": "u", "_deleted": True}, "dataset", "schema")
    validate_event(deleted)  # a deletion carries no content
    dataset_event = {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER,
                     "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                     "dataset": {"namespace": "ns", "name": "d"}, "run": {"runId": str(uuid.uuid4())}}
    assert validate_event(dataset_event) == "DatasetEvent"  # a run beside the dataset, no job
    assert record_to_event(event_to_record(copy.deepcopy(dataset_event))) == dataset_event
