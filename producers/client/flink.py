"""PyFlink: turn on the official OpenLineage Flink listener and route its events into the pipeline.

Route: the listener (``io.openlineage:openlineage-flink``, Flink 2's ``JobStatusChangedListener``) → its own HTTP
transport → ``lineage collector`` → Avro on the events topic, as for Spark: no Java code of ours runs inside Flink
and the collector applies the same validation, contract and key as for every other emitter. Flink has no
``spark.jars.packages``: the jars (the listener and the Kafka SQL connector) are resolved through Maven (the
machine's ``mvn``, its default configuration, the artifacts kept in Maven's local repository) and put on
``pipeline.jars``::

    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = with_openlineage(Configuration(), job_name="orders-clean", rest_port=8081)
    env = TableEnvironment.create(EnvironmentSettings.new_instance().with_configuration(config).build())

What the listener (1.53) does, and so what the settings here are for:

* Without ``openlineage.enableDetachedJobTracking`` it sends START only when the job is submitted from a client that
  does not wait for it (PyFlink's ``execute()`` / ``execute_sql()``): the job status events reach the listener in the
  client, which has no later status. Detached tracking polls the job's REST API (``rest.address``/``rest.port``;
  a fixed port, Flink's default picks any) and sends COMPLETE / FAIL / ABORT.
* While a job runs it polls ``/jobs/<id>/checkpoints`` every ``trackingIntervalInSeconds`` and sends a RUNNING event
  per new checkpoint (the run's heartbeat); ``checkpoint_events=False`` turns that off.
* A job it could not follow to its end is finished by ``lineage flink watch`` (``producers/service/flink_watcher``),
  which reads the final state from the same REST API.

Settings not passed default to the pipeline's environment (``OPENLINEAGE_URL`` / ``LINEAGE_COLLECTOR_HOST/PORT/
TOKEN``). Jar versions: ``OPENLINEAGE_FLINK_PACKAGE`` and ``KAFKA_CONNECTOR_PACKAGE`` (the pairs tested together).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyflink.common import Configuration

OPENLINEAGE_FLINK_VERSION = "1.53.0"
OPENLINEAGE_FLINK_PACKAGE = f"io.openlineage:openlineage-flink:{OPENLINEAGE_FLINK_VERSION}"
KAFKA_CONNECTOR_PACKAGE = "org.apache.flink:flink-sql-connector-kafka:4.0.1-2.0"  # Flink 2.0's Kafka SQL connector
DEFAULT_PACKAGES = (OPENLINEAGE_FLINK_PACKAGE, KAFKA_CONNECTOR_PACKAGE)
LISTENER_FACTORY = "io.openlineage.flink.listener.OpenLineageJobStatusChangedListenerFactory"
LISTENERS_KEY = "execution.job-status-changed-listeners"
DEFAULT_JOB_NAMESPACE = "flink-jobs"  # the listener's own default
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class JarResolutionError(RuntimeError):
    """Maven could not provide a jar; the message says which and where Maven's log is."""


def collector_url_from_env(env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(collector URL, token) from the standard OpenLineage variables, else the collector's own settings."""
    env = os.environ if env is None else env
    url = env.get("OPENLINEAGE_URL") or (
        f"http://{env.get('LINEAGE_COLLECTOR_HOST', '127.0.0.1')}:{env.get('LINEAGE_COLLECTOR_PORT', '5000')}")
    return url, env.get("OPENLINEAGE_API_KEY") or env.get("LINEAGE_COLLECTOR_TOKEN") or None


def openlineage_flink_conf(
    collector_url: str | None = None,
    *,
    namespace: str = DEFAULT_JOB_NAMESPACE,
    job_name: str | None = None,
    token: str | None = None,
    rest_port: int | None = None,
    detached_tracking: bool = True,
    checkpoint_events: bool = True,
    tracking_interval_s: int | None = None,
    timeout_ms: int = 30_000,
) -> dict[str, str]:
    """Flink configuration entries (``key: value`` strings, as in Flink's config file) for the listener.

    ``job_name`` defaults to the name Flink gives the job (``pipeline.name``, else its own default), the job namespace
    to the listener's ``flink-jobs``. ``rest_port`` fixes the REST port that detached tracking and the checkpoint
    heartbeat poll (and ``lineage flink watch`` reads); leave it None on a cluster whose config already sets it.
    """
    if collector_url is None:
        collector_url, env_token = collector_url_from_env()
        token = token if token is not None else env_token
    conf = {
        LISTENERS_KEY: LISTENER_FACTORY,
        "openlineage.transport.type": "http",
        "openlineage.transport.url": collector_url.rstrip("/"),
        "openlineage.transport.endpoint": "/api/v1/lineage",
        "openlineage.transport.compression": "gzip",
        "openlineage.transport.timeoutInMillis": str(timeout_ms),
        "openlineage.job.namespace": namespace,
    }
    if token:  # sent as "Authorization: Bearer …"
        conf["openlineage.transport.auth.type"] = "api_key"
        conf["openlineage.transport.auth.apiKey"] = token
    if job_name:
        conf["openlineage.job.name"] = job_name
    if detached_tracking:
        conf["openlineage.enableDetachedJobTracking"] = "true"
    if not checkpoint_events:
        conf["openlineage.flink.disableCheckpointTracking"] = "true"
    if tracking_interval_s is not None:
        conf["openlineage.trackingIntervalInSeconds"] = str(int(tracking_interval_s))
    if rest_port is not None:
        conf["rest.port"] = str(int(rest_port))
        conf.setdefault("rest.address", "127.0.0.1")
    return conf


def flink_config_yaml(conf: Mapping[str, str]) -> str:
    """The entries as lines of Flink's ``config.yaml`` (flat keys, what a Java/SQL user copies)."""
    return "".join(f"{key}: {_yaml_scalar(value)}\n" for key, value in conf.items())


def _yaml_scalar(value: str) -> str:
    plain = value and value.strip() == value and not any(c in value for c in ":#{}[],&*!|>'\"%@`") \
        and value.lower() not in ("true", "false", "null", "yes", "no", "on", "off")
    return value if plain or value in ("true", "false") else '"' + value.replace('"', '\\"') + '"'


def _render_pom(coordinates: Iterable[str]) -> str:
    deps = []
    for coordinate in coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                    f"<version>{version}</version></dependency>")
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>local.kafka-lineage.flink</groupId>\n  <artifactId>flink-jars</artifactId>\n"
            "  <version>1</version>\n  <packaging>pom</packaging>\n  <dependencies>\n" + "\n".join(deps)
            + "\n  </dependencies>\n</project>\n")


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("LINEAGE_CACHE_DIR") or Path.home() / ".cache" / "kafka-lineage")


