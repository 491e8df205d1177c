"""`lineage serve` against the real stack: a known graph written by the graph sink's own statements, then every
endpoint's answer compared with it exactly (Marquez's shapes, bad input, limits, the bearer token)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
import requests

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import ChildProcess, server_process

pytestmark = pytest.mark.integration
PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/tests/integration/server"


def _schema(*fields: tuple[str, str]) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": n, "type": t} for n, t in fields]}


def _column(output: str, namespace: str, source: str, field: str) -> dict[str, Any]:
    """``output`` derives from ``field`` of dataset ``source``."""
    return {"_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": {output: {"inputFields": [{"namespace": namespace, "name": source, "field": field,
                                                 "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION"}]}]}}}


def _event(kind: str, time: str, job: tuple[str, str], run: str, inputs: list[dict], outputs: list[dict]) -> dict:
    return {"eventType": kind, "eventTime": time, "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": {"runId": run}, "job": {"namespace": job[0], "name": job[1]}, "inputs": inputs, "outputs": outputs}


class World:
    """raw --clean--> mid --report--> out, in namespace ``ns`` (a URI, as real namespaces are), jobs in ``jobs``;
    out.total derives from mid.amount, which derives from raw.amount; clean ran twice (a failure, then complete)."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns, self.jobs = f"postgres://db-{tag}:5432", f"airflow-{tag}"
        raw = {"namespace": self.ns, "name": "shop.raw/orders", "facets": {"schema": _schema(("amount", "DECIMAL"),
                                                                                             ("id", "BIGINT"))}}
        mid = {"namespace": self.ns, "name": "shop.mid", "facets": {
            "schema": _schema(("amount", "DECIMAL")),
            "columnLineage": _column("amount", self.ns, "shop.raw/orders", "amount")}}
        out = {"namespace": self.ns, "name": "shop.out", "facets": {
            "schema": _schema(("total", "DECIMAL")), "columnLineage": _column("total", self.ns, "shop.mid", "amount")}}
        self.failed, self.clean_run, self.report_run = (str(uuid.uuid4()) for _ in range(3))
        clean, report = (self.jobs, "etl.clean"), (self.jobs, "etl.report")
        self.events = [
            _event("START", "2024-05-01T10:00:00Z", clean, self.failed, [raw], [mid]),
            _event("FAIL", "2024-05-01T10:01:00Z", clean, self.failed, [raw], [mid]),
            _event("START", "2024-05-01T11:00:00Z", clean, self.clean_run, [raw], [mid]),
            _event("COMPLETE", "2024-05-01T11:00:30Z", clean, self.clean_run, [raw], [mid]),
            _event("START", "2024-05-01T12:00:00Z", report, self.report_run, [mid], [out]),
            _event("COMPLETE", "2024-05-01T12:00:05Z", report, self.report_run, [mid], [out]),
        ]


@pytest.fixture(scope="module")
def world(clients: ClientSettings) -> World:
    world = World()
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, world.events)
    return world


@pytest.fixture(scope="module")
def server(world: World) -> Iterator[ChildProcess]:
    with server_process({"LINEAGE_SERVER_MAX_NODES": "50", "LINEAGE_SERVER_MAX_DEPTH": "10"}) as child:
        yield child


def _get(server: ChildProcess, path: str, status: int = 200, **params: Any) -> Any:
    answer = requests.get(f"{server.url}{path}", params=params, timeout=30)
    assert answer.status_code == status, answer.text
    return answer.json()


def _seg(value: str) -> str:
    return quote(value, safe="")


