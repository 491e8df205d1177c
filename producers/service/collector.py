"""OpenLineage HTTP collector: ``POST /api/v1/lineage`` → validated Avro on the events topic.

Any OpenLineage producer (the Spark agent, Flink, Airflow, dbt, Trino, openlineage-python's HttpTransport) can point
its HTTP transport here. The body is one event or a JSON array of events (a batch), optionally gzip-compressed.
The answer is 200 only once Kafka has acknowledged every event of the request; an invalid event makes the whole
request 400 with a reason per event, and an event too large for a Kafka record 413 (nothing of it is published, so
the client can fix and resend it as a unit); an unreachable Kafka or registry is 503 with Retry-After, so clients
retry (duplicates are removed downstream).

``POST /api/v1/lineage/batch`` is the OpenLineage spec's batch endpoint (``postEventBatch``): a JSON array whose
valid events are published even when others are not; the answer (200) says which failed and why, and whether a
retry could help (``status`` success / partial_success, ``summary`` received / successful / failed / retriable /
non_retriable, ``failed_events`` index / reason / retriable). A Kafka or registry outage is still 503 for the whole
batch: nothing in it was accepted, all of it may be sent again.
"""

from __future__ import annotations

import asyncio
import gzip
import hmac
import json
import logging
import os
import ssl
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web
from confluent_kafka import KafkaException

from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.producers.service import collector_workers
from kafka_lineage.producers.service.facet_memo import FacetMemo
from kafka_lineage.producers.service.intake import (
    STRICT_DECODER,
    NotJSON,
    Refusal,
    encode_or_refuse,
    message_max_bytes,
    strict_json,
)
from kafka_lineage.producers.service.settings import CollectorSettings
from kafka_lineage.runtime.metrics import Metrics, Readiness, aiohttp_handlers

log = logging.getLogger(__name__)
STAGE = "collector"
LINEAGE_PATH = "/api/v1/lineage"
BATCH_PATH = "/api/v1/lineage/batch"
READY_CACHE_SECONDS = 2.0
# Bodies up to this size (uncompressed) are checked on the event loop: a worker thread's hand-off cost ~20% of the
# collector's events/s on 100-event batches; larger or compressed ones (whose size says nothing) go to the thread.
INLINE_BODY_BYTES = 1024 * 1024  # ~200 realistic (5 KB) events: ~20 ms of the loop
OUTAGE_ACK_WAIT = 0.5  # seconds a request waits for Kafka's acknowledgement while every broker is known down


@dataclass(frozen=True)
class Rejection(Exception):
    """An HTTP error answer: status and a reason for the client."""

    status: int
    reason: str
    errors: tuple[dict[str, Any], ...] = ()

    def body(self) -> dict[str, Any]:
        return {"error": self.reason, **({"errors": list(self.errors)} if self.errors else {})}


