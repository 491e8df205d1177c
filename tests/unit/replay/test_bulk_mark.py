"""A bulk rebuild's mark (replay/bulk/mark.py): a killed rebuild can be started again."""

from __future__ import annotations

import os

import pytest

from kafka_lineage.replay.bulk.mark import (
    MARK_FILE,
    RebuildMark,
    RebuildRunning,
    left_by_killed_rebuild,
    read_mark,
    remove_mark,
    write_mark,
)


def test_no_mark_means_no_rebuild_was_killed(tmp_path):
    assert left_by_killed_rebuild(tmp_path) is None


def test_a_killed_rebuilds_mark_gives_its_database_and_phase_and_its_files_are_removed(tmp_path):
    files = tmp_path / "work" / "lineage-bulk-x"
    files.mkdir(parents=True)
    (files / "nodes-Run-00000.csv").write_text("id:ID\n")
    write_mark(tmp_path / "data", RebuildMark(4242, "lineage", "stop").at("fold", str(files)).at("import"))
    found = left_by_killed_rebuild(tmp_path / "data", alive=lambda pid: False)
    assert found == RebuildMark(4242, "lineage", "import", str(files))
    assert not files.exists()


def test_a_running_rebuild_is_not_disturbed(tmp_path):
    write_mark(tmp_path, RebuildMark(4242, "neo4j", "fold", str(tmp_path / "files")))
    (tmp_path / "files").mkdir()
    with pytest.raises(RebuildRunning, match=r"a rebuild \(pid 4242\) is running on this store, now in its fold"):
        left_by_killed_rebuild(tmp_path, alive=lambda pid: pid == 4242)
    assert (tmp_path / "files").exists()


def test_this_process_own_mark_is_not_another_rebuild(tmp_path):
    write_mark(tmp_path, RebuildMark(os.getpid(), "neo4j", "start"))
    assert left_by_killed_rebuild(tmp_path, alive=lambda pid: True) == RebuildMark(os.getpid(), "neo4j", "start")


def test_a_mark_is_written_whole_and_removed(tmp_path):
    write_mark(tmp_path, RebuildMark(1, "neo4j", "stop"))
    assert [path.name for path in tmp_path.iterdir()] == [MARK_FILE]  # no partial file left
    assert read_mark(tmp_path) == RebuildMark(1, "neo4j", "stop")
    remove_mark(tmp_path)
    remove_mark(tmp_path)  # twice: nothing to remove is fine
    assert read_mark(tmp_path) is None


def test_a_torn_mark_is_no_mark(tmp_path):
    (tmp_path / MARK_FILE).write_text('{"pid": 12, "datab')
    assert read_mark(tmp_path) is None
