"""`lineage backfill plan`: arguments, exit codes, table and JSON, and --mark-stale's events, with the graph and
Kafka replaced (the real ones in tests/integration/sinks/test_backfill.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j.exceptions import ServiceUnavailable

from kafka_lineage.app import cli
from kafka_lineage.graph import backfill, driver, queries
from kafka_lineage.graph.backfill import BackfillFacts, RunFacts
from kafka_lineage.graph.partitions import UnknownDataset
from kafka_lineage.schemas.openlineage import validate_event

NS = "s3://lake"


@contextlib.contextmanager
def _driver(*_args: Any, **_kwargs: Any) -> Iterator[object]:
    yield object()


def _facts(keys: tuple[str, ...] = ("date=2025-12-01", "date=2025-12-02")) -> BackfillFacts:
    runs = [RunFacts(f"r{d}", ("air", "clean"), "COMPLETE", f"2025-12-0{d}T01:00:00Z", None, None,
                     ((NS, "raw", f"date=2025-12-0{d}"),), ((NS, "clean", f"date=2025-12-0{d}"),)) for d in (1, 2)]
    return BackfillFacts((NS, "raw"), keys, {("air", "clean"): 1, ("air", "blind"): 2},
                         {("air", "clean"): ((NS, "raw"),), ("air", "blind"): ((NS, "clean"),)},
                         {("air", "clean"): ((NS, "clean"),), ("air", "blind"): ((NS, "report"),)}, tuple(runs))


@pytest.fixture(autouse=True)
def no_neo4j(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "driver_for", _driver)
    monkeypatch.setattr(queries, "closest_datasets", lambda *_a, **_k: [(NS, "raw")])


def _answer(monkeypatch: pytest.MonkeyPatch, result: Any) -> None:
    def fetch(_driver: object, namespace: str, name: str, depth: int) -> Any:
        if isinstance(result, BaseException):
            raise result
        return result

    monkeypatch.setattr(backfill, "fetch_facts", fetch)


def test_plan_table_json_and_exit_codes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _answer(monkeypatch, _facts())
    args = ["backfill", "plan", NS, "raw", "--from", "2025-12-01", "--to", "2025-12-01"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "stage 0 (1 in parallel)" in out and "air clean  date=2025-12-01  → clean date=2025-12-01" in out
    assert "partitions: unknown, by window" in out and "dry run" in out
    assert cli.main([*args, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [[i["job"]["name"] for i in s["items"]] for s in body["stages"]] == [["clean"], ["blind"]]
    assert body["window"] == {"from": "2025-12-01", "to": "2025-12-01"} and body["planId"].startswith("bf-")
    assert cli.main([*args[:-1], "December"]) == 2 and "--to" in capsys.readouterr().err
    _answer(monkeypatch, _facts(("region=eu",)))
    assert cli.main(args) == 2 and "no partition key is a date" in capsys.readouterr().err
    _answer(monkeypatch, UnknownDataset("no"))
    assert cli.main(args) == 2 and "closest existing: s3://lake raw" in capsys.readouterr().err
    _answer(monkeypatch, ServiceUnavailable("no Neo4j"))
    assert cli.main(args) == 3


def test_mark_stale_publishes_one_valid_event_per_known_partition(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _answer(monkeypatch, _facts())
    sent: list[Any] = []

    class Publisher:
        topic = "openlineage.events"

        @classmethod
        def from_settings(cls, *_a: Any, **_k: Any) -> Publisher:
            return cls()

        def encode(self, event: dict) -> dict:
            validate_event(event)
            sent.append(event)
            return event

        def send(self, records: list) -> Any:
            class Done:
                def result(self) -> int:
                    return len(records)
            return Done()

        def close(self) -> None:
            pass

    monkeypatch.setattr(cli, "EventPublisher", Publisher)
    args = ["backfill", "plan", NS, "raw", "--from", "2025-12-01", "--to", "2025-12-02", "--mark-stale", "--json"]
    assert cli.main(args) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["markStale"]["published"] == 2 and body["markStale"]["skipped"] == 2  # blind's outputs: by window
    facet = sent[0]["dataset"]["facets"]["kafkaLineage_partition"]
    assert (sent[0]["dataset"]["name"], facet["keys"]) == ("clean", [{"name": "date", "value": "2025-12-01"}])
    assert facet["stale"]["upstream"] == {"namespace": NS, "name": "raw", "planId": body["planId"]}
    assert facet["stale"]["requestedAt"] == sent[0]["eventTime"] == body["markStale"]["requestedAt"]
