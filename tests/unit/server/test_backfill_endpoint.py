"""The lineage server's backfill-plan endpoint over a stand-in store: the plan, 400/404, the depth cap, OpenAPI."""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from fastapi.testclient import TestClient

from kafka_lineage.graph.backfill import BackfillFacts, RunFacts, parse_day, plan
from kafka_lineage.graph.store import NotFound
from kafka_lineage.server.api import create_app
from kafka_lineage.server.settings import ServerSettings

NS, NAME = "s3://lake", "raw/events"


class Store:
    driver = None
    asked: ClassVar[list[int]] = []

    def backfill_plan(self, namespace: str, name: str, start: str, end: str, depth: int) -> dict[str, Any]:
        if (namespace, name) != (NS, NAME):
            raise NotFound(f"dataset {namespace} {name} is not in the graph")
        self.asked.append(depth)
        run = RunFacts("r1", ("air", "clean"), "COMPLETE", "2025-12-01T01:00:00Z", None, None,
                       ((NS, NAME, "date=2025-12-01"),), ((NS, "clean", "date=2025-12-01"),))
        facts = BackfillFacts((NS, NAME), ("date=2025-12-01",), {("air", "clean"): 1},
                              {("air", "clean"): ((NS, NAME),)}, {("air", "clean"): ((NS, "clean"),)}, (run,))
        return plan(facts, parse_day(start, "from"), parse_day(end, "to"), depth)


def test_plan_status_codes_and_depth_cap() -> None:
    client = TestClient(create_app(Store(), ServerSettings()))  # type: ignore[arg-type]
    url = f"/api/v2/datasets/{quote(NS, safe='')}/{quote(NAME, safe='')}/backfill-plan"
    answer = client.get(url, params={"from": "2025-12-01", "to": "2025-12-07"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["stages"][0]["items"][0]["rebuild"] == [{"namespace": NS, "name": "clean", "key": "date=2025-12-01"}]
    assert body["depth"] == 10 and not body["truncated"]
    assert client.get(url, params={"from": "2025-12-01", "to": "soon"}).status_code == 400
    assert client.get(url, params={"from": "2025-12-07", "to": "2025-12-01"}).status_code == 400
    assert client.get(url, params={"from": "2025-12-01"}).status_code == 400  # to is required
    assert client.get(url.replace("raw%2Fevents", "nope"), params={"from": "2025-12-01", "to": "2025-12-01"}
                      ).status_code == 404
    capped = client.get(url, params={"from": "2025-12-01", "to": "2025-12-01", "depth": 10_000}).json()
    assert capped["truncated"] and Store.asked[-1] == capped["depth"] < 10_000
    operation = client.get("/openapi.json").json()["paths"]["/api/v2/datasets/{namespace}/{dataset}/backfill-plan"]
    assert operation["get"]["description"] and {p["name"] for p in operation["get"]["parameters"]} >= {"from", "to"}