# At most this many per-event errors go back to the client (with the total): a request of 5 million empty events
# once produced a 575 MB answer.
MAX_ERRORS_RETURNED = 100
_WHITESPACE = " \t\n\r"


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int, max_events: int = 10_000,
                array_only: bool = False) -> list[Any]:
    """The events of a request body: one JSON object (unless ``array_only``) or an array of at most ``max_events``
    of them (more is 413, found while parsing, so a small body of millions of tiny events never becomes millions of
    objects), identity or gzip/deflate encoded."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "gzip":
        body = _bounded_decompress(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), body, max_bytes, "gzip")
    elif encoding == "deflate":
        body = _bounded_decompress(zlib.decompressobj, body, max_bytes, "deflate")
    elif encoding != "identity":
        raise Rejection(415, f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    try:  # strict: no NaN/Infinity, and a body nested too deeply is refused rather than a RecursionError (500)
        text = body.decode(json.detect_encoding(body))
        if array_only and not text.lstrip(_WHITESPACE).startswith("["):
            raise Rejection(400, "a batch is a JSON array of OpenLineage events")
        events = _json_events(text, max_events)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NotJSON
        raise Rejection(400, f"body is not valid JSON: {exc}") from None
    if not events:
        raise Rejection(400, "empty batch: send one OpenLineage event or a non-empty JSON array of them")
    return events


def _json_events(text: str, max_events: int) -> list[Any]:
    """One JSON value, or the elements of a top-level array parsed one by one (stopping at ``max_events`` + 1)."""
    start = len(text) - len(text.lstrip(_WHITESPACE))
    if not text.startswith("[", start) or text.count(",") < max_events:  # cannot hold more: parse it whole (faster)
        payload = _parse(text)
        return payload if isinstance(payload, list) else [payload]
    events: list[Any] = []
    index = _skip(text, start + 1)
    if text.startswith("]", index):
        return _end(text, index + 1, events)
    while True:
        if len(events) == max_events:
            raise Rejection(413, f"more than {max_events:,} events in one request (LINEAGE_COLLECTOR_MAX_EVENTS); "
                                 "send them in several requests")
        try:
            event, index = STRICT_DECODER.raw_decode(text, index)
        except RecursionError:
            raise NotJSON("JSON nested too deeply") from None
        events.append(event)
        index = _skip(text, index)
        if text.startswith(",", index):
            index = _skip(text, index + 1)
        elif text.startswith("]", index):
            return _end(text, index + 1, events)
        else:
            raise NotJSON(f"expected ',' or ']' after array element {len(events) - 1} (char {index})")


# msgspec reads what json.loads reads, to the same values (floats through the same strict hook, big integers exact),
# ~3x faster; anything it refuses (NaN, a lone surrogate, 1e400 …) is strict_json's to accept or refuse in its words,
# as are texts with enough brackets to nest deeper than msgspec or json may recurse (realistic events: ~110-150).
_FAST_DECODER = msgspec.json.Decoder(float_hook=STRICT_DECODER.parse_float)
_FAST_MAX_OPENINGS = 400


def _parse(text: str) -> Any:
    if text.count("{") + text.count("[") < _FAST_MAX_OPENINGS:
        try:
            return _FAST_DECODER.decode(text)
        except (msgspec.DecodeError, ValueError):
            pass
    return strict_json(text)


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _end(text: str, index: int, events: list[Any]) -> list[Any]:
    if _skip(text, index) != len(text):
        raise NotJSON(f"extra data after the array (char {index})")
    return events


def _bounded_decompress(new_decompressor: Callable[[], Any], body: bytes, max_bytes: int, name: str) -> bytes:
    """Decompress at most ``max_bytes`` so that a small compressed body cannot expand without limit.

    The stream must be complete: a body cut anywhere before its end (for gzip, before the CRC-32 and length trailer,
    which zlib checks only once it reaches them) is refused, as are bytes after it. A gzip body may hold several
    members (RFC 1952; ``gzip.decompress`` reads them all): each is decompressed in turn, within the same limit."""
    data, rest = b"", body
    while True:
        decompressor = new_decompressor()
        try:  # max_length is at least 1 here (0 would mean no limit)
            data += decompressor.decompress(rest, max_bytes + 1 - len(data))
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise Rejection(400, f"body is not valid {name}: {exc}") from None
        if len(data) > max_bytes or decompressor.unconsumed_tail:
            raise Rejection(413, f"decompressed body exceeds the limit of {max_bytes} bytes")
        if not decompressor.eof:
            raise Rejection(400, f"truncated {name} body: the compressed stream ends before its end marker")
        rest = decompressor.unused_data
        if not rest:
            return data
        if name != "gzip" or not rest.startswith(b"\x1f\x8b"):  # not another gzip member: garbage
            raise Rejection(400, f"body is not valid {name}: {len(rest)} bytes after the end of the compressed "
                                 "stream")


def _listed(errors: list[dict[str, Any]]) -> str:
    return f" (the first {MAX_ERRORS_RETURNED} are listed)" if len(errors) > MAX_ERRORS_RETURNED else ""


def batch_answer(received: int, failed: list[dict[str, Any]]) -> dict[str, Any]:
    """The spec's batch response: what was received, published and refused (none of these would pass on a retry:
    invalid or too large; an outage is a 503 for the whole batch instead)."""
    return {"status": "partial_success" if failed else "success",
            "summary": {"received": received, "successful": received - len(failed), "failed": len(failed),
                        "retriable": 0, "non_retriable": len(failed)},
            "failed_events": [{"index": f["index"], "reason": f["reason"], "retriable": False}
                              for f in failed[:MAX_ERRORS_RETURNED]]}


def bearer_token_ok(header: str | None, token: str) -> bool:
    scheme, _, supplied = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(supplied.strip().encode(), token.encode())


class Collector:
    def __init__(self, publisher: EventPublisher, settings: CollectorSettings, metrics: Metrics | None = None
                 ) -> None:
        self.publisher = publisher
        self.settings = settings
        self.metrics = metrics or Metrics(process_metrics=False)
        self.accepted = self.rejected = 0
        self.max_record_bytes = message_max_bytes()
        # facets that repeat run after run validated and written once (facet_memo); the publisher's bytes
        self._memo = FacetMemo(publisher) if isinstance(publisher, EventPublisher) else None
        # Parsing, validating and encoding a request is CPU work: a thread of its own keeps the event loop (health
        # checks, other requests' acknowledgements) answering while a 10,000-event batch is checked.
        self._work = ThreadPoolExecutor(max_workers=2, thread_name_prefix="collector-encode")
        self._busy = 0
        # Kafka has the topic and the registry its schema; answers reused for READY_CACHE_SECONDS: a probe per
        # second from each of several orchestrators must not become as many broker and registry round trips.
        self._http = aiohttp_handlers(self.metrics, Readiness(
            {"kafka-and-registry": lambda: self.publisher.check_connected()}, timeout=6.0, ttl=READY_CACHE_SECONDS))

    def app(self) -> web.Application:
        # aiohttp enforces the raw body limit itself (413) while reading; decompression is ours (decode_body), so
        # the same limit also bounds what a small compressed body may expand to.
        app = web.Application(client_max_size=self.settings.max_body_bytes,
                              handler_args={"auto_decompress": False})
        app.router.add_post(LINEAGE_PATH, self.post_lineage)
        app.router.add_post(BATCH_PATH, self.post_batch)
        app.router.add_get("/health/live", self.live)
        app.router.add_get("/health/ready", self._http.ready)
        # a worker of several answers every worker's counters (collector_workers), not only its own
        app.router.add_get("/metrics", collector_workers.multiprocess_metrics() or self._http.metrics)
        return app

    async def post_lineage(self, request: web.Request) -> web.Response:
        return await self._bounded(request, batch=False)

    async def post_batch(self, request: web.Request) -> web.Response:
        return await self._bounded(request, batch=True)

    async def _bounded(self, request: web.Request, batch: bool) -> web.Response:
        if self._busy >= self.settings.max_concurrent:  # refused at once, before reading: a flood stays cheap
            return self._reject(request, Rejection(503, f"busy: {self._busy} requests in progress "
                                                        "(LINEAGE_COLLECTOR_MAX_CONCURRENT); retry shortly"),
                                headers={"Retry-After": "1"})
        self._busy += 1
        try:
            return await self._post(request, batch)
        finally:
            self._busy -= 1

    async def _post(self, request: web.Request, batch: bool) -> web.Response:
        loop = asyncio.get_running_loop()
        try:
            if self.settings.token and not bearer_token_ok(request.headers.get("Authorization"), self.settings.token):
                raise Rejection(401, "missing or wrong bearer token")
            if request.content.is_eof():  # the whole body came with the headers (a small event): nothing to wait for
                body = await request.read()  # a timer and a task per request cost more than the read itself
            else:
                try:
                    body = await asyncio.wait_for(request.read(), self.settings.read_timeout)
                except TimeoutError:
                    raise Rejection(408, f"the body did not arrive within {self.settings.read_timeout:.0f}s"
                                    ) from None
            encoding = request.headers.get("Content-Encoding")
            if len(body) <= INLINE_BODY_BYTES and not encoding:  # a few milliseconds: the thread hop costs more
                events, records, failed = self._decode_and_encode(body, encoding, batch)
            else:
                events, records, failed = await loop.run_in_executor(self._work, self._decode_and_encode, body,
                                                                     encoding, batch)
            self.metrics.events_in(STAGE, len(events))
            count = await self._acknowledged(self.publisher.send(records, wait_for_room=False)) if records else 0
        except web.HTTPRequestEntityTooLarge:
            return self._reject(request, Rejection(413, f"body exceeds the limit of {self.settings.max_body_bytes} "
                                                        "bytes"))
        except Rejection as rejection:
            return self._reject(request, rejection)
        except PublishError as exc:
            if exc.too_large:  # no retry can help: the record exceeds the broker's or the topic's size limit
                return self._reject(request, Rejection(413, f"{exc}; nothing of this request may be retried as is"))
            if exc.permanent:
                return self._reject(request, Rejection(400, str(exc)))
            return self._reject(request, Rejection(503, str(exc)), headers={"Retry-After": "5"})
        except TimeoutError:
            reason = ("Kafka is unreachable" if self.publisher.kafka_down
                      else f"Kafka did not acknowledge within {self.settings.ack_timeout:.0f}s")
            return self._reject(request, Rejection(503, reason), headers={"Retry-After": "5"})
        except KafkaException as exc:  # produce refused a record outright (sizes are checked before: not those)
            return self._reject(request, Rejection(503, f"Kafka refused the records: {exc}"),
                                headers={"Retry-After": "5"})
        self.accepted += count
        self.metrics.events_out(STAGE, count)
        self.metrics.seen(STAGE)
        if not batch:  # json_response's bytes, without json.dumps
            return web.Response(body=b'{"accepted": %d}' % count, content_type="application/json", charset="utf-8")
        if failed:
            self.rejected += 1
            self.metrics.dead_letter(STAGE, "batch-events-refused", len(failed))
            log.warning("%s %s from %s: %d of %d events refused: %s", request.method, request.path, request.remote,
                        len(failed), len(events), failed[0]["reason"])
        return web.json_response(batch_answer(len(events), failed))

    async def _acknowledged(self, delivery: Future[int]) -> int:
        """Kafka's count of the acknowledged records, waited for at most ``ack_timeout``, and at most
        ``OUTAGE_ACK_WAIT`` once every broker is known down: a client learns of an outage within a second (503,
        retry later) instead of holding its connection for the whole timeout. The records stay queued and may still
        be delivered, which a retry only repeats (duplicates are removed downstream)."""
        loop = asyncio.get_running_loop()
        acknowledged = asyncio.wrap_future(delivery)
        deadline, outage_deadline = loop.time() + self.settings.ack_timeout, None
        while True:
            now = loop.time()
            if outage_deadline is None and self.publisher.kafka_down:
                outage_deadline = now + OUTAGE_ACK_WAIT
            limit = min(deadline, outage_deadline or deadline)
            if now >= limit:
                acknowledged.cancel()
                raise TimeoutError
            done, _ = await asyncio.wait({acknowledged}, timeout=min(0.1, limit - now))
            if done:
                return acknowledged.result()

    def _decode_and_encode(self, body: bytes, content_encoding: str | None, batch: bool = False
                           ) -> tuple[list[Any], list[tuple[bytes, bytes]], list[dict[str, Any]]]:
        """The events, the records to publish and (a batch's) the events refused. Outside the batch endpoint any
        refused event refuses the whole request (400 if invalid, 413 if too large for Kafka)."""
        events = decode_body(body, content_encoding, self.settings.max_body_bytes, self.settings.max_events,
                             array_only=batch)
        records, failed = self._encode_each(events)
        if failed and not batch:
            invalid = [f for f in failed if f["kind"] == "invalid"]
            listed = [{"index": f["index"], "error": f["reason"]} for f in (invalid or failed)]
            noun = "event is" if len(listed) == 1 else "events are"
            if invalid:
                raise Rejection(400, f"{len(invalid)} of {len(events)} {noun} invalid; nothing was published"
                                + _listed(listed), tuple(listed[:MAX_ERRORS_RETURNED]))
            raise Rejection(413, f"{len(listed)} of {len(events)} {noun} too large for Kafka "
                                 f"({listed[0]['error']}); nothing was published" + _listed(listed),
                            tuple(listed[:MAX_ERRORS_RETURNED]))
        return events, records, failed

    def _encode_each(self, events: list[Any]) -> tuple[list[tuple[bytes, bytes]], list[dict[str, Any]]]:
        """Every event's record, and the events that cannot be one (index, reason, kind: invalid or too_large);
        a Rejection (503) when the registry cannot be reached (nothing is encoded then)."""
        records, failed = [], []
        memo = self._memo if self._memo is not None and self._memo.take() else None
        encode = memo.encode if memo is not None else self.publisher.encode
        try:
            for index, event in enumerate(events):
                try:
                    outcome = encode_or_refuse(encode, event, self.max_record_bytes)
                except PublishError as exc:  # the registry could not be reached: the client should retry later
                    raise Rejection(503, str(exc)) from None
                if isinstance(outcome, Refusal):  # an event we fail to encode is answered as invalid: not a 5xx
                    unencodable = outcome.kind == "unencodable"
                    failed.append({"index": index,
                                   "reason": f"event: {outcome.reason}" if unencodable else outcome.reason,
                                   "kind": "invalid" if unencodable else outcome.kind})
                else:
                    records.append(outcome)
        finally:
            if memo is not None:
                memo.release()
        return records, failed

    def _reject(self, request: web.Request, rejection: Rejection, headers: dict[str, str] | None = None
                ) -> web.Response:
        self.rejected += 1
        self.metrics.dead_letter(STAGE, f"http-{rejection.status}")  # refused to the sender, who keeps the event
        log.warning("%s %s from %s: %d %s", request.method, request.path, request.remote, rejection.status,
                    rejection.reason)
        extra = {"WWW-Authenticate": "Bearer"} if rejection.status == 401 else {}
        return web.json_response(rejection.body(), status=rejection.status, headers={**extra, **(headers or {})})

    async def live(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "live"})


def serve(publisher: EventPublisher, settings: CollectorSettings) -> None:
    """Run until SIGINT/SIGTERM; aiohttp stops accepting, finishes in-flight requests, then the producer flushes.
    With ``settings.processes`` > 1 this process only supervises workers that each do all of that
    (``collector_workers``)."""
    tls = None
    if settings.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(settings.tls_cert, settings.tls_key)  # checked here, before any worker starts
    scheme = "https" if tls else "http"

    def announce(port: int) -> None:
        print(f"OpenLineage collector on {scheme}://{settings.host}:{port}{LINEAGE_PATH} → topic {publisher.topic}"
              + (" (bearer token required)" if settings.token else "")
              + (f" ({settings.processes} processes)" if settings.processes > 1 else ""), flush=True)

    if settings.processes > 1:
        publisher.close(0)  # the workers publish, each with its own producer
        collector_workers.supervise(settings.host, settings.port, settings.processes, settings.ack_timeout,
                                    announce)
        print(f"collector stopped: its {settings.processes} worker processes stopped", flush=True)
        return
    collector = Collector(publisher, settings, Metrics())
    app = collector.app()
    sockets = collector_workers.inherited_sockets()
    worker = collector_workers.worker_name()
    if sockets is None:
        announce(settings.port)
        where: dict[str, Any] = {"host": settings.host, "port": settings.port}
    else:  # a worker of a supervisor: its sockets are bound already
        print(f"collector worker {worker} (pid {os.getpid()}) serving", flush=True)
        collector_workers.watch_supervisor(app)
        where = {"sock": sockets}
    try:
        # access_log: aiohttp's default logger, or None (no line per request: LINEAGE_COLLECTOR_ACCESS_LOG)
        web.run_app(app, print=None, ssl_context=tls, shutdown_timeout=settings.ack_timeout, **where,
                    **({} if settings.access_log else {"access_log": None}))
    finally:
        remaining = publisher.close(settings.ack_timeout)
        print(f"collector{f' worker {worker}' if worker else ''} stopped: {collector.accepted} events accepted, "
              f"{collector.rejected} requests rejected"
              + (f", {remaining} events not acknowledged by Kafka" if remaining else ""), flush=True)