def test_namespaces_datasets_and_jobs_as_marquez_lists_them(server: ChildProcess, world: World) -> None:
    names = {n["name"] for n in _get(server, "/api/v1/namespaces", limit=1000)["namespaces"]}
    assert {world.ns, world.jobs} <= names
    listed = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets")
    assert listed["totalCount"] == 3
    assert [d["name"] for d in listed["datasets"]] == ["shop.mid", "shop.out", "shop.raw/orders"]
    counted = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets", limit=0)  # the total only, as Marquez
    assert counted == {"datasets": [], "totalCount": 3}
    raw = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/{_seg('shop.raw/orders')}")
    assert raw["id"] == {"namespace": world.ns, "name": "shop.raw/orders"}
    assert [(f["name"], f["type"]) for f in raw["fields"]] == [("amount", "DECIMAL"), ("id", "BIGINT")]
    assert raw["lastModifiedAt"] is None  # read only: no completed run wrote it
    mid = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.mid")
    assert mid["lastModifiedAt"] == "2024-05-01T11:00:30.000000Z"  # the complete run, not the failed one
    jobs = _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs")
    assert jobs["totalCount"] == 2 and [j["name"] for j in jobs["jobs"]] == ["etl.clean", "etl.report"]
    clean = jobs["jobs"][0]
    assert clean["inputs"] == [{"namespace": world.ns, "name": "shop.raw/orders"}]
    assert clean["outputs"] == [{"namespace": world.ns, "name": "shop.mid"}]
    assert clean["latestRun"]["id"] == world.clean_run and clean["latestRun"]["state"] == "COMPLETED"
    assert clean["latestRun"]["durationMs"] == 30_000
    assert clean["createdAt"] == "2024-05-01T10:00:00.000000Z"


def test_runs_and_versions(server: ChildProcess, world: World) -> None:
    runs = _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs/etl.clean/runs")["runs"]
    assert [(r["id"], r["state"]) for r in runs] == [(world.clean_run, "COMPLETED"), (world.failed, "FAILED")]
    page = _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs/etl.clean/runs", limit=1, offset=1)
    assert [r["id"] for r in page["runs"]] == [world.failed] and page["totalCount"] == 2  # all runs, not the page
    versions = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.out/versions")["versions"]
    assert len(versions) == 1 and [f["name"] for f in versions[0]["fields"]] == ["total"]
    assert _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.out/versions", limit=1,
                offset=1) == {"versions": [], "totalCount": 1}
    assert versions[0]["createdAt"] == "2024-05-01T12:00:00.000000Z"


