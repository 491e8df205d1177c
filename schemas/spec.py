"""OpenLineage's own event and facet schemas, compiled into fast validators. Pure.

No package registry serves the spec's JSON Schema files, but openlineage-python ships the model OpenLineage
generates from them (``openlineage.client.generated``: one attrs class per schema definition, with the field types,
which fields are required, the enums, and validators for the formats). The JSON Schemas are rebuilt from that model
at import — never written by hand — and compiled with jsonschema-rs (a Rust validator: ~1 µs for a core event,
where fastjsonschema's generated Python took 5-30 µs a schema):

- types, required fields, enums and nesting as the generated classes declare them; ``null`` is not a value of any
  field (the spec allows none); extra properties are allowed everywhere, as the spec allows them;
- formats from the classes' validators: a ``UUID(...)`` check is a UUID in its standard form (8-4-4-4-12 hex
  digits: Python's ``UUID()`` also takes braces, ``urn:uuid:`` and no hyphens, which the spec's ``uuid`` does not),
  ``isoparse`` is ``date-time`` (RFC 3339) — except the event's own ``eventTime``, which ``openlineage.event_time``
  reads (it accepts more ISO-8601 spellings and normalizes them);
- the spec's base rules the generated classes fill in by default instead of requiring: an event's ``producer`` and
  ``schemaURL``, a facet's ``_producer`` and ``_schemaURL`` (``BASE_REQUIRED``);
- a facet is checked against the facet the spec registers under its key (``STANDARD_KEYS``: each facet's schema
  file names the key it goes under, e.g. ``parent`` in the run's facets is a ParentRunFacet), else the facet its
  ``_schemaURL`` names (``…/SchemaDatasetFacet.json``, whatever version: the model holds the newest, and facets
  only ever gain optional fields); an unknown (custom) facet and a deleted one (``"_deleted": true``) against the
  base facet rules only.

``check(event, kind)`` raises ``SpecViolation`` naming the field: ``run.runId must be uuid``.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import itertools
import pkgutil
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attr
import jsonschema_rs
import openlineage.client.generated as generated
from openlineage.client.generated import base

# What the spec requires that the generated classes default instead (the clients fill them in).
BASE_REQUIRED = {base.BaseEvent: ("eventTime", "producer", "schemaURL"), base.BaseFacet: ("_producer", "_schemaURL")}
EVENT_CLASSES = {"RunEvent": base.RunEvent, "DatasetEvent": base.DatasetEvent, "JobEvent": base.JobEvent}
# The facet maps of the core objects: each value is checked as a facet on its own (``check``).
FACET_MAPS = {"facets", "inputFacets", "outputFacets"}
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_FORMATS = (("UUID(", {"pattern": UUID_PATTERN}), ("isoparse", {"format": "date-time"}))
# The key each standard facet goes under, per facet map (the facets' own schema files declare them).
STANDARD_KEYS: dict[tuple[str, str], str] = {
    **{("run", key): name for key, name in (
        ("parent", "ParentRunFacet"), ("nominalTime", "NominalTimeRunFacet"), ("errorMessage", "ErrorMessageRunFacet"),
        ("processing_engine", "ProcessingEngineRunFacet"), ("externalQuery", "ExternalQueryRunFacet"),
        ("extractionError", "ExtractionErrorRunFacet"), ("environmentVariables", "EnvironmentVariablesRunFacet"),
        ("tags", "TagsRunFacet"), ("jobDependencies", "JobDependenciesRunFacet"),
        ("executionParameters", "ExecutionParametersRunFacet"), ("test", "TestRunFacet"))},
    **{("job", key): name for key, name in (
        ("jobType", "JobTypeJobFacet"), ("sql", "SQLJobFacet"), ("sourceCode", "SourceCodeJobFacet"),
        ("sourceCodeLocation", "SourceCodeLocationJobFacet"), ("documentation", "DocumentationJobFacet"),
        ("ownership", "OwnershipJobFacet"), ("tags", "TagsJobFacet"), ("lineage", "LineageJobFacet"))},
    **{("dataset", key): name for key, name in (
        ("schema", "SchemaDatasetFacet"), ("dataSource", "DatasourceDatasetFacet"),
        ("columnLineage", "ColumnLineageDatasetFacet"), ("symlinks", "SymlinksDatasetFacet"),
        ("lifecycleStateChange", "LifecycleStateChangeDatasetFacet"), ("version", "DatasetVersionDatasetFacet"),
        ("storage", "StorageDatasetFacet"), ("ownership", "OwnershipDatasetFacet"),
        ("documentation", "DocumentationDatasetFacet"), ("datasetType", "DatasetTypeDatasetFacet"),
        ("catalog", "CatalogDatasetFacet"), ("hierarchy", "HierarchyDatasetFacet"), ("tags", "TagsDatasetFacet"),
        ("lineage", "LineageDatasetFacet"), ("dataQualityAssertions", "DataQualityAssertionsDatasetFacet"))},
    ("input", "dataQualityMetrics"): "DataQualityMetricsInputDatasetFacet",
    ("input", "inputStatistics"): "InputStatisticsInputDatasetFacet",
    ("output", "outputStatistics"): "OutputStatisticsOutputDatasetFacet",
}
_MAP_KIND = {"facets": None, "inputFacets": "input", "outputFacets": "output"}
MAX_PROBLEMS = 8  # problems named in one refusal
_REQUIRED = re.compile(r'"(.+)" is a required property')
_DEFINITION = re.compile(r"#/(?:\$defs|definitions)/([A-Za-z0-9]+)$")
_FACET_NAME = re.compile(r"/([A-Za-z0-9]+)\.json(?:#.*)?$")


class SpecViolation(ValueError):
    """An event or facet the spec's schema refuses; the message names the field."""


