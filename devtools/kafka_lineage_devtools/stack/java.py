"""Pick a JDK for each server: Kafka and Neo4j 5.26 run on 17, Apicurio Registry 3.3 needs 21 or newer.

Candidates, in order: LINEAGE_JAVA_HOME, JAVA_HOME, the `java` on PATH, then every JDK under /usr/lib/jvm.
The first whose feature version lies in the service's range wins.
"""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

from kafka_lineage.runtime.config import ConfigError

JVM_ROOT = Path("/usr/lib/jvm")


def _feature_version(home: Path) -> int | None:
    try:
        release = (home / "release").read_text()
    except OSError:
        return None
    match = re.search(r'^JAVA_VERSION="(\d+)', release, re.MULTILINE)
    return int(match.group(1)) if match else None


@functools.cache
def _candidates(preferred: tuple[str, ...]) -> list[tuple[Path, int]]:
    homes: list[Path] = [Path(p) for p in preferred if p]
    on_path = shutil.which("java")
    if on_path:
        homes.append(Path(on_path).resolve().parent.parent)
    if JVM_ROOT.is_dir():
        homes.extend(sorted(p.resolve() for p in JVM_ROOT.iterdir() if p.is_dir()))
    found: list[tuple[Path, int]] = []
    for home in dict.fromkeys(homes):  # keep order, drop repeats
        version = _feature_version(home)
        if version is not None and (home / "bin" / "java").is_file():
            found.append((home, version))
    return found


def find_java(preferred: tuple[str, ...], minimum: int, maximum: int | None = None) -> str:
    """Path of a `java` binary whose feature version is within [minimum, maximum]."""
    for home, version in _candidates(preferred):
        if version >= minimum and (maximum is None or version <= maximum):
            return str(home / "bin" / "java")
    wanted = f"{minimum}..{maximum}" if maximum else f"{minimum}+"
    seen = ", ".join(f"{home} ({version})" for home, version in _candidates(preferred)) or "none"
    raise ConfigError(f"LINEAGE_JAVA_HOME: no JDK {wanted} found (seen: {seen}); install one or point at it")
