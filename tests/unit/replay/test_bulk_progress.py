"""The bulk rebuild's progress, phase by phase (replay/bulk/progress.py)."""

from __future__ import annotations

import io

from kafka_lineage.replay.bulk.progress import PhaseProgress, progress_line


def test_a_phase_of_known_size_shows_its_bar_rate_and_eta():
    line = progress_line("fold", 250_000, 1_000_000, 25.0, width=10)
    assert line == "fold [##........] 250,000/1,000,000 records  10,000/s  ETA 1m15s"
    assert progress_line("fold", 0, 1000, 3.0, width=4).endswith("0/s  ETA ?")
    assert progress_line("fold", 2000, 1000, 1.0, width=4).startswith("fold [####] 1,000/1,000")


def test_a_phase_of_unknown_size_shows_its_elapsed_time():
    assert progress_line("import", 0, None, 75.4) == "import ... 1m15s"
    assert progress_line("start", 0, None, 4.6) == "start ... 5s"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_phases_end_with_their_seconds_and_the_next_begins():
    out, clock = io.StringIO(), _Clock()
    phases = PhaseProgress(out=out, clock=clock, tick=3600)
    phases.begin("read", 1000)
    clock.now += 2.0
    phases.update(500)
    assert out.getvalue().endswith("read [###############...............] 500/1,000 records  250/s  ETA 2s")
    clock.now += 2.0
    phases.begin("import")  # ends "read"
    clock.now += 10.0
    assert phases.end() == 10.0
    assert phases.end() is None  # nothing running
    lines = [line.split("\r\033[K")[-1] for line in out.getvalue().split("\n") if line]
    assert lines == ["read: 4.0s (1,000 records, 250/s)", "import: 10.0s"]
    assert phases.seconds == {"read": 4.0, "import": 10.0}