def _generated_classes() -> Iterator[type]:
    for module_info in pkgutil.iter_modules(generated.__path__):
        module = importlib.import_module(f"{generated.__name__}.{module_info.name}")
        for value in vars(module).values():
            if attr.has(value) and value.__module__ == module.__name__:
                yield value


def _format(cls: type, field: attr.Attribute) -> dict[str, str]:
    """The format a generated validator checks (``UUID(value)``, ``isoparse(value)``) as schema keywords."""
    if field.validator is None or (issubclass(cls, base.BaseEvent) and field.name == "eventTime"):
        return {}
    try:
        source = inspect.getsource(getattr(field.validator, "__func__", field.validator))
    except (OSError, TypeError):
        return {}
    return next((keywords for marker, keywords in _FORMATS if marker in source), {})


def _field_types(cls: type) -> dict[str, Any]:
    """Each attrs field's type, its annotation evaluated in the module that declared it (only fields: a module may
    annotate class variables with names it imports for type checkers only)."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations = vars(klass).get("__annotations__", {})
        namespace = _namespace(klass)
        for name, annotation in annotations.items():
            if name in attr.fields_dict(cls):
                hints[name] = eval(annotation, namespace) if isinstance(annotation, str) else annotation
    return hints


def _namespace(cls: type) -> dict[str, Any]:
    return {**vars(typing), **vars(importlib.import_module(cls.__module__))}


class _Builder:
    """JSON Schema ``$defs`` for attrs classes, by module and class name (``parent_run.Job`` is not ``base.Job``)."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def ref(self, cls: type) -> dict[str, Any]:
        key = f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"
        if key not in self.defs:
            self.defs[key] = {}  # a placeholder first: nested and recursive definitions refer to it
            self.defs[key] = self._object(cls)
        return {"$ref": f"#/$defs/{key}"}

    def _object(self, cls: type) -> dict[str, Any]:
        hints, namespace = _field_types(cls), _namespace(cls)
        required = {name for klass, names in BASE_REQUIRED.items() if issubclass(cls, klass) for name in names}
        properties = {}
        for field in attr.fields(cls):
            schema = self.of(hints[field.name], namespace, facet_map=field.name in FACET_MAPS)
            properties[field.name] = {**schema, **_format(cls, field)}
            if field.default is attr.NOTHING:
                required.add(field.name)
        return {"type": "object", "properties": properties, "required": sorted(required)}

    def of(self, hint: Any, namespace: dict[str, Any], facet_map: bool = False) -> dict[str, Any]:
        if isinstance(hint, str | typing.ForwardRef):  # a name inside a Union alias: the declaring module's
            hint = eval(hint if isinstance(hint, str) else hint.__forward_arg__, namespace)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            options = [self.of(arg, namespace, facet_map) for arg in args if arg is not type(None)]
            return options[0] if len(options) == 1 else {"anyOf": options}
        if origin is list:
            return {"type": "array", "items": self.of(args[0], namespace) if args else {}}
        if origin is dict:
            if facet_map:  # each facet is checked by what its _schemaURL names: only "an object" here
                return {"type": "object", "additionalProperties": {"type": "object"}}
            return {"type": "object", "additionalProperties": self.of(args[1], namespace) if args else {}}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if hint is Any or hint is object:
            return {}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return {"enum": [member.value for member in hint]}
        if isinstance(hint, type) and attr.has(hint):
            return self.ref(hint)
        simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
        if hint in simple:
            return {"type": simple[hint]}
        raise TypeError(f"no JSON Schema for {hint!r}")


