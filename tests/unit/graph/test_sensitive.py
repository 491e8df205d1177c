"""Which tags are sensitive and which hops carry them (``graph/sensitive.py``)."""

from __future__ import annotations

import json

from kafka_lineage.graph.column_walk import Hop
from kafka_lineage.graph.sensitive import carries, cleared_for, facet_tags, tag_names


def hop(transformation: str) -> Hop:
    return Hop("ns", "t", "c", transformation, ())


def test_a_tag_answers_to_its_key_value_and_both() -> None:
    assert tag_names({"key": "classification", "value": "PII", "field": "email"}) == {
        "classification", "pii", "classification:pii"}
    assert tag_names({"key": "pii", "value": ""}) == {"pii"}
    assert tag_names({"value": "pii"}) == set() and tag_names("pii") == set()


def test_which_hops_carry_values() -> None:
    assert carries(hop("")) and carries(hop("DIRECT/IDENTITY")) and carries(hop("DIRECT/TRANSFORMATION"))
    assert not carries(hop("DIRECT/HASH(masked)")) and not carries(hop("INDIRECT/FILTER"))
    assert carries(hop("INDIRECT/JOIN,DIRECT/IDENTITY"))  # one of its inputs' transformations carries values
    assert carries(hop("DIRECT/AGGREGATION")) and not carries(hop("DIRECT/AGGREGATION"), stop_at_aggregation=True)
    assert carries(hop("DIRECT/AGGREGATION,DIRECT/IDENTITY"), stop_at_aggregation=True)


def test_clearance_and_stored_facets() -> None:
    stored = json.dumps({"tags": {"_producer": "p", "tags": [{"key": "pii-cleared", "value": "yes"},
                                                             {"key": "cleared", "value": "phi", "field": "x"}]}})
    tags = facet_tags(stored)
    assert len(tags) == 2 and cleared_for(tags, "pii") and not cleared_for(tags, "phi")  # a column's does not clear
    assert facet_tags(None) == [] and facet_tags("{") == [] and facet_tags('{"tags": {"tags": "x"}}') == []
