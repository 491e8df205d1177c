"""The web UI's pure logic (its layered graph layout, short names) through its own unit tests (vitest, under
server/ui/tests), run with the UI's Node packages (`make install` puts them in server/ui/node_modules)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

UI = Path(__file__).resolve().parents[3] / "server" / "ui"


def test_the_ui_unit_tests_pass() -> None:
    assert (UI / "node_modules" / ".bin" / "vitest").exists(), "the UI's Node packages are missing: make install"
    npm = shutil.which("npm")
    assert npm, "npm is not installed"
    done = subprocess.run([npm, "test", "--silent"], cwd=UI, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " passed" in done.stdout, done.stdout[-2000:]
