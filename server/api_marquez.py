"""Marquez-compatible reads under ``/api/v1``: namespaces, datasets, jobs, runs, lineage, column lineage, search."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse

from kafka_lineage.graph.node_ids import parse_node_id
from kafka_lineage.graph.store import NotFound
from kafka_lineage.server import marquez, stats
from kafka_lineage.server.http import (
    AsOf,
    Depth,
    Limit,
    NodeLimit,
    Offset,
    Routes,
    SearchText,
    parse_as_of,
    segment,
)

SearchDay = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}$", description="a day, YYYY-MM-DD")]


def marquez_routes(routes: Routes) -> APIRouter:
    store, settings, api = routes.store, routes.settings, routes.api
    capped, depth_cap, node_cap, flagged = routes.capped, routes.depth_cap, routes.node_cap, routes.flagged
    router = APIRouter()

    @router.get("/api/v1/namespaces", dependencies=api, tags=["Marquez"])
    def namespaces(limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        rows = store.namespaces(capped(limit, settings.max_results), offset)
        return {"namespaces": [marquez.namespace(row) for row in rows]}

    @router.get("/api/v1/namespaces/{namespace}", dependencies=api, tags=["Marquez"])
    def one_namespace(namespace: str) -> dict[str, Any]:
        name = segment(namespace)
        for row in store.namespaces(settings.max_results * 100):
            if row[0] == name:
                return marquez.namespace(row)
        raise NotFound(f"namespace {name} is not in the graph")

    @router.get("/api/v1/namespaces/{namespace}/datasets", dependencies=api, tags=["Marquez"])
    def datasets(namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        rows, total = store.datasets(segment(namespace), capped(limit, settings.max_results), offset)
        return {"datasets": [marquez.dataset(row) for row in rows], "totalCount": total}

    @router.get("/api/v1/namespaces/{namespace}/datasets/{dataset}", dependencies=api, tags=["Marquez"])
    def one_dataset(namespace: str, dataset: str) -> dict[str, Any]:
        return marquez.dataset(store.dataset(segment(namespace), segment(dataset)))

    @router.get("/api/v1/namespaces/{namespace}/datasets/{dataset}/versions", dependencies=api, tags=["Marquez"])
    def dataset_versions(namespace: str, dataset: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        ns, name = segment(namespace), segment(dataset)
        versions = store.versions(ns, name, capped(limit, settings.max_results), offset)
        return {"versions": [marquez.dataset_version(ns, name, v) for v in versions],
                "totalCount": store.version_count(ns, name)}

    @router.get("/api/v1/namespaces/{namespace}/datasets/{dataset}/versions/{version}", dependencies=api,
                tags=["Marquez"])
    def dataset_version(namespace: str, dataset: str, version: str) -> dict[str, Any]:
        ns, name = segment(namespace), segment(dataset)
        return marquez.dataset_version(ns, name, store.version(ns, name, segment(version)))

    @router.get("/api/v1/sources", dependencies=api, tags=["Marquez"])
    def sources(limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        """Marquez's sources: the datasets' namespaces (a dataset's ``sourceName``)."""
        return {"sources": [marquez.source(ns) for ns in store.dataset_namespaces(capped(limit, settings.max_results),
                                                                                  offset)]}

    @router.get("/api/v1/sources/{source}", dependencies=api, tags=["Marquez"])
    def one_source(source: str) -> dict[str, Any]:
        name = segment(source)
        if store.datasets(name, 1, 0)[1] == 0:
            raise NotFound(f"source {name} is not in the graph")
        return marquez.source(name)

    @router.get("/api/v1/tags", dependencies=api, tags=["Marquez"])
    def tags(limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        """The tags of the datasets' ``tags`` facets, as Marquez names them (``key`` or ``key:value``)."""
        names = marquez.tag_names(store.tag_facets())[offset:offset + capped(limit, settings.max_results)]
        return {"tags": [{"name": name, "description": None} for name in names]}

    @router.get("/api/v1/jobs/runs/{run_id}", dependencies=api, tags=["Marquez"])
    def one_run(run_id: str) -> dict[str, Any]:
        found = store.marquez_run(segment(run_id))
        return marquez.run(found["run"], found["inputs"], found["outputs"])

    @router.get("/api/v1/jobs/runs/{run_id}/facets", dependencies=api, tags=["Marquez"])
    def run_facets(run_id: str, type: str = "run") -> dict[str, Any]:
        """Marquez's FacetsResult: the run's facets (``type=run``) or its job's (``type=job``)."""
        if type not in ("run", "job"):
            raise HTTPException(400, f"type: run or job, got {type!r}")
        found = store.marquez_run(segment(run_id))
        facets = found["run"]["facets"] if type == "run" else (found["job"] or {}).get("facets", {})
        return {"runId": found["run"]["runId"], "facets": facets}

    @router.get("/api/v1/namespaces/{namespace}/jobs", dependencies=api, tags=["Marquez"])
    def jobs(namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        rows, total = store.jobs(segment(namespace), capped(limit, settings.max_results), offset)
        return {"jobs": [marquez.job(row) for row in rows], "totalCount": total}

    @router.get("/api/v1/namespaces/{namespace}/jobs/{job}", dependencies=api, tags=["Marquez"])
    def one_job(namespace: str, job: str) -> dict[str, Any]:
        return marquez.job(store.job(segment(namespace), segment(job)))

    @router.get("/api/v1/namespaces/{namespace}/jobs/{job}/runs", dependencies=api, tags=["Marquez"])
    def job_runs(namespace: str, job: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        runs = store.runs(segment(namespace), segment(job), capped(limit, settings.max_results), offset)
        return {"runs": [marquez.run(r) for r in runs], "totalCount": store.run_count(segment(namespace), segment(job))}

    @router.get("/api/v1/jobs", dependencies=api, tags=["Marquez"])
    def all_jobs(lastRunStates: Annotated[list[str] | None, Query()] = None, limit: Limit = 100,
                 offset: Offset = 0) -> dict[str, Any]:
        """Jobs of every namespace, most recently active first (Marquez's dashboard); ``lastRunStates``
        (repeatable: NEW, RUNNING, COMPLETED, FAILED, ABORTED) keeps those whose latest run is in one."""
        states = None
        if lastRunStates:
            unknown = sorted({s.upper() for s in lastRunStates} - set(marquez.OPENLINEAGE_STATES))
            if unknown:
                raise HTTPException(400, f"lastRunStates: one of {', '.join(marquez.OPENLINEAGE_STATES)}, "
                                         f"got {', '.join(unknown)}")
            states = sorted({state for s in lastRunStates for state in marquez.OPENLINEAGE_STATES[s.upper()]})
        rows, total = store.all_jobs(states, capped(limit, settings.max_results), offset)
        return {"jobs": [marquez.job(row) for row in rows], "totalCount": total}

    @router.get("/api/v1/namespaces/{namespace}/jobs/{job}/versions", dependencies=api, tags=["Marquez"])
    def job_versions(namespace: str, job: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
        """Marquez's job versions, derived from the job's latest 1,000 runs: one per distinct set of datasets a
        completed run read and wrote, newest first, each with its latest run."""
        versions = marquez.job_versions(*store.job_run_io(segment(namespace), segment(job)))
        return {"versions": versions[offset:offset + capped(limit, settings.max_results)]}

    @router.get("/api/v1/namespaces/{namespace}/jobs/{job}/versions/{version}", dependencies=api,
                tags=["Marquez"])
    def job_version(namespace: str, job: str, version: str) -> dict[str, Any]:
        found = [v for v in marquez.job_versions(*store.job_run_io(segment(namespace), segment(job)))
                 if v["version"] == version]
        if not found:
            raise NotFound(f"job {namespace} {job} has no version {version} among its latest runs")
        return found[0]

    @router.get("/api/v1/runlineage/upstream", dependencies=api, tags=["Marquez"])
    def run_lineage_upstream(runId: str, depth: Depth = 20) -> dict[str, Any]:
        """Marquez's upstream run lineage: the run, then level by level the runs that produced what it read (for
        each dataset read, the latest completed write that ended before the run started), with the schema version
        of each input then; at most 1,000 runs."""
        return marquez.upstream_run_lineage(store.upstream_runs(segment(runId), depth_cap(depth)))

    @router.get("/api/v1/stats/lineage-events", dependencies=api, tags=["Marquez"])
    def lineage_event_stats(period: str, timezone: str | None = None) -> list[dict[str, Any]]:
        """Marquez's dashboard metric: per hour of the last day (``period=DAY``, UTC) or per day of the last week in
        ``timezone`` (``period=WEEK``, required), the runs that started and that ended complete, failed, aborted."""
        chosen = period.upper()
        if chosen not in ("DAY", "WEEK"):
            raise HTTPException(400, "period: DAY or WEEK")
        if chosen == "WEEK" and not timezone:
            raise HTTPException(400, "Timezone must be specified for period 'WEEK'")
        try:
            zone = ZoneInfo(timezone) if timezone else UTC
        except (ZoneInfoNotFoundError, ValueError):
            raise HTTPException(400, f"timezone: unknown {timezone!r}") from None
        spans = stats.intervals(chosen, datetime.now(UTC), zone)
        hours = store.run_hours(stats.stored_time(spans[0][0]), stats.stored_time(spans[-1][1]))
        return stats.lineage_metrics(spans, hours)

    @router.get("/api/v1/lineage", dependencies=api, tags=["Marquez"])
    def lineage(nodeId: str, depth: Depth = 20, asOf: AsOf = None, limit: NodeLimit = None) -> JSONResponse:
        node = parse_node_id(nodeId, ("dataset", "job"))
        capped_depth = depth_cap(depth)
        as_of = parse_as_of(asOf)
        graph = store.neighbourhood(node.kind, node.namespace, node.name, capped_depth, node_cap(limit), as_of)
        return flagged(marquez.lineage_graph(graph, graph.latest_runs(), graph.schemas(), graph.written()),
                       graph.stopped is not None or depth > capped_depth)

    @router.get("/api/v1/column-lineage", dependencies=api, tags=["Marquez"])
    def column_lineage(nodeId: str, depth: Depth = 20, withDownstream: bool = False,
                       asOf: AsOf = None, limit: NodeLimit = None) -> JSONResponse:
        node = parse_node_id(nodeId, ("dataset", "datasetField", "job"))
        capped_depth = depth_cap(depth)
        directions = ("up", "down") if withDownstream else ("up",)
        if node.kind == "job":  # Marquez: the columns of the datasets the job writes
            graph = store.job_column_graph(node.namespace, node.name, capped_depth, directions, node_cap(limit),
                                           parse_as_of(asOf))
        else:
            graph = store.column_graph(node.namespace, node.name, node.field, capped_depth, directions,
                                       node_cap(limit), parse_as_of(asOf))
        types = store.field_types({(n.namespace, n.name) for n in graph.nodes.values()})
        return flagged(marquez.column_lineage_graph(graph, types),
                       graph.stopped is not None or depth > capped_depth)

    @router.get("/api/v1/search", dependencies=api, tags=["Marquez"])
    def search(q: SearchText, filter: str | None = None, sort: str = "NAME", limit: Limit = 10,
               namespace: str | None = None, before: SearchDay = None, after: SearchDay = None) -> dict[str, Any]:
        """Marquez's search: datasets and jobs whose name contains ``q`` (case-insensitive; ``%`` any run of
        characters, ``_`` one), by name or (``sort=UPDATE_AT``) latest update first; ``after``/``before``
        (``YYYY-MM-DD``, UTC) keep what was updated from the one day to before the other — only jobs carry an update
        time here. ``totalCount`` is the number of results, as in Marquez."""
        kinds = {"dataset", "job"}
        if filter is not None:
            if filter.lower() not in kinds:
                raise HTTPException(400, f"filter: dataset or job, got {filter!r}")
            kinds = {filter.lower()}
        if sort.upper() not in ("NAME", "UPDATE_AT", "UPDATED_AT"):
            raise HTTPException(400, f"sort: NAME or UPDATE_AT, got {sort!r}")
        rows = store.search(q, kinds, capped(limit, settings.max_results), namespace, by_update=sort.upper() != "NAME",
                            after=after and f"{after}T", before=before and f"{before}T")  # graph time text
        return {"totalCount": len(rows), "results": [marquez.search_result(row) for row in rows]}

    return router
