"""``lineage bench peer``: Marquez (on its own PostgreSQL) measured beside our pipeline, fed the same events.

Figures (one run, both systems, phases interleaved; the machine is shared so the ratios are what to read):
ingest events/s with one event per request from 8 concurrent clients, batched ingest (ours only: Marquez's API
takes one event per request), time until the graph is queryable, lineage p50/p99 at depth 10 through the same
``GET /api/v1/lineage`` on both servers, and resident memory of each system's processes.

Setting Marquez up (``make peer-deps`` or ``python -m kafka_lineage_devtools.bench_peer setup``): Debian's
PostgreSQL, and Marquez's API server with its dependencies as jars under ``PEER_DIR``. Its published artifact is
asked for first (``mvn dependency:copy-dependencies`` of ``io.github.marquezproject:marquez-api``); when Maven
Central has none, Marquez's source release (``--source``: a checkout, or a git directory holding the release tag)
is compiled with Maven against the same dependencies as its Gradle build lists, because Marquez's own Gradle
wrapper needs a Gradle distribution and the Gradle plugin portal, which this project's machines cannot reach.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from kafka_lineage_devtools import bench_events
from kafka_lineage_devtools.cpu_budget import resident_mib

MARQUEZ_VERSION = "0.51.1"
MARQUEZ_GROUP = "io.github.marquezproject"
PEER_DIR = Path(os.environ.get("LINEAGE_PEER_DIR", Path.home() / ".cache" / "kafka-lineage" / "peer"))
PG_PORT = int(os.environ.get("LINEAGE_PEER_PG_PORT", "15432"))
MARQUEZ_PORT = int(os.environ.get("LINEAGE_PEER_MARQUEZ_PORT", "15000"))
MARQUEZ_ADMIN_PORT = int(os.environ.get("LINEAGE_PEER_MARQUEZ_ADMIN_PORT", "15001"))
CLIENTS = 8
DEPTH = 10
# Our server cuts a lineage answer at 2,000 nodes by default (Marquez never does): lifted so both answer in full.
UNCAPPED = 1_000_000


class PeerSetupError(RuntimeError):
    """Marquez or PostgreSQL cannot be set up here; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------------------------
# Setting Marquez up

# Marquez 0.51.1's runtime dependencies as its Gradle build (api + clients/java) declares them; Maven resolves
# their transitive dependencies the way Gradle's ``implementation`` configuration does at run time.
_DROPWIZARD, _JDBI, _PROMETHEUS = "2.1.12", "3.40.0", "0.16.0"
MARQUEZ_DEPENDENCIES: tuple[str, ...] = (
    *(f"io.dropwizard:dropwizard-{m}:{_DROPWIZARD}" for m in ("core", "jdbi3", "json-logging", "http2", "assets",
                                                              "jackson")),
    *(f"io.prometheus:simpleclient{m}:{_PROMETHEUS}" for m in ("", "_dropwizard", "_hotspot", "_servlet")),
    "io.openlineage:openlineage-java:1.23.0",
    *(f"org.jdbi:jdbi3-{m}:{_JDBI}" for m in ("core", "jackson2", "postgres", "sqlobject")),
    "com.google.guava:guava:32.1.3-jre", "org.dhatim:dropwizard-sentry:2.1.6", "io.sentry:sentry:6.34.0",
    "org.flywaydb:flyway-core:8.5.13", "org.postgresql:postgresql:42.7.4", "com.graphql-java:graphql-java:20.9",
    "com.graphql-java-kickstart:graphql-java-servlet:12.0.0", "org.opensearch.client:opensearch-rest-client:2.19.1",
    "org.opensearch.client:opensearch-java:2.22.0", "org.slf4j:slf4j-api:1.7.36",
    "org.apache.commons:commons-lang3:3.17.0", "org.apache.httpcomponents:httpclient:4.5.14",
)
LOMBOK = "1.18.34"


