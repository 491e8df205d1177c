"""The graph's answers in Marquez's shapes (Marquez's spec/openapi.yml and its services' edge conventions)."""

from kafka_lineage.graph.node_ids import NodeId
from kafka_lineage.graph.store import Graph, like_needle, like_pattern, run_facets
from kafka_lineage.server import marquez


def test_lineage_graph_edges_point_along_the_data() -> None:
    graph = Graph(nodes={"d1": NodeId("dataset", "s3://lake", "raw/orders"), "j1": NodeId("job", "etl", "clean"),
                         "d2": NodeId("dataset", "s3://lake", "mart/orders")},
                  edges={("d1", "j1"): "", ("j1", "d2"): ""}, starts=["d1"])
    nodes = {n["id"]: n for n in marquez.lineage_graph(graph)["graph"]}
    assert set(nodes) == {"dataset:s3://lake:raw/orders", "job:etl:clean", "dataset:s3://lake:mart/orders"}
    job = nodes["job:etl:clean"]
    assert job["type"] == "JOB"
    assert job["inEdges"] == [{"origin": "dataset:s3://lake:raw/orders", "destination": "job:etl:clean"}]
    assert job["outEdges"] == [{"origin": "job:etl:clean", "destination": "dataset:s3://lake:mart/orders"}]
    assert job["data"]["inputs"] == [{"namespace": "s3://lake", "name": "raw/orders"}]
    assert job["data"]["outputs"] == [{"namespace": "s3://lake", "name": "mart/orders"}]
    raw = nodes["dataset:s3://lake:raw/orders"]
    assert raw["type"] == "DATASET" and raw["inEdges"] == []
    # every field of Marquez's JobData and DatasetData is there (null when the walk does not read it)
    assert {"parentJobName", "parentJobUuid", "currentRunUuid", "createdAt", "updatedAt", "location", "description",
            "latestRun"} <= set(job["data"])
    assert {"createdAt", "updatedAt", "lastModifiedAt", "description", "lastLifecycleState", "fields", "tags"} \
        <= set(raw["data"])
    assert raw["outEdges"] == [{"origin": "dataset:s3://lake:raw/orders", "destination": "job:etl:clean"}]


def test_column_lineage_graph_follows_marquez_edge_convention() -> None:
    graph = Graph(nodes={"o": NodeId("datasetField", "pg", "mart", "total"),
                         "i": NodeId("datasetField", "pg", "raw", "amount")},
                  edges={("o", "i"): "DIRECT/AGGREGATION"}, starts=["o"])
    nodes = {n["id"]: n for n in marquez.column_lineage_graph(graph, {("pg", "mart"): {"total": "DECIMAL"}})["graph"]}
    total, amount = nodes["datasetField:pg:mart:total"], nodes["datasetField:pg:raw:amount"]
    assert total["type"] == "DATASET_FIELD"
    assert total["data"]["fieldType"] == "DECIMAL"
    assert total["data"]["inputFields"] == [{"namespace": "pg", "dataset": "raw", "datasetVersion": None,
                                             "field": "amount", "transformationDescription": "DIRECT/AGGREGATION",
                                             "transformationType": "DIRECT"}]
    # as Marquez answers: a field's inEdges go from it to its inputs, an input's outEdges to what derives from it
    assert total["inEdges"] == [{"origin": "datasetField:pg:mart:total", "destination": "datasetField:pg:raw:amount"}]
    assert amount["outEdges"] == [{"origin": "datasetField:pg:raw:amount",
                                   "destination": "datasetField:pg:mart:total"}]
    assert amount["data"]["inputFields"] == [] and amount["inEdges"] == []


def test_runs_in_marquez_states_with_their_duration() -> None:
    run = marquez.run({"runId": "r1", "state": "COMPLETE", "startTime": "2024-05-01T10:00:00.000000Z",
                       "endTime": "2024-05-01T10:00:02.500000Z", "lastEventTime": "2024-05-01T10:00:02.500000Z"})
    assert run["state"] == "COMPLETED" and run["durationMs"] == 2500
    assert marquez.run({"runId": "r2", "state": "START", "startTime": "2024-05-01T10:00:00.000000Z"})["state"] \
        == "RUNNING"
    assert marquez.run({"runId": "r3", "state": None})["state"] == "NEW"
    assert marquez.run({"runId": "r4", "state": "FAIL"})["durationMs"] is None


