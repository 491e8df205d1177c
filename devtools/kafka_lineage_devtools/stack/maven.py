"""Fetch the stack's servers from Maven Central with the machine's own ``mvn`` (its default configuration).

Jars stay in Maven's local repository (the download cache); we only keep the resolved classpath, and for
distributions shipped as archives (Apicurio) the unpacked tree, under the cache directory.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class ResolutionError(RuntimeError):
    """Maven could not provide an artifact; the message says which and where the log is."""


@dataclass(frozen=True)
class Coordinate:
    group: str
    artifact: str
    version: str

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def render_pom(name: str, dependencies: list[Coordinate]) -> str:
    """A throwaway project whose only purpose is to let Maven resolve `dependencies` transitively."""
    deps = "\n".join(
        f"    <dependency><groupId>{d.group}</groupId><artifactId>{d.artifact}</artifactId>"
        f"<version>{d.version}</version></dependency>"
        for d in dependencies
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka-lineage.stack</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def _mvn(args: list[str], cwd: Path, log: Path, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ResolutionError("mvn not found on PATH: install Maven (apt-get install maven)")
    with log.open("w") as out:
        result = subprocess.run([mvn, "-B", "-U", *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise ResolutionError(f"Maven could not fetch {what}; see {log}")


def resolve_classpath(cache_dir: Path, name: str, dependencies: list[Coordinate]) -> str:
    """Runtime classpath of `dependencies`, resolved once per distinct dependency list and then reused.

    `-U` makes Maven retry artifacts whose earlier download failed instead of trusting its failure cache.
    """
    workdir = cache_dir / "maven" / name
    workdir.mkdir(parents=True, exist_ok=True)
    pom = render_pom(name, dependencies)
    pom_file, classpath_file = workdir / "pom.xml", workdir / "classpath.txt"
    if classpath_file.is_file() and pom_file.is_file() and pom_file.read_text() == pom:
        classpath = classpath_file.read_text().strip()
        if all(Path(jar).is_file() for jar in classpath.split(":")):
            return classpath
    pom_file.write_text(pom)
    _mvn(
        [
            f"{DEPENDENCY_PLUGIN}:build-classpath",
            "-Dmdep.includeScope=runtime",
            f"-Dmdep.outputFile={classpath_file}",
        ],
        workdir,
        workdir / "mvn.log",
        ", ".join(map(str, dependencies)),
    )
    return classpath_file.read_text().strip()


def unpack_archive(cache_dir: Path, coordinate: Coordinate, packaging: str, classifier: str) -> Path:
    """Unpack an archive artifact (e.g. Apicurio's ``all`` tar.gz) once; returns the unpacked directory."""
    target = cache_dir / "dist" / f"{coordinate.artifact}-{coordinate.version}-{classifier}"
    marker = target / ".unpacked"
    if marker.is_file():
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    _mvn(
        [
            f"{DEPENDENCY_PLUGIN}:unpack",
            f"-Dartifact={coordinate}:{packaging}:{classifier}",
            f"-DoutputDirectory={target}",
        ],
        target.parent,
        target.parent / f"{target.name}.mvn.log",
        f"{coordinate}:{packaging}:{classifier}",
    )
    marker.write_text(str(coordinate))
    return target
