"""A rebuild's coverage: which normalized records the live graph sink leaves out, and how the sink filters a batch."""

from __future__ import annotations

import pytest

from kafka_lineage.graph.coverage import NO_COVERAGE, Coverage, coverage_from
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.sinks.graph.sink import _Prepared

COVERAGE = Coverage("r1", "lineage.events", {0: 10, 2: 0})


def source(topic: str | None, partition: int | None, offset: int | None) -> dict:
    return {"sourceTopic": topic, "sourcePartition": partition, "sourceOffset": offset}


@pytest.mark.parametrize("processing, covered", [
    (source("lineage.events", 0, 9), True),  # below the end: the import holds it
    (source("lineage.events", 0, 10), False),  # the end itself: the first record after the rebuild
    (source("lineage.events", 2, 0), False),  # a partition the rebuild found empty
    (source("lineage.events", 1, 3), False),  # a partition it did not know (added since)
    (source("other.events", 0, 3), False),  # another raw topic
    (source(None, 0, 3), False),  # a source the processor did not name
    (source("lineage.events", None, 3), False),
    (source("lineage.events", 0, None), False),
    ({}, False),
])
def test_a_record_is_covered_only_below_its_partitions_end(processing: dict, covered: bool) -> None:
    assert COVERAGE.covers(processing) is covered
    assert NO_COVERAGE.covers(processing) is False


def test_the_node_reads_back_as_the_coverage_it_was_made_of() -> None:
    assert coverage_from([COVERAGE.node()]) == COVERAGE
    assert COVERAGE.node()["partitions"] == [0, 2] and COVERAGE.node()["ends"] == [10, 0]
    assert coverage_from([]) == NO_COVERAGE
    with pytest.raises(ValueError, match="2 RebuildCoverage nodes"):
        coverage_from([COVERAGE.node(), COVERAGE.node()])


def _event(run: str) -> dict:
    return {"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z", "run": {"runId": run},
            "job": {"namespace": "ns", "name": f"job-{run}"}, "inputs": [], "outputs": []}


def test_a_batch_is_filtered_again_with_a_new_coverage() -> None:
    records = [(f"message-{offset}", _event(f"00000000-0000-0000-0000-{offset:012d}"),
                {**source("lineage.events", 0, offset), "producedAt": None}) for offset in (8, 9, 10, 11)]
    prepared = _Prepared([], {}, records)  # type: ignore[arg-type]
    prepared.filter(NO_COVERAGE, KnownRows())
    assert [message for message, _ in prepared.decoded] == ["message-8", "message-9", "message-10", "message-11"]
    assert prepared.covered == 0 and prepared.work

    prepared.filter(COVERAGE, KnownRows())
    assert [message for message, _ in prepared.decoded] == ["message-10", "message-11"]
    assert prepared.covered == 2 and prepared.coverage is COVERAGE
    written_runs = {row["runId"] for _, parameters in prepared.work for row in parameters.get("rows", ())
                    if "runId" in row}
    assert written_runs == {"00000000-0000-0000-0000-000000000010", "00000000-0000-0000-0000-000000000011"}

    # everything held: nothing to write but the check
    prepared.filter(Coverage("r2", "lineage.events", {0: 100}), KnownRows())
    assert prepared.decoded == [] and prepared.work == [] and prepared.covered == 4
