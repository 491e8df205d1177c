"""The processor's caches change nothing but speed: every cached path equals the plain function it replaces."""

from __future__ import annotations

import copy
import io
import json

import fastavro

from kafka_lineage.processors.core import Incoming, ProcessorCore
from kafka_lineage.processors.identity import canonical_json, dedupe_id
from kafka_lineage.processors.normalize import NormalizeCache, normalize_event, parse_aliases
from kafka_lineage.schemas.avro_schemas import schema_text
from kafka_lineage.schemas.openlineage import FacetCache, event_to_record, partition_key, record_to_event
from kafka_lineage.schemas.wire import HEADER, MAGIC, AvroCodec, FrozenRecord, SchemaNotFound
from kafka_lineage_devtools.bench_core import build_events
from tests.openlineage_samples import dataset_event, full_run_event, job_event

SCHEMAS = {1: "openlineage_event", 2: "normalized_event", 3: "dead_letter"}


def _fetch(schema_id: int) -> str:
    if schema_id not in SCHEMAS:
        raise SchemaNotFound(schema_id)
    return schema_text(SCHEMAS[schema_id])


CODECS = {name: AvroCodec(name, _fetch) for name in SCHEMAS.values()}


def _variants() -> list[dict]:
    """Events that exercise every normalization path: symlinks, column lineage, aliases' targets, odd keys."""
    unified = full_run_event()  # input symlinked to a table, referenced by the output's column lineage
    renamed = full_run_event()
    renamed["inputs"][0].update(namespace="s3a://raw", name="orders")
    renamed["outputs"][0].update(namespace="jdbc:postgresql://DB/shop", name="public.t")
    renamed["outputs"][0]["facets"]["columnLineage"]["dataset"] = [
        {"namespace": "s3n://raw", "name": "orders", "field": "id"}]
    extra = full_run_event()
    extra["custom"] = {"nested": [1, 2.5, None, "ü"]}
    extra["inputs"][0]["extraKey"] = {"b": 1, "a": 2}
    no_facets = job_event()
    no_facets["inputs"][0].pop("facets", None)
    single = dataset_event()
    single["dataset"]["namespace"] = "kafka://b2:9092,b1:9092"
    return [unified, renamed, extra, no_facets, single, dataset_event(), job_event()]


def _decoded(events: list[dict], facets: FacetCache | None) -> list[dict]:
    records = [CODECS["openlineage_event"].decode(CODECS["openlineage_event"].encode(event_to_record(e), 1))
               for e in events]
    return [record_to_event(record, facets) for record in records]


def test_facet_cache_shares_after_admission_and_derives_once() -> None:
    cache = FacetCache(admit_after=1)
    text = '{"b":1,"a":[1,2]}'
    first, second, third = cache.parse(text), cache.parse(text), cache.parse(text)
    assert first == second == third == json.loads(text)
    assert first is not second and second is third  # cached the second time it was seen
    assert cache.holds(third) and not cache.holds(first) and not cache.holds(json.loads(text))
    calls = []
    assert cache.derived(third, "kind", lambda v: calls.append(v) or "x") == "x"
    assert cache.derived(third, "kind", lambda v: calls.append(v) or "y") == "x"
    assert cache.derived(first, "kind", lambda v: "z") == "z"  # not a cached object: computed each time
    assert len(calls) == 1
    assert cache.dumps(third) == text  # the same JSON, the parsed text's own string
    assert cache.parse("[1]") == [1] and cache.parse("[1]") == [1] and len(cache) == 1  # only objects are cached


def test_facet_cache_maps_and_objects() -> None:
    cache = FacetCache(admit_after=0)
    texts = {"schema": '{"fields":[]}', "x": '{"a":1}'}
    mapped = cache.parse_map(texts)
    assert mapped == {"schema": {"fields": []}, "x": {"a": 1}} and cache.parse_map(dict(texts)) is mapped
    assert cache.parse_map(dict(reversed(texts.items()))) is not mapped  # order matters: it is kept on the wire
    assert cache.parse_map({}) == {}
    assert cache.parse(b'{"a":1}') == cache.parse(bytearray(b'{"a":1}')) == {"a": 1}  # json.loads's own inputs
    ones = cache.parse_map({1: "{}"}), cache.parse_map({True: "{}"})  # not from Avro: 1 == True, never shared
    assert ones[0] is not ones[1] and list(ones[1]) == [True]
    built = []
    key = ("job", "ns", "n", ("a",), None)
    obj = cache.shared(key, lambda: built.append(1) or {"namespace": "ns"})
    assert cache.shared(key, lambda: {"other": 1}) is obj and built == [1]
    not_strings = ("job", 1, "n")
    assert cache.shared(not_strings, lambda: {}) is not cache.shared(not_strings, lambda: {})  # 1 == True: no
    assert cache.shared(("job", ["unhashable"]), lambda: {"a": 1}) == {"a": 1}