def test_a_run_a_dataset_version_its_source_and_tags_by_marquez_paths(server: ChildProcess, world: World,
                                                                     clients: ClientSettings) -> None:
    (version,) = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.out/versions")["versions"]
    one = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.out/versions/{version['version']}")
    assert one == version
    _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.out/versions/no-such-version", 404)
    # the job's versions: one (raw → mid) from its completed run; the failed run wrote nothing
    (job_version,) = _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs/etl.clean/versions")["versions"]
    assert job_version["latestRun"]["id"] == world.clean_run
    assert job_version["inputs"] == [{"namespace": world.ns, "name": "shop.raw/orders"}]
    assert job_version["outputs"] == [{"namespace": world.ns, "name": "shop.mid"}]
    assert _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs/etl.clean/versions/{job_version['version']}") \
        == job_version
    _get(server, f"/api/v1/namespaces/{_seg(world.jobs)}/jobs/etl.clean/versions/{uuid.uuid4()}", 404)
    run = _get(server, f"/api/v1/jobs/runs/{world.report_run}")
    assert (run["id"], run["state"], run["durationMs"]) == (world.report_run, "COMPLETED", 5000)
    mid_version = _get(server, f"/api/v1/namespaces/{_seg(world.ns)}/datasets/shop.mid")["currentVersion"]
    assert run["inputDatasetVersions"] == [{"datasetVersionId": {"namespace": world.ns, "name": "shop.mid",
                                                                 "version": mid_version}, "facets": {}}]
    assert run["outputDatasetVersions"][0]["datasetVersionId"]["version"] == version["version"]
    _get(server, f"/api/v1/jobs/runs/{uuid.uuid4()}", 404)

    tags = f"tags-{uuid.uuid4().hex[:8]}"
    event = _event("COMPLETE", "2024-05-02T10:00:00Z", (tags, "tagger"), str(uuid.uuid4()), [], [
        {"namespace": f"kafka://{tags}:9092", "name": "topic", "facets": {"tags": {
            "_producer": PRODUCER, "_schemaURL": "t", "tags": [{"key": f"{tags}-owner", "value": "crm",
                                                               "source": "USER"}]}}}])
    event["job"]["facets"] = {"documentation": {"_producer": PRODUCER, "_schemaURL": "t", "description": "tags"}}
    event["run"]["facets"] = {"nominalTime": {"_producer": PRODUCER, "_schemaURL": "t",
                                              "nominalStartTime": "2024-05-02T10:00:00Z"}}
    with driver_for(clients) as driver:
        write_events(driver, [event])
    assert {"name": f"{tags}-owner:crm", "description": None} in _get(server, "/api/v1/tags", limit=1000)["tags"]
    facets = _get(server, f"/api/v1/jobs/runs/{event['run']['runId']}/facets")
    assert facets["runId"] == event["run"]["runId"] and set(facets["facets"]) == {"nominalTime"}
    job_facets = _get(server, f"/api/v1/jobs/runs/{event['run']['runId']}/facets", type="job")["facets"]
    assert job_facets["documentation"]["description"] == "tags"
    _get(server, f"/api/v1/jobs/runs/{event['run']['runId']}/facets", 400, type="dataset")
    source = _get(server, f"/api/v1/sources/{_seg(f'kafka://{tags}:9092')}")
    assert (source["name"], source["type"], source["connectionUrl"]) == (f"kafka://{tags}:9092", "KAFKA",
                                                                         f"kafka://{tags}:9092")
    listed = [s["name"] for s in _get(server, "/api/v1/sources", limit=3)["sources"]]
    assert len(listed) == 3 and listed == sorted(listed)  # one per dataset namespace, by name
    _get(server, f"/api/v1/sources/{_seg('kafka://nowhere:1')}", 404)


def test_every_namespaces_jobs_most_recent_first_by_their_latest_run_state(server: ChildProcess, world: World,
                                                                           clients: ClientSettings) -> None:
    tag = f"dash-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC).replace(year=2099)  # newer than any other test's events, and than earlier runs'
    failing, done = (tag, "failing"), (tag, "done")
    events = [_event("START", (now - timedelta(seconds=30)).isoformat(), done, str(uuid.uuid4()), [], []),
              _event("COMPLETE", (now - timedelta(seconds=20)).isoformat(), done, str(uuid.uuid4()), [], []),
              _event("FAIL", (now - timedelta(seconds=10)).isoformat(), failing, str(uuid.uuid4()), [], [])]
    with driver_for(clients) as driver:
        write_events(driver, events)
    recent = _get(server, "/api/v1/jobs", limit=2)
    assert [(j["namespace"], j["name"]) for j in recent["jobs"]] == [failing, done]  # the latest activity first
    assert recent["totalCount"] >= 4  # every job, not the page (the world's two and these)
    failed = _get(server, "/api/v1/jobs", lastRunStates="FAILED", limit=1)["jobs"]
    assert [(j["name"], j["latestRun"]["state"]) for j in failed] == [("failing", "FAILED")]
    both = _get(server, "/api/v1/jobs?lastRunStates=FAILED&lastRunStates=COMPLETED&limit=2")["jobs"]
    assert [j["name"] for j in both] == ["failing", "done"]
    _get(server, "/api/v1/jobs", 400, lastRunStates="DONE")
    names = [n["name"] for n in _get(server, "/api/v1/namespaces", limit=1000)["namespaces"]]
    assert [n["name"] for n in _get(server, "/api/v1/namespaces", limit=2, offset=1)["namespaces"]] == names[1:3]


