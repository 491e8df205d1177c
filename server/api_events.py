"""The raw OpenLineage events read back from the raw events topic: Marquez's events browser
(``GET /api/v1/events/lineage``) and one run's events in the order they were published."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from confluent_kafka import KafkaException
from fastapi import APIRouter, HTTPException, Query
from starlette.concurrency import run_in_threadpool

from kafka_lineage.server.events import MAX_PAGE_DEPTH, EventLog
from kafka_lineage.server.http import Limit, Offset, Routes, segment

MAX_RUN_EVENTS = 1000
EARLIEST = datetime.fromisoformat("1970-01-01T00:00:00+00:00")  # Marquez's defaults
LATEST = datetime.fromisoformat("2030-01-01T00:00:00+00:00")


def _millis(moment: str | None) -> int | None:
    """The graph's UTC time text as epoch milliseconds (None when missing or unreadable)."""
    try:
        return int(datetime.fromisoformat(moment).timestamp() * 1000) if moment else None
    except ValueError:
        return None


def events_routes(routes: Routes) -> APIRouter:
    store, settings, api, clients = routes.store, routes.settings, routes.api, routes.clients
    log = EventLog(clients) if clients is not None else None
    router = APIRouter()

    async def read(question: Callable[[EventLog], Any]) -> Any:
        """A question to the raw topic in a worker thread: 503 when it is not configured or Kafka does not answer,
        504 when the read ran out of time."""
        if log is None:
            raise HTTPException(503, "this server does not read the raw events topic")
        try:
            return await run_in_threadpool(question, log)
        except TimeoutError as exc:
            raise HTTPException(504, f"{exc}: narrow the window (after/before)") from None
        except KafkaException as exc:
            raise HTTPException(503, f"the raw events topic cannot be read now: {exc}") from None

    @router.get("/api/v1/events/lineage", dependencies=api, tags=["Marquez"])
    async def lineage_events(before: datetime = LATEST, after: datetime = EARLIEST,
                             sortDirection: Literal["asc", "desc"] = "desc", limit: Limit = 100,
                             offset: Offset = 0) -> dict[str, Any]:
        """Marquez's events browser: the raw events published in [after, before) (by when they were published,
        the raw topic's record time), newest first (``sortDirection=asc``: oldest first), a page of them and how
        many there are. ``offset + limit`` is at most 10,000: narrow ``after``/``before`` to go further."""
        limit = routes.capped(limit, settings.max_results)
        if offset + limit > MAX_PAGE_DEPTH:
            raise HTTPException(400, f"offset + limit is at most {MAX_PAGE_DEPTH}: narrow after/before instead")
        if before.tzinfo is None or after.tzinfo is None:
            raise HTTPException(400, "before and after need a time zone (e.g. 2025-01-01T00:00:00Z)")
        events, total = await read(lambda raw: raw.between(int(after.timestamp() * 1000),
                                                           int(before.timestamp() * 1000), limit, offset,
                                                           sortDirection == "desc"))
        return {"events": events, "totalCount": total}

    @router.get("/api/v2/runs/{run_id}/events", dependencies=api, tags=["Runs"])
    async def run_events(run_id: str, limit: Annotated[int, Query(ge=1, le=MAX_RUN_EVENTS)] = 200
                         ) -> dict[str, Any]:
        """One run's raw OpenLineage events in the order they were published, read from the raw events topic
        around the run's known times (from 10 minutes before its first to an hour after its last: an event
        published later than that is not found). ``truncated``: the window held more records than one read looks
        at (200,000), the read took too long, or more than ``limit`` events exist."""
        run = (await run_in_threadpool(store.run, segment(run_id)))["run"]
        times = [t for t in (_millis(run.get(k)) for k in ("startTime", "endTime", "lastEventTime")) if t is not None]
        if not times:
            return {"runId": segment(run_id), "events": [], "truncated": False}
        found = await read(lambda raw: raw.of_run(segment(run_id), min(times), max(times), limit))
        return {"runId": segment(run_id), "events": found.events, "truncated": found.truncated}

    return router