def test_dataset_shape_from_its_current_schema() -> None:
    fields = '[{"name":"id","type":"BIGINT","description":"key"},{"name":"address","type":"STRUCT",' \
             '"fields":[{"name":"city","type":"STRING"}]}]'
    dataset = marquez.dataset(["kafka://broker:9092", "orders", "abc123", fields, "2024-05-01T00:00:00.000000Z",
                               "2024-05-02T00:00:00.000000Z", [],
                               [["id", "pg", "raw", "order_id", "DIRECT/IDENTITY"], ["id", "pg", "raw", "id2", None],
                                ["total", "pg", "raw", "amount", "DIRECT/AGGREGATION"]]])
    assert dataset["id"] == {"namespace": "kafka://broker:9092", "name": "orders"}
    assert dataset["type"] == "STREAM"
    assert dataset["fields"] == [{"name": "id", "type": "BIGINT", "tags": [], "description": "key"},
                                 {"name": "address", "type": "STRUCT", "tags": [], "description": None}]
    assert dataset["lastModifiedAt"] == dataset["updatedAt"] == "2024-05-02T00:00:00.000000Z"
    assert dataset["currentVersion"] == "abc123"
    # Marquez's columnLineage: each column with its input fields
    assert [c["name"] for c in dataset["columnLineage"]] == ["id", "total"]
    assert dataset["columnLineage"][0]["inputFields"] == [
        {"namespace": "pg", "dataset": "raw", "field": "id2", "transformationDescription": None,
         "transformationType": None},
        {"namespace": "pg", "dataset": "raw", "field": "order_id", "transformationDescription": "DIRECT/IDENTITY",
         "transformationType": "DIRECT"}]


def test_facet_documents_fill_description_tags_lifecycle_and_facets() -> None:
    texts = ['{"documentation": {"_producer": "p", "description": "Orders, cleaned"}}',
             '{"tags": {"tags": [{"key": "pii", "value": "true", "source": "CONFIG"}, '
             '{"key": "gold", "value": "gold"}]}}',
             '{"lifecycleStateChange": {"lifecycleStateChange": "DROP"}}', '{"_omitted": {"catalog": 70000}}',
             '{"version": {"datasetVersion": "7"}}', "not json"]
    dataset = marquez.dataset(["ns", "d", None, None, None, None, texts, []])
    assert dataset["description"] == "Orders, cleaned" and dataset["tags"] == ["gold", "pii:true"]
    assert dataset["lastLifecycleState"] == "DROP" and dataset["deleted"] is True
    assert dataset["facets"]["version"] == {"datasetVersion": "7"} and dataset["facets"]["_omitted"] == {
        "catalog": 70000}
    job = marquez.job(["ns", "j", None, None, None, None, None, [], [], [], [
        '{"sourceCodeLocation": {"type": "git", "url": "https://git.example/etl"}}']])
    assert job["location"] == "https://git.example/etl" and "sourceCodeLocation" in job["facets"]


def test_run_facets_follow_the_jobs_content_mode_and_deletions() -> None:
    def row(mode: str | None) -> dict:
        return {"startRunFacets": '{"a": {"v": 1}, "b": {"v": 1}}',
                "runFacets": '{"b": {"v": 2}, "c": {"_deleted": true}}', "contentMode": mode}

    assert run_facets(row(None)) == {"a": {"v": 1}, "b": {"v": 2}}  # ACCUMULATIVE: START's, updated by the latest
    assert run_facets(row("COMPLETE_SNAPSHOT")) == {"b": {"v": 2}}  # the latest event's alone


def test_tag_names_are_the_tags_facets_keys_or_key_values() -> None:
    documents = ['{"tags": {"tags": [{"key": "pii"}, {"key": "classification", "value": "pii"}]}}',
                 '{"tags": {"tags": [{"key": "pii", "value": "pii"}, {"value": "no key"}]}}', "not json",
                 '{"kafkaLineage_tags": {"tags": [{"key": "owner", "value": "crm", "field": "email"}]}}']
    assert marquez.tag_names(documents) == ["classification:pii", "owner:crm", "pii"]