def test_lineage_graph_is_exactly_the_neighbourhood(server: ChildProcess, world: World) -> None:
    graph = _get(server, "/api/v1/lineage", nodeId=f"dataset:{world.ns}:shop.mid", depth=5)["graph"]
    ids = {n["id"] for n in graph}
    assert ids == {f"dataset:{world.ns}:shop.raw/orders", f"dataset:{world.ns}:shop.mid",
                   f"dataset:{world.ns}:shop.out", f"job:{world.jobs}:etl.clean", f"job:{world.jobs}:etl.report"}
    raw = next(n for n in graph if n["id"] == f"dataset:{world.ns}:shop.raw/orders")
    assert [(f["name"], f["type"]) for f in raw["data"]["fields"]] == [("amount", "DECIMAL"), ("id", "BIGINT")]
    clean = next(n for n in graph if n["id"] == f"job:{world.jobs}:etl.clean")
    assert (clean["data"]["latestRun"]["id"], clean["data"]["latestRun"]["state"]) == (world.clean_run, "COMPLETED")
    edges = {(e["origin"], e["destination"]) for n in graph for e in n["inEdges"] + n["outEdges"]}
    assert edges == {(f"dataset:{world.ns}:shop.raw/orders", f"job:{world.jobs}:etl.clean"),
                     (f"job:{world.jobs}:etl.clean", f"dataset:{world.ns}:shop.mid"),
                     (f"dataset:{world.ns}:shop.mid", f"job:{world.jobs}:etl.report"),
                     (f"job:{world.jobs}:etl.report", f"dataset:{world.ns}:shop.out")}
    # depth 1 from a job: its datasets and the jobs next to them (raw is a job further)
    near = _get(server, "/api/v1/lineage", nodeId=f"job:{world.jobs}:etl.report", depth=1)["graph"]
    assert {n["id"] for n in near} == {f"job:{world.jobs}:etl.report", f"dataset:{world.ns}:shop.mid",
                                       f"dataset:{world.ns}:shop.out", f"job:{world.jobs}:etl.clean"}


def test_column_lineage_up_and_down(server: ChildProcess, world: World) -> None:
    up = _get(server, "/api/v1/column-lineage", nodeId=f"datasetField:{world.ns}:shop.out:total")["graph"]
    assert {n["id"] for n in up} == {f"datasetField:{world.ns}:shop.out:total",
                                     f"datasetField:{world.ns}:shop.mid:amount",
                                     f"datasetField:{world.ns}:shop.raw/orders:amount"}
    total = next(n for n in up if n["id"].endswith("shop.out:total"))
    assert total["data"]["fieldType"] == "DECIMAL"
    assert total["data"]["inputFields"][0]["field"] == "amount"
    assert total["data"]["inputFields"][0]["transformationType"] == "DIRECT"
    only_up = _get(server, "/api/v1/column-lineage", nodeId=f"datasetField:{world.ns}:shop.mid:amount")["graph"]
    assert {n["id"] for n in only_up} == {f"datasetField:{world.ns}:shop.mid:amount",
                                          f"datasetField:{world.ns}:shop.raw/orders:amount"}
    both = _get(server, "/api/v1/column-lineage", nodeId=f"datasetField:{world.ns}:shop.mid:amount",
                withDownstream="true")["graph"]
    assert f"datasetField:{world.ns}:shop.out:total" in {n["id"] for n in both}
    # a job node (Marquez): the column lineage of the columns of the datasets it writes
    job = _get(server, "/api/v1/column-lineage", nodeId=f"job:{world.jobs}:etl.clean", withDownstream="true")["graph"]
    assert {n["id"] for n in job} == {f"datasetField:{world.ns}:shop.mid:amount",
                                      f"datasetField:{world.ns}:shop.raw/orders:amount",
                                      f"datasetField:{world.ns}:shop.out:total"}
    _get(server, "/api/v1/column-lineage", 404, nodeId=f"job:{world.jobs}:no.such.job")