def _dependency_xml(coordinates: str, scope: str = "") -> str:
    group, artifact, version = coordinates.split(":")
    scoped = f"<scope>{scope}</scope>" if scope else ""
    return (f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{scoped}</dependency>")


def pom_xml(dependencies: Sequence[str], *, compile_sources: bool) -> str:
    """A throwaway Maven project: with ``compile_sources`` it compiles Marquez's sources (Java 17, Lombok), and
    either way ``dependency:copy-dependencies`` puts every runtime jar in ``target/lib``."""
    deps = "".join(_dependency_xml(d) for d in dependencies)
    build = ""
    if compile_sources:
        deps += _dependency_xml(f"org.projectlombok:lombok:{LOMBOK}", "provided")
        build = ("<build><plugins><plugin><groupId>org.apache.maven.plugins</groupId>"
                 "<artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version><configuration>"
                 "<release>17</release><encoding>UTF-8</encoding><parameters>true</parameters>"
                 "<annotationProcessorPaths><path><groupId>org.projectlombok</groupId><artifactId>lombok</artifactId>"
                 f"<version>{LOMBOK}</version></path></annotationProcessorPaths></configuration></plugin>"
                 "</plugins></build>")
    return ('<?xml version="1.0" encoding="UTF-8"?><project xmlns="http://maven.apache.org/POM/4.0.0">'
            "<modelVersion>4.0.0</modelVersion><groupId>kafka-lineage.peer</groupId><artifactId>marquez-peer"
            "</artifactId><version>1</version><packaging>jar</packaging><properties>"
            "<project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>"
            f"<dependencies>{deps}</dependencies>{build}</project>\n")


def _mvn(project: Path, *goals: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("mvn") is None:
        raise PeerSetupError("Maven (mvn) is not installed: apt-get install -y maven")
    return subprocess.run(["mvn", "-B", "-q", "-f", str(project / "pom.xml"), *goals], capture_output=True,
                          text=True, check=False)


def _copy_dependencies(project: Path, lib: Path) -> subprocess.CompletedProcess[str]:
    return _mvn(project, "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
                "-DincludeScope=runtime", f"-DoutputDirectory={lib}")


def _source_tree(source: Path, into: Path) -> Path:
    """Marquez's release sources as a directory: ``source`` itself, or the release tag exported from a git dir."""
    if (source / "api" / "src").is_dir():
        return source
    tag = subprocess.run(["git", "--git-dir", str(source), "rev-parse", "--verify", f"{MARQUEZ_VERSION}^{{commit}}"],
                         capture_output=True, text=True, check=False)
    if tag.returncode != 0:
        raise PeerSetupError(f"{source} is neither a Marquez checkout nor a git directory with tag {MARQUEZ_VERSION}")
    archive = subprocess.run(["git", "--git-dir", str(source), "archive", MARQUEZ_VERSION, "api", "clients/java",
                              "lombok.config"], capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def build_from_source(source: Path, target: Path) -> None:
    """Compile Marquez's api and Java client modules into ``target/classes`` and their jars into ``target/lib``."""
    with tempfile.TemporaryDirectory(prefix="marquez-src-") as scratch:
        tree = _source_tree(source, Path(scratch) / "tree")
        project = Path(scratch) / "build"
        main = project / "src" / "main"
        for module in (tree / "api", tree / "clients" / "java"):
            for kind in ("java", "resources"):
                if (module / "src" / "main" / kind).is_dir():
                    shutil.copytree(module / "src" / "main" / kind, main / kind, dirs_exist_ok=True)
        if (tree / "lombok.config").is_file():  # Lombok finds it above the sources; it changes generated code
            shutil.copy(tree / "lombok.config", project / "lombok.config")
        properties = main / "resources" / "config.properties"
        if properties.is_file():  # Gradle's processResources token
            properties.write_text(properties.read_text().replace("@version@", MARQUEZ_VERSION))
        (project / "pom.xml").write_text(pom_xml(MARQUEZ_DEPENDENCIES, compile_sources=True))
        built = _mvn(project, "compile")
        if built.returncode != 0:
            raise PeerSetupError("compiling Marquez's sources failed:\n" + (built.stdout + built.stderr)[-3000:])
        copied = _copy_dependencies(project, target / "lib")
        if copied.returncode != 0:
            raise PeerSetupError("resolving Marquez's dependencies failed:\n" + (copied.stdout + copied.stderr)[-3000:])
        shutil.rmtree(target / "classes", ignore_errors=True)
        shutil.copytree(project / "target" / "classes", target / "classes")


def fetch_published(target: Path) -> bool:
    """Marquez's published API jar and its dependencies into ``target/lib``; False when Maven cannot resolve it."""
    with tempfile.TemporaryDirectory(prefix="marquez-pub-") as scratch:
        project = Path(scratch)
        (project / "pom.xml").write_text(pom_xml([f"{MARQUEZ_GROUP}:marquez-api:{MARQUEZ_VERSION}"],
                                                 compile_sources=False))
        return _copy_dependencies(project, target / "lib").returncode == 0


def marquez_classpath(target: Path = PEER_DIR) -> str | None:
    """The classpath of a Marquez set up under ``target``, or None."""
    lib = target / "lib"
    if not lib.is_dir() or not any(lib.glob("*.jar")):
        return None
    entries = [str(target / "classes")] if (target / "classes").is_dir() else []
    if not entries and not any(lib.glob("marquez-api-*.jar")):
        return None
    return os.pathsep.join([*entries, str(lib / "*")])


def setup_marquez(source: Path | None = None, target: Path = PEER_DIR) -> str:
    """Marquez ready under ``target`` (published artifact first, then the source release); its classpath."""
    ready = marquez_classpath(target)
    if ready is not None:
        return ready
    target.mkdir(parents=True, exist_ok=True)
    if not fetch_published(target):
        shutil.rmtree(target / "lib", ignore_errors=True)
        if source is None:
            raise PeerSetupError(
                f"Maven could not resolve {MARQUEZ_GROUP}:marquez-api:{MARQUEZ_VERSION} (Maven Central served no "
                "version of it on 2026-11-25), so Marquez must be built from its source release: give a checkout "
                f"of Marquez {MARQUEZ_VERSION} (or a git directory holding tag {MARQUEZ_VERSION}) as "
                "make peer-deps MARQUEZ_SOURCE=<dir>, --source <dir> or LINEAGE_PEER_MARQUEZ_SOURCE. Marquez's own "
                "build (./gradlew) cannot run here: it downloads a Gradle distribution and Gradle plugins from "
                "hosts these machines do not reach.")
        build_from_source(source, target)
    classpath = marquez_classpath(target)
    if classpath is None:
        raise PeerSetupError(f"Marquez set-up left no runnable classpath under {target}")
    return classpath


def postgres_bin() -> Path:
    """The directory of Debian's newest PostgreSQL server binaries (initdb, pg_ctl, postgres)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if not versions:
        raise PeerSetupError("PostgreSQL is not installed: make peer-deps (apt-get install -y postgresql)")
    return versions[-1].parent


# ---------------------------------------------------------------------------------------------------------------
# Running PostgreSQL and Marquez


def _as_postgres_user() -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as Debian's ``postgres`` user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as missing:
        raise PeerSetupError("running as root and there is no 'postgres' user to run PostgreSQL as") from missing
    return ["runuser", "-u", "postgres", "--"]


@contextlib.contextmanager
def private_postgres(port: int = PG_PORT) -> Iterator[dict[str, Any]]:
    """A throwaway PostgreSQL cluster on ``port`` under a temp dir, with database ``marquez``; stopped after."""
    bindir, runas = postgres_bin(), _as_postgres_user()
    root = Path(tempfile.mkdtemp(prefix="peer-pg-"))
    data, log = root / "data", root / "postgres.log"
    if runas:
        shutil.chown(root, "postgres", "postgres")
    try:
        subprocess.run([*runas, str(bindir / "initdb"), "-D", str(data), "-U", "marquez", "-A", "trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True)
        options = f"-p {port} -k {root} -c listen_addresses=localhost -c fsync=off -c shared_buffers=256MB"
        subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w",
                        "start"], check=True, capture_output=True)
        subprocess.run([*runas, str(bindir.parent / "bin" / "createdb"), "-h", "localhost", "-p", str(port),
                        "-U", "marquez", "marquez"], check=True, capture_output=True)
        yield {"port": port, "data": data, "log": log}
    except subprocess.CalledProcessError as failed:
        tail = log.read_text()[-2000:] if log.is_file() else ""
        raise PeerSetupError(f"PostgreSQL did not start: {failed.stderr!r} {tail}") from failed
    finally:
        subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _postgres_pids(data: Path) -> list[int]:
    """The postmaster (first line of postmaster.pid) and its children."""
    pid_file = data / "postmaster.pid"
    if not pid_file.is_file():
        return []
    main = int(pid_file.read_text().splitlines()[0])
    children = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True, check=False).stdout
    return [main, *(int(pid) for pid in children.split())]


MARQUEZ_CONFIG = """\
server:
  applicationConnectors:
  - type: http
    port: {port}
    httpCompliance: RFC7230_LEGACY
  adminConnectors:
  - type: http
    port: {admin}
db:
  driverClass: org.postgresql.Driver
  url: jdbc:postgresql://localhost:{pg}/marquez
  user: marquez
  password: marquez
migrateOnStartup: true
graphql:
  enabled: false
search:
  enabled: false
logging:
  level: WARN
  appenders:
  - type: file
    currentLogFilename: {log}
    archive: false
"""


@contextlib.contextmanager
def marquez_server(classpath: str, pg_port: int, workdir: Path) -> Iterator[dict[str, Any]]:
    """Marquez's API server (default JVM settings) on ``MARQUEZ_PORT``, its schema migrated; stopped after."""
    config, log = workdir / "marquez.yml", workdir / "marquez.log"
    config.write_text(MARQUEZ_CONFIG.format(port=MARQUEZ_PORT, admin=MARQUEZ_ADMIN_PORT, pg=pg_port, log=log))
    stdout = (workdir / "marquez.out").open("w")
    process = subprocess.Popen(["java", "-cp", classpath, "marquez.MarquezApp", "server", str(config)],
                               stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{MARQUEZ_PORT}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                tail = (workdir / "marquez.out").read_text()[-3000:]
                raise PeerSetupError(f"Marquez exited ({process.returncode}) while starting:\n{tail}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/api/v1/namespaces", timeout=5).ok:
                    break
            if time.monotonic() > deadline:
                raise PeerSetupError("Marquez did not answer within 300 s")
            time.sleep(1)
        yield {"url": url, "pid": process.pid}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stdout.close()


# ---------------------------------------------------------------------------------------------------------------
# Pure logic: events, query nodes, percentiles, formatting


def tag_namespaces(events: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """The events with every dataset namespace made this run's own (``scheme://<tag>-host…``): our graph store
    outlives a bench, and a dataset shared with an earlier run would widen our lineage answers but not Marquez's."""
    known = (*bench_events.SOURCE_NAMESPACES, *bench_events.TABLE_NAMESPACES)
    mapping = {f'"{ns}"': f'"{ns.replace("://", f"://{tag}-", 1)}"' for ns in known}
    tagged = []
    for event in events:
        text = json.dumps(event)
        for old, new in mapping.items():
            text = text.replace(old, new)
        tagged.append(json.loads(text))
    return tagged


def query_nodes(events: list[dict[str, Any]], count: int) -> list[str]:
    """``count`` dataset node ids (``dataset:<namespace>:<name>``, Marquez's form, which our server speaks too) for
    the depth-10 lineage queries: outputs of jobs that completed, the DAG's middle layers first (lineage on both
    sides within depth 10), spread evenly over them.

    Only namespaces already in normal form (``s3://`` or ``postgres://``, lower case) qualify: our pipeline
    normalizes the others (s3a -> s3, JDBC URLs, host case) and Marquez keeps them as sent, so only these name the
    same node in both graphs. Jobs do not either: Marquez renames a job with a parent run to ``<parent>.<name>``."""
    outputs = {(output["namespace"], output["name"]) for event in events if event.get("eventType") == "COMPLETE"
               for output in event.get("outputs", []) if _normal_form(output["namespace"])}
    ordered = sorted(outputs, key=lambda dataset: (_middle_distance(dataset[1]), dataset))
    if not ordered:
        return []
    middle = ordered[: max(count, len(ordered) // 2)]
    step = max(1, len(middle) // max(1, count))
    return [f"dataset:{namespace}:{name}" for namespace, name in middle[::step][:count]]


def _normal_form(namespace: str) -> bool:
    return namespace == namespace.lower() and namespace.split("://", 1)[0] in {"s3", "postgres"}


def _middle_distance(name: str) -> float:
    """How far the table ``layer_<l>/table_<n>`` sits from the DAG's middle layer (0 = in it); others last."""
    try:
        layer = int(name.split("/", 1)[0].removeprefix("layer_"))
    except ValueError:
        return float("inf")
    return abs(layer - (bench_events.LAYERS - 1) / 2)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs, None when either is missing or theirs is 0."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def _fmt(value: float | None, spec: str = ",.0f", unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def format_peer(result: dict[str, Any]) -> str:
    """The peer bench as a table: ours, Marquez, ours/Marquez."""
    ours, theirs = result["ours"], result["marquez"]
    rows: list[tuple[str, float | None, float | None, str]] = [
        ("ingest, 1 event/request, 8 clients (events/s)", ours["ingest_single_events_per_s"],
         theirs["ingest_single_events_per_s"], ",.0f"),
        (f"ingest, {ours['batch_size']} events/request (events/s)", ours["ingest_batched_events_per_s"],
         theirs.get("ingest_batched_events_per_s"), ",.0f"),
        ("time to a queryable graph (s)", ours["time_to_queryable_s"], theirs["time_to_queryable_s"], ",.1f"),
        (f"lineage depth {result['depth']} p50 (ms)", ours["lineage_ms"]["p50"], theirs["lineage_ms"]["p50"],
         ",.1f"),
        (f"lineage depth {result['depth']} p99 (ms)", ours["lineage_ms"]["p99"], theirs["lineage_ms"]["p99"],
         ",.1f"),
        ("RSS, servers (MiB)", ours["rss_mib"]["app"], theirs["rss_mib"]["app"], ",.0f"),
        ("RSS, servers + storage (MiB)", ours["rss_mib"]["total"], theirs["rss_mib"]["total"], ",.0f"),
    ]
    lines = [f"{result['events']:,} {result['shape']} events (~{result['mean_event_bytes'] / 1000:.1f} KB) into "
             f"each system; Marquez {result['marquez_version']} on PostgreSQL {result['postgres_version']}",
             f"{'measure':48} {'ours':>10} {'Marquez':>10} {'ours/Marquez':>13}"]
    for name, mine, peer, spec in rows:
        lines.append(f"{name:48} {_fmt(mine, spec):>10} {_fmt(peer, spec):>10} "
                     f"{_fmt(ratio(mine, peer), '.2f', 'x'):>13}")
    if theirs.get("ingest_batched_note"):
        lines.append(f"Marquez batched: {theirs['ingest_batched_note']}")
    lines.append(f"lineage answers (mean nodes): ours {_fmt(ours['lineage_nodes_mean'], ',.0f')}, Marquez "
                 f"{_fmt(theirs['lineage_nodes_mean'], ',.0f')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Measuring


def post_each(url: str, events: list[dict[str, Any]], clients: int = CLIENTS, batch: int = 1,
              retried: list[int] | None = None) -> float:
    """POST the events to ``url`` ``batch`` per request (one bare event when 1) from ``clients`` keep-alive
    sessions; seconds taken. A request refused three times fails the bench (a system dropping events is not
    measured); ones that passed on a retry are appended to ``retried``."""
    retried = [] if retried is None else retried
    bodies = [json.dumps(events[i] if batch == 1 else events[i:i + batch]).encode()
              for i in range(0, len(events), batch)]
    sessions = [requests.Session() for _ in range(clients)]

    def post(index: int) -> None:
        for attempt in range(3):  # Marquez answers 500 now and then on concurrent first writes of one name
            answer = sessions[index % clients].post(url, data=bodies[index], timeout=300,
                                                    headers={"Content-Type": "application/json"})
            if answer.status_code < 300:
                if attempt:
                    retried.append(index)
                return
        raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:300]}")

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(clients) as pool:
            # clients threads each take every clients-th request, so a session is used by one thread at a time
            list(pool.map(lambda lane: [post(i) for i in range(lane, len(bodies), clients)], range(clients)))
    finally:
        for session in sessions:
            session.close()
    return time.perf_counter() - started


def lineage_latencies(url: str, nodes: Sequence[str]) -> tuple[list[float], list[int]]:
    """Client-side milliseconds of ``GET /api/v1/lineage?nodeId=…&depth=10`` for each node, and each answer's
    node count (the graphs must match in size for the times to compare)."""
    times: list[float] = []
    sizes: list[int] = []
    with requests.Session() as http:
        for node in nodes:
            for attempt in range(3):
                # a server may close an idle keep-alive connection just as it is reused (ours after 5 s, while
                # the previous answer is parsed here): that attempt is not timed, the next one on a new one is
                started = time.perf_counter()
                try:
                    answer = http.get(f"{url}/api/v1/lineage", params={"nodeId": node, "depth": DEPTH},
                                      timeout=300)
                    break
                except requests.ConnectionError:
                    if attempt == 2:
                        raise
            times.append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            sizes.append(len(answer.json().get("graph", [])))
    return times, sizes


def summarize(times: Sequence[float], sizes: Sequence[int]) -> dict[str, Any]:
    """p50/p99 of the query times, how many, and the mean answer size in nodes."""
    return {"p50": percentile(times, 0.5), "p99": percentile(times, 0.99), "queries": len(times),
            "nodes_mean": sum(sizes) / len(sizes) if sizes else None}


def _completed_in_neo4j(settings: Any, run_ids: list[str]) -> int:
    from kafka_lineage.graph.driver import driver_for
    with driver_for(settings) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (r:Run) WHERE r.runId IN $ids AND r.state = 'COMPLETE' RETURN count(r) AS n", ids=run_ids)
    return int(records[0]["n"])


def _completed_run_ids(events: list[dict[str, Any]]) -> list[str]:
    return [event["run"]["runId"] for event in events if event["eventType"] == "COMPLETE"]


def _marquez_has_runs(url: str, events: list[dict[str, Any]]) -> bool:
    """Marquez answers for the last COMPLETE run, as COMPLETED: its ingest is synchronous, so this only confirms
    that the graph was queryable when the last POST returned."""
    last = next(e for e in reversed(events) if e["eventType"] == "COMPLETE")
    answer = requests.get(f"{url}/api/v1/jobs/runs/{last['run']['runId']}", timeout=60)
    return answer.ok and answer.json().get("state") == "COMPLETED"


def run_peer_bench(count: int, output: Path, source: Path | None = None) -> dict[str, Any]:
    """``lineage bench peer``; when Marquez or PostgreSQL cannot be set up or started, says why on stderr and
    exits 2 (``SystemExit``)."""
    try:
        return _run_peer_bench(count, output, source)
    except PeerSetupError as error:
        print(f"lineage bench peer: cannot set Marquez up: {error}", file=sys.stderr)
        raise SystemExit(2) from error


def _run_peer_bench(count: int, output: Path, source: Path | None = None) -> dict[str, Any]:
    """``lineage bench peer``: set Marquez up (``PeerSetupError`` when it cannot be), start PostgreSQL, Marquez
    and our pipeline (collector, processor, graph sink, lineage server on the running stack), feed both the same
    ``count`` events one per request and then ``count`` more batched, query both, write the result to ``output``."""
    from kafka_lineage.runtime.config import ClientSettings
    from kafka_lineage_devtools.processes import (
        collector_process,
        pipeline_env,
        processor_process,
        server_process,
        sink_process,
        wait_until,
    )
    from kafka_lineage_devtools.stack.config import StackSettings
    from kafka_lineage_devtools.stack.manager import Stack

    source = source or (Path(os.environ["LINEAGE_PEER_MARQUEZ_SOURCE"])
                        if os.environ.get("LINEAGE_PEER_MARQUEZ_SOURCE") else None)
    classpath = setup_marquez(source)
    settings = ClientSettings.from_env()
    tag = uuid.uuid4().hex[:6]
    namespace = f"bench-peer-{tag}"
    single = tag_namespaces(bench_events.run_pairs(count, "realistic", namespace=namespace), tag)
    batched = tag_namespaces(bench_events.run_pairs(count, "realistic", namespace=namespace), tag)
    batch_size = 100
    prefix = f"lineage.bench.peer.{tag}"
    env = {**pipeline_env(prefix, 6, Path(".lineage/bench") / prefix), "LINEAGE_SINK_POLL_SECONDS": "0.1"}
    postgres_version = re.search(r"\d+\.\d+", subprocess.run(  # "postgres (PostgreSQL) 15.18-0+deb12u1)"
        [str(postgres_bin() / "postgres"), "--version"], capture_output=True, text=True, check=False).stdout)
    stack = Stack(StackSettings.from_env(), report=lambda _line: None)
    ours: dict[str, Any] = {"batch_size": batch_size}
    theirs: dict[str, Any] = {"ingest_batched_events_per_s": None,
                              "ingest_batched_note": f"Marquez {MARQUEZ_VERSION}'s POST /api/v1/lineage takes one "
                                                     "event per request (no batch endpoint), so none was measured"}
    with tempfile.TemporaryDirectory(prefix="peer-marquez-") as workdir, private_postgres() as postgres, \
            marquez_server(classpath, postgres["port"], Path(workdir)) as marquez, \
            collector_process(env) as collector, processor_process(env) as processor, \
            sink_process(env) as sink, \
            server_process({**env, "LINEAGE_SERVER_MAX_NODES": str(UNCAPPED)}) as server:
        def completed(events: list[dict[str, Any]]) -> float:
            ids = _completed_run_ids(events)
            wait_until(lambda: _completed_in_neo4j(settings, ids) >= len(set(ids)), 1800,
                       what="every COMPLETE run in Neo4j")
            return time.perf_counter()

        # Warm-up on both (JIT, connection pools, plans; the namespaces created one client at a time), not
        # reported; its events stay in both graphs alike.
        warm = tag_namespaces(bench_events.run_pairs(200, "realistic", namespace=namespace), tag)
        for url in (f"{marquez['url']}/api/v1/lineage", f"{collector.url}/api/v1/lineage"):
            post_each(url, warm[:20], clients=1)
            post_each(url, warm[20:])

        # One event per request: ours first, then Marquez (ours' backlog drains meanwhile: its time to a queryable
        # graph runs from its first POST until every COMPLETE run is in Neo4j).
        started = time.perf_counter()
        seconds = post_each(f"{collector.url}/api/v1/lineage", single)
        ours["ingest_single_events_per_s"] = count / seconds
        ours["time_to_queryable_s"] = completed(single) - started
        started = time.perf_counter()
        retried: list[int] = []
        seconds = post_each(f"{marquez['url']}/api/v1/lineage", single, retried=retried)
        theirs["requests_retried"] = len(retried)
        theirs["ingest_single_events_per_s"] = count / seconds
        theirs["time_to_queryable_s"] = (time.perf_counter() - started) if _marquez_has_runs(
            marquez["url"], single) else None

        # Lineage at depth 10 on the same graph (the single-event phase's), interleaved round by round.
        nodes = query_nodes(single, 20)
        lineage_latencies(server.url, nodes)  # warm-up round each: plans, caches
        lineage_latencies(marquez["url"], nodes)
        samples: dict[str, tuple[list[float], list[int]]] = {"ours": ([], []), "marquez": ([], [])}
        for _ in range(3):  # rounds alternate so both see the same background load
            for side, url in (("ours", server.url), ("marquez", marquez["url"])):
                times, sizes = lineage_latencies(url, nodes)
                samples[side][0].extend(times)
                samples[side][1].extend(sizes)
        ours["lineage_ms"], theirs["lineage_ms"] = summarize(*samples["ours"]), summarize(*samples["marquez"])
        ours["lineage_nodes_mean"] = ours["lineage_ms"]["nodes_mean"]
        theirs["lineage_nodes_mean"] = theirs["lineage_ms"]["nodes_mean"]

        # Batched: ours only (see the note); its time to queryable as well.
        started = time.perf_counter()
        seconds = post_each(f"{collector.url}/api/v1/lineage", batched, batch=batch_size)
        ours["ingest_batched_events_per_s"] = count / seconds
        ours["time_to_queryable_batched_s"] = completed(batched) - started

        app = [collector.process.pid, processor.process.pid, sink.process.pid, server.process.pid]
        storage = [stack.running_pid(name) for name in ("kafka", "registry", "neo4j")]
        ours["rss_mib"] = {"app": resident_mib(app), "total": resident_mib(app + storage),
                           "storage": {name: resident_mib([pid]) for name, pid in
                                       zip(("kafka", "registry", "neo4j"), storage, strict=True)}}
        pg = _postgres_pids(postgres["data"])
        theirs["rss_mib"] = {"app": resident_mib([marquez["pid"]]), "total": resident_mib([marquez["pid"], *pg]),
                             "storage": {"postgres": resident_mib(pg)}}
        theirs["postgres_processes"] = len(pg)
    result = {"bench": "peer", "at": datetime.now(UTC).isoformat(),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "events": count, "shape": "realistic", "mean_event_bytes": bench_events.mean_bytes(single[:1000]),
              "clients": CLIENTS, "depth": DEPTH, "query_nodes": nodes,
              "marquez_version": MARQUEZ_VERSION,
              "postgres_version": postgres_version.group(0) if postgres_version else None,
              "ours": ours, "marquez": theirs,
              "ratios_ours_over_marquez": {
                  "ingest_single": ratio(ours["ingest_single_events_per_s"], theirs["ingest_single_events_per_s"]),
                  "time_to_queryable": ratio(ours["time_to_queryable_s"], theirs["time_to_queryable_s"]),
                  "lineage_p50": ratio(ours["lineage_ms"]["p50"], theirs["lineage_ms"]["p50"]),
                  "lineage_p99": ratio(ours["lineage_ms"]["p99"], theirs["lineage_ms"]["p99"]),
                  "rss_app": ratio(ours["rss_mib"]["app"], theirs["rss_mib"]["app"]),
                  "rss_total": ratio(ours["rss_mib"]["total"], theirs["rss_mib"]["total"])}}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_lineage_peer(count: int, servers: dict[str, str], output: Path, rounds: int = 3,
                     seed: int = 23) -> dict[str, Any]:
    """The lineage part of the peer bench alone, for comparing our servers' code (``servers``: name → URL of a
    running ``lineage serve`` on the stack, e.g. an old and a new checkout) with Marquez on one graph: ``count``
    realistic events (fixed ``seed``, this run's own namespaces) are written into Neo4j by the graph sink's own
    statements and posted to Marquez one per request; then ``GET /api/v1/lineage`` at depth 10 over the query nodes,
    servers in turn, ``rounds`` times after a warm-up round. Answers of our servers are compared whole (JSON)."""
    from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
    from kafka_lineage.processors.normalize import normalize_event
    from kafka_lineage.runtime.config import ClientSettings

    classpath = setup_marquez(None)
    tag = uuid.uuid4().hex[:6]
    events = tag_namespaces(bench_events.run_pairs(count, "realistic", seed=seed,
                                                   namespace=f"bench-peer-{tag}"), tag)
    with driver_for(ClientSettings.from_env()) as driver:
        ensure_constraints(driver)
        for start in range(0, len(events), 500):
            write_events(driver, [normalize_event(event)[0] for event in events[start:start + 500]])
    nodes = query_nodes(events, 20)
    samples: dict[str, tuple[list[float], list[int]]] = {name: ([], []) for name in [*servers, "marquez"]}
    same: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="peer-marquez-") as workdir, private_postgres() as postgres, \
            marquez_server(classpath, postgres["port"], Path(workdir)) as marquez:
        post_each(f"{marquez['url']}/api/v1/lineage", events[:20], clients=1)
        ingest = post_each(f"{marquez['url']}/api/v1/lineage", events[20:])
        urls = {**servers, "marquez": marquez["url"]}
        for url in urls.values():
            lineage_latencies(url, nodes)  # warm-up: plans, caches
        for _ in range(rounds):  # in turn, so all see the same background load
            for name, url in urls.items():
                times, sizes = lineage_latencies(url, nodes)
                samples[name][0].extend(times)
                samples[name][1].extend(sizes)
        with requests.Session() as http:
            for node in nodes:
                answers = [http.get(f"{url}/api/v1/lineage", params={"nodeId": node, "depth": DEPTH},
                                    timeout=300).json() for url in servers.values()]
                same.append(all(answer == answers[0] for answer in answers))
    result = {"bench": "peer-lineage", "at": datetime.now(UTC).isoformat(), "events": count, "seed": seed,
              "depth": DEPTH, "rounds": rounds, "query_nodes": nodes, "marquez_version": MARQUEZ_VERSION,
              "marquez_ingest_events_per_s": (len(events) - 20) / ingest,
              "load_average": os.getloadavg(), "our_answers_identical": sum(same),
              "lineage_ms": {name: summarize(*sample) for name, sample in samples.items()}}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m kafka_lineage_devtools.bench_peer setup [--source DIR]`` (what ``make peer-deps`` runs)."""
    parser = argparse.ArgumentParser(prog="bench_peer")
    parser.add_argument("action", choices=["setup", "lineage"])
    parser.add_argument("--source", type=Path, default=None,
                        help="Marquez's source release (checkout or git dir with the release tag)")
    parser.add_argument("--server", action="append", default=[], metavar="NAME=URL",
                        help="lineage: one of our running servers to measure (repeat for old and new code)")
    parser.add_argument("--events", type=int, default=2200, help="lineage: events written to both graphs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path(".lineage/bench/peer-lineage.json"))
    args = parser.parse_args(argv)
    if args.action == "lineage":
        servers = dict(item.split("=", 1) for item in args.server)
        if not servers:
            parser.error("lineage: at least one --server NAME=URL")
        try:
            result = run_lineage_peer(args.events, servers, args.output, args.rounds)
        except PeerSetupError as error:
            print(f"cannot set Marquez up: {error}", file=sys.stderr)
            return 2
        print(json.dumps({k: v for k, v in result.items() if k != "query_nodes"}, indent=2))
        return 0
    source = args.source or (Path(os.environ["LINEAGE_PEER_MARQUEZ_SOURCE"])
                             if os.environ.get("LINEAGE_PEER_MARQUEZ_SOURCE") else None)
    try:
        postgres_bin()
        print(f"Marquez {MARQUEZ_VERSION} ready: {setup_marquez(source)}")
    except PeerSetupError as error:
        print(f"cannot set Marquez up: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