def test_search_is_marquez_like_containment() -> None:
    import re

    # the pattern runs over the lower-cased search key; the needle is what the key's text index is asked for
    assert re.fullmatch(like_pattern("ORD%s"), "mart/orders_daily")
    assert re.fullmatch(like_pattern("o_ders"), "orders")
    assert not re.fullmatch(like_pattern("o.ders"), "orders")  # a dot is a dot
    assert like_needle("ORD%s") == "ORD" and like_needle("o_der%s.daily") == "s.daily" and like_needle("%") == ""
    assert marquez.search_result(["JOB", "etl", "clean", None, None])["nodeId"] == "job:etl:clean"


# Marquez's properties and their JSON types (MarquezProject/marquez spec/openapi.yml, its Java models for what the
# spec leaves out: Job.simpleName/parentJob*/latestRuns, ColumnLineageNodeData), written out: every shape we answer
# must carry exactly these, each null or of its type (deprecated ones included, as Marquez still does).
STR, INT, OBJ, ARR, BOOL = str, int, dict, list, bool
_RUN_TYPES = {"id": STR, "createdAt": STR, "updatedAt": STR, "nominalStartTime": STR, "nominalEndTime": STR,
              "state": STR, "startedAt": STR, "endedAt": STR, "durationMs": INT, "args": OBJ, "facets": OBJ}
MARQUEZ_PROPERTIES: dict[str, dict[str, type]] = {
    "Namespace": {"name": STR, "createdAt": STR, "updatedAt": STR, "ownerName": STR, "description": STR,
                  "isHidden": BOOL},  # isHidden, Job.tags/labels: in Marquez's models, not its OpenAPI document
    "Dataset": {"id": OBJ, "type": STR, "name": STR, "physicalName": STR, "createdAt": STR, "updatedAt": STR,
                "namespace": STR, "sourceName": STR, "fields": ARR, "tags": ARR, "lastModifiedAt": STR,
                "lastLifecycleState": STR, "description": STR, "facets": OBJ, "currentVersion": STR, "deleted": BOOL,
                "columnLineage": ARR},  # columnLineage: in Marquez's Dataset model, not in its OpenAPI document
    "DatasetVersion": {"id": OBJ, "type": STR, "name": STR, "physicalName": STR, "createdAt": STR, "version": STR,
                       "namespace": STR, "sourceName": STR, "fields": ARR, "tags": ARR, "description": STR,
                       "createdByRun": OBJ, "facets": OBJ},
    "Job": {"id": OBJ, "type": STR, "name": STR, "simpleName": STR, "parentJobName": STR, "parentJobUuid": STR,
            "createdAt": STR, "updatedAt": STR, "namespace": STR, "inputs": ARR, "outputs": ARR, "location": STR,
            "context": OBJ, "description": STR, "latestRun": OBJ, "latestRuns": ARR, "facets": OBJ,
            "currentVersion": STR, "tags": ARR, "labels": ARR},
    "Run": {**_RUN_TYPES, "jobVersion": OBJ, "inputDatasetVersions": ARR, "outputDatasetVersions": ARR},
    "DatasetVersionRef": {"datasetVersionId": OBJ, "facets": OBJ},  # Input/OutputDatasetVersion
    "Source": {"type": STR, "name": STR, "createdAt": STR, "updatedAt": STR, "connectionUrl": STR, "description": STR},
    "SearchResult": {"type": STR, "name": STR, "updatedAt": STR, "namespace": STR, "nodeId": STR},
    "GraphNode": {"id": STR, "type": STR, "data": OBJ, "inEdges": ARR, "outEdges": ARR},
    "GraphEdge": {"origin": STR, "destination": STR},
    "ColumnLineageNodeData": {"namespace": STR, "dataset": STR, "datasetVersion": STR, "field": STR, "fieldType": STR,
                              "transformationDescription": STR, "transformationType": STR, "inputFields": ARR},
    "InputFieldNodeData": {"namespace": STR, "dataset": STR, "datasetVersion": STR, "field": STR,
                           "transformationDescription": STR, "transformationType": STR},
}


def _conforms(shape: dict, name: str) -> None:
    spec = MARQUEZ_PROPERTIES[name]
    assert set(shape) == set(spec), name
    wrong = {key: value for key, value in shape.items() if value is not None and not isinstance(value, spec[key])}
    assert not wrong, (name, wrong)