def test_search_finds_datasets_and_jobs(server: ChildProcess, world: World) -> None:
    datasets = _get(server, "/api/v1/search", q="SHOP.%", filter="dataset", namespace=world.ns)
    assert datasets == {"totalCount": 3, "results": [  # by name, any case
        {"type": "DATASET", "name": name, "namespace": world.ns, "updatedAt": None,
         "nodeId": f"dataset:{world.ns}:{name}"} for name in ("shop.mid", "shop.out", "shop.raw/orders")]}
    assert [r["name"] for r in _get(server, "/api/v1/search", q="s_op.r", namespace=world.ns)["results"]] == [
        "shop.raw/orders"]
    jobs = _get(server, "/api/v1/search", q="etl.%", filter="job", namespace=world.jobs)["results"]
    assert jobs == [{"type": "JOB", "name": name, "namespace": world.jobs, "nodeId": f"job:{world.jobs}:{name}",
                     "updatedAt": updated} for name, updated in (("etl.clean", "2024-05-01T11:00:30.000000Z"),
                                                                 ("etl.report", "2024-05-01T12:00:05.000000Z"))]
    assert _get(server, "/api/v1/search", q="shop", namespace=world.ns, limit=2)["totalCount"] == 2
    # latest update first (Marquez's UPDATE_AT), and a window of days: only jobs carry an update time here
    by_update = _get(server, "/api/v1/search", q="etl.%", filter="job", namespace=world.jobs, sort="update_at")
    assert [r["name"] for r in by_update["results"]] == ["etl.report", "etl.clean"]
    in_may = _get(server, "/api/v1/search", q="%", namespace=world.jobs, after="2024-05-01", before="2024-05-02")
    assert {r["name"] for r in in_may["results"]} == {"etl.clean", "etl.report"}
    assert _get(server, "/api/v1/search", q="%", namespace=world.jobs, after="2024-05-02")["totalCount"] == 0
    assert _get(server, "/api/v1/search", q="etl", namespace=world.ns, after="2024-05-01")["totalCount"] == 0
    _get(server, "/api/v1/search", 400, q="etl", sort="size")
    _get(server, "/api/v1/search", 400, q="etl", after="May 1st")
    # short queries (read in key order) and long ones (the text index) answer alike
    assert [r["name"] for r in _get(server, "/api/v1/search", q="D", namespace=world.ns)["results"]] == [
        "shop.mid", "shop.raw/orders"]


def test_v2_search_finds_columns_too(server: ChildProcess, world: World) -> None:
    found = _get(server, "/api/v2/search", q="AMOUNT", namespace=world.ns)["results"]
    assert [(r["kind"], r["name"], r["field"], r["nodeId"]) for r in found] == [
        ("field", name, "amount", f"datasetField:{world.ns}:{name}:amount") for name in ("shop.mid", "shop.raw/orders")]
    every = _get(server, "/api/v2/search", q="t", namespace=world.ns, kinds="dataset,field")["results"]
    assert {(r["kind"], r["name"], r["field"]) for r in every} == {
        ("field", "shop.mid", "amount"), ("field", "shop.raw/orders", "amount"), ("field", "shop.out", "total"),
        ("dataset", "shop.out", None)}
    assert "kinds" in _get(server, "/api/v2/search", 400, q="x", kinds="run")["message"]


def test_v2_impact_with_paths_and_written_flags(server: ChildProcess, world: World) -> None:
    answer = _get(server, f"/api/v2/datasets/{_seg(world.ns)}/{_seg('shop.raw/orders')}/impact", depth=5)
    assert not answer["truncated"]
    rows = {(n["kind"], n["name"]): n for n in answer["nodes"]}
    assert set(rows) == {("job", "etl.clean"), ("dataset", "shop.mid"), ("job", "etl.report"),
                         ("dataset", "shop.out")}
    assert {key: (n["lastRun"]["runId"], n["lastRun"]["state"]) for key, n in rows.items()} == {
        ("job", "etl.clean"): (world.clean_run, "COMPLETE"), ("dataset", "shop.mid"): (world.clean_run, "COMPLETE"),
        ("job", "etl.report"): (world.report_run, "COMPLETE"), ("dataset", "shop.out"): (world.report_run, "COMPLETE")}
    assert rows[("dataset", "shop.out")]["path"] == [
        ["dataset", world.ns, "shop.raw/orders"], ["job", world.jobs, "etl.clean"], ["dataset", world.ns, "shop.mid"],
        ["job", world.jobs, "etl.report"], ["dataset", world.ns, "shop.out"]]
    assert rows[("dataset", "shop.mid")]["written"] is True
    columns = _get(server, f"/api/v2/datasets/{_seg(world.ns)}/{_seg('shop.raw/orders')}/impact", column="amount")
    assert [(n["name"], n["field"]) for n in columns["nodes"]] == [("shop.mid", "amount"), ("shop.out", "total")]