Validator = Any  # a compiled jsonschema_rs validator


def _compile(cls: type, builder: _Builder) -> Validator:
    root = builder.ref(cls)
    return jsonschema_rs.validator_for({"$schema": "https://json-schema.org/draft/2020-12/schema", **root,
                                        "$defs": builder.defs}, validate_formats=True)


def _build() -> tuple[dict[str, Validator], dict[str, Validator], Validator]:
    builder = _Builder()
    events = {kind: _compile(cls, builder) for kind, cls in EVENT_CLASSES.items()}
    facets = {cls.__name__: _compile(cls, builder) for cls in _generated_classes()
              if issubclass(cls, base.BaseFacet) and cls.__module__ != base.__name__}
    return events, facets, _compile(base.BaseFacet, builder)


_EVENTS, _FACETS, _BASE_FACET = _build()


def facet_name(schema_url: Any) -> str | None:
    """The facet a ``_schemaURL`` names: its ``#/$defs/…`` definition when that is a known facet (one file may hold
    several: ``BaseSubsetDatasetFacet.json#/$defs/InputSubsetInputDatasetFacet``), else its file's name
    (``…/facets/1-0-1/SchemaDatasetFacet.json`` → SchemaDatasetFacet)."""
    if not isinstance(schema_url, str):
        return None
    definition = _DEFINITION.search(schema_url)
    if definition and definition.group(1) in _FACETS:
        return definition.group(1)
    match = _FACET_NAME.search(schema_url)
    return match.group(1) if match else None


def _violation(validator: Validator, instance: Any, where: str) -> SpecViolation | None:
    """None when ``instance`` is valid, else its problems (the first ``MAX_PROBLEMS``), each naming the field
    (``where`` + its path)."""
    if validator.is_valid(instance):
        return None
    problems: list[str] = []
    try:
        errors = list(itertools.islice(validator.iter_errors(instance), MAX_PROBLEMS))
    except ValueError:  # the validator's error report gives up on very deep values (its own recursion limit)
        return SpecViolation(f"{where or 'event'}: does not match the spec's schema")
    for error in errors:
        path = ".".join(str(part) for part in error.instance_path)
        field = f"{where}.{path}" if where and path else where or path or "event"
        message = error.message
        missing = _REQUIRED.fullmatch(message)
        if missing:  # name the missing field itself: "job.name: is required"
            field, message = f"{field}.{missing.group(1)}" if field != "event" else missing.group(1), "is required"
        elif UUID_PATTERN in message:
            message = f"{message.split(' does not match ', 1)[0][:80]} is not a UUID (8-4-4-4-12 hex digits)"
        problems.append(f"{field}: {message}")
    return SpecViolation("; ".join(problems))


def _facet_validator(facet: Any, standard: str | None) -> Validator:
    if isinstance(facet, Mapping) and facet.get("_deleted") is not True:
        return _FACETS.get(standard or facet_name(facet.get("_schemaURL")) or "", _BASE_FACET)
    return _BASE_FACET


_SPEC_KINDS: dict[str | None, str] = {}  # standard facet name → FacetCache.derived kind of its validity