def resolve_jars(packages: Iterable[str] = DEFAULT_PACKAGES, cache_dir: Path | None = None) -> list[Path]:
    """The jars of ``packages`` (``group:artifact:version``, runtime dependencies included) through the machine's
    Maven; resolved once per distinct list, the classpath remembered under ``cache_dir`` (like the stack's jars).

    Both default jars are self-contained (the listener shades its client, the SQL connector its Kafka client)."""
    packages = list(packages)
    for package in packages:
        if package.count(":") != 2 or not all(package.split(":")):
            raise ValueError(f"{package!r}: expected group:artifact:version")
    workdir = (cache_dir or default_cache_dir()) / "maven" / "flink-jars"
    workdir.mkdir(parents=True, exist_ok=True)
    pom, pom_file, classpath_file = _render_pom(packages), workdir / "pom.xml", workdir / "classpath.txt"
    if pom_file.is_file() and classpath_file.is_file() and pom_file.read_text() == pom:
        jars = [Path(p) for p in classpath_file.read_text().strip().split(":") if p]
        if jars and all(jar.is_file() for jar in jars):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError("mvn not found on PATH: install Maven (apt-get install maven)")
    pom_file.write_text(pom)
    log = workdir / "mvn.log"
    with log.open("w") as out:
        done = subprocess.run([mvn, "-B", "-U", f"{DEPENDENCY_PLUGIN}:build-classpath", "-Dmdep.includeScope=runtime",
                               f"-Dmdep.outputFile={classpath_file}"], cwd=workdir, stdout=out,
                              stderr=subprocess.STDOUT)
    if done.returncode != 0 or not classpath_file.is_file():
        raise JarResolutionError(f"Maven could not fetch {', '.join(packages)}; see {log}")
    return [Path(p) for p in classpath_file.read_text().strip().split(":") if p]


def jar_urls(jars: Iterable[Path]) -> list[str]:
    return [Path(jar).resolve().as_uri() for jar in jars]


def with_openlineage(config: Configuration, collector_url: str | None = None, *,
                     packages: Iterable[str] | None = DEFAULT_PACKAGES, jars: Iterable[Path] = (),
                     **options: Any) -> Configuration:
    """``config`` (a PyFlink ``Configuration``, changed in place and returned) with the listener configured and its
    jars added to ``pipeline.jars`` (the job's own jars kept; ``packages=None`` adds none: a cluster that has them in
    ``lib/``). ``options`` are those of :func:`openlineage_flink_conf`."""
    wanted = [*(resolve_jars(packages) if packages else []), *jars]
    existing = [j for j in (config.get_string("pipeline.jars", "") or "").split(";") if j.strip()]
    urls = [*existing, *(u for u in jar_urls(wanted) if u not in existing)]
    if urls:
        config.set_string("pipeline.jars", ";".join(urls))
    for key, value in openlineage_flink_conf(collector_url, **options).items():
        if key == LISTENERS_KEY:
            listeners = [x for x in (config.get_string(key, "") or "").split(";") if x.strip()]
            value = ";".join([*listeners, value]) if value not in listeners else ";".join(listeners)
        config.set_string(key, value)
    return config