@pytest.mark.parametrize(("path", "params", "status", "says"), [
    ("/api/v1/lineage", {"nodeId": "table:x:y"}, 400, "nodeId"),
    ("/api/v1/lineage", {"nodeId": "dataset:nowhere:nothing"}, 404, "dataset nowhere nothing"),
    ("/api/v1/lineage", {"nodeId": "dataset:a:b", "depth": "deep"}, 400, "depth"),
    ("/api/v1/lineage", {}, 400, "nodeId"),
    ("/api/v1/search", {"q": "x", "filter": "run"}, 400, "filter"),
    ("/api/v1/namespaces/nowhere/datasets/nothing", {}, 404, "nothing"),
    ("/api/v1/namespaces/nowhere/jobs/nothing/runs", {}, 404, "nothing"),
])
def test_bad_input_is_a_clear_error(server: ChildProcess, path: str, params: dict, status: int, says: str) -> None:
    answer = _get(server, path, status, **params)
    assert answer["code"] == status and says in answer["message"]


def test_hostile_names_round_trip(server: ChildProcess, clients: ClientSettings) -> None:
    ns, name = "weird://x", "a'b\"c} RETURN 1 //\u202e/ünï"
    event = _event("COMPLETE", "2024-05-01T10:00:00Z", ("weird", "job' OR 1=1"), str(uuid.uuid4()), [],
                   [{"namespace": ns, "name": name}])
    with driver_for(clients) as driver:
        write_events(driver, [event])
    found = _get(server, f"/api/v1/namespaces/{_seg(ns)}/datasets/{_seg(name)}")
    assert found["name"] == name and found["namespace"] == ns
    graph = _get(server, "/api/v1/lineage", nodeId=f"dataset:{ns}:{name}", depth=1)["graph"]
    assert {n["id"] for n in graph} == {f"dataset:{ns}:{name}", "job:weird:job' OR 1=1"}


def _facet(schema: str, **content: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"https://openlineage.io/spec/facets/1-0-1/{schema}.json", **content}