def _valid_by_parts(event: Mapping[str, Any], kind: str, memo: Memo) -> bool:
    """Whether the event is valid, judged from its shell (the event with empty facet maps) and each facet on its
    own, a cached facet's validity remembered; False also when that cannot be told this way. A facet map of objects
    under string keys passes the event's schema whatever the objects hold, so shell and facets valid ⇔ event valid.
    """
    shell = _shell(event)
    try:
        if shell is None or not _EVENTS[kind].is_valid(shell):
            return False
        for where, owner, obj in _core_objects(event):
            for _where, standard, facet in _facets(obj, where, owner):
                validator = _facet_validator(facet, standard)
                memo_kind = _SPEC_KINDS.get(standard)
                if memo_kind is None:
                    memo_kind = _SPEC_KINDS[standard] = f"spec:{standard}"
                if not memo(facet, memo_kind, validator.is_valid):
                    return False
    except (ValueError, TypeError):  # a value the validator cannot read: the whole check says which
        return False
    return True


def _shell(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The event with each facet map of its core objects emptied (shallow copies); None if a map holds anything but
    objects under string keys (the whole check then judges it)."""
    if type(event) is not dict:
        return None
    shell = dict(event)
    for key in ("run", "job", "dataset"):
        obj = event.get(key)
        if type(obj) is dict:
            emptied = _emptied(obj)
            if emptied is None:
                return None
            shell[key] = emptied
    for key in ("inputs", "outputs"):
        items = event.get(key)
        if type(items) is list:
            emptied_items = []
            for item in items:
                emptied = _emptied(item) if type(item) is dict else item
                if emptied is None:
                    return None
                emptied_items.append(emptied)
            shell[key] = emptied_items
    return shell


def _emptied(obj: dict[str, Any]) -> dict[str, Any] | None:
    emptied = obj
    for key in FACET_MAPS:
        facets = obj.get(key)
        if type(facets) is dict and facets:
            if not all(type(name) is str and type(facet) is dict for name, facet in facets.items()):
                return None
            if emptied is obj:
                emptied = dict(obj)
            emptied[key] = {}
    return emptied


def _facets(obj: Any, where: str, owner: str) -> Iterator[tuple[str, str | None, Any]]:
    """Every facet of a core object (``run``, ``job``, a dataset): where it is, its spec facet name, the facet."""
    if isinstance(obj, Mapping):
        for key, kind in _MAP_KIND.items():
            facets = obj.get(key)
            if isinstance(facets, Mapping):
                for name, facet in facets.items():
                    yield f"{where}.{key}.{name}", STANDARD_KEYS.get((kind or owner, name)), facet


def _core_objects(event: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    for key in ("run", "job", "dataset"):
        if key in event:
            yield key, key, event[key]
    for key in ("inputs", "outputs"):
        items = event.get(key)
        if isinstance(items, list):
            for index, item in enumerate(items):
                yield f"{key}.{index}", "dataset", item


Memo = Callable[[Any, str, Callable[[Any], Any]], Any]  # FacetCache.derived: (value, kind, compute) → result


def check(event: Mapping[str, Any], kind: str, memo: Memo | None = None) -> None:
    """``event`` (a ``kind``: RunEvent, DatasetEvent, JobEvent) against the spec's schemas, its facets included.

    ``memo`` (``FacetCache.derived``): each facet's validity is computed once per cached facet, and the event's own
    schema sees the event without its facets (each is checked on its own anyway). That path only ever concludes
    "valid"; any problem on it runs the whole check again as without ``memo``, so refusals read the same.
    """
    if memo is not None and _valid_by_parts(event, kind, memo):
        return
    problem = _violation(_EVENTS[kind], event, "")
    if problem is not None:
        raise problem
    for where, owner, obj in _core_objects(event):
        for facet_where, standard, facet in _facets(obj, where, owner):
            check_facet(facet, facet_where, standard)


def check_facet(facet: Any, where: str, standard: str | None = None) -> None:
    """One facet: the ``standard`` facet (the one registered under its key), else the facet its ``_schemaURL``
    names, else (custom, or ``_deleted``) the base facet rules."""
    problem = _violation(_facet_validator(facet, standard), facet, where)
    if problem is not None:
        raise problem