RUN_ROW = {"runId": "r", "state": "COMPLETE", "startTime": "2024-05-01T10:00:00.000000Z",
           "endTime": "2024-05-01T10:01:00.000000Z", "lastEventTime": "2024-05-01T10:01:00.000000Z"}


def test_every_shape_has_exactly_marquez_properties() -> None:
    shapes = {
        "Namespace": marquez.namespace(["ns", None, None]),
        "Dataset": marquez.dataset(["ns", "d", "v", '[{"name": "a", "type": "INT"}]', "2024-05-01T00:00:00.000000Z",
                                    None, ['{"documentation": {"description": "d"}}'], []]),
        "DatasetVersion": marquez.dataset_version("ns", "d", {"version": "v", "fields": "[]", "firstSeen": None}),
        "Job": marquez.job(["ns", "j", None, None, None, None, None, [], [], [RUN_ROW], []]),
        "Run": marquez.run({**RUN_ROW, "facets": {"parent": {}}}, [{"namespace": "ns", "name": "d", "version": "v"}],
                           [{"namespace": "ns", "name": "o", "version": None}]),
        "SearchResult": marquez.search_result(["DATASET", "ns", "d", None, None]),
        "Source": marquez.source("postgres://db:5432"),
    }
    for name, shape in shapes.items():
        _conforms(shape, name)
    _conforms(shapes["Job"]["latestRun"], "Run")
    for version in shapes["Run"]["inputDatasetVersions"] + shapes["Run"]["outputDatasetVersions"]:
        _conforms(version, "DatasetVersionRef")
    assert shapes["Run"]["inputDatasetVersions"][0]["datasetVersionId"] == {"namespace": "ns", "name": "d",
                                                                           "version": "v"}
    assert shapes["Source"]["type"] == "POSTGRES"
    table = Graph(nodes={"d": NodeId("dataset", "ns", "d"), "j": NodeId("job", "ns", "j")}, edges={("d", "j"): ""})
    for node in marquez.lineage_graph(table, {"j": RUN_ROW})["graph"]:
        _conforms(node, "GraphNode")
        for edge in node["inEdges"] + node["outEdges"]:
            _conforms(edge, "GraphEdge")
    columns = Graph(nodes={"o": NodeId("datasetField", "ns", "d", "a"), "i": NodeId("datasetField", "ns", "s", "b")},
                    edges={("o", "i"): "DIRECT/IDENTITY"})
    for node in marquez.column_lineage_graph(columns, {})["graph"]:
        _conforms(node["data"], "ColumnLineageNodeData")
        for field in node["data"]["inputFields"]:
            _conforms(field, "InputFieldNodeData")


def test_job_versions_are_the_distinct_inputs_and_outputs_of_its_runs() -> None:
    def item(run_id: str, start: str, inputs: list[list[str]], outputs: list[list[str]]) -> dict:
        return {"run": {"runId": run_id, "state": "COMPLETE", "startTime": start}, "inputs": inputs,
                "outputs": outputs}

    runs = [item("r3", "2024-05-03T00:00:00.000000Z", [["pg", "a"], ["pg", "b"]], [["pg", "out"]]),  # newest first
            item("r2", "2024-05-02T00:00:00.000000Z", [["pg", "a"]], [["pg", "out"]]),
            item("r1", "2024-05-01T00:00:00.000000Z", [["pg", "a"]], [["pg", "out"]]),
            {**item("r0", "2024-04-30T00:00:00.000000Z", [["pg", "a"]], []), "run": {"runId": "r0", "state": "FAIL"}}]
    versions = marquez.job_versions("etl", "load", runs)
    assert [(v["createdAt"][:10], v["latestRun"]["id"], len(v["inputs"])) for v in versions] == [
        ("2024-05-03", "r3", 2), ("2024-05-01", "r2", 1)]  # b joined: a new version; the first since r1
    again = marquez.job_versions("etl", "load", runs[1:])
    assert again[0]["version"] == versions[1]["version"]  # the same inputs and outputs, the same id
    assert versions[0]["id"] == {"namespace": "etl", "name": "load", "version": versions[0]["version"]}
    assert set(versions[0]) == {"id", "name", "createdAt", "version", "namespace", "location", "inputs", "outputs",
                                "latestRun"}