def test_facets_are_shown_deletions_hide_them_and_assertions_say_pass_or_fail(server: ChildProcess,
                                                                            clients: ClientSettings) -> None:
    """Facets the graph keeps as documents (a dataset's documentation, tags, catalog, version, a job's source
    location), a later ``_deleted`` facet hiding one, the run facets of a COMPLETE_SNAPSHOT job (the latest event's
    only), and an input's quality assertions with their outcome, through the server, in any order of arrival."""
    ns, jobs, run = f"facets-{uuid.uuid4().hex[:8]}", f"facets-jobs-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    table = {"namespace": ns, "name": "orders", "facets": {
        "documentation": _facet("DocumentationDatasetFacet", description="Orders, one row each"),
        "tags": _facet("TagsDatasetFacet", tags=[{"key": "pii", "value": "true", "source": "CONFIG"}]),
        "catalog": _facet("CatalogDatasetFacet", framework="iceberg", type="rest", name="lake"),
        "version": _facet("DatasetVersionDatasetFacet", datasetVersion="42"),
        "ownership": _facet("OwnershipDatasetFacet", owners=[{"name": "team:data"}])}}
    source = {"namespace": ns, "name": "raw", "inputFacets": {"dataQualityAssertions": _facet(
        "DataQualityAssertionsDatasetFacet", assertions=[{"assertion": "not_null", "success": True, "column": "id"},
                                                         {"assertion": "unique", "success": False, "column": "id"}])}}
    job_facets = {"sourceCodeLocation": _facet("SourceCodeLocationJobFacet", type="git", url="https://git.x/etl"),
                  "jobType": _facet("JobTypeJobFacet", processingType="STREAMING", integration="FLINK",
                                    emissionPattern={"eventTrigger": "PERIODIC", "windowDuration": 60,
                                                     "eventContentMode": "COMPLETE_SNAPSHOT"})}
    start = _event("START", "2024-05-01T10:00:00Z", (jobs, "load"), run, [source], [table])
    start["job"]["facets"] = job_facets
    start["run"]["facets"] = {"processing_engine": _facet("ProcessingEngineRunFacet", version="1.0", name="flink")}
    later = _event("COMPLETE", "2024-05-01T10:05:00Z", (jobs, "load"), run, [source], [
        {"namespace": ns, "name": "orders", "facets": {"ownership": {"_producer": PRODUCER, "_schemaURL": "x",
                                                                     "_deleted": True}}}])
    later["job"]["facets"] = job_facets
    later["run"]["facets"] = {"nominalTime": _facet("NominalTimeRunFacet", nominalStartTime="2024-05-01T10:00:00Z")}
    with driver_for(clients) as driver:
        write_events(driver, [later])  # the deletion arrives first: the earlier facet must not come back
        write_events(driver, [start])
    dataset = _get(server, f"/api/v1/namespaces/{_seg(ns)}/datasets/orders")
    assert dataset["description"] == "Orders, one row each" and dataset["tags"] == ["pii:true"]
    assert set(dataset["facets"]) == {"documentation", "tags", "catalog", "version"}  # ownership deleted later
    assert dataset["facets"]["version"]["datasetVersion"] == "42" and dataset["facets"]["catalog"]["framework"] == (
        "iceberg")
    job = _get(server, f"/api/v1/namespaces/{_seg(jobs)}/jobs/load")
    assert job["location"] == "https://git.x/etl" and job["type"] == "STREAM"
    (latest,) = _get(server, f"/api/v1/namespaces/{_seg(jobs)}/jobs/load/runs")["runs"]
    assert set(latest["facets"]) == {"nominalTime"}  # COMPLETE_SNAPSHOT: the latest event's facets only
    quality = _get(server, f"/api/v2/datasets/{_seg(ns)}/raw/runs")["quality"]
    assert [(a["assertion"], a["success"]) for a in quality[0]["assertions"]] == [("not_null", True),
                                                                                  ("unique", False)]
    detail = _get(server, f"/api/v2/runs/{run}")
    assert detail["inputs"][0]["assertions"][1]["success"] is False


def test_limits_cut_and_say_so(server: ChildProcess, clients: ClientSettings) -> None:
    hub = f"hub-{uuid.uuid4().hex[:8]}"
    events = [_event("COMPLETE", "2024-05-01T10:00:00Z", (hub, f"reader-{i}"), str(uuid.uuid4()),
                     [{"namespace": hub, "name": "source"}], [{"namespace": hub, "name": f"out-{i}"}])
              for i in range(80)]
    with driver_for(clients) as driver:
        write_events(driver, events)
    answer = requests.get(f"{server.url}/api/v1/lineage", params={"nodeId": f"dataset:{hub}:source", "depth": 500},
                          timeout=30)
    assert answer.status_code == 200 and answer.headers["X-Lineage-Truncated"] == "true"
    assert len(answer.json()["graph"]) == 50  # LINEAGE_SERVER_MAX_NODES
    drawn = requests.get(f"{server.url}/api/v1/lineage", params={"nodeId": f"dataset:{hub}:source", "depth": 1,
                                                                "limit": 7}, timeout=30)  # what the web UI draws
    assert drawn.headers["X-Lineage-Truncated"] == "true" and len(drawn.json()["graph"]) == 7
    capped = requests.get(f"{server.url}/api/v1/lineage", params={"nodeId": f"dataset:{hub}:source", "depth": 1,
                                                                 "limit": 10_000}, timeout=30)
    assert len(capped.json()["graph"]) == 50  # a caller's limit never passes the server's
    assert requests.get(f"{server.url}/api/v1/lineage", params={"nodeId": f"dataset:{hub}:source", "limit": 0},
                        timeout=30).status_code == 400
    impact = _get(server, f"/api/v2/datasets/{hub}/source/impact", depth=500)
    assert impact["truncated"] is True and impact["depth"] == 10


