"""How a lineage answer is read and written: the node data a walk brings, split by kind; the walk's level query
text; graph answers written by orjson with the same bytes as Starlette's JSON, falling back where orjson refuses."""

from __future__ import annotations

import pytest
from starlette.responses import JSONResponse

from kafka_lineage.graph import store
from kafka_lineage.graph.node_ids import NodeId
from kafka_lineage.server import marquez
from kafka_lineage.server.http import GraphJSON


def test_node_data_splits_into_latest_runs_schemas_and_written_datasets() -> None:
    graph = store.Graph(nodes={"j1": NodeId("job", "etl", "clean"), "j2": NodeId("job", "etl", "never-ran"),
                               "d1": NodeId("dataset", "pg", "raw"), "d2": NodeId("dataset", "pg", "no-schema")},
                        data={"j1": {"runId": "r1"}, "j2": None, "d1": ['[{"name": "id"}]', True],
                              "d2": [None, False]},
                        edges={("j2", "d2"): ""})
    assert graph.latest_runs() == {"j1": {"runId": "r1"}}
    assert graph.schemas() == {"d1": '[{"name": "id"}]'}
    assert graph.written() == {"d1"}
    nodes = {n["id"]: n["data"] for n in marquez.lineage_graph(graph, {}, {}, graph.written())["graph"]}
    assert nodes["dataset:pg:no-schema"]["declaredOnly"] is True  # written by a job, never by a completed run
    assert "declaredOnly" not in nodes["dataset:pg:raw"]  # a source no job writes says nothing


def test_levels_are_unrolled_and_bounded() -> None:
    levels = store._TABLE_LEVEL[False]
    assert levels.count == store.LEVELS_PER_QUERY and levels.data
    assert levels.query.count("CALL (seen, frontier)") == store.LEVELS_PER_QUERY
    assert levels.query.count("LIMIT $cap") == store.LEVELS_PER_QUERY  # no level reads more than fits
    assert "$asOf" in store._TABLE_LEVEL[True].query
    assert store._ALIASES[False].count == store.MAX_ALIAS_LINKS
    assert not store._FIELD_LEVEL["up"].data


@pytest.mark.parametrize("body", [
    {"graph": [{"id": "dataset:s3://lake:raw/orders", "data": {"fields": [{"name": "é\u2028\x1f\x7f/\"\\"}]},
                "inEdges": [], "n": [1, None, True, -5, 2**63 - 1]}]},
    {"graph": []},
])
def test_graph_answers_are_starlettes_bytes(body: dict) -> None:
    assert GraphJSON(body).body == JSONResponse(body).body


def test_what_orjson_refuses_is_written_as_before() -> None:
    big = {"rows": 2**70}
    assert GraphJSON(big).body == JSONResponse(big).body
    with pytest.raises(UnicodeEncodeError):  # as Starlette fails on a lone surrogate
        GraphJSON({"name": "\ud800"})
