"""`lineage ready` / `lineage partitions` / `lineage run`: arguments, exit codes and output, with the graph questions
replaced (the real ones run against Neo4j in tests/integration/sinks/test_partitions.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j.exceptions import ServiceUnavailable

from kafka_lineage.app import cli
from kafka_lineage.graph import driver, partitions, queries
from kafka_lineage.graph.partitions import PartitionFacts, RunPartitions, UnknownDataset, Version


@contextlib.contextmanager
def _driver(*_args: Any, **_kwargs: Any) -> Iterator[object]:
    yield object()


@pytest.fixture(autouse=True)
def no_neo4j(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "driver_for", _driver)
    monkeypatch.setattr(queries, "closest_datasets", lambda *_a, **_k: [("s3://lake", "events")])


def _answer(monkeypatch: pytest.MonkeyPatch, result: Any) -> None:
    def ready(_driver: object, namespace: str, name: str, key: str) -> Any:
        if isinstance(result, BaseException):
            raise result
        partitions.parse_key(key)
        return result

    monkeypatch.setattr(partitions, "ready", ready)


def test_ready_exit_codes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _answer(monkeypatch, (True, [], []))
    assert cli.main(["ready", "s3://lake", "events", "--key", "date=2025-12-24", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ready": True, "missing": []}
    missing = [{"role": "upstream", "namespace": "s3://lake", "name": "raw", "key": "date=2025-12-24",
                "state": "FAILED", "reason": "assertion failed: not_null(id)"}]
    _answer(monkeypatch, (False, missing, []))
    assert cli.main(["ready", "s3://lake", "events", "--key", "date=2025-12-24"]) == 1
    out = capsys.readouterr().out
    assert "not ready" in out and "upstream  s3://lake raw date=2025-12-24: FAILED — assertion failed" in out
    assert cli.main(["ready", "s3://lake", "events", "--key", "2025-12-24"]) == 2  # not name=value
    assert "--key" in capsys.readouterr().err
    _answer(monkeypatch, UnknownDataset("dataset s3://lake evnts is not in the graph"))
    assert cli.main(["ready", "s3://lake", "evnts", "--key", "date=2025-12-24"]) == 2
    assert "closest existing: s3://lake events" in capsys.readouterr().err
    _answer(monkeypatch, ServiceUnavailable("no Neo4j"))
    assert cli.main(["ready", "s3://lake", "events", "--key", "date=2025-12-24"]) == 3
    with pytest.raises(SystemExit) as usage:  # --key is required: argparse's usage error
        cli.main(["ready", "s3://lake", "events"])
    assert usage.value.code == 2


def test_partitions_lists_states_and_versions(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    facts = PartitionFacts("s3://lake", "events", "date=2025-12-24", None, (), 2, (
        Version("run-1", "FAIL", "2025-12-24T01:00:00.000000Z", "2025-12-24T01:05:00.000000Z"),
        Version("run-2", "COMPLETE", "2025-12-24T02:00:00.000000Z", "2025-12-24T02:05:00.000000Z", row_count=7,
                job=("airflow", "load"))))
    asked: dict[str, Any] = {}

    def listing(_driver: object, namespace: str, name: str, key: str | None, state: str | None, limit: int) -> Any:
        asked.update(key=key, state=state, limit=limit)
        return [partitions.partition_status(facts)]

    monkeypatch.setattr(partitions, "dataset_partitions", listing)
    assert cli.main(["partitions", "s3://lake", "events", "--key", "date=2025-12-24", "--state", "SUCCESS",
                     "--runs"]) == 0
    out = capsys.readouterr().out
    assert asked == {"key": "date=2025-12-24", "state": "SUCCESS", "limit": 1000}
    assert "date=2025-12-24" in out and "SUCCESS" in out and "v2/2 run run-2 (load)  rows 7" in out
    assert "v1 FAILED   run run-1 FAIL" in out
    assert cli.main(["partitions", "s3://lake", "events", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["state"] == "SUCCESS" and listed["latest"]["version"] == 2 and "versions" not in listed
    assert cli.main(["partitions", "s3://lake", "events", "--limit", "0"]) == 2


def test_run_names_what_it_wrote_and_read(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    found = RunPartitions(True, ("airflow", "load"), "COMPLETE",
                          [{"namespace": "s3://lake", "name": "events", "key": "date=2025-12-24", "version": 1,
                            "state": "SUCCESS", "rowCount": 7}],
                          [{"namespace": "s3://lake", "name": "raw", "key": "date=2025-12-24", "state": None,
                            "reason": "no run wrote it"}])
    monkeypatch.setattr(partitions, "run_partitions", lambda _d, run_id: found if run_id == "r1" else
                        RunPartitions(False))
    assert cli.main(["run", "r1"]) == 0
    out = capsys.readouterr().out
    assert "wrote 1 partitions" in out and "events date=2025-12-24: v1 SUCCESS rows 7" in out
    assert "raw date=2025-12-24: UNKNOWN" in out
    assert cli.main(["run", "r1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["job"] == {"namespace": "airflow", "name": "load"}
    assert cli.main(["run", "nope"]) == 2
