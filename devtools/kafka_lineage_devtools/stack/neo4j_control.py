"""``<neo4j home>/bin/neo4j start|stop|status`` for the local stack's Neo4j (the script ``Neo4j.write_scripts``
writes, with the stack's settings exported): start waits until Bolt answers, stop until the process is gone."""

from __future__ import annotations

import sys

from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack, StackError


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("start", "stop", "status"):
        print("usage: neo4j start|stop|status", file=sys.stderr)
        return 2
    stack = Stack(StackSettings.from_env(), report=lambda line: print(line, file=sys.stderr))
    try:
        if argv[0] == "start":
            stack.up(["neo4j"])
        elif argv[0] == "stop":
            stack.down(["neo4j"])
        else:
            row = next(row for row in stack.status() if row.name == "neo4j")
            print(row.state)
            return 0 if row.healthy else 3
    except StackError as exc:
        print(f"neo4j {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
