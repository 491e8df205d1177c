"""Operating the pipeline: health, metrics, drift alerts (latest and live), the pipeline's status, dead letters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from kafka_lineage.runtime.status import DEFAULT_LAG_THRESHOLD, collect_status, status_json
from kafka_lineage.server.feeds import dead_letters
from kafka_lineage.server.http import (
    KEEP_ALIVE_SECONDS,
    MAX_DEAD_LETTERS,
    Limit,
    Routes,
)


def operations_routes(routes: Routes) -> APIRouter:
    settings, api, capped = routes.settings, routes.api, routes.capped
    metrics, readiness, feed = routes.metrics, routes.readiness, routes.feed
    clients, groups, services = routes.clients, routes.groups, routes.services
    router = APIRouter()

    @router.get("/health/live", include_in_schema=False)
    def live() -> dict[str, str]:
        return {"status": "live"}

    @router.get("/health/ready", include_in_schema=False)
    async def ready() -> JSONResponse:
        report = await asyncio.to_thread(readiness.evaluate)
        metrics.set_ready(report.ready)
        return JSONResponse(report.body(), status_code=report.status)

    @router.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    @router.get("/api/v2/alerts", dependencies=api, tags=["Operations"])
    def alerts(limit: Limit = 100, namespace: str | None = None, name: str | None = None) -> dict[str, Any]:
        """The latest schema-drift alerts, newest first (of one dataset with ``namespace`` and ``name``)."""
        if feed is None:
            raise HTTPException(503, "this server does not read the alert topic")
        dataset = (namespace, name) if namespace is not None and name is not None else None
        return {"alerts": feed.recent(capped(limit, settings.max_results), dataset)}

    @router.get("/api/v2/alerts/stream", dependencies=api, tags=["Operations"])
    async def alert_stream(request: Request) -> StreamingResponse:
        """Server-sent events: one ``alert`` event per schema-drift alert as it is published."""
        if feed is None:
            raise HTTPException(503, "this server does not read the alert topic")
        loop, queue = feed.subscribe()

        async def events() -> AsyncIterator[str]:
            try:
                yield ": connected\n\n"
                while not await request.is_disconnected() and feed.subscribed(loop, queue):
                    try:
                        alert = await asyncio.wait_for(queue.get(), KEEP_ALIVE_SECONDS)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    yield f"event: alert\ndata: {json.dumps(alert)}\n\n"
            finally:
                feed.unsubscribe(loop, queue)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @router.get("/api/v2/status", dependencies=api, tags=["Operations"])
    def pipeline_status(lagThreshold: Annotated[int, Query(ge=0)] = DEFAULT_LAG_THRESHOLD) -> dict[str, Any]:
        """What `lineage status --json` shows: services, lag and last event per stage, dead letters, alerts."""
        if clients is None or groups is None:
            raise HTTPException(503, "this server does not read the pipeline's status")
        return status_json(collect_status(services, clients, dict(groups), lag_threshold=lagThreshold))

    @router.get("/api/v2/dead-letters", dependencies=api, tags=["Operations"])
    def latest_dead_letters(limit: Annotated[int, Query(ge=1, le=MAX_DEAD_LETTERS)] = 50) -> dict[str, Any]:
        """The latest dead letters, newest first: stage, reason, source record, a preview of the original."""
        if clients is None:
            raise HTTPException(503, "this server does not read the dead-letter topic")
        return {"deadLetters": dead_letters(clients, limit)}

    return router
