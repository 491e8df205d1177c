"""Tags recorded as events (``schemas/tags.py``)."""

from __future__ import annotations

import pytest

from kafka_lineage.schemas.openlineage import validate_event
from kafka_lineage.schemas.tags import MAX_TAGS, TAGS_FACET, BadTag, checked_tag, merged, tags_event


def test_tags_are_checked_and_merged_by_key_and_field() -> None:
    pii = checked_tag({"key": " pii ", "field": "email"})
    assert pii == {"key": "pii", "value": "true", "source": "USER", "field": "email"}
    owner = checked_tag({"key": "owner", "value": "crm", "source": "DBT CORE"})
    again = checked_tag({"key": "pii", "value": "direct", "field": "email"})
    assert merged([pii, owner], [again]) == [owner, again]
    assert merged([pii, owner], removed=[("pii", "email"), ("nope", None)]) == [owner]
    for bad in ({"value": "x"}, {"key": ""}, {"key": "k", "value": 3}, {"key": "k", "field": ""}, "pii"):
        with pytest.raises(BadTag):
            checked_tag(bad)
    with pytest.raises(BadTag, match=str(MAX_TAGS)):
        merged([], [checked_tag({"key": f"k{i}"}) for i in range(MAX_TAGS + 1)])


def test_the_event_is_a_valid_dataset_event() -> None:
    event = tags_event("postgres://db:5432", "shop.orders", [checked_tag({"key": "pii", "field": "email"})],
                       "2026-12-05T10:00:00.000Z")
    assert validate_event(event) == "DatasetEvent"
    assert event["dataset"]["facets"][TAGS_FACET]["tags"][0]["field"] == "email"
    with pytest.raises(BadTag):
        tags_event("", "x", [], "2026-12-05T10:00:00Z")
