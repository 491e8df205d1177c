"""The lineage server's partition endpoints over a stand-in store: shapes, status codes, encoded names, OpenAPI."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from kafka_lineage.graph.partitions import PartitionFacts, RunPartitions, Version, parse_key, partition_status
from kafka_lineage.graph.store import NotFound
from kafka_lineage.server.api import create_app
from kafka_lineage.server.settings import ServerSettings


class Store:
    """Answers for dataset ``s3://lake`` ``mart/orders`` only, as GraphStore would."""

    driver = None

    def _known(self, namespace: str, name: str) -> None:
        if (namespace, name) != ("s3://lake", "mart/orders"):
            raise NotFound(f"dataset {namespace} {name} is not in the graph")

    def ready(self, namespace: str, name: str, key: str) -> tuple[bool, list[dict[str, Any]]]:
        self._known(namespace, name)
        parse_key(key)
        if key == "date=2025-12-24":
            return True, []
        return False, [{"role": "partition", "namespace": namespace, "name": name, "key": key, "state": "RUNNING",
                        "reason": "run complete, marker _SUCCESS not reported"}]

    def partitions(self, namespace: str, name: str, key: str | None, state: str | None, limit: int) -> list[Any]:
        self._known(namespace, name)
        facts = PartitionFacts(namespace, name, "date=2025-12-24", None, (), 1, (
            Version("r1", "COMPLETE", "2025-12-24T01:00:00.000000Z", "2025-12-24T01:10:00.000000Z", row_count=5),))
        return [partition_status(facts)]

    def run_partitions(self, run_id: str) -> RunPartitions:
        if run_id != "r1":
            raise NotFound(f"run {run_id} is not in the graph")
        return RunPartitions(True, ("airflow", "load"), "COMPLETE", [{"key": "date=2025-12-24"}], [])


def _client() -> TestClient:
    return TestClient(create_app(Store(), ServerSettings()))  # type: ignore[arg-type]


def test_ready_answers_200_with_ready_and_missing() -> None:
    client = _client()
    base = "/api/v2/datasets/s3:%2F%2Flake/mart%2Forders/partitions/ready"  # one segment each, as Marquez's
    answer = client.get(base, params={"key": "date=2025-12-24"})
    assert answer.status_code == 200 and answer.json() == {
        "dataset": {"namespace": "s3://lake", "name": "mart/orders"}, "key": "date=2025-12-24", "ready": True,
        "missing": []}
    waiting = client.get(base, params={"key": "date=2025-12-25"}).json()
    assert waiting["ready"] is False and waiting["missing"][0]["state"] == "RUNNING"
    bad = client.get(base, params={"key": "2025-12-24"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("key: ")
    assert client.get(base).status_code == 400  # key is required
    unknown = client.get("/api/v2/datasets/s3:%2F%2Flake/nope/partitions/ready", params={"key": "date=1"})
    assert unknown.status_code == 404 and "nope" in unknown.json()["message"]


def test_partitions_and_run_partitions() -> None:
    client = _client()
    listed = client.get("/api/v2/datasets/s3:%2F%2Flake/mart%2Forders/partitions", params={"versions": "true"}).json()
    (partition,) = listed["partitions"]
    assert partition["state"] == "SUCCESS" and partition["latest"]["rowCount"] == 5
    assert [v["runId"] for v in partition["versions"]] == ["r1"]
    assert client.get("/api/v2/datasets/s3:%2F%2Flake/mart%2Forders/partitions",
                      params={"state": "DONE"}).status_code == 400
    run = client.get("/api/v2/runs/r1/partitions").json()
    assert run["job"] == {"namespace": "airflow", "name": "load"} and run["wrote"] == [{"key": "date=2025-12-24"}]
    assert client.get("/api/v2/runs/r2/partitions").status_code == 404


def test_openapi_describes_them() -> None:
    paths = _client().get("/openapi.json").json()["paths"]
    for path in ("/api/v2/datasets/{namespace}/{dataset}/partitions",
                 "/api/v2/datasets/{namespace}/{dataset}/partitions/ready", "/api/v2/runs/{run_id}/partitions"):
        assert "Partitions" in str(paths[path]["get"]["tags"]) or "Runs" in str(paths[path]["get"]["tags"])
        assert paths[path]["get"]["description"]
