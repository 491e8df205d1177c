"""What a bulk rebuild's graph already holds: the raw events topic's offsets it folded, kept in the graph itself.

A rebuild (``replay.bulk``) imports one ``RebuildCoverage`` node beside the lineage: the raw topic, and per partition
the end offset it read up to. The live graph sink reads it before every write, in the write's own transaction, and
leaves out a normalized record whose source (``processing.sourceTopic/Partition/Offset``) lies below it: the import
holds that record's event already. So the sink takes over exactly where the rebuild ended, with no gap (everything
at or above the ends is written) and no event written twice; a graph without the node (never rebuilt in bulk, or
wiped since) covers nothing. The node is not lineage: the fingerprint and every query leave it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LABEL = "RebuildCoverage"
READ_QUERY = f"MATCH (c:{LABEL}) RETURN c.rebuild AS rebuild, c.topic AS topic, c.partitions AS partitions, " \
             "c.ends AS ends ORDER BY c.rebuild LIMIT 2"


@dataclass(frozen=True)
class Coverage:
    """The raw records a graph holds through its rebuild: those of ``topic`` below ``ends[partition]``."""

    rebuild: str | None = None  # the rebuild's id; None: the graph has no coverage node
    topic: str | None = None
    ends: Mapping[int, int] = field(default_factory=dict)

    def covers(self, processing: Mapping[str, Any]) -> bool:
        """Whether a normalized record's source (its ``processing`` block) is in the graph already."""
        partition, offset = processing.get("sourcePartition"), processing.get("sourceOffset")
        if self.topic is None or processing.get("sourceTopic") != self.topic or partition is None or offset is None:
            return False
        end = self.ends.get(partition)
        return end is not None and offset < end

    def node(self) -> dict[str, Any]:
        """The node's properties, as imported."""
        partitions = sorted(self.ends)
        return {"rebuild": self.rebuild, "topic": self.topic, "partitions": partitions,
                "ends": [self.ends[p] for p in partitions]}


NO_COVERAGE = Coverage()


def coverage_from(records: list[Mapping[str, Any]]) -> Coverage:
    """The coverage of READ_QUERY's answer; more than one node is a graph no rebuild made: refused."""
    if not records:
        return NO_COVERAGE
    if len(records) > 1:
        raise ValueError(f"the graph holds {len(records)} {LABEL} nodes; a rebuild imports exactly one")
    record = records[0]
    return Coverage(str(record["rebuild"]), record["topic"],
                    dict(zip(record["partitions"] or [], record["ends"] or [], strict=True)))


class CoverageChanged(Exception):
    """The graph's coverage is not the one a batch was filtered with (a rebuild replaced the graph since)."""

    def __init__(self, coverage: Coverage) -> None:
        super().__init__(f"the graph's rebuild coverage is now {coverage.rebuild}")
        self.coverage = coverage
