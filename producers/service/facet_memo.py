"""The collector's encode with what repeats computed once: the publisher's records, byte for byte, cheaper.

A platform's agents post the same facets run after run (a dataset's schema and column lineage, a job's SQL and
source), yet ``EventPublisher.encode`` validates each against the spec and writes it as JSON for Avro anew: ~150 of
a one-event request's ~500 CPU µs. Here each facet of an event parsed from a request is looked up by its own compact
JSON (orjson: equal texts are equal JSON values, 1 vs 1.0 vs true included) and replaced by the equal object seen
before, which the processor's ``FacetCache`` then validates and serializes once (``validate_event`` and
``event_to_record`` with a cache, decision 62). Jobs and datasets are looked up whole first: one seen before comes
with its limit checks and its Avro record (``FrozenRecord``, whose bytes ``AvroCodec`` writes once). The record is
written by ``AvroCodec`` with the schema id the publisher's own serializer got from the registry.

Nothing else changes. The cached path only ever concludes "valid and encoded"; an event it cannot encode goes
through ``EventPublisher.encode``, whose refusal (InvalidEvent naming the field, PublishError for the registry) is
the answer, as before. The first ``VERIFY_EVENTS`` events are encoded both ways and compared: any difference turns
the cache off for good (logged). A facet is cached on its second sighting (a run's own facets, such as statistics,
never repeat and never displace the ones that do); the cache is bounded in characters of JSON.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import orjson

from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.schemas.openlineage import FacetCache, event_to_record, partition_key, validate_event
from kafka_lineage.schemas.wire import AvroCodec

log = logging.getLogger(__name__)

FACET_CACHE_CHARS = 24_000_000  # characters of JSON: a 2,000-job DAG of realistic events holds ~15 M (~100 MB)
VERIFY_EVENTS = 50  # encoded both ways, compared, before the cached path is trusted alone
MAX_SEEN = 50_000  # facets seen once, remembered by hash until their second sighting
_OWNERS = ("job", "dataset")
_MAPS = ("facets",)
_DATASETS = {"inputs": ("facets", "inputFacets"), "outputs": ("facets", "outputFacets")}


class FacetMemo:
    """``encode(event)`` as ``EventPublisher.encode`` answers it, cheaper for facets seen before. Thread-safe: a
    request that finds the cache busy (a large batch in the collector's worker thread) encodes without it."""

    def __init__(self, publisher: EventPublisher, max_chars: int = FACET_CACHE_CHARS) -> None:
        self.publisher = publisher
        self.max_chars = max_chars
        self.enabled = True
        self._facets = FacetCache(max_chars=max_chars)
        self._by_text: OrderedDict[bytes, dict[str, Any]] = OrderedDict()
        self._chars = 0
        self._seen: dict[int, int] = {}
        self._codec = AvroCodec("openlineage_event", _encode_only)
        self._schema_id: int | None = None
        self._verify = VERIFY_EVENTS
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Whether this request may use the cache (then ``release`` it after): not while another thread does."""
        return self.enabled and self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()

    def encode(self, event: Any) -> tuple[bytes, bytes]:
        """(partition key, Avro value) of a valid event, as ``EventPublisher.encode``; only between ``take`` and
        ``release``."""
        if self._schema_id is None or type(event) is not dict:
            return self._learn(event)
        self._intern(event)
        try:
            validate_event(event, self._facets)
            record = (partition_key(event).encode(), self._codec.encode(event_to_record(event, self._facets),
                                                                         self._schema_id))
        except Exception:  # whatever it is, the publisher's own encode says it in its words
            return self.publisher.encode(event)
        if self._verify:
            self._verify -= 1
            expected = self.publisher.encode(event)
            if expected != record:
                self.enabled = False
                log.warning("the collector's facet cache wrote an event differently from the publisher; cache off")
                return expected
        return record

    def _learn(self, event: Any) -> tuple[bytes, bytes]:
        """The publisher's encode; its first record's frame gives the schema id the cached path writes with."""
        record = self.publisher.encode(event)
        value = record[1]
        if self._schema_id is None and len(value) > 5 and value[0] == 0:
            self._schema_id = int.from_bytes(value[1:5], "big")
        return record

    def _intern(self, event: dict[str, Any]) -> None:
        """Replace the job, each dataset and each facet of ``event`` by the equal one seen before (the event is the
        request's own). A job or dataset seen before comes with its checks and its Avro record (FacetCache keeps
        what is derived from it), a new one has its facets interned one by one."""
        for key in _OWNERS:
            if type(owner := event.get(key)) is dict:
                event[key] = self._shared(owner, _MAPS)
        if type(run := event.get("run")) is dict:  # not the run itself (its id is its events' own): its facets
            self._facets_of(run, _MAPS)
        for key in _DATASETS:
            if type(datasets := event.get(key)) is list:
                for index, dataset in enumerate(datasets):
                    if type(dataset) is dict:
                        datasets[index] = self._shared(dataset, _DATASETS[key])

    def _shared(self, obj: dict[str, Any], maps: tuple[str, ...]) -> dict[str, Any]:
        known = self._known(obj)
        if known is not None:
            return known
        self._facets_of(obj, maps)
        return obj

    def _facets_of(self, obj: dict[str, Any], maps: tuple[str, ...]) -> None:
        for name in maps:
            if type(facets := obj.get(name)) is dict:
                for facet_name, facet in facets.items():
                    if type(facet) is dict and (equal := self._known(facet)) is not None:
                        facets[facet_name] = equal

    def _known(self, value: dict[str, Any]) -> dict[str, Any] | None:
        """The equal object cached before, or None (then ``value`` is remembered: cached on its second sighting)."""
        try:
            text = orjson.dumps(value)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate, deep nesting: not cached
            return None
        known = self._by_text.get(text)
        if known is not None:
            self._by_text.move_to_end(text)
            if not self._facets.holds(known):  # pushed out of the FacetCache's order: back in
                self._facets.adopt(known, len(text))
            return known
        if self._admit(text):
            self._add(text, value)
        return None

    def _admit(self, text: bytes) -> bool:
        key = hash(text)
        if self._seen.pop(key, 0):
            return True
        if len(self._seen) >= MAX_SEEN:
            self._seen.clear()
        self._seen[key] = 1
        return False

    def _add(self, text: bytes, facet: dict[str, Any]) -> None:
        if len(text) > self.max_chars // 16:  # a huge facet would push out many small ones
            return
        self._by_text[text] = facet
        self._facets.adopt(facet, len(text))
        self._chars += len(text)
        while self._chars > self.max_chars:
            old, _ = self._by_text.popitem(last=False)
            self._chars -= len(old)


def _encode_only(schema_id: int) -> str:
    raise RuntimeError(f"the collector only writes records (asked for schema {schema_id})")
