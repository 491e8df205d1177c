"""OpenLineage HTTP collector: ``POST /api/v1/lineage`` → validated Avro on the events topic.

Any OpenLineage producer (the Spark agent, Flink, Airflow, dbt, Trino, openlineage-python's HttpTransport) can point
its HTTP transport here. The body is one event or a JSON array of events (a batch), optionally gzip-compressed.
The answer is 200 only once Kafka has acknowledged every event of the request; an invalid event makes the whole
request 400 with a reason per event, and an event too large for a Kafka record 413 (nothing of it is published, so
the client can fix and resend it as a unit); an unreachable Kafka or registry is 503 with Retry-After, so clients
retry (duplicates are removed downstream).
"""

from __future__ import annotations

import asyncio
import gzip
import hmac
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException
from kafka_lineage.config import CollectorSettings
from kafka_lineage.metrics import Metrics, aiohttp_handlers
from kafka_lineage.producers.backfill import message_max_bytes, oversize, strict_json
from kafka_lineage.producers.publisher import EventPublisher, PublishError
from kafka_lineage.schemas.openlineage import InvalidEvent

log = logging.getLogger(__name__)
STAGE = "collector"
LINEAGE_PATH = "/api/v1/lineage"


@dataclass(frozen=True)
class Rejection(Exception):
    """An HTTP error answer: status and a reason for the client."""

    status: int
    reason: str
    errors: tuple[dict[str, Any], ...] = ()

    def body(self) -> dict[str, Any]:
        return {"error": self.reason, **({"errors": list(self.errors)} if self.errors else {})}


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int) -> list[Any]:
    """The events of a request body: one JSON object or an array of them, identity or gzip/deflate encoded."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "gzip":
        body = _bounded_decompress(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), body, max_bytes, "gzip")
    elif encoding == "deflate":
        body = _bounded_decompress(zlib.decompressobj, body, max_bytes, "deflate")
    elif encoding != "identity":
        raise Rejection(415, f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    try:  # strict: no NaN/Infinity, and a body nested too deeply is refused rather than a RecursionError (500)
        payload = strict_json(body)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NotJSON
        raise Rejection(400, f"body is not valid JSON: {exc}") from None
    events = payload if isinstance(payload, list) else [payload]
    if not events:
        raise Rejection(400, "empty batch: send one OpenLineage event or a non-empty JSON array of them")
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

    def app(self) -> web.Application:
        # aiohttp enforces the raw body limit itself (413) while reading; decompression is ours (decode_body), so
        # the same limit also bounds what a small compressed body may expand to.
        app = web.Application(client_max_size=self.settings.max_body_bytes,
                              handler_args={"auto_decompress": False})
        app.router.add_post(LINEAGE_PATH, self.post_lineage)
        app.router.add_get("/health/live", self.live)
        app.router.add_get("/health/ready", self.ready)
        app.router.add_get("/metrics", aiohttp_handlers(self.metrics).metrics)
        return app

    async def post_lineage(self, request: web.Request) -> web.Response:
        try:
            if self.settings.token and not bearer_token_ok(request.headers.get("Authorization"), self.settings.token):
                raise Rejection(401, "missing or wrong bearer token")
            events = decode_body(await request.read(), request.headers.get("Content-Encoding"),
                                 self.settings.max_body_bytes)
            self.metrics.events_in(STAGE, len(events))
            records = self._encode_all(events)
            count = await asyncio.wait_for(asyncio.wrap_future(self.publisher.send(records)),
                                           self.settings.ack_timeout)
        except web.HTTPRequestEntityTooLarge:
            return self._reject(request, Rejection(413, f"body exceeds the limit of {self.settings.max_body_bytes} "
                                                        "bytes"))
        except Rejection as rejection:
            return self._reject(request, rejection)
        except (PublishError, TimeoutError) as exc:
            reason = str(exc) or f"Kafka did not acknowledge within {self.settings.ack_timeout:.0f}s"
            return self._reject(request, Rejection(503, reason), headers={"Retry-After": "5"})
        except KafkaException as exc:  # produce refused a record outright (sizes are checked before: not those)
            return self._reject(request, Rejection(503, f"Kafka refused the records: {exc}"),
                                headers={"Retry-After": "5"})
        self.accepted += count
        self.metrics.events_out(STAGE, count)
        self.metrics.seen(STAGE)
        return web.json_response({"accepted": count})

    def _encode_all(self, events: list[Any]) -> list[tuple[bytes, bytes]]:
        """Every event's record, or a Rejection before anything is produced: 400 if any is invalid, 413 if any is
        too large for a Kafka record (librdkafka would raise on it after producing the records before it)."""
        records, errors, too_large = [], [], []
        for index, event in enumerate(events):
            try:
                record = self.publisher.encode(event)
            except InvalidEvent as exc:
                errors.append({"index": index, "error": str(exc)})
                continue
            except RecursionError:  # parsed, but too deep to validate or encode
                errors.append({"index": index, "error": "event: nested too deeply"})
                continue
            except PublishError as exc:  # the registry could not be reached: the client should retry later
                raise Rejection(503, str(exc)) from None
            except Exception as exc:  # a failure of ours on this event: a retry would fail alike, so not a 5xx
                log.exception("event %d of a request could not be encoded", index)
                errors.append({"index": index, "error": f"event: cannot be encoded ({type(exc).__name__}: "
                                                        f"{str(exc)[:200]})"})
                continue
            if (reason := oversize(record, self.max_record_bytes)) is not None:
                too_large.append({"index": index, "error": reason})
            records.append(record)
        if errors:
            noun = "event is" if len(errors) == 1 else "events are"
            raise Rejection(400, f"{len(errors)} of {len(events)} {noun} invalid; nothing was published",
                            tuple(errors))
        if too_large:
            noun = "event is" if len(too_large) == 1 else "events are"
            raise Rejection(413, f"{len(too_large)} of {len(events)} {noun} too large for Kafka "
                                 f"({too_large[0]['error']}); nothing was published", tuple(too_large))
        return records

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

    async def ready(self, _request: web.Request) -> web.Response:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.publisher.check_connected)
        except Exception as exc:
            return web.json_response({"status": "not ready", "reason": str(exc)}, status=503)
        return web.json_response({"status": "ready"})


def serve(publisher: EventPublisher, settings: CollectorSettings) -> None:
    """Run until SIGINT/SIGTERM; aiohttp stops accepting, finishes in-flight requests, then the producer flushes."""
    collector = Collector(publisher, settings, Metrics())
    print(f"OpenLineage collector on http://{settings.host}:{settings.port}{LINEAGE_PATH} → topic {publisher.topic}"
          + (" (bearer token required)" if settings.token else ""), flush=True)
    try:
        web.run_app(collector.app(), host=settings.host, port=settings.port, print=None,
                    shutdown_timeout=settings.ack_timeout)
    finally:
        remaining = publisher.close(settings.ack_timeout)
        print(f"collector stopped: {collector.accepted} events accepted, {collector.rejected} requests rejected"
              + (f", {remaining} events not acknowledged by Kafka" if remaining else ""), flush=True)
