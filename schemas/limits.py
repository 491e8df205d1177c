"""Every size limit on an OpenLineage event, stated once with its reason, and the check that enforces them.

``validate_event`` (``schemas/openlineage.py``) calls ``check_limits`` on every event at every entry point (the
collector, ``lineage emit``, the Python transport, and the processor for records written to the topic directly), so
no later stage ever sees an event beyond them. The check runs before the spec's schemas (``schemas/spec.py``), which
say nothing of sizes, and is iterative: no input can exhaust the interpreter's stack here.

Why each limit is what it is:

- ``MAX_JSON_DEPTH`` (500): nesting of the whole event (the event object is level 1). Every stage walks events with
  C code that recurses once per level (``json``), inside stacks of up to ~100 frames (Faust, asyncio), under
  Python's limit of 1,000 frames: 500 leaves half of that as margin. Plans that Spark or other engines serialize
  into facets nest deeply (a chain of operators nests two levels per operator), so the limit is far above a
  schema's or a plan's usual depth (Jackson, which writes Java producers' events, reads up to 1,000 by default).
- ``MAX_SCHEMA_FIELDS`` (25,000): fields of one ``schema`` facet, nested ones included (each becomes a graph
  ``Field`` node and a diff entry); wide tables of 12,000 columns exist.
- ``MAX_SCHEMA_FIELD_DEPTH`` (32): nesting of schema fields (structs in structs); the schema diff and the graph's
  field paths recurse per level.
- ``MAX_FIELD_PATH_CHARS`` (4,096): one dotted field path (``address.zip``), as the graph stores it and alerts name
  it; also the length of a column-lineage field name. Paths repeat their ancestors' names, so they grow
  quadratically with nesting: this and the next limit keep the ``Field`` rows linear in the event's size.
- ``MAX_SCHEMA_PATH_CHARS`` (4,000,000): all dotted paths of one schema facet together (the characters of its
  ``Field`` rows; a 12,000-column table with 100-character paths is 1.2 M).
- ``MAX_NAME_CHARS`` (65,536): a job's or dataset's namespace or name (also in parent and column-lineage
  references). Real names (S3 keys, SQL-derived job names) stay far below; names over ``graph.keys``'s
  key threshold (~2 KB) are stored by hash in Neo4j.
- ``MAX_COLUMN_LINEAGE_FIELDS`` (25,000): output fields of one ``columnLineage`` facet (like a schema).
- ``MAX_COLUMN_LINEAGE_INPUTS`` (100,000): input field references of one ``columnLineage`` facet, its dataset-level
  ``dataset`` list included (each becomes ``DERIVES_FROM`` edges and ``Field`` nodes).

The event's byte size is bounded before this check: by the collector's body limit (``LINEAGE_COLLECTOR_MAX_BYTES``)
and by the Kafka record limit (``message.max.bytes``) on every emitter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_JSON_DEPTH = 500
MAX_SCHEMA_FIELDS = 25_000
MAX_SCHEMA_FIELD_DEPTH = 32
MAX_FIELD_PATH_CHARS = 4_096
MAX_SCHEMA_PATH_CHARS = 4_000_000
MAX_NAME_CHARS = 65_536
MAX_COLUMN_LINEAGE_FIELDS = 25_000
MAX_COLUMN_LINEAGE_INPUTS = 100_000

_SHOWN_PATH_CHARS = 200  # a path in a message is cut here: a path 500 levels deep is no help to read

# A facet's check result: (the facet's own nesting depth, (path inside the facet, problem) or None).
Problem = tuple[str, str]
FacetCheck = tuple[int, Problem | None]
# How ``check_limits`` computes a facet's check: ``memo(facet, kind, compute)`` may return a stored result for a
# facet object it has seen (a long-lived decoder shares read-only facet objects between events).
Memo = Callable[[Any, str, Callable[[Any], FacetCheck]], FacetCheck]
_TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels (the JSON of the whole event)"


class LimitExceeded(ValueError):
    """An event beyond a limit; the message names the field and the limit."""


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _message(path: str, problem: str) -> str:
    """``path: problem``, the path cut at ``_SHOWN_PATH_CHARS`` (a path 500 levels deep is no help to read)."""
    shown = path if len(path) <= _SHOWN_PATH_CHARS else path[:_SHOWN_PATH_CHARS] + "…"
    return f"{shown or 'event'}: {problem}"


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of ``value`` (a scalar 0, ``{}`` 1), or ``limit + 1`` as soon as it is deeper than ``limit``.

    Iterative, level by level (one list comprehension per level: this runs on every event)."""
    if type(value) is not dict and type(value) is not list:
        return 0
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        level = [item for container in level
                 for item in (container.values() if type(container) is dict else container)
                 if type(item) is dict or type(item) is list]
    return depth


