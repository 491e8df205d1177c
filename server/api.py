"""The lineage server's HTTP API: Marquez-compatible reads under ``/api/v1`` and the pipeline's own under ``/api/v2``,
thin resources over ``GraphStore``. The OpenAPI document is generated from these routes (``/openapi.json``).

Errors are JSON ``{"code": …, "message": …}`` as Marquez answers them: 400 names the parameter, 404 the node,
503 when Neo4j cannot answer, 504 when a question runs out of its time limit.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import orjson
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kafka_lineage.graph.model import utc_time
from kafka_lineage.graph.queries import MAX_DEPTH, traverse
from kafka_lineage.runtime.config import ClientSettings, ServerSettings
from kafka_lineage.runtime.metrics import Check, Metrics, Readiness
from kafka_lineage.runtime.status import DEFAULT_LAG_THRESHOLD, ServiceProbe, collect_status, status_json
from kafka_lineage.schemas.schema_diff import diff_schemas, overall_severity
from kafka_lineage.server import marquez
from kafka_lineage.server.feeds import AlertFeed, dead_letters
from kafka_lineage.server.node_ids import BadNodeId, NodeId, parse_node_id
from kafka_lineage.server.store import GraphStore, NotFound, QueryTimeout, schema_fields

API_TITLE = "kafka-lineage"
UI_DIR = Path(__file__).parent / "ui-dist"  # built from server/ui by `make install`
KEEP_ALIVE_SECONDS = 15.0  # a comment line on an idle event stream, so proxies keep it open
MAX_DEAD_LETTERS = 500
# Query parameters (module level: the route signatures' annotations are resolved by name)
Limit = Annotated[int, Query(ge=1, description="rows to return (capped at LINEAGE_SERVER_MAX_RESULTS)")]
Offset = Annotated[int, Query(ge=0)]
SearchText = Annotated[str, Query(min_length=1, max_length=1024, description="contained in the name, any case; % any "
                                  "run of characters, _ one character")]
Depth = Annotated[int, Query(ge=1, description="jobs deep (capped at LINEAGE_SERVER_MAX_DEPTH, and then the answer "
                                               "is flagged truncated)")]
PartitionKey = Annotated[str | None, Query(max_length=40_000, description="name=value pairs a partition holds, "
                                                                        "e.g. date=2025-12-24 or date=…/region=eu")]
PartitionState = Annotated[Literal["RUNNING", "SUCCESS", "FAILED", "STALE"] | None, Query()]
AsOf = Annotated[str | None, Query(description="ISO-8601 time: the lineage as it was then (edges an event had "
                                               "carried by that time)")]


def _as_of(value: str | None) -> str | None:
    if value is None:
        return None
    moment = utc_time(value)
    if moment is None:
        raise HTTPException(400, f"asOf: an ISO-8601 time such as 2024-05-01T12:00:00Z, got {value[:100]!r}")
    return moment


class EncodedSlashes:
    """Routes on the raw path: Marquez clients send a namespace such as ``s3://bucket`` or a name such as
    ``mart/orders`` as one URL-encoded path segment (``s3:%2F%2Fbucket``), which the decoded path would split.
    Handlers decode their path parameters themselves (``_segment``)."""

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


def _segment(value: str) -> str:
    return unquote(value)


def _decode_quality(item: dict[str, Any]) -> None:
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


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)


def create_app(store: GraphStore, settings: ServerSettings, metrics: Metrics | None = None,
               checks: Mapping[str, Check] | None = None, feed: AlertFeed | None = None,
               clients: ClientSettings | None = None, groups: Mapping[str, str] | None = None,
               services: ServiceProbe | None = None, ui: Path = UI_DIR) -> FastAPI:
    """The API over ``store``; ``feed`` (the alert topic, followed), ``clients`` (to read dead letters and
    status) with ``groups`` (stage → consumer group) and ``services`` (a probe) enable the pipeline's views."""
    metrics = metrics or Metrics(process_metrics=False)
    readiness = Readiness(dict(checks or {}), timeout=5.0, ttl=2.0)
    app = FastAPI(title=API_TITLE, version="1", docs_url="/api/docs", redoc_url=None,
                  description="Lineage of the OpenLineage pipeline: Marquez-compatible reads (/api/v1) and the "
                              "pipeline's own questions (/api/v2).")

    def authorized(request: Request) -> None:
        if not settings.token:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), settings.token.encode()):
            raise HTTPException(401, "a bearer token is required (Authorization: Bearer …)",
                                headers={"WWW-Authenticate": "Bearer"})

    api = [Depends(authorized)]

    def capped(value: int, cap: int) -> int:
        return min(value, cap)

    def depth_cap(depth: int) -> int:
        return min(depth, settings.max_depth, MAX_DEPTH)

    def flagged(body: dict[str, Any], truncated: bool) -> JSONResponse:
        """Marquez's graph shape has no room for it: a cut answer says so in a header. The body is plain JSON
        values already, so it is sent as it is (FastAPI's generic encoding took 17 ms of a 500-node graph)."""
        return GraphJSON(body, headers={"X-Lineage-Truncated": "true"} if truncated else None)

    # --- errors ------------------------------------------------------------------------------------------------
    @app.exception_handler(NotFound)
    async def not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(BadNodeId)
    async def bad_node(_request: Request, exc: BadNodeId) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(QueryTimeout)
    async def too_slow(_request: Request, exc: QueryTimeout) -> JSONResponse:
        return _error(504, f"{exc}; ask for less (depth, limit) or raise LINEAGE_SERVER_QUERY_TIMEOUT")

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "request"
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        return _error(400, "; ".join(problems))

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        response = _error(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(ServiceUnavailable)
    @app.exception_handler(SessionExpired)
    @app.exception_handler(TransientError)
    async def unavailable(_request: Request, exc: Exception) -> JSONResponse:
        return _error(503, f"Neo4j cannot answer now ({type(exc).__name__}); retry shortly")

    # --- operations --------------------------------------------------------------------------------------------
    @app.get("/health/live", include_in_schema=False)
    def live() -> dict[str, str]:
        return {"status": "live"}

    @app.get("/health/ready", include_in_schema=False)
    async def ready() -> JSONResponse:
        report = await asyncio.to_thread(readiness.evaluate)
        metrics.set_ready(report.ready)
        return JSONResponse(report.body(), status_code=report.status)

    @app.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    # --- Marquez-compatible ------------------------------------------------------------------------------------

    @app.get("/api/v1/namespaces", dependencies=api, tags=["Marquez"])
    def namespaces(limit: Limit = 100) -> dict[str, Any]:
        rows = store.namespaces(capped(limit, settings.max_results))
        return {"namespaces": [marquez.namespace(row) for row in rows]}

    @app.get("/api/v1/namespaces/{namespace}", dependencies=api, tags=["Marquez"])
    def one_namespace(namespace: str) -> dict[str, Any]:
        name = _segment(namespace)
        for row in store.namespaces(settings.max_results * 100):
            if row[0] == name:
                return marquez.namespace(row)
        raise NotFound(f"namespace {name} is not in the graph")

    @app.get("/api/v1/namespaces/{namespace}/datasets", dependencies=api, tags=["Marquez"])
    def datasets(namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        rows, total = store.datasets(_segment(namespace), capped(limit, settings.max_results), offset)
        return {"datasets": [marquez.dataset(row) for row in rows], "totalCount": total}

    @app.get("/api/v1/namespaces/{namespace}/datasets/{dataset}", dependencies=api, tags=["Marquez"])
    def one_dataset(namespace: str, dataset: str) -> dict[str, Any]:
        return marquez.dataset(store.dataset(_segment(namespace), _segment(dataset)))

    @app.get("/api/v1/namespaces/{namespace}/datasets/{dataset}/versions", dependencies=api, tags=["Marquez"])
    def dataset_versions(namespace: str, dataset: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        ns, name = _segment(namespace), _segment(dataset)
        versions = store.versions(ns, name, capped(limit, settings.max_results), offset)
        return {"versions": [marquez.dataset_version(ns, name, v) for v in versions], "totalCount": len(versions)}

    @app.get("/api/v1/namespaces/{namespace}/jobs", dependencies=api, tags=["Marquez"])
    def jobs(namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        rows, total = store.jobs(_segment(namespace), capped(limit, settings.max_results), offset)
        return {"jobs": [marquez.job(row) for row in rows], "totalCount": total}

    @app.get("/api/v1/namespaces/{namespace}/jobs/{job}", dependencies=api, tags=["Marquez"])
    def one_job(namespace: str, job: str) -> dict[str, Any]:
        return marquez.job(store.job(_segment(namespace), _segment(job)))

    @app.get("/api/v1/namespaces/{namespace}/jobs/{job}/runs", dependencies=api, tags=["Marquez"])
    def job_runs(namespace: str, job: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        runs = store.runs(_segment(namespace), _segment(job), capped(limit, settings.max_results), offset)
        return {"runs": [marquez.run(r) for r in runs], "totalCount": len(runs)}

    @app.get("/api/v1/lineage", dependencies=api, tags=["Marquez"])
    def lineage(nodeId: str, depth: Depth = 20, asOf: AsOf = None) -> JSONResponse:
        node = parse_node_id(nodeId, ("dataset", "job"))
        capped_depth = depth_cap(depth)
        as_of = _as_of(asOf)
        graph = store.neighbourhood(node.kind, node.namespace, node.name, capped_depth, settings.max_nodes, as_of)
        return flagged(marquez.lineage_graph(graph, graph.latest_runs(), graph.schemas()),
                       graph.stopped is not None or depth > capped_depth)

    @app.get("/api/v1/column-lineage", dependencies=api, tags=["Marquez"])
    def column_lineage(nodeId: str, depth: Depth = 20, withDownstream: bool = False,
                       asOf: AsOf = None) -> JSONResponse:
        node = parse_node_id(nodeId, ("dataset", "datasetField"))
        capped_depth = depth_cap(depth)
        graph = store.column_graph(node.namespace, node.name, node.field, capped_depth,
                                   ("up", "down") if withDownstream else ("up",), settings.max_nodes, _as_of(asOf))
        types = store.field_types({(n.namespace, n.name) for n in graph.nodes.values()})
        return flagged(marquez.column_lineage_graph(graph, types),
                       graph.stopped is not None or depth > capped_depth)

    @app.get("/api/v1/search", dependencies=api, tags=["Marquez"])
    def search(q: SearchText, filter: str | None = None, limit: Limit = 10,
               namespace: str | None = None) -> dict[str, Any]:
        """Marquez's search: datasets and jobs whose name contains ``q`` (case-insensitive; ``%`` any run of
        characters, ``_`` one), by name. ``totalCount`` is the number of results, as in Marquez."""
        kinds = {"dataset", "job"}
        if filter is not None:
            if filter.lower() not in kinds:
                raise HTTPException(400, f"filter: dataset or job, got {filter!r}")
            kinds = {filter.lower()}
        rows = store.search(q, kinds, capped(limit, settings.max_results), namespace)
        return {"totalCount": len(rows), "results": [marquez.search_result(row) for row in rows]}

    @app.get("/api/v2/search", dependencies=api, tags=["Lineage"])
    def search_all(q: SearchText, kinds: str = "dataset,job,field", limit: Limit = 10,
                   namespace: str | None = None) -> dict[str, Any]:
        """Datasets, jobs and columns (``kinds``, comma-separated) whose name contains ``q``, as ``/api/v1/search``
        matches, by name, each with its Marquez ``nodeId`` (``datasetField:…`` for a column)."""
        asked = {kind.strip().lower() for kind in kinds.split(",") if kind.strip()}
        if not asked or not asked <= {"dataset", "job", "field"}:
            raise HTTPException(400, f"kinds: a comma-separated list of dataset, job, field; got {kinds!r}")
        rows = store.search(q, asked, capped(limit, settings.max_results), namespace)
        return {"results": [{"kind": kind.lower(), "namespace": ns, "name": name, "field": field, "updatedAt": time,
                             "nodeId": str(NodeId("datasetField" if kind == "FIELD" else kind.lower(), ns, name,
                                                  field))}
                            for kind, ns, name, field, time in rows]}

    # --- the pipeline's own ------------------------------------------------------------------------------------
    @app.get("/api/v2/datasets/{namespace}/{dataset}/impact", dependencies=api, tags=["Lineage"])
    def impact(namespace: str, dataset: str, depth: Depth = 5, direction: str = "down",
               column: str | None = None, asOf: AsOf = None) -> JSONResponse:
        """Downstream (``direction=down``) or upstream jobs and datasets of a dataset, nearest first, each with the
        path from the dataset, the run that last touched it (a job's latest run; for a dataset, the latest run of a
        job writing it), whether a completed run wrote it, and whether the answer was cut short."""
        if direction not in ("down", "up"):
            raise HTTPException(400, f"direction: down or up, got {direction!r}")
        ns, name, as_of = _segment(namespace), _segment(dataset), _as_of(asOf)
        asked = depth
        depth = depth_cap(depth)
        if column is not None:
            graph = store.column_graph(ns, name, column, depth, (direction,), settings.max_nodes, as_of)
            start = graph.starts[0]
            columns = sorted((n for element, n in graph.nodes.items() if element != start),
                             key=lambda n: (n.namespace, n.name, n.field or ""))
            return JSONResponse({
                "dataset": {"namespace": ns, "name": name}, "column": column, "direction": direction,
                "depth": depth, "truncated": graph.stopped is not None or asked > depth,
                "stoppedBy": graph.stopped or ("depth" if asked > depth else None),
                "nodes": [{"kind": "field", "namespace": n.namespace, "name": n.name, "field": n.field}
                          for n in columns]})
        walk = traverse(store.driver, ns, name, depth, direction, settings.max_nodes, settings.query_timeout, as_of)
        if not walk.found:
            raise NotFound(f"dataset {ns} {name} is not in the graph")
        last_runs = store.last_runs([(n.kind, n.namespace, n.name) for n in walk.nodes], as_of)
        return JSONResponse({
            "dataset": {"namespace": ns, "name": name}, "direction": direction, "depth": depth, "asOf": as_of,
            "truncated": walk.truncated or asked > depth, "stoppedBy": walk.stopped or ("depth" if asked > depth
                                                                                          else None),
            "nodes": [{"kind": n.kind, "namespace": n.namespace, "name": n.name, "depth": n.depth,
                       "path": [list(step) for step in walk.path(n.kind, n.namespace, n.name)],
                       "lastRun": last_runs.get((n.kind, n.namespace, n.name)),
                       **({"written": ("dataset", n.namespace, n.name) not in walk.unwritten}
                          if n.kind == "dataset" else {})} for n in walk.nodes],
            "edges": [[list(a), list(b)] for a, b in walk.edges],
        })

    @app.get("/api/v2/datasets/{namespace}/{dataset}/schema", dependencies=api, tags=["Datasets"])
    def schema_history(namespace: str, dataset: str, limit: Limit = 100) -> dict[str, Any]:
        """The dataset's schema versions, oldest first, each with the changes from the one before and their
        severity, and the latest drift alerts about it."""
        ns, name = _segment(namespace), _segment(dataset)
        current = store.dataset(ns, name)[2]
        versions = store.versions(ns, name, capped(limit, settings.max_results), 0)[::-1]
        history, previous = [], None
        for version in versions:
            fields = schema_fields(version["fields"])
            changes = diff_schemas(previous, fields) if previous is not None else []
            history.append({"version": version["version"], "firstSeen": version["firstSeen"], "fields": fields,
                            "current": version["version"] == current,
                            "changes": [change.as_record() for change in changes],
                            "severity": overall_severity(changes) if changes else None})
            previous = fields
        alerts = feed.recent(capped(limit, settings.max_results), (ns, name)) if feed is not None else []
        return {"dataset": {"namespace": ns, "name": name}, "currentVersion": current, "versions": history,
                "alerts": alerts}

    @app.get("/api/v2/datasets/{namespace}/{dataset}/runs", dependencies=api, tags=["Datasets"])
    def dataset_runs(namespace: str, dataset: str, limit: Limit = 100) -> dict[str, Any]:
        """Row counts and bytes of the latest runs that wrote the dataset, and the data-quality metrics and
        assertions (each with ``success``) of the runs that read it, newest first."""
        runs = store.dataset_runs(_segment(namespace), _segment(dataset), capped(limit, settings.max_results))
        for item in runs["quality"]:
            _decode_quality(item)
        return runs

    @app.get("/api/v2/datasets/{namespace}/{dataset}/partitions", dependencies=api, tags=["Partitions"])
    def partitions(namespace: str, dataset: str, key: PartitionKey = None, state: PartitionState = None,
                   versions: bool = False, limit: Limit = 1000) -> JSONResponse:
        """The dataset's partitions by key (those holding every ``name=value`` pair of ``key``; in ``state``), each
        with its state (RUNNING, SUCCESS, FAILED, STALE; null when no run wrote it), the reason, version count, the
        latest version (writing run and job, times, rows, bytes, marker, assertions, data-quality metrics) and the
        upstream partitions that version's run read; ``versions=true`` adds every version (the runs that wrote it)."""
        ns, name = _segment(namespace), _segment(dataset)
        try:
            found = store.partitions(ns, name, key, state, capped(limit, settings.max_results))
        except ValueError as exc:
            raise HTTPException(400, f"key: {exc}") from None
        return JSONResponse({"dataset": {"namespace": ns, "name": name},
                             "partitions": [status.as_dict(versions) for status in found]})

    @app.get("/api/v2/datasets/{namespace}/{dataset}/partitions/ready", dependencies=api, tags=["Partitions"])
    def partition_ready(namespace: str, dataset: str, key: Annotated[str, Query(
            min_length=1, max_length=40_000, description="the partition, e.g. date=2025-12-24; pairs a partition "
                                                         "holds name all such partitions")]) -> JSONResponse:
        """What `lineage ready` answers, always 200 for a known dataset: ``{"ready": bool, "missing": [{"role":
        "partition"|"upstream", "namespace", "name", "key", "state", "reason"}]}``. Ready when the partition's
        latest version is SUCCESS and not STALE and so is every upstream partition it was built from. 400: a
        malformed key; 404: an unknown dataset."""
        ns, name = _segment(namespace), _segment(dataset)
        try:
            ok, missing = store.ready(ns, name, key)
        except ValueError as exc:
            raise HTTPException(400, f"key: {exc}") from None
        return JSONResponse({"dataset": {"namespace": ns, "name": name}, "key": key, "ready": ok, "missing": missing})

    @app.get("/api/v2/datasets/{namespace}/{dataset}/backfill-plan", dependencies=api, tags=["Partitions"])
    def backfill_plan(namespace: str, dataset: str,
                      start: Annotated[str, Query(alias="from", description="first day, e.g. 2025-12-01")],
                      end: Annotated[str, Query(alias="to", description="last day (inclusive), e.g. 2025-12-07")],
                      depth: Depth = 10) -> JSONResponse:
        """What `lineage backfill plan --json` answers: the downstream work items (job, partition key: the output
        partitions it rebuilds, the inputs it reads, its last known run) deriving from the dataset's partitions dated
        in [from, to], in stages that can run in parallel, each after every stage it depends on; ``cycles`` names
        job cycles met, ``truncated`` a depth cut. 400: a malformed day or a dataset without dated partitions; 404:
        an unknown dataset."""
        ns, name = _segment(namespace), _segment(dataset)
        capped_depth = depth_cap(depth)
        try:
            body = store.backfill_plan(ns, name, start, end, capped_depth)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        if depth > capped_depth:
            body["truncated"] = True
        return JSONResponse(body)

    @app.get("/api/v2/runs/{run_id}/partitions", dependencies=api, tags=["Runs"])
    def run_partitions(run_id: str) -> JSONResponse:
        """The partitions a run wrote (its version of each, with that version's state) and read (their state)."""
        found = store.run_partitions(_segment(run_id))
        return JSONResponse({"runId": _segment(run_id), "state": found.state,
                             "job": {"namespace": found.job[0], "name": found.job[1]} if found.job else None,
                             "wrote": found.wrote, "read": found.read})

    @app.get("/api/v2/runs/{run_id}", dependencies=api, tags=["Runs"])
    def run_detail(run_id: str) -> dict[str, Any]:
        """A run: state and times, error, statistics, data quality (metrics, assertions) per input, its job,
        parent and child runs."""
        detail = store.run(_segment(run_id))
        for item in detail["inputs"]:
            _decode_quality(item)
        return detail

    @app.get("/api/v2/alerts", dependencies=api, tags=["Operations"])
    def alerts(limit: Limit = 100, namespace: str | None = None, name: str | None = None) -> dict[str, Any]:
        """The latest schema-drift alerts, newest first (of one dataset with ``namespace`` and ``name``)."""
        if feed is None:
            raise HTTPException(503, "this server does not read the alert topic")
        dataset = (namespace, name) if namespace is not None and name is not None else None
        return {"alerts": feed.recent(capped(limit, settings.max_results), dataset)}

    @app.get("/api/v2/alerts/stream", dependencies=api, tags=["Operations"])
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

    @app.get("/api/v2/status", dependencies=api, tags=["Operations"])
    def pipeline_status(lagThreshold: Annotated[int, Query(ge=0)] = DEFAULT_LAG_THRESHOLD) -> dict[str, Any]:
        """What `lineage status --json` shows: services, lag and last event per stage, dead letters, alerts."""
        if clients is None or groups is None:
            raise HTTPException(503, "this server does not read the pipeline's status")
        return status_json(collect_status(services, clients, dict(groups), lag_threshold=lagThreshold))

    @app.get("/api/v2/dead-letters", dependencies=api, tags=["Operations"])
    def latest_dead_letters(limit: Annotated[int, Query(ge=1, le=MAX_DEAD_LETTERS)] = 50) -> dict[str, Any]:
        """The latest dead letters, newest first: stage, reason, source record, a preview of the original."""
        if clients is None:
            raise HTTPException(503, "this server does not read the dead-letter topic")
        return {"deadLetters": dead_letters(clients, limit)}

    # --- the web UI (built by `make install` into server/ui-dist) ----------------------------------------------
    if (ui / "index.html").is_file():
        app.mount("/assets", StaticFiles(directory=ui / "assets"), name="assets")

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        if not (ui / "index.html").is_file():
            return _error(503, "the web UI is not built: `make install` builds it (npm ci && npm run build in "
                               "server/ui)")
        return FileResponse(ui / "index.html", headers={"Cache-Control": "no-cache"})

    app.add_middleware(EncodedSlashes)
    app.add_middleware(ServerTiming)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET"],
                           allow_headers=["Authorization"], expose_headers=["X-Lineage-Truncated", "Server-Timing"])
    return app
