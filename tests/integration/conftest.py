"""One real local stack per test session, started from a clean state directory by the project's own code.

The state dir is `.lineage/test-stack` in the repository (override: LINEAGE_TEST_STATE_DIR); downloads stay in
the shared caches (Maven's local repository, LINEAGE_CACHE_DIR), so only the first run on a machine is slow.
Set LINEAGE_TEST_KEEP_STACK=1 to leave the stack running after the session for inspection.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_lineage.config import ClientSettings, StackSettings
from kafka_lineage.stack.manager import Stack

REPO = Path(__file__).resolve().parents[2]


def lineage(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real `lineage` CLI in a subprocess, as a user would."""
    result = subprocess.run(
        [sys.executable, "-m", "kafka_lineage.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"lineage {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def stack_settings() -> Iterator[StackSettings]:
    state_dir = Path(os.environ.get("LINEAGE_TEST_STATE_DIR", REPO / ".lineage" / "test-stack")).resolve()
    previous = os.environ.get("LINEAGE_STATE_DIR")
    os.environ["LINEAGE_STATE_DIR"] = str(state_dir)  # the CLI subprocesses and ClientSettings see it too
    settings = StackSettings.from_env()
    stack = Stack(settings)
    stack.down()
    shutil.rmtree(state_dir, ignore_errors=True)
    started = time.monotonic()
    stack.up()
    print(f"\nstack up from a clean state dir in {time.monotonic() - started:.1f}s", file=sys.stderr)
    yield settings
    if not os.environ.get("LINEAGE_TEST_KEEP_STACK"):
        stack.down()
    if previous is None:
        os.environ.pop("LINEAGE_STATE_DIR", None)
    else:
        os.environ["LINEAGE_STATE_DIR"] = previous


@pytest.fixture(scope="session")
def clients(stack_settings: StackSettings) -> ClientSettings:
    return ClientSettings.from_env()
