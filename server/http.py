"""What every router of the lineage server shares: the query parameters, the JSON answers, the middleware, and the
``Routes`` context (the store, the settings, and the few helpers every route applies alike)."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import orjson
from fastapi import Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kafka_lineage.graph.keys import utc_time
from kafka_lineage.graph.queries import MAX_DEPTH
from kafka_lineage.graph.store import GraphStore
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.metrics import Metrics, Readiness
from kafka_lineage.runtime.status import ServiceProbe
from kafka_lineage.server.feeds import AlertFeed
from kafka_lineage.server.settings import ServerSettings

API_TITLE = "kafka-lineage"
UI_DIR = Path(__file__).parent / "ui-dist"  # built from server/ui by `make install`
KEEP_ALIVE_SECONDS = 15.0  # a comment line on an idle event stream, so proxies keep it open
MAX_DEAD_LETTERS = 500
# Query parameters (module level: the route signatures' annotations are resolved by name)
Limit = Annotated[int, Query(ge=0, description="rows to return (capped at LINEAGE_SERVER_MAX_RESULTS; 0: none, the "
                                              "totals only, as Marquez allows)")]
Offset = Annotated[int, Query(ge=0)]
SearchText = Annotated[str, Query(min_length=1, max_length=1024, description="contained in the name, any case; % any "
                                  "run of characters, _ one character")]
Depth = Annotated[int, Query(ge=1, description="jobs deep (capped at LINEAGE_SERVER_MAX_DEPTH, and then the answer "
                                               "is flagged truncated)")]
PartitionKey = Annotated[str | None, Query(max_length=40_000, description="name=value pairs a partition holds, "
                                                                        "e.g. date=2025-12-24 or date=…/region=eu")]
PartitionState = Annotated[Literal["RUNNING", "SUCCESS", "FAILED", "STALE"] | None, Query()]
NodeLimit = Annotated[int | None, Query(ge=1, description="nodes in the answer at most (capped at "
                                                          "LINEAGE_SERVER_MAX_NODES; more is cut, nearest kept, "
                                                          "and flagged truncated)")]
AsOf = Annotated[str | None, Query(description="ISO-8601 time: the lineage as it was then (edges an event had "
                                               "carried by that time)")]


def parse_as_of(value: str | None) -> str | None:
    if value is None:
        return None
    moment = utc_time(value)
    if moment is None:
        raise HTTPException(400, f"asOf: an ISO-8601 time such as 2024-05-01T12:00:00Z, got {value[:100]!r}")
    return moment


class EncodedSlashes:
    """Routes on the raw path: Marquez clients send a namespace such as ``s3://bucket`` or a name such as
    ``mart/orders`` as one URL-encoded path segment (``s3:%2F%2Fbucket``), which the decoded path would split.
    Handlers decode their path parameters themselves (``segment``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("raw_path"):
            raw = scope["raw_path"].decode("latin-1").split("?", 1)[0]
            if raw.startswith("/api/"):
                scope = {**scope, "path": raw}
        await self.app(scope, receive, send)


class ServerTiming:
    """Adds ``Server-Timing: app;dur=<ms>`` to every answer: the time from the request to the answer's headers in
    this process, which clients (and ``lineage bench api``) read apart from the network's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - started) * 1000
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"server-timing", f"app;dur={took:.2f}".encode())]}
            await send(message)

        await self.app(scope, receive, timed)


def segment(value: str) -> str:
    return unquote(value)


def decode_quality(item: dict[str, Any]) -> None:
    """A READ's data-quality JSON texts (metrics, assertions) as JSON values (null when absent)."""
    for key in ("dataQuality", "assertions"):
        item[key] = json.loads(item[key]) if item.get(key) else None


class GraphJSON(JSONResponse):
    """A graph answer's JSON written by orjson: the same text as Starlette's (compact, UTF-8) for the values a graph
    holds, ~10x faster on a 2,000-node answer (several MB). What orjson refuses (an integer beyond 64 bits, a lone
    surrogate) is written as before; a NaN, which Starlette refuses, is written as null."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except TypeError:  # orjson.JSONEncodeError is one
            return super().render(content)


def error_answer(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)



@dataclass(frozen=True)
class Routes:
    """What a router's routes read: the store and settings, the pipeline's feeds (None: not read by this server)."""

    store: GraphStore
    settings: ServerSettings
    metrics: Metrics
    readiness: Readiness
    feed: AlertFeed | None = None
    clients: ClientSettings | None = None
    groups: Mapping[str, str] | None = None
    services: ServiceProbe | None = None

    def authorized(self, request: Request) -> None:
        if not self.settings.token:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.settings.token.encode()):
            raise HTTPException(401, "a bearer token is required (Authorization: Bearer …)",
                                headers={"WWW-Authenticate": "Bearer"})

    @property
    def api(self) -> list[Any]:
        """The dependencies of every /api route: the bearer token, when one is set."""
        return [Depends(self.authorized)]

    def capped(self, value: int, cap: int) -> int:
        return min(value, cap)

    def depth_cap(self, depth: int) -> int:
        return min(depth, self.settings.max_depth, MAX_DEPTH)

    def node_cap(self, limit: int | None) -> int:
        """The nodes a graph answer may hold: the caller's ``limit`` (the web UI draws fewer than the API answers)
        within the server's ``max_nodes``."""
        return min(limit or self.settings.max_nodes, self.settings.max_nodes)

    @staticmethod
    def flagged(body: dict[str, Any], truncated: bool) -> JSONResponse:
        """Marquez's graph shape has no room for it: a cut answer says so in a header. The body is plain JSON
        values already, so it is sent as it is (FastAPI's generic encoding took 17 ms of a 500-node graph)."""
        return GraphJSON(body, headers={"X-Lineage-Truncated": "true"} if truncated else None)
