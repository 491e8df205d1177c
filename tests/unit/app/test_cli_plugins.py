"""The development tools' commands reach `lineage` through the ``kafka_lineage.commands`` entry point, and their
failures are the CLI's one-line errors, whichever way the CLI is started."""

import subprocess
import sys

import pytest

from kafka_lineage.app.cli import build_parser


def test_the_dev_tools_commands_are_added_by_their_entry_point() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"stack", "demo", "bench", "workload", "faults"} <= set(commands)
    assert {"collector", "processor", "sink", "alerts", "impact", "replay", "status"} <= set(commands)


@pytest.mark.parametrize("entry", [["-m", "kafka_lineage.app.cli"], ["-c", "from kafka_lineage.app.cli import main; "
                                                                           "raise SystemExit(main())"]])
def test_a_dev_tool_failure_is_one_line_not_a_traceback(entry: list[str]) -> None:
    done = subprocess.run([sys.executable, *entry, "stack", "logs", "no-such-service"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "lineage: unknown service 'no-such-service'; known: kafka, neo4j, registry, connect"]