def test_facet_cache_is_bounded_least_recently_used_first() -> None:
    cache = FacetCache(max_chars=160, admit_after=0)
    texts = [json.dumps({"n": i}) for i in range(30)]  # 8 or 9 characters each
    first = cache.parse(texts[0])
    parsed = []
    for text in texts[1:]:
        parsed.append(cache.parse(text))
        assert cache.parse(texts[0]) is first  # in use: stays
    assert cache._chars <= 160 and len(cache) < 30
    assert cache.holds(first) and cache.holds(parsed[-1])
    assert not cache.holds(parsed[0])  # the least recently used went first
    big = cache.parse(json.dumps({"huge": "x" * 20}))  # more than a sixteenth of the bound: never cached
    assert not cache.holds(big)


def test_adopted_objects_cache_their_json() -> None:
    cache = FacetCache()
    facet = {"b": 1, "a": "ü"}
    cache.adopt(facet)
    assert cache.holds(facet) and cache.dumps(facet) == '{"b":1,"a":"ü"}'
    cache.adopt([1])  # only objects
    assert not cache.holds([1]) and cache.size(facet) == len('{"b":1,"a":"ü"}') and cache.size({}) == 0


def test_cached_decoding_and_encoding_equal_the_plain_functions() -> None:
    events = _variants() + build_events(100, seed=3)
    cache = FacetCache(admit_after=1)
    for _ in range(3):  # the later rounds run on shared objects
        for plain, cached in zip(_decoded(events, None), _decoded(events, cache), strict=True):
            assert cached == plain
            assert json.dumps(cached) == json.dumps(plain)  # key order too
            assert event_to_record(cached, cache) == event_to_record(plain)
            assert canonical_json(cached, cache) == canonical_json(plain) == json.dumps(
                plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            assert dedupe_id(cached, cache) == dedupe_id(plain)
    assert len(cache) > 0
    job = _decoded([full_run_event()], cache)[0]["job"]
    assert job is _decoded([full_run_event()], cache)[0]["job"]  # decoded once
    assert type(event_to_record({"job": job}, cache)["job"][1]) is FrozenRecord


def test_canonical_json_of_odd_values_is_the_encoders() -> None:
    cache = FacetCache()
    for value in ({"b": 1, "a": {"z": [1, {"y": None}], "facets": {"f": {"k": 1.5}}}}, [1, "x", {"run": None}],
                  "plain", 7, None, {"inputs": [{"facets": {"s": {"c": 1, "b": [True]}}}, 3]}, {}, []):
        assert canonical_json(value, cache) == canonical_json(value)
    mixed = {1: "a", "b": 2}  # the encoder sorts what it can and turns keys into strings: its own rules
    try:
        expected = canonical_json(mixed)
    except TypeError as error:
        expected = repr(error)
    try:
        actual = canonical_json(mixed, cache)
    except TypeError as error:
        actual = repr(error)
    assert actual == expected
    assert canonical_json({"run": {2: "x", 1: "y"}}, cache) == canonical_json({"run": {2: "x", 1: "y"}})


def test_normalize_cache_equals_normalize_event() -> None:
    aliases = parse_aliases("kafka://b1:9092=kafka://prod; postgres://db:5432=postgres://main:5432")
    events = _variants() + build_events(100, seed=5)
    for alias_map in (None, aliases):
        cache = FacetCache(admit_after=1)
        normalizer = NormalizeCache(cache, alias_map)
        for _ in range(3):
            for plain, cached in zip(_decoded(events, None), _decoded(events, cache), strict=True):
                before = copy.deepcopy(cached)
                expected = normalize_event(plain, alias_map)
                actual = normalizer.normalize(cached)
                assert actual == expected
                assert cached == before  # the input is left as it was
                assert event_to_record(actual[0], cache) == event_to_record(expected[0])
        assert len(normalizer) > 0
    assert NormalizeCache(FacetCache()).normalize([1]) == ([1], [])  # not an event: as normalize_event



def test_an_output_with_its_runs_statistics_shares_its_rewritten_facet_map() -> None:
    """A COMPLETE's output carries the run's own statistics, so the dataset is never the cache's; its facet map
    (schema and column lineage, the same on every run) is, and its rewrite is one object on every run."""
    cache = FacetCache(admit_after=1)
    normalizer = NormalizeCache(cache)
    maps = []
    for rows in (10, 20, 30):
        event = full_run_event()
        output = event["outputs"][0]
        output["facets"]["columnLineage"]["dataset"] = [{"namespace": "s3n://raw", "name": "orders", "field": "id"}]
        output["outputFacets"] = {"outputStatistics": {"_producer": "p", "_schemaURL": "u", "rowCount": rows}}
        (cached,) = _decoded([event], cache)
        normalized, _ = normalizer.normalize(cached)
        assert normalized == normalize_event(_decoded([event], None)[0])[0]
        assert normalized["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == rows
        maps.append(normalized["outputs"][0]["facets"])
    assert maps[0]["columnLineage"]["dataset"][0]["namespace"] == "s3://raw"
    assert maps[1] is maps[2] and cache.holds(maps[2])  # (the first run's map was not in the cache yet)

def _frame(events: list[dict]) -> list[Incoming]:
    codec = CODECS["openlineage_event"]
    produced = 1_800_000_000_000  # Kafka timestamps after the events' times
    return [Incoming(partition_key(e).encode(), codec.encode(event_to_record(e), 1), i % 3, i, produced + i, "events")
            for i, e in enumerate(events)]


def _fastavro(codec: AvroCodec, record: dict, schema_id: int) -> bytes:
    buffer = io.BytesIO()
    buffer.write(HEADER.pack(MAGIC, schema_id))
    fastavro.schemaless_writer(buffer, codec._reader, record)
    return buffer.getvalue()


def test_core_with_warm_caches_writes_what_it_writes_without_them() -> None:
    stream = _frame(build_events(500, seed=7) + _variants() * 3)
    warm = ProcessorCore(CODECS["openlineage_event"], {}, {})
    cold = ProcessorCore(CODECS["openlineage_event"], {}, {}, facets=FacetCache(admit_after=10**9))  # never shares
    renamed = []
    for n, start in enumerate(range(0, len(stream), 100)):
        batch = stream[start:start + 100]
        outputs = [core.process(batch, 100.0 + n) for core in (warm, cold)]
        for core, out in zip((warm, cold), outputs, strict=True):
            for key, (_, value) in out.run_writes.items():
                core.runs[key] = value
        (a, b) = outputs
        renamed += [r for _, x in a.normalized for r in x["processing"]["renamedDatasets"]]
        assert (a.duplicates, a.late, a.drift_findings) == (b.duplicates, b.late, b.drift_findings)
        assert a.run_writes == b.run_writes
        assert [key for key, _ in a.normalized] == [key for key, _ in b.normalized]
        codec = CODECS["normalized_event"]
        for (_, x), (_, y) in zip(a.normalized, b.normalized, strict=True):
            assert x == y
            assert codec.encode(x, 2) == codec.encode(y, 2) == _fastavro(codec, y, 2)
        strip = [{**d, "failedAt": 0} for _, d in a.dead_letters], [{**d, "failedAt": 0} for _, d in b.dead_letters]
        assert strip[0] == strip[1]
    assert len(warm.facets) > 0 and len(cold.facets) == 0
    assert renamed and all(type(r) is FrozenRecord for r in renamed)  # shared, so encoded once
    assert len({id(r) for r in renamed}) < len(renamed)
    # and what the warm core wrote is what the plain functions give, event by event
    sources = {(i.partition, i.offset): i for i in stream}
    out = ProcessorCore(CODECS["openlineage_event"], {}, {}).process(stream[:200], 1.0)
    for _, record in out.normalized:
        processing = record["processing"]
        source = sources[processing["sourcePartition"], processing["sourceOffset"]]
        event = record_to_event(CODECS["openlineage_event"].decode(source.value))
        normalized, renames = normalize_event(event)
        assert record["event"] == event_to_record(normalized)
        assert processing["dedupeId"] == dedupe_id(event)
        assert processing["renamedDatasets"] == [rename.as_record() for rename in renames]
