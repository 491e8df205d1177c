"""OpenLineage event <-> Avro record, lossless, and validation with messages that name the field.

Core fields are typed in Avro; each facet travels as its JSON text, and any key the core does not know (or a known
key whose value has an unexpected type, such as an explicit ``null``) is kept verbatim in the object's ``extra``
JSON. Hence ``record_to_event(event_to_record(e)) == e`` for every valid event, custom facets included.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson

from kafka_lineage.schemas import spec
from kafka_lineage.schemas.limits import LimitExceeded, check_limits
from kafka_lineage.schemas.wire import FrozenRecord

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


# One encoder, built once: json.dumps(**kwargs) builds a fresh JSONEncoder per call (same output).
_dumps: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# The dedupe identity's canonical JSON (processors/identity.py): sorted keys, compact.
_canonical: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode
# orjson (C) writes a value of strings, 64-bit integers, booleans, null, lists and string-keyed objects exactly as
# these encoders do, ~20x faster (escapes included; sorted keys in the same code point order); it writes floats
# differently (1e-05 as 0.00001) and refuses larger integers. So it only writes what FacetCache parsed without a
# float ("plain"), and anything it refuses goes to json.
_SORTED = orjson.OPT_SORT_KEYS
_MAX_PLAIN = 256


# msgspec's JSON decoder (C) reads a facet ~2.5x faster than json's. It reads floats with float(text) as json does and
# big integers exactly, and refuses what json refuses; json.loads answers for what it refuses (NaN, a lone
# surrogate) and for deep nesting (json's RecursionError is the "nested too deeply" dead letter), so every text gives
# exactly json.loads's value or error.
_decode_json = msgspec.json.Decoder(float_hook=float).decode
_MSGSPEC_MAX_OPENINGS = 400  # brackets in a text: fewer means less nesting than json.loads can read


def loads(text: str) -> Any:
    """``json.loads(text)`` for a str, the same value or error, faster."""
    if text.count("{") + text.count("[") < _MSGSPEC_MAX_OPENINGS:
        try:
            return _decode_json(text)
        except (msgspec.DecodeError, ValueError):
            pass
    return json.loads(text)


class _Entry:
    __slots__ = ("derived", "plain", "size", "text", "value")

    def __init__(self, value: dict[str, Any], size: int, text: str | None = None, plain: bool = False) -> None:
        self.value = value
        self.size = size  # characters of JSON behind the entry, for the cache's bound
        self.text = text  # the facet's JSON as parsed, if it was
        self.plain = plain  # parsed from JSON without a float: orjson writes it as json does
        self.derived: dict[str, Any] = {}


class FacetCache:
    """Parsed facets and facet maps by their JSON, and what is derived from them, for a long-lived decoder.

    A stream repeats the same facets (a dataset's schema and column lineage on every run of its job), and mostly the
    same jobs and datasets, so each distinct facet text, ``{name: text}`` map and job or dataset is decoded once, and
    what the processor derives from it (Avro record, canonical JSON for the dedupe identity, normalized form) is
    computed once. Events decoded through a cache share those objects with each other: treat them as read-only
    (the processor never modifies an event).

    Anything is cached once it has been seen ``admit_after`` times: run statistics never repeat, and a run's own
    facets only on its few events; caching those would only push out useful entries and load the cyclic GC
    (``max_seen`` bounds that count). Bounded by the characters of JSON behind the entries (a map or object counts
    its facets again), least recently used first out: the default holds ~100 jobs' worth of a Spark stream in
    ~25 MB (the processor's holds a platform's: ``processors/core.py`` ``FACET_CACHE_CHARS``).
    """

    def __init__(self, max_chars: int = 4_000_000, admit_after: int = 2, max_seen: int = 50_000) -> None:
        self.max_chars = max_chars
        self.admit_after = admit_after
        self.max_seen = max_seen
        self._lru: OrderedDict[Any, _Entry] = OrderedDict()  # by text, by map items, or by the entry (adopted)
        self._by_id: dict[int, _Entry] = {}  # id of a cached object → its entry (which keeps the object alive)
        self._seen: dict[int, int] = {}  # hash of a key not cached yet → times seen (a collision only caches early)
        self._chars = 0
        self._floats = 0  # floats the decoder has read (its float hook counts them)
        self._decode = msgspec.json.Decoder(float_hook=self._float).decode
        # Facets parsed without a float but not cached (an event's own, or before admission), by id, until the
        # event is encoded (the processor encodes an event before it decodes the next, unless it holds it back):
        # the last few hundred, kept alive so that ids are theirs. Few: what is kept alive loads the cyclic GC.
        self._plain: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._lru)

    def parse(self, text: str) -> Any:
        """``json.loads(text)``; the same object for the same text while it is cached."""
        if type(text) is not str:  # Avro strings are str; anything else is json.loads's alone
            return json.loads(text)
        entry = self._lru.get(text)
        if entry is not None:
            self._lru.move_to_end(text)
            return entry.value
        value, plain = self._loads(text)
        if type(value) is dict:  # facets are objects; anything else is left to validation
            if self._admit(text):
                self._add(text, _Entry(value, len(text), text, plain))
            elif plain:
                if len(self._plain) >= _MAX_PLAIN:
                    self._plain.clear()
                self._plain[id(value)] = value
        return value

    def _loads(self, text: str) -> tuple[Any, bool]:
        """``json.loads(text)`` (see ``loads``), and whether the value holds no float (then msgspec read it)."""
        if text.count("{") + text.count("[") < _MSGSPEC_MAX_OPENINGS:
            floats = self._floats
            try:
                value = self._decode(text)
            except (msgspec.DecodeError, ValueError):
                pass
            else:
                return value, self._floats == floats
        return json.loads(text), False

    def _float(self, text: str) -> float:
        self._floats += 1
        return float(text)  # as json.loads reads a float

    def _is_plain(self, value: Any) -> bool:
        entry = self._by_id.get(id(value))
        if entry is not None and entry.value is value:
            return entry.plain
        return self._plain.get(id(value)) is value

    def parse_map(self, texts: dict[str, str]) -> dict[str, Any]:
        """``{name: json.loads(text)}``; the same object for the same map (items in the same order) while cached."""
        if not texts:
            return {}
        key = tuple(texts.items())
        entry = self._lru.get(key)
        if entry is not None:
            self._lru.move_to_end(key)
            return entry.value
        value = {name: self.parse(text) for name, text in texts.items()}
        if self._admit(key) and all(type(name) is str for name, _ in key):  # equal keys, equal maps: no 1 == True
            self._add(key, _Entry(value, sum(len(text) for text in texts.values())))
        return value

    def shared(self, key: tuple[Any, ...], build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``build()``; the same object for the same key (the object's whole content, strings only) while cached."""
        try:
            entry = self._lru.get(key)
        except TypeError:  # unhashable: not a record decoded from Avro
            return build()
        if entry is not None:
            self._lru.move_to_end(key)
            return entry.value
        value = build()
        if self._admit(key) and (size := _strings(key)) is not None:
            self._add(key, _Entry(value, size))
        return value

    def adopt(self, value: Any, size: int | None = None) -> None:
        """Cache what is derived from an object not decoded here (a facet or dataset the processor rewrote and
        reuses); ``size``: its characters of JSON, if known."""
        if type(value) is dict and not self.holds(value):
            entry = _Entry(value, 0)
            if size is None:
                entry.derived["json"] = text = _dumps(value)
                size = len(text)
            entry.size = size
            self._add(entry, entry)

    def size(self, value: Any) -> int:
        """Characters of JSON behind a cached object (0 for others)."""
        entry = self._by_id.get(id(value))
        return entry.size if entry is not None and entry.value is value else 0

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is an object of this cache (kept alive by it, so its id is its own)."""
        entry = self._by_id.get(id(value))
        return entry is not None and entry.value is value

    def derived(self, value: Any, kind: str, compute: Callable[[Any], Any]) -> Any:
        """``compute(value)``, computed once per cached object (kind names the computation); others as they are.

        What is returned for a cached object is shared by every caller: read-only, like the object itself.
        """
        entry = self._by_id.get(id(value))
        if entry is None or entry.value is not value:
            return compute(value)
        result = entry.derived.get(kind)
        if result is None:
            result = compute(value)
            entry.derived[kind] = entry.text if result == entry.text else result  # share the string when equal
        return result

    def dumps(self, value: Any) -> str:
        """A facet's JSON as ``event_to_record`` writes it."""
        return self.derived(value, "json", self._dumps_one)

    def canonical(self, value: Any) -> str:
        """A facet's canonical JSON (sorted keys, compact), as the dedupe identity hashes it."""
        return self.derived(value, "canonical", self._canonical_one)

    def _dumps_one(self, value: Any) -> str:
        if self._is_plain(value):
            try:
                return orjson.dumps(value).decode()
            except TypeError:  # an integer beyond 64 bits
                pass
        return _dumps(value)

    def _canonical_one(self, value: Any) -> str:
        if self._is_plain(value):
            try:
                return orjson.dumps(value, option=_SORTED).decode()
            except TypeError:
                pass
        return _canonical(value)

    def dumps_map(self, value: dict[str, Any]) -> dict[str, str]:
        """A facet map as ``event_to_record`` writes it: ``{name: facet JSON}``."""
        return self.derived(value, "json-map", self._dumps_map)

    def _dumps_map(self, value: dict[str, Any]) -> dict[str, str]:
        return {name: self.dumps(facet) for name, facet in value.items()} if value else {}

    def _admit(self, key: Any) -> bool:
        seen = hash(key)
        count = self._seen.get(seen, 0) + 1
        if count > self.admit_after:
            self._seen.pop(seen, None)
            return True
        if len(self._seen) >= self.max_seen:
            self._seen.clear()
        self._seen[seen] = count
        return False

    def _add(self, key: Any, entry: _Entry) -> None:
        if entry.size > self.max_chars // 16:
            return  # a huge facet would push out many small ones
        self._lru[key] = self._by_id[id(entry.value)] = entry
        self._chars += entry.size
        while self._chars > self.max_chars:
            _, old = self._lru.popitem(last=False)
            del self._by_id[id(old.value)]
            self._chars -= old.size


# The layouts as (key → (kind code, nested layout)): the walks below run for every object of every event.
_STR, _EVENT_TYPE, _FACET_MAP, _LIST, _RECORD = range(5)
_CODES = {
    name: {key: ((_STR, None) if kind == "str" else (_EVENT_TYPE, None) if kind == "event_type"
                 else (_FACET_MAP, None) if kind == _FACETS else (_LIST, kind[0]) if isinstance(kind, list)
                 else (_RECORD, kind))
           for key, kind in layout.items()}
    for name, layout in _LAYOUT.items()
}
_NO_CODE = (None, None)
_RECORD_KIND = {name: f"record:{name}" for name in _LAYOUT}  # FacetCache.derived kinds
# Objects decoded once per distinct content. Not runs: a run's id makes it unique to its few events.
_SHARED = frozenset({"job", "dataset", "input", "output"})
_FIELDS = {name: tuple((key, code == _FACET_MAP) for key, (code, _) in codes.items()) for name, codes in _CODES.items()}


def _encode(obj: dict[str, Any], layout_name: str, facets: FacetCache | None = None) -> dict[str, Any]:
    """Known keys of the right JSON type go to typed Avro fields; anything else is kept verbatim in ``extra``.

    Collections (facet maps, dataset lists) are plain Avro maps/arrays rather than ``["null", …]`` unions, which
    halves fastavro's write time; a collection the object did not have is listed in ``absent`` instead.
    """
    if facets is not None and layout_name in _SHARED:  # a job or dataset of the cache: its record is computed once,
        # and frozen, so that the codec writes its Avro bytes once too
        return facets.derived(obj, _RECORD_KIND[layout_name],
                              lambda o: FrozenRecord(_encode_object(o, layout_name, facets)))
    return _encode_object(obj, layout_name, facets)


def _encode_object(obj: dict[str, Any], layout_name: str, facets: FacetCache | None) -> dict[str, Any]:
    codes = _CODES[layout_name]
    record: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        code, nested = codes.get(key, _NO_CODE)
        if code == _STR:
            if isinstance(value, str):
                record[key] = value
                continue
        elif code == _FACET_MAP:
            if isinstance(value, dict):
                if facets is not None:
                    record[key] = facets.dumps_map(value)
                else:
                    record[key] = {name: _dumps(facet) for name, facet in value.items()} if value else {}
                continue
        elif code == _EVENT_TYPE:
            if value in _EVENT_TYPES:
                record[key] = value
                continue
        elif code == _LIST:
            if isinstance(value, list) and all(isinstance(item, dict) for item in value):
                record[key] = [_encode(item, nested, facets) for item in value]
                continue
        elif code == _RECORD and isinstance(value, dict):
            record[key] = (_UNION_RECORD[nested], _encode(value, nested, facets))
            continue
        extra[key] = value
    absent = [key for key in _COLLECTIONS[layout_name] if key not in record]
    for key in absent:
        record[key] = {} if codes[key][0] == _FACET_MAP else []
    record["absent"] = absent
    record["extra"] = _dumps(extra) if extra else None
    return record


def _decode(record: dict[str, Any], layout_name: str, facets: FacetCache | None = None) -> dict[str, Any]:
    if facets is not None and layout_name in _SHARED:  # the same job or dataset as before: the same object
        return facets.shared(_content(record, layout_name), lambda: _decode_object(record, layout_name, facets))
    return _decode_object(record, layout_name, facets)


_MAP = object()  # marks a facet map's items in a key: no value of a record can look like it


def _content(record: dict[str, Any], layout_name: str) -> tuple[Any, ...]:
    """Everything ``_decode_object`` reads of a nested record, as a key (facet maps as their items, in order)."""
    return (layout_name,
            *[(_MAP, *value.items()) if is_map and type(value := record.get(key)) is dict else record.get(key)
              for key, is_map in _FIELDS[layout_name]],
            tuple(record.get("absent") or ()), record.get("extra"))


def _strings(key: tuple[Any, ...]) -> int | None:
    """Characters of a ``_content`` key made of strings only, as records decoded from Avro are (so that equal keys
    mean equal objects: no 1 == 1.0 == True); None for any other key, which is then not cached."""
    size = 0
    for part in key:
        if type(part) is str:
            size += len(part)
        elif type(part) is tuple:
            for item in part[1:] if part and part[0] is _MAP else part:
                if type(item) is str:
                    size += len(item)
                elif type(item) is tuple and len(item) == 2 and type(item[0]) is str and type(item[1]) is str:
                    size += len(item[1])
                else:
                    return None
        elif part is not None:
            return None
    return size


def _decode_object(record: dict[str, Any], layout_name: str, facets: FacetCache | None) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    absent = record.get("absent") or ()
    for key, (code, nested) in _CODES[layout_name].items():
        value = record.get(key)
        if value is None or key in absent:
            continue
        if isinstance(value, tuple):  # an encoder-side record with fastavro's (branch name, value) union hint
            value = value[1]
        if code <= _EVENT_TYPE:
            obj[key] = value
        elif code == _FACET_MAP:
            obj[key] = facets.parse_map(value) if facets is not None else {
                name: json.loads(text) for name, text in value.items()}
        elif code == _LIST:
            obj[key] = [_decode(item, nested, facets) for item in value]
        else:
            obj[key] = _decode(value, nested, facets)
    if extra := record.get("extra"):
        obj.update(loads(extra) if type(extra) is str else json.loads(extra))
    return obj


def event_to_record(event: dict[str, Any], facets: FacetCache | None = None) -> dict[str, Any]:
    """An OpenLineage event (parsed JSON) as a record of ``schemas/avro/openlineage_event.avsc``.

    ``facets``: the cache the event was decoded with; its facets' JSON is then serialized once, not per event.
    """
    return _encode(event, "event", facets)


def record_to_event(record: dict[str, Any], facets: FacetCache | None = None) -> dict[str, Any]:
    """The exact OpenLineage event (parsed JSON) that ``event_to_record`` was given.

    ``facets``: parse facet JSON through this cache (the result then shares facet objects with other events).
    """
    return _decode(record, "event", facets)


# --- validation ----------------------------------------------------------------------------------------------------
def event_kind(event: dict[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent, as the spec's ``oneOf`` tells them apart: a run and a job make a RunEvent
    (a DatasetEvent may not have both), else a dataset a DatasetEvent (one may carry a run), else a job a JobEvent
    (which may not have a run), else a lone run a RunEvent (refused: it needs its job)."""
    if "run" in event and "job" in event:
        return "RunEvent"
    if "dataset" in event:
        return "DatasetEvent"
    if "job" in event:
        return "JobEvent"
    if "run" in event:
        return "RunEvent"
    raise InvalidEvent("event: not an OpenLineage event (none of run, job, dataset is present)")


def check_event_time(value: Any) -> None:
    """``eventTime``: any ISO-8601 date and time Python reads (the spec's RFC 3339, and also no offset, read as UTC
    as everywhere in the pipeline; ``+0200``; no seconds; a decimal comma). Every stage reads it the same way
    (``event_instant``, the graph's ``utc_time``); the event keeps the producer's text."""
    if not isinstance(value, str) or "T" not in value.upper():
        raise InvalidEvent(f"eventTime: must be an ISO-8601 date-time string such as 2024-05-01T12:00:00.000Z, "
                           f"got {str(value)[:64]!r}")
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidEvent(f"eventTime: not an ISO-8601 date-time: {value[:64]!r}") from None


def validate_event(event: Any, facets: FacetCache | None = None) -> str:
    """Check an event against OpenLineage's own schemas (``schemas/spec.py``: the core and every facet) and the
    size limits of ``schemas/limits.py``; returns its kind or raises InvalidEvent naming the field. ``facets``: the
    cache the event was decoded with, so that each of its facets' limits is checked once (facets are read-only)."""
    if not isinstance(event, dict):
        raise InvalidEvent(f"event: expected a JSON object, got {type(event).__name__}")
    kind = event_kind(event)
    try:
        check_limits(event, facets.derived if facets is not None else None)
        try:
            spec.check(event, kind, facets.derived if facets is not None else None)
        except (ValueError, TypeError) as exc:  # a value JSON has no form for (the validator cannot even read it)
            if isinstance(exc, spec.SpecViolation):
                raise
            raise InvalidEvent(f"{unwritable_path(event)}: not a JSON value ({str(exc)[:200]})") from None
        check_event_time(event["eventTime"])
        _check_identity_text(event)
    except (LimitExceeded, spec.SpecViolation, InvalidEvent) as exc:
        raise InvalidEvent(f"invalid {kind}: {exc}") from None
    return kind


def unwritable_path(event: Any, max_depth: int = 200) -> str:
    """The dotted path of the first value in ``event`` that JSON cannot write (not a JSON type, a string that is not
    UTF-8-encodable, a key that is not a string, a container that contains itself, or nesting deeper than
    ``max_depth``). Only called once validation or an encode failed, so it walks the whole event without hurry;
    iterative, so deep nesting cannot overflow it."""
    todo: list[tuple[Any, str, tuple[int, ...]]] = [(event, "", ())]
    while todo:
        value, path, ancestors = todo.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return path or "event"
        elif isinstance(value, (dict, list)):
            if id(value) in ancestors or len(ancestors) >= max_depth:
                return path or "event"
            if isinstance(value, dict) and (odd := next((k for k in value if not isinstance(k, str)), None)):
                return f"{path}.{odd}" if path else str(odd)  # a key JSON would silently turn into a string
            items = value.items() if isinstance(value, dict) else enumerate(value)
            todo.extend((item, f"{path}.{key}" if path else str(key), (*ancestors, id(value)))
                        for key, item in items)
        elif not (value is None or isinstance(value, (bool, int, float))):
            return path or "event"
    return "event"


def _identity_texts(event: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The strings that become the graph's keys and the record's typed fields."""
    for key in ("eventTime", "producer", "schemaURL"):
        yield key, event.get(key)
    run, job = event.get("run"), event.get("job")
    if isinstance(run, dict):
        yield "run.runId", run.get("runId")
    for where, obj in (("job", job), ("dataset", event.get("dataset"))):
        if isinstance(obj, dict):
            yield f"{where}.namespace", obj.get("namespace")
            yield f"{where}.name", obj.get("name")
    for key in ("inputs", "outputs"):
        for index, dataset in enumerate(event.get(key) or ()):
            if isinstance(dataset, dict):
                yield f"{key}.{index}.namespace", dataset.get("namespace")
                yield f"{key}.{index}.name", dataset.get("name")


def _check_identity_text(event: dict[str, Any]) -> None:
    """A lone surrogate (a string Python holds but UTF-8 cannot) in a name or id: no stage could store it."""
    for path, text in _identity_texts(event):
        if isinstance(text, str) and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidEvent(f"{path}: not valid Unicode text (a lone surrogate)") from None


def _job_key(job: Any) -> str | None:
    if isinstance(job, dict):
        namespace, name = job.get("namespace"), job.get("name")
        if isinstance(namespace, str) and namespace and isinstance(name, str) and name:
            return f"{namespace}/{name}"
    return None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def partition_key(event: Any) -> str:
    """Kafka key that keeps one application's events on one partition, in order (openlineage-python's convention).

    RunEvent: ``run:{ns}/{name}`` of the parent facet's root job, else the parent job, else the event's job.
    DatasetEvent: ``dataset:{ns}/{name}``; JobEvent: ``job:{ns}/{name}``. Total: any value gets a key (a part that
    is missing or malformed is skipped, ``None`` written for a missing name), so no caller ever fails here.
    """
    if not isinstance(event, dict):
        return "event:invalid"
    if "run" in event:
        parent = _get(_get(event.get("run"), "facets"), "parent")
        for job in (_get(_get(parent, "root"), "job"), _get(parent, "job"), event.get("job")):
            if (key := _job_key(job)) is not None:
                return f"run:{key}"
    if isinstance(dataset := event.get("dataset"), dict):
        return f"dataset:{dataset.get('namespace')}/{dataset.get('name')}"
    job = event.get("job")
    return f"job:{_get(job, 'namespace')}/{_get(job, 'name')}"


# The lifecycle order of a run's events, shared by the processor (reordering) and the sinks (state only moves forward).
_RANKS = {"START": 0, "RUNNING": 1, "OTHER": 1, "COMPLETE": 2, "FAIL": 2, "ABORT": 2}


def lifecycle_rank(event_type: str | None) -> int:
    """START=0 < RUNNING=1 < COMPLETE/FAIL/ABORT=2.

    OTHER and a missing/unknown eventType rank as RUNNING: the spec allows OTHER (and no type) at any point of a run
    for extra facets, so they need a START before them but must not be held back behind a terminal event.
    """
    return _RANKS.get(event_type, 1) if isinstance(event_type, str) else 1


def event_instant(event_time: Any) -> float:
    """An ISO-8601 eventTime as epoch seconds (offsets and ``Z`` honoured; no offset = UTC); ``inf`` if unusable.

    Unusable times sort last within their rank instead of raising: an event that passed validation must flow.
    """
    if not isinstance(event_time, str):
        return math.inf
    try:
        moment = datetime.fromisoformat(event_time.strip())
    except ValueError:
        return math.inf
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