def test_openapi_health_and_token(world: World) -> None:
    with server_process({"LINEAGE_SERVER_TOKEN": "s3cret-token"}) as child:
        assert requests.get(f"{child.url}/openapi.json", timeout=10).json()["paths"]["/api/v1/lineage"]
        assert requests.get(f"{child.url}/health/ready", timeout=10).json()["checks"] == {"neo4j": "ok"}
        refused = requests.get(f"{child.url}/api/v1/namespaces", timeout=10)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
        allowed = requests.get(f"{child.url}/api/v1/namespaces", headers={"Authorization": "Bearer s3cret-token"},
                               timeout=10)
        assert allowed.status_code == 200
        assert "s3cret-token" not in child.output_so_far()


def test_as_of_answers_the_graph_as_it_was(server: ChildProcess, world: World) -> None:
    """clean's edges were first seen at 10:00, report's at 12:00; clean's first complete run ended at 11:00:30."""
    mid = f"dataset:{world.ns}:shop.mid"
    at_11 = _get(server, "/api/v1/lineage", nodeId=mid, depth=5, asOf="2024-05-01T11:00:00Z")["graph"]
    assert {n["id"] for n in at_11} == {f"dataset:{world.ns}:shop.raw/orders", f"job:{world.jobs}:etl.clean", mid}
    clean = next(n for n in at_11 if n["type"] == "JOB")  # its latest run then: the second, started at 11:00
    assert clean["data"]["latestRun"]["id"] == world.clean_run
    at_9 = _get(server, "/api/v1/lineage", nodeId=mid, depth=5, asOf="2024-05-01T09:00:00+00:00")["graph"]
    assert [n["id"] for n in at_9] == [mid]
    assert at_9[0]["data"]["fields"] == []  # its schema was first seen at 10:00
    assert [f["name"] for f in next(n for n in at_11 if n["id"] == mid)["data"]["fields"]] == ["amount"]
    now = _get(server, "/api/v1/lineage", nodeId=mid, depth=5, asOf="2030-01-01")["graph"]
    assert len(now) == 5
    impact = _get(server, f"/api/v2/datasets/{_seg(world.ns)}/{_seg('shop.raw/orders')}/impact",
                  asOf="2024-05-01T13:00:00+02:00")  # 11:00Z: mid declared, its writing run not complete yet
    assert impact["asOf"] == "2024-05-01T11:00:00.000000Z"
    assert [(n["kind"], n["name"], n.get("written")) for n in impact["nodes"]] == [  # depth 1 both, then kind
        ("dataset", "shop.mid", False), ("job", "etl.clean", None)]
    assert [(n["lastRun"]["runId"], n["lastRun"]["state"]) for n in impact["nodes"]] == [  # the run started then
        (world.clean_run, "COMPLETE")] * 2
    early = _get(server, f"/api/v2/datasets/{_seg(world.ns)}/{_seg('shop.raw/orders')}/impact",
                 asOf="2024-05-01T10:30:00Z")["nodes"]
    assert [n["lastRun"]["runId"] for n in early] == [world.failed] * 2
    total = f"datasetField:{world.ns}:shop.out:total"
    columns = _get(server, "/api/v1/column-lineage", nodeId=total, asOf="2024-05-01T11:00:00Z")["graph"]
    assert [n["id"] for n in columns] == [total]
    bad = _get(server, "/api/v1/lineage", 400, nodeId=mid, asOf="yesterday")
    assert "asOf" in bad["message"]