def _deep_path(value: Any, limit: int) -> str:
    """The path (relative to ``value``) of a container at depth ``limit + 1``: walked again, only on failure."""
    todo: list[tuple[Any, str, int]] = [(value, "", 1)]
    while todo:
        current, path, depth = todo.pop()
        if depth > limit:
            return path
        items = current.items() if type(current) is dict else enumerate(current)
        todo.extend((item, _join(path, key), depth + 1) for key, item in items
                    if type(item) is dict or type(item) is list)
    return ""


def _check_depth(value: Any, path: str, key: Any, above: int) -> None:
    """Raise if ``value`` (at ``path.key``, ``above`` levels deep in the event) takes the event past
    ``MAX_JSON_DEPTH``. Paths are only built for the message: this runs for every value of every event."""
    if (type(value) is dict or type(value) is list) and _depth(value, MAX_JSON_DEPTH - above) > MAX_JSON_DEPTH - above:
        raise LimitExceeded(_message(_join(_join(path, key), _deep_path(value, MAX_JSON_DEPTH - above)), _TOO_DEEP))


def _schema_check(facet: Any) -> FacetCheck:
    """A ``schema`` facet: field count, field nesting, path lengths, as ``schema_diff.schema_fields`` and the
    graph's ``field_paths`` read it (named fields, nested under ``fields``)."""
    depth = _depth(facet, MAX_JSON_DEPTH)
    fields = facet.get("fields") if type(facet) is dict else None
    # (a fields list, the indexes that lead to it, the name prefix of its paths, its nesting level)
    todo: list[tuple[Any, tuple[int, ...], str, int]] = [(fields, (), "", 1)]
    count = chars = 0
    while todo:
        items, where, prefix, level = todo.pop()
        if type(items) is not list:
            continue
        for index, item in enumerate(items):
            name = item.get("name") if type(item) is dict else None
            if type(name) is not str:
                continue
            count += 1
            path = prefix + name if prefix else name
            chars += len(path)
            nested = item.get("fields")
            if count > MAX_SCHEMA_FIELDS:
                return depth, (_fields_path(where, index), f"more than {MAX_SCHEMA_FIELDS:,} schema fields (nested "
                                                           "ones included)")
            if len(path) > MAX_FIELD_PATH_CHARS:
                return depth, (_fields_path(where, index) + ".name", f"field path of {len(path):,} characters, "
                                                                     f"above the limit of {MAX_FIELD_PATH_CHARS:,}")
            if chars > MAX_SCHEMA_PATH_CHARS:
                return depth, (_fields_path(where, index), f"the schema's field paths exceed "
                                                           f"{MAX_SCHEMA_PATH_CHARS:,} characters in total")
            if type(nested) is list and nested:
                if level >= MAX_SCHEMA_FIELD_DEPTH:
                    return depth, (_fields_path(where, index) + ".fields", f"schema fields nested deeper than "
                                                                           f"{MAX_SCHEMA_FIELD_DEPTH} levels")
                todo.append((nested, (*where, index), path + ".", level + 1))
    return depth, None


def _fields_path(where: tuple[int, ...], index: int) -> str:
    return "fields." + "".join(f"{i}.fields." for i in where) + str(index)


def _name_problem(obj: Any, path: str) -> Problem | None:
    """A namespace or name of ``obj`` (a job, dataset or reference to one) longer than ``MAX_NAME_CHARS``."""
    if type(obj) is dict:
        for key in ("namespace", "name"):
            value = obj.get(key)
            if type(value) is str and len(value) > MAX_NAME_CHARS:
                return _join(path, key), f"{len(value):,} characters, above the limit of {MAX_NAME_CHARS:,}"
    return None


def _field_name_problem(value: Any, path: str) -> Problem | None:
    if type(value) is str and len(value) > MAX_FIELD_PATH_CHARS:
        return path, f"field name of {len(value):,} characters, above the limit of {MAX_FIELD_PATH_CHARS:,}"
    return None


def _input_problem(entry: Any, path: str) -> Problem | None:
    return _name_problem(entry, path) or _field_name_problem(
        entry.get("field") if type(entry) is dict else None, f"{path}.field")


def _column_lineage_check(facet: Any) -> FacetCheck:
    """A ``columnLineage`` facet: output fields, input references (``inputFields`` and the dataset-level
    ``dataset`` list) and the names in them."""
    depth = _depth(facet, MAX_JSON_DEPTH)
    fields = facet.get("fields") if type(facet) is dict else None
    datasets = facet.get("dataset") if type(facet) is dict else None
    inputs = 0
    if type(fields) is dict:
        if len(fields) > MAX_COLUMN_LINEAGE_FIELDS:
            return depth, ("fields", f"more than {MAX_COLUMN_LINEAGE_FIELDS:,} output fields")
        for out_field, spec in fields.items():
            where = _join("fields", out_field if len(str(out_field)) <= _SHOWN_PATH_CHARS else "…")
            problem = _field_name_problem(out_field, where)
            entries = spec.get("inputFields") if type(spec) is dict else None
            if problem is None and type(entries) is list:
                inputs += len(entries)
                if inputs > MAX_COLUMN_LINEAGE_INPUTS:
                    return depth, (f"{where}.inputFields", f"more than {MAX_COLUMN_LINEAGE_INPUTS:,} input field "
                                                           "references in the facet")
                for index, entry in enumerate(entries):
                    if (problem := _input_problem(entry, f"{where}.inputFields.{index}")) is not None:
                        break
            if problem is not None:
                return depth, problem
    if type(datasets) is list and inputs + len(datasets) > MAX_COLUMN_LINEAGE_INPUTS:
        return depth, ("dataset", f"more than {MAX_COLUMN_LINEAGE_INPUTS:,} input field references in the facet")
    for index, entry in enumerate(datasets if type(datasets) is list else ()):
        if (problem := _input_problem(entry, f"dataset.{index}")) is not None:
            return depth, problem
    return depth, None


