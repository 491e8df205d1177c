"""The lineage server's HTTP API: Marquez-compatible reads under ``/api/v1`` (``api_marquez``) and the pipeline's own
under ``/api/v2`` (``api_lineage``, ``api_operations``), thin routers over ``GraphStore``, and the web UI. The OpenAPI
document is generated from these routes (``/openapi.json``).

Errors are JSON ``{"code": …, "message": …}`` as Marquez answers them: 400 names the parameter, 404 the node,
503 when Neo4j cannot answer, 504 when a question runs out of its time limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

from kafka_lineage.graph.node_ids import BadNodeId
from kafka_lineage.graph.store import GraphStore, NotFound, QueryTimeout
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.metrics import Check, Metrics, Readiness
from kafka_lineage.runtime.status import ServiceProbe
from kafka_lineage.server.api_events import events_routes
from kafka_lineage.server.api_lineage import lineage_routes
from kafka_lineage.server.api_marquez import marquez_routes
from kafka_lineage.server.api_operations import operations_routes
from kafka_lineage.server.feeds import AlertFeed
from kafka_lineage.server.http import (
    API_TITLE,
    UI_DIR,
    EncodedSlashes,
    Routes,
    ServerTiming,
    error_answer,
)
from kafka_lineage.server.settings import ServerSettings


def create_app(store: GraphStore, settings: ServerSettings, metrics: Metrics | None = None,
               checks: Mapping[str, Check] | None = None, feed: AlertFeed | None = None,
               clients: ClientSettings | None = None, groups: Mapping[str, str] | None = None,
               services: ServiceProbe | None = None, ui: Path = UI_DIR) -> FastAPI:
    """The API over ``store``; ``feed`` (the alert topic, followed), ``clients`` (to read dead letters and
    status) with ``groups`` (stage → consumer group) and ``services`` (a probe) enable the pipeline's views."""
    metrics = metrics or Metrics(process_metrics=False)
    routes = Routes(store, settings, metrics, Readiness(dict(checks or {}), timeout=5.0, ttl=2.0), feed, clients,
                    groups, services)
    app = FastAPI(title=API_TITLE, version="1", docs_url="/api/docs", redoc_url=None,
                  description="Lineage of the OpenLineage pipeline: Marquez-compatible reads (/api/v1) and the "
                              "pipeline's own questions (/api/v2).")
    for router in (operations_routes(routes), marquez_routes(routes), lineage_routes(routes), events_routes(routes)):
        app.include_router(router)

    # --- errors ------------------------------------------------------------------------------------------------
    @app.exception_handler(NotFound)
    async def not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return error_answer(404, str(exc))

    @app.exception_handler(BadNodeId)
    async def bad_node(_request: Request, exc: BadNodeId) -> JSONResponse:
        return error_answer(400, str(exc))

    @app.exception_handler(QueryTimeout)
    async def too_slow(_request: Request, exc: QueryTimeout) -> JSONResponse:
        return error_answer(504, f"{exc}; ask for less (depth, limit) or raise LINEAGE_SERVER_QUERY_TIMEOUT")

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "request"
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        return error_answer(400, "; ".join(problems))

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        response = error_answer(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(ServiceUnavailable)
    @app.exception_handler(SessionExpired)
    @app.exception_handler(TransientError)
    async def unavailable(_request: Request, exc: Exception) -> JSONResponse:
        return error_answer(503, f"Neo4j cannot answer now ({type(exc).__name__}); retry shortly")

    # --- the web UI (built by `make install` into server/ui-dist) ----------------------------------------------
    if (ui / "index.html").is_file():
        app.mount("/assets", StaticFiles(directory=ui / "assets"), name="assets")

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        if not (ui / "index.html").is_file():
            return error_answer(503, "the web UI is not built: `make install` builds it (npm ci && npm run build "
                                     "in server/ui)")
        return FileResponse(ui / "index.html", headers={"Cache-Control": "no-cache"})

    app.add_middleware(EncodedSlashes)
    app.add_middleware(ServerTiming)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET"],
                           allow_headers=["Authorization"], expose_headers=["X-Lineage-Truncated", "Server-Timing"])
    return app
