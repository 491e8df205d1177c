"""The Spark fold's shuffle and writers without Spark: tasks' rows in chunks per shuffle partition as ``chunks``
places them, merged there (``merged_rows``), each partition written by ``write_partition``, the driver's part by
``finish_files``: the same CSV records as the single-process import's tables, whatever the number of partitions."""

from __future__ import annotations

import copy
import csv
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from kafka_lineage.graph.events import graph_batch
from kafka_lineage.replay.bulk.spark_fold import _REPORT, chunks, finish_files, merged_rows, write_partition
from kafka_lineage.replay.bulk.tables import ARRAY_DELIMITERS, import_tables, write_csv
from kafka_lineage.replay.drift import ReplayDrift
from kafka_lineage_devtools.bench_events import run_pairs
from tests.unit.replay.bulk_events import rich_events


def _records(nodes: tuple, relationships: tuple, delimiter: str) -> dict[str, Counter]:
    """Per table, its data records (the headers checked equal per table), as a multiset."""
    found: dict[str, Counter] = defaultdict(Counter)
    headers: dict[str, list[str]] = {}
    for name, path in (*nodes, *relationships):
        with Path(path).open(encoding="utf-8", newline="") as handle:
            header, *rows = list(csv.reader(handle))
        assert headers.setdefault(name, header) == header
        found[name].update(tuple(row) for row in rows)
    return dict(found)


@pytest.mark.parametrize("partitions, delimiter_in_a_list", [(1, False), (3, False), (8, False), (3, True)])
def test_the_partitions_writers_write_the_single_process_records(tmp_path: Path, partitions: int,
                                                                 delimiter_in_a_list: bool) -> None:
    events = rich_events("ns")
    if delimiter_in_a_list:  # a failed assertion's name holds the first delimiter candidate: a list value
        events = json.loads(json.dumps(events).replace('"unique"', '"uni\\u001fque"'))
    events += run_pairs(120, "realistic", seed=5, namespace="bench")
    expected = write_csv(import_tables(graph_batch(events)), tmp_path / "one")

    # three tasks' slices (a run's events and a dataset's rows in several), chunked as the tasks send them
    spread: dict[int, list] = defaultdict(list)
    for task in (events[0::3], events[1::3], events[2::3]):
        for index, chunk in chunks(graph_batch(task), partitions):
            spread[index].append((index, copy.deepcopy(chunk)))  # (unpickled on the other side: its own rows)
        spread[0].append((0, [(_REPORT, {"records": 1, "written": 1, "dead_letters": 0, "scanned": 1})]))
    directory = tmp_path / "spark"
    directory.mkdir()

    def write(delimiter: str) -> list:
        return [item for index in range(partitions) for item in
                write_partition(index, merged_rows(copy.deepcopy(spread[index])), str(directory), delimiter)]

    delimiter = ARRAY_DELIMITERS[0]
    out = write(delimiter)
    used = set().union(*(value for tag, value in out if tag == "delimiters"))
    assert (delimiter in used) is delimiter_in_a_list
    if delimiter in used:  # written again with another, as the driver does
        for path in directory.iterdir():
            path.unlink()
        delimiter = next(candidate for candidate in ARRAY_DELIMITERS if candidate not in used)
        out = write(delimiter)
    files, table_counts, counts = finish_files(out, str(directory), delimiter, ReplayDrift(10))

    assert delimiter == expected.array_delimiter and files.multiline == expected.multiline
    assert counts == {"records": 3, "written": 3, "dead_letters": 0, "scanned": 3}  # every task's, summed
    found = _records(files.nodes, files.relationships, delimiter)
    assert found == _records(expected.nodes, expected.relationships, delimiter)
    assert table_counts == {name: sum(rows.values()) for name, rows in found.items()}
    assert {"Job", "Run", "OF_JOB", "READ", "WROTE"} <= set(found)