def _parent_check(facet: Any) -> FacetCheck:
    """A ``parent`` facet: its job's and its root job's names."""
    root = facet.get("root") if type(facet) is dict else None
    return _depth(facet, MAX_JSON_DEPTH), (
        _name_problem(facet.get("job") if type(facet) is dict else None, "job")
        or _name_problem(root.get("job") if type(root) is dict else None, "root.job"))


def _plain_check(facet: Any) -> FacetCheck:
    return _depth(facet, MAX_JSON_DEPTH), None


_FACET_CHECKS: dict[str, Callable[[Any], FacetCheck]] = {
    "schema": _schema_check, "columnLineage": _column_lineage_check, "parent": _parent_check}
_MEMO_KINDS = {name: f"limits:{name}" for name in _FACET_CHECKS}  # one memo entry per facet and check
_OBJECT_KINDS = {True: "limits:named-object", False: "limits:object"}


def _no_memo(facet: Any, _kind: str, compute: Callable[[Any], FacetCheck]) -> FacetCheck:
    return compute(facet)


# The event's layout as far as limits care: objects whose namespace/name are names, and where facet maps are.
_OBJECTS = {"run": False, "job": True, "dataset": True}  # key → whether it has namespace/name
_DATASET_LISTS = ("inputs", "outputs")
_FACET_MAPS = ("facets", "inputFacets", "outputFacets")


def check_limits(event: Any, memo: Memo | None = None) -> None:
    """Raise ``LimitExceeded`` naming the field if ``event`` is beyond a limit of this module. Any shape is accepted
    (what does not have the OpenLineage layout is only measured for depth, the rest is left to the validation).

    ``memo``: computes each facet's check (see ``Memo``); by default on every call."""
    memo = memo or _no_memo
    if type(event) is not dict:
        _check_depth(event, "", "", 0)
        return
    for key, value in event.items():
        if key in _OBJECTS and type(value) is dict:
            _check_object(value, key, 1, _OBJECTS[key], memo)
        elif key in _DATASET_LISTS and type(value) is list:
            for index, dataset in enumerate(value):
                if type(dataset) is dict:
                    _check_object(dataset, f"{key}.{index}", 2, True, memo)
                else:
                    _check_depth(dataset, key, index, 2)
        else:
            _check_depth(value, "", key, 1)


def _check_object(obj: dict[Any, Any], path: str, above: int, named: bool, memo: Memo) -> None:
    """A run, job or dataset object ``above`` levels deep (the event is level 1). Jobs and datasets repeat in a
    stream (a decoder's cache shares them), so an object's check is memoized like a facet's."""
    depth, problem = memo(obj, _OBJECT_KINDS[named], lambda value: _object_check(value, named, memo))
    if above + depth > MAX_JSON_DEPTH:
        raise LimitExceeded(_message(_join(path, _deep_path(obj, MAX_JSON_DEPTH - above)), _TOO_DEEP))
    if problem is not None:
        raise LimitExceeded(_message(_join(path, problem[0]), problem[1]))


def _object_check(obj: dict[Any, Any], named: bool, memo: Memo) -> FacetCheck:
    """An object's own nesting depth (capped past ``MAX_JSON_DEPTH``) and its first problem (path inside it): its
    names, then its facets' checks."""
    if named and (problem := _name_problem(obj, "")) is not None:
        return 1, problem
    depth = 1
    for key, value in obj.items():
        if key in _FACET_MAPS and type(value) is dict:
            depth = max(depth, 2)
            for name, facet in value.items():
                if type(facet) is not dict:
                    depth = max(depth, 2 + _depth(facet, MAX_JSON_DEPTH))
                    continue
                check = _FACET_CHECKS.get(name, _plain_check) if type(name) is str else _plain_check
                facet_depth, problem = memo(facet, _MEMO_KINDS.get(name, "limits"), check)
                depth = max(depth, 2 + facet_depth)
                if problem is not None:
                    return depth, (_join(_join(key, name), problem[0]), problem[1])
        else:
            depth = max(depth, 1 + _depth(value, MAX_JSON_DEPTH))
    return depth, None
