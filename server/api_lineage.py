"""The pipeline's own questions under ``/api/v2``: search of every kind, impact, schema history, the schema-change
gate (``POST /api/v2/check``), runs, partitions and backfill plans, a run's detail."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kafka_lineage.graph.check import check
from kafka_lineage.graph.node_ids import NodeId
from kafka_lineage.graph.sensitive import dataset_tags, sensitive_columns
from kafka_lineage.graph.store import NotFound
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.schemas.proposals import MAX_PROPOSAL_BYTES, ProposalError, proposals_of
from kafka_lineage.schemas.tags import TAGS_FACET, BadTag, checked_tag, merged, tags_event
from kafka_lineage.server.http import (
    AsOf,
    Depth,
    Limit,
    PartitionKey,
    PartitionState,
    Routes,
    SearchText,
    decode_quality,
    parse_as_of,
    segment,
)
from kafka_lineage.server.marquez import millis_between

MAX_OVERVIEW_DAYS = 90


def lineage_routes(routes: Routes) -> APIRouter:
    store, settings, api = routes.store, routes.settings, routes.api
    capped, depth_cap, feed = routes.capped, routes.depth_cap, routes.feed
    router = APIRouter()

    @router.get("/api/v2/search", dependencies=api, tags=["Lineage"])
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
    @router.get("/api/v2/datasets/{namespace}/{dataset}/impact", dependencies=api, tags=["Lineage"])
    def impact(namespace: str, dataset: str, depth: Depth = 5, direction: str = "down",
               column: str | None = None, asOf: AsOf = None) -> JSONResponse:
        """Downstream (``direction=down``) or upstream jobs and datasets of a dataset, nearest first, each with the
        path from the dataset, the run that last touched it (a job's latest run; for a dataset, the latest run of a
        job writing it), whether a completed run wrote it, and whether the answer was cut short."""
        if direction not in ("down", "up"):
            raise HTTPException(400, f"direction: down or up, got {direction!r}")
        ns, name, as_of = segment(namespace), segment(dataset), parse_as_of(asOf)
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
        walk = store.walk(ns, name, depth, direction, settings.max_nodes, as_of)
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

    @router.get("/api/v2/datasets/{namespace}/{dataset}/schema", dependencies=api, tags=["Datasets"])
    def schema_history(namespace: str, dataset: str, limit: Limit = 100) -> dict[str, Any]:
        """The dataset's schema versions, oldest first, each with the changes from the one before and their
        severity, and the latest drift alerts about it."""
        ns, name = segment(namespace), segment(dataset)
        current, history = store.schema_history(ns, name, capped(limit, settings.max_results))
        alerts = feed.recent(capped(limit, settings.max_results), (ns, name)) if feed is not None else []
        return {"dataset": {"namespace": ns, "name": name}, "currentVersion": current, "versions": history,
                "alerts": alerts}

    @router.get("/api/v2/datasets/{namespace}/{dataset}/runs", dependencies=api, tags=["Datasets"])
    def dataset_runs(namespace: str, dataset: str, limit: Limit = 100) -> dict[str, Any]:
        """Row counts and bytes of the latest runs that wrote the dataset, and the data-quality metrics and
        assertions (each with ``success``) of the runs that read it, newest first."""
        runs = store.dataset_runs(segment(namespace), segment(dataset), capped(limit, settings.max_results))
        for item in runs["quality"]:
            decode_quality(item)
        return runs

    @router.get("/api/v2/datasets/{namespace}/{dataset}/partitions", dependencies=api, tags=["Partitions"])
    def partitions(namespace: str, dataset: str, key: PartitionKey = None, state: PartitionState = None,
                   versions: bool = False, limit: Limit = 1000) -> JSONResponse:
        """The dataset's partitions by key (those holding every ``name=value`` pair of ``key``; in ``state``), each
        with its state (RUNNING, SUCCESS, FAILED, STALE; null when no run wrote it), the reason, version count, the
        latest version (writing run and job, times, rows, bytes, marker, assertions, data-quality metrics) and the
        upstream partitions that version's run read; ``versions=true`` adds every version (the runs that wrote it)."""
        ns, name = segment(namespace), segment(dataset)
        try:
            found = store.partitions(ns, name, key, state, capped(limit, settings.max_results))
        except ValueError as exc:
            raise HTTPException(400, f"key: {exc}") from None
        return JSONResponse({"dataset": {"namespace": ns, "name": name},
                             "partitions": [status.as_dict(versions) for status in found]})

    @router.get("/api/v2/datasets/{namespace}/{dataset}/partitions/ready", dependencies=api, tags=["Partitions"])
    def partition_ready(namespace: str, dataset: str, key: Annotated[str, Query(
            min_length=1, max_length=40_000, description="the partition, e.g. date=2025-12-24; pairs a partition "
                                                         "holds name all such partitions")]) -> JSONResponse:
        """What `lineage ready` answers, always 200 for a known dataset: ``{"ready": bool, "missing": [{"role":
        "partition"|"upstream", "namespace", "name", "key", "state", "reason"}]}``. Ready when the partition's
        latest version is SUCCESS and not STALE and so is every upstream partition it was built from. 400: a
        malformed key; 404: an unknown dataset."""
        ns, name = segment(namespace), segment(dataset)
        try:
            ok, missing = store.ready(ns, name, key)
        except ValueError as exc:
            raise HTTPException(400, f"key: {exc}") from None
        return JSONResponse({"dataset": {"namespace": ns, "name": name}, "key": key, "ready": ok, "missing": missing})

    @router.get("/api/v2/datasets/{namespace}/{dataset}/backfill-plan", dependencies=api, tags=["Partitions"])
    def backfill_plan(namespace: str, dataset: str,
                      start: Annotated[str, Query(alias="from", description="first day, e.g. 2025-12-01")],
                      end: Annotated[str, Query(alias="to", description="last day (inclusive), e.g. 2025-12-07")],
                      depth: Depth = 10) -> JSONResponse:
        """What `lineage backfill plan --json` answers: the downstream work items (job, partition key: the output
        partitions it rebuilds, the inputs it reads, its last known run) deriving from the dataset's partitions dated
        in [from, to], in stages that can run in parallel, each after every stage it depends on; ``cycles`` names
        job cycles met, ``truncated`` a depth cut. 400: a malformed day or a dataset without dated partitions; 404:
        an unknown dataset."""
        ns, name = segment(namespace), segment(dataset)
        capped_depth = depth_cap(depth)
        try:
            body = store.backfill_plan(ns, name, start, end, capped_depth)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        if depth > capped_depth:
            body["truncated"] = True
        return JSONResponse(body)

    @router.get("/api/v2/jobs/{namespace}/{job}/runs", dependencies=api, tags=["Runs"])
    def job_runs(namespace: str, job: str, limit: Limit = 100) -> dict[str, Any]:
        """A job's latest runs, newest first, with what a timeline draws: state, start and end, duration, rows and
        bytes read and written, the error of a failed run (the run facets are under /api/v2/runs/{id})."""
        runs = store.runs(segment(namespace), segment(job), capped(limit, settings.max_results), 0)
        return {"runs": [{key: value for key, value in run.items()
                          if key not in ("facets", "startRunFacets", "runFacets")}
                         | {"durationMs": millis_between(run.get("startTime"), run.get("endTime"))} for run in runs]}

    @router.get("/api/v2/overview", dependencies=api, tags=["Runs"])
    def overview(days: Annotated[int, Query(ge=1, le=MAX_OVERVIEW_DAYS)] = 14, limit: Limit = 20) -> dict[str, Any]:
        """What needs attention (the web UI's home page): the latest failed or aborted runs of the last ``days``
        days and the partitions they wrote that are failed still, the runs still going (oldest first), runs per day
        and state over those days, and how many jobs, datasets and runs the graph holds. Drift alerts, dead letters
        and lag are under /api/v2/alerts, /api/v2/dead-letters and /api/v2/status."""
        today = datetime.now(UTC).date()
        since, until = (today - timedelta(days=days - 1)).isoformat(), (today + timedelta(days=1)).isoformat()
        return store.overview(since, until, capped(limit, settings.max_results))

    @router.get("/api/v2/runs/{run_id}/partitions", dependencies=api, tags=["Runs"])
    def run_partitions(run_id: str) -> JSONResponse:
        """The partitions a run wrote (its version of each, with that version's state) and read (their state)."""
        found = store.run_partitions(segment(run_id))
        return JSONResponse({"runId": segment(run_id), "state": found.state,
                             "job": {"namespace": found.job[0], "name": found.job[1]} if found.job else None,
                             "wrote": found.wrote, "read": found.read})

    @router.get("/api/v2/runs/{run_id}", dependencies=api, tags=["Runs"])
    def run_detail(run_id: str) -> dict[str, Any]:
        """A run: state and times, error, statistics, data quality (metrics, assertions) per input, its job,
        parent and child runs."""
        detail = store.run(segment(run_id))
        for item in detail["inputs"]:
            decode_quality(item)
        return detail

    @router.post("/api/v2/check", dependencies=api, tags=["Lineage"])
    async def check_schemas(request: Request) -> JSONResponse:
        """The schema-change gate (``lineage check``): proposed schemas diffed against the graph's current ones, with
        every changed column's consumers along column lineage. Body: ``{"proposals": [{"namespace", "name",
        "fields": [schema facet fields], "complete": true}], "documents": [{"text", "format", "source",
        "namespace", "dialect", "dataset": [ns, name]}], "allow": [patterns], "depth": 10,
        "knownConsumersOnly": false}``; ``documents`` are read as ``lineage check`` reads files (DDL, Avro, JSON
        Schema, OpenLineage). Answers the report (``verdict``: PASS or BREAKING_WITH_CONSUMERS); 400 for an input
        it cannot read, 413 over the size limit."""
        body = await _bounded_json(request, MAX_PROPOSAL_BYTES)
        try:
            proposals, options = proposals_of(body)
            depth = depth_cap(options["depth"])
        except ProposalError as exc:
            raise HTTPException(400, str(exc)) from None
        try:
            report = await run_in_threadpool(check, store.driver, proposals, depth=depth, allow=options["allow"],
                                             unknown_readers_count=not options["knownConsumersOnly"])
        except ProposalError as exc:  # an ALTER naming a column the current schema does not have
            raise HTTPException(400, str(exc)) from None
        return JSONResponse(report.as_dict())

    @router.get("/api/v2/sensitive", dependencies=api, tags=["Lineage"])
    def sensitive(tag: str | None = None, depth: Depth = 10, asOf: AsOf = None) -> JSONResponse:
        """Where sensitive tags reach along column lineage: every column tagged (``origin``), derived from a
        tagged one (``derived``) or derived through a masking hop that stops the tag (``masked``), with the path
        from the origin, and whether its dataset is cleared for the tag. ``tag``: one tag (default: the
        configured ones, ``LINEAGE_SENSITIVE_TAGS``)."""
        return JSONResponse(_sensitive_answer(tag, depth, asOf))

    @router.get("/api/v2/datasets/{namespace}/{dataset}/sensitive", dependencies=api, tags=["Datasets"])
    def dataset_sensitive(namespace: str, dataset: str, tag: str | None = None, depth: Depth = 10,
                          asOf: AsOf = None) -> JSONResponse:
        """The dataset's columns that a sensitive tag reaches (as ``/api/v2/sensitive``), each with its origin."""
        ns, name = segment(namespace), segment(dataset)
        answer = _sensitive_answer(tag, depth, asOf)
        answer["dataset"] = {"namespace": ns, "name": name}
        answer["columns"] = [c for c in answer["columns"] if (c["namespace"], c["name"]) == (ns, name)]
        return JSONResponse(answer)

    @router.get("/api/v2/datasets/{namespace}/{dataset}/tags", dependencies=api, tags=["Datasets"])
    def get_tags(namespace: str, dataset: str) -> dict[str, Any]:
        """The dataset's tags: its producers' (the ``tags`` facet) and those set here (``userTags``)."""
        ns, name = segment(namespace), segment(dataset)
        store.dataset(ns, name)  # 404 for an unknown dataset
        found = dataset_tags(store.driver, ns, name, settings.query_timeout)
        return {"dataset": {"namespace": ns, "name": name}, "tags": found["tags"], "userTags": found[TAGS_FACET]}

    @router.put("/api/v2/datasets/{namespace}/{dataset}/tags", dependencies=api, tags=["Datasets"], status_code=202)
    async def put_tags(namespace: str, dataset: str, request: Request) -> JSONResponse:
        """Set tags on the dataset or its columns: ``{"tags": [{"key": "classification", "value": "pii",
        "field": "email"}]}`` (a tag of the same key and field is replaced). Recorded as a DatasetEvent on the events
        topic (a rebuild keeps it); 202 once Kafka has it, the graph shows it when the pipeline has written it."""
        body = await _bounded_json(request, 1024 * 1024)
        items = body.get("tags") if isinstance(body, dict) else None
        if not isinstance(items, list) or not items:
            raise HTTPException(400, 'the body is {"tags": [{"key": …, "value": …, "field": …}]}')
        try:
            added = [checked_tag(item) for item in items]
        except BadTag as exc:
            raise HTTPException(400, str(exc)) from None
        return await run_in_threadpool(_record_tags, segment(namespace), segment(dataset), added, [])

    @router.delete("/api/v2/datasets/{namespace}/{dataset}/tags", dependencies=api, tags=["Datasets"],
                   status_code=202)
    def delete_tag(namespace: str, dataset: str, key: str, field: str | None = None) -> JSONResponse:
        """Remove a tag set here (``key``, and ``field`` for a column's), recorded as an event like ``PUT``."""
        return _record_tags(segment(namespace), segment(dataset), [], [(key, field or None)])

    def _record_tags(ns: str, name: str, added: list[dict[str, str]],
                     removed: list[tuple[str, str | None]]) -> JSONResponse:
        if routes.clients is None:
            raise HTTPException(503, "this server has no Kafka settings: tags cannot be recorded")
        store.dataset(ns, name)  # 404 for an unknown dataset (a typo must not tag a new one)
        current = dataset_tags(store.driver, ns, name, settings.query_timeout)[TAGS_FACET]
        try:
            tags = merged(current, added, removed)
            event = tags_event(ns, name, tags, datetime.now(UTC).isoformat(timespec="milliseconds")
                               .replace("+00:00", "Z"))
        except BadTag as exc:
            raise HTTPException(400, str(exc)) from None
        publisher = _publisher()
        publisher.send([publisher.encode(event)]).result(30)
        return JSONResponse({"dataset": {"namespace": ns, "name": name}, "userTags": tags,
                             "eventTime": event["eventTime"]}, status_code=202)

    publishers: list[EventPublisher] = []

    def _publisher() -> EventPublisher:
        if not publishers:
            publishers.append(EventPublisher.from_settings(routes.clients))
        return publishers[0]

    def _sensitive_answer(tag: str | None, depth: int, as_of_text: str | None) -> dict[str, Any]:
        tags = (tag,) if tag else settings.sensitive_tags
        columns, cut = sensitive_columns(store.driver, tags, depth=depth_cap(depth),
                                         stop_at_aggregation=settings.sensitive_stop_at_aggregation,
                                         as_of=parse_as_of(as_of_text), timeout=settings.query_timeout)
        return {"tags": list(tags), "truncated": cut, "columns": [c.as_dict() for c in columns]}

    return router


async def _bounded_json(request: Request, limit: int) -> Any:
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the body is over {limit:,} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from None
