"""The four real servers of the local stack: what to fetch, how to configure and launch them, how to probe health.

Each service is a small class: ``prepare`` writes its configuration under the state directory (once-only steps
such as formatting Kafka's storage or setting Neo4j's initial password included) and returns the launch command;
``probe`` raises ``NotReady`` until the service really answers (broker metadata, registry ``/subjects``, a Bolt
query, Connect's ``/connectors``).
"""

from __future__ import annotations

import base64
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests

from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.java import find_java
from kafka_lineage_devtools.stack.maven import Coordinate, ResolutionError, resolve_classpath, unpack_archive


class NotReady(Exception):
    """The service does not answer (yet); the message says what was tried."""


@dataclass
class Launch:
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def _write_properties(path: Path, values: dict[str, object], private: bool = False) -> None:
    """A Java properties file; ``private``: readable by the owner only (it holds a secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{key}={value}\n" for key, value in values.items())
    if private:
        write_private(path, text)
    else:
        path.write_text(text)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file created readable by its owner only: never world-readable, not even for an instant
    (writing first and chmod-ing after left a window, and kept the mode of a file that already existed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # an existing file keeps its mode through O_CREAT: set it
        os.write(descriptor, text.encode())
    finally:
        os.close(descriptor)


def _http_probe(url: str) -> None:
    try:
        response = requests.get(url, timeout=3)
    except requests.RequestException as exc:
        raise NotReady(f"GET {url}: {exc.__class__.__name__}") from None
    if response.status_code != 200:
        raise NotReady(f"GET {url}: HTTP {response.status_code}")


LOG4J2_CONSOLE = """status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.kafka.name = kafka
logger.kafka.level = info
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
"""


def _kafka_classpath(s: StackSettings) -> str:
    """Broker, Connect runtime and the file connectors share one classpath (same Kafka version)."""
    log4j = "2.24.3"
    return resolve_classpath(
        s.cache_dir,
        f"kafka-{s.kafka_version}",
        [
            Coordinate("org.apache.kafka", "kafka_2.13", s.kafka_version),
            Coordinate("org.apache.kafka", "connect-runtime", s.kafka_version),
            Coordinate("org.apache.kafka", "connect-file", s.kafka_version),
            # Kafka logs through slf4j 1.x; this binding routes it to log4j2, configured to write our log file.
            Coordinate("org.apache.logging.log4j", "log4j-slf4j-impl", log4j),
            Coordinate("org.apache.logging.log4j", "log4j-core", log4j),
        ],
    )


def new_password() -> str:
    """A generated password for the local stack, safe as a command-line argument: URL-safe base64 can start with "-",
    which the Neo4j admin tool then reads as an option and fails ("Missing required parameter: '<password>'", 1 start
    in 64)."""
    return secrets.token_hex(18)


def _classpath_args(home: Path, classpath: str) -> str:
    """Hand the long classpath to the JVM through an @argfile, keeping `ps` and our logs readable."""
    home.mkdir(parents=True, exist_ok=True)
    argfile = home / "classpath.args"
    argfile.write_text(f'-cp "{classpath}"\n')
    return f"@{argfile}"


def _jvm(java: str, heap: str, log4j_config: Path | None = None) -> list[str]:
    args = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
    if log4j_config is not None:
        args.append(f"-Dlog4j2.configurationFile={log4j_config}")
    return args


class Service:
    name: str = ""
    depends_on: tuple[str, ...] = ()
    start_timeout: float = 180.0
    java_range: tuple[int, int | None] = (17, None)

    def java(self, s: StackSettings) -> str:
        return find_java(s.java_homes, *self.java_range)

    def ports(self, s: StackSettings) -> list[int]:
        raise NotImplementedError

    def endpoint(self, s: StackSettings) -> str:
        raise NotImplementedError

    def fetch(self, s: StackSettings) -> None:
        """Download (or find cached) everything the service needs; may take minutes on a fresh machine."""
        raise NotImplementedError

    def prepare(self, s: StackSettings) -> Launch:
        raise NotImplementedError

    def probe(self, s: StackSettings) -> None:
        raise NotImplementedError

    def home(self, s: StackSettings) -> Path:
        return s.state_dir / self.name


class Kafka(Service):
    name = "kafka"

    def ports(self, s: StackSettings) -> list[int]:
        return [s.kafka_port, s.kafka_controller_port, s.kafka_sasl_port]

    def endpoint(self, s: StackSettings) -> str:
        return (f"127.0.0.1:{s.kafka_port} (SASL/PLAIN: 127.0.0.1:{s.kafka_sasl_port}, user lineage, password in "
                f"{s.kafka_sasl_password_file}; KRaft controller 127.0.0.1:{s.kafka_controller_port})")

    def sasl_password(self, s: StackSettings) -> str:
        """The SASL listener's password for user ``lineage``: generated once, kept in the state directory."""
        path = s.kafka_sasl_password_file
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_private(path, new_password())
        return path.read_text().strip()

    def fetch(self, s: StackSettings) -> None:
        _kafka_classpath(s)

    def server_properties(self, s: StackSettings, sasl_password: str = "") -> dict[str, object]:
        """Single-node KRaft (broker and controller in one process), listening on 127.0.0.1 only: plaintext for the
        pipeline, plus a SASL/PLAIN listener (user ``lineage``) so secured connections are tested for real."""
        password = sasl_password
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{s.kafka_controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{s.kafka_port},CONTROLLER://127.0.0.1:{s.kafka_controller_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{s.kafka_sasl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{s.kafka_port},"
                                    f"SASL_PLAINTEXT://127.0.0.1:{s.kafka_sasl_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="lineage" password="{password}" user_lineage="{password}";',
            "log.dirs": self.home(s) / "data",
            "num.partitions": 3,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
        }

    def prepare(self, s: StackSettings) -> Launch:
        home = self.home(s)
        data = home / "data"
        config = home / "server.properties"
        # private: the SASL listener's JAAS line holds the password
        _write_properties(config, self.server_properties(s, self.sasl_password(s)), private=True)
        log4j = home / "log4j2.properties"
        log4j.write_text(LOG4J2_CONSOLE)
        classpath = _classpath_args(home, _kafka_classpath(s))
        if not (data / "meta.properties").is_file():
            # KRaft needs its storage formatted once, with a cluster id of 16 random bytes in URL-safe base64.
            # (A leading "-" would be read as an option by the tool: about one id in 64, so draw again.)
            cluster_id = "-"
            while cluster_id.startswith("-"):
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            result = subprocess.run(
                [
                    *_jvm(self.java(s), "256m", log4j),
                    classpath,
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    str(config),
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                detail = " ".join(result.stderr.split())[-400:]  # one line, as every error of the CLI
                raise ResolutionError(f"kafka: formatting storage in {data} failed: {detail}")
        return Launch([*_jvm(self.java(s), s.kafka_heap, log4j), classpath, "kafka.Kafka", str(config)])

    def probe(self, s: StackSettings) -> None:
        if not port_open(s.kafka_port):
            raise NotReady(f"nothing listens on 127.0.0.1:{s.kafka_port}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{s.kafka_port}", "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=5)
        except Exception as exc:  # KafkaException: broker not ready to serve metadata
            raise NotReady(f"broker metadata: {exc}") from None
        if not metadata.brokers:
            raise NotReady("broker metadata lists no broker")


class SchemaRegistry(Service):
    """Apicurio Registry 3.x with KafkaSQL storage (schemas survive restarts), Confluent API at /apis/ccompat/v7."""

    name = "registry"
    depends_on = ("kafka",)
    java_range = (21, None)  # Apicurio 3.3 is compiled for Java 21

    def ports(self, s: StackSettings) -> list[int]:
        return [s.registry_port, s.registry_management_port]

    def url(self, s: StackSettings) -> str:
        return f"http://127.0.0.1:{s.registry_port}/apis/ccompat/v7"

    def endpoint(self, s: StackSettings) -> str:
        return self.url(s)

    def _dist(self, s: StackSettings) -> Path:
        return unpack_archive(
            s.cache_dir,
            Coordinate("io.apicurio", "apicurio-registry-app", s.apicurio_version),
            "tar.gz",
            "all",
        )

    def fetch(self, s: StackSettings) -> None:
        self._dist(s)

    def prepare(self, s: StackSettings) -> Launch:
        dist = self._dist(s)
        self.home(s).mkdir(parents=True, exist_ok=True)
        return Launch(
            [*_jvm(self.java(s), s.registry_heap), "-jar", str(dist / "quarkus-run.jar")],
            env={
                "QUARKUS_HTTP_HOST": "127.0.0.1",
                "QUARKUS_HTTP_PORT": str(s.registry_port),
                # Health on a loopback management port of its own (Quarkus binds it to every interface otherwise).
                "QUARKUS_MANAGEMENT_ENABLED": "true",
                "QUARKUS_MANAGEMENT_HOST": "127.0.0.1",
                "QUARKUS_MANAGEMENT_PORT": str(s.registry_management_port),
                "APICURIO_STORAGE_KIND": "kafkasql",
                "APICURIO_KAFKASQL_BOOTSTRAP_SERVERS": f"127.0.0.1:{s.kafka_port}",
                "APICURIO_REST_DELETION_ARTIFACT_ENABLED": "true",
                "APICURIO_REST_DELETION_ARTIFACT_VERSION_ENABLED": "true",
                "APICURIO_REST_DELETION_GROUP_ENABLED": "true",
            },
        )

    def probe(self, s: StackSettings) -> None:
        # Ready = its KafkaSQL store has replayed the journal (a restarted registry answers /subjects before that,
        # without the schemas registered earlier), then the Confluent API answers.
        _http_probe(f"http://127.0.0.1:{s.registry_management_port}/health/ready")
        _http_probe(f"{self.url(s)}/subjects")


class Neo4j(Service):
    name = "neo4j"
    java_range = (17, 21)  # the 5.26 LTS line supports Java 17 and 21

    def ports(self, s: StackSettings) -> list[int]:
        return [s.neo4j_bolt_port, s.neo4j_http_port]

    def endpoint(self, s: StackSettings) -> str:
        # A local development stack: showing the generated password is the point (`lineage stack status`).
        # The password itself is never printed (status output ends up in logs): only where to read it.
        return (
            f"bolt://127.0.0.1:{s.neo4j_bolt_port} (http://127.0.0.1:{s.neo4j_http_port}), "
            f"user neo4j, password in {s.neo4j_password_file}; LINEAGE_NEO4J_HOME={self.home(s)}"
        )

    def _classpath(self, s: StackSettings) -> str:
        return resolve_classpath(
            s.cache_dir,
            f"neo4j-{s.neo4j_version}",
            [
                Coordinate("org.neo4j", "neo4j", s.neo4j_version),
                Coordinate("org.neo4j.app", "neo4j-server", s.neo4j_version),
            ],
        )

    def fetch(self, s: StackSettings) -> None:
        self.write_scripts(s)

    def write_scripts(self, s: StackSettings) -> None:
        """``bin/neo4j-admin`` and ``bin/neo4j start|stop`` in the home, as an installation has them: what
        ``lineage replay --fresh --bulk`` needs (LINEAGE_NEO4J_HOME) without knowing about this stack. ``neo4j``
        starts and stops the stack's process (pid file, health probe) with this stack's settings."""
        home = self.home(s)
        classpath = _classpath_args(home, self._classpath(s))
        bin_dir = home / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        quote = shlex.quote
        admin = (f"#!/bin/sh\nexport NEO4J_HOME={quote(str(home))} NEO4J_CONF={quote(str(home / 'conf'))}\n"
                 f"exec {quote(self.java(s))} -Xmx{s.neo4j_heap} -XX:+UseG1GC -Dfile.encoding=UTF-8 "
                 f"{quote(classpath)} org.neo4j.cli.AdminTool \"$@\"\n")
        settings = {"LINEAGE_STATE_DIR": s.state_dir, "LINEAGE_CACHE_DIR": s.cache_dir,
                    "LINEAGE_NEO4J_VERSION": s.neo4j_version, "LINEAGE_NEO4J_BOLT_PORT": s.neo4j_bolt_port,
                    "LINEAGE_NEO4J_HTTP_PORT": s.neo4j_http_port, "LINEAGE_NEO4J_HEAP": s.neo4j_heap,
                    "LINEAGE_NEO4J_PAGECACHE": s.neo4j_pagecache,
                    **dict(zip(("LINEAGE_JAVA_HOME", "JAVA_HOME"), s.java_homes, strict=True))}
        exports = " ".join(f"{key}={quote(str(value))}" for key, value in settings.items() if str(value))
        control = (f"#!/bin/sh\nexport {exports}\n"
                   f"exec {quote(sys.executable)} -m kafka_lineage_devtools.stack.neo4j_control \"$@\"\n")
        for name, text in (("neo4j-admin", admin), ("neo4j", control)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)

    def prepare(self, s: StackSettings) -> Launch:
        home = self.home(s)
        conf = home / "conf"
        _write_properties(
            conf / "neo4j.conf",
            {
                "server.directories.data": home / "data",
                "server.directories.logs": home / "logs",
                "server.directories.import": home / "import",
                "server.directories.plugins": home / "plugins",
                "server.default_listen_address": "127.0.0.1",
                "server.bolt.listen_address": f"127.0.0.1:{s.neo4j_bolt_port}",
                "server.http.listen_address": f"127.0.0.1:{s.neo4j_http_port}",
                "server.https.enabled": "false",
                "dbms.security.auth_enabled": "true",
                "server.memory.pagecache.size": s.neo4j_pagecache,
                "dbms.usage_report.enabled": "false",
                # Bolt keep-alive: NOOPs every 5 s on a connection waiting for a query's answer (checked every
                # second), and the driver is told (connection.recv_timeout_seconds = 5 s x 4 probes) to drop a
                # connection silent for 20 s — a query in flight when Neo4j goes away then fails instead of hanging
                # for the default 120 s.
                "server.bolt.connection_keep_alive_for_requests": "ALL",
                "server.bolt.connection_keep_alive": "5s",
                "server.bolt.connection_keep_alive_probes": "4",
                "server.bolt.connection_keep_alive_streaming_scheduling_interval": "1s",
            },
        )
        classpath = _classpath_args(home, self._classpath(s))
        env = {"NEO4J_HOME": str(home), "NEO4J_CONF": str(conf)}
        if not (home / "data" / "dbms" / "auth.ini").is_file():
            password = new_password()
            # The admin tool (picocli) reads an "@file" argument's words from the file: the password never appears
            # on a command line, which every local user can read in /proc.
            argument = home / "initial-password.arg"
            write_private(argument, password + "\n")
            try:
                result = subprocess.run(
                    [self.java(s), classpath, "org.neo4j.cli.AdminTool", "dbms", "set-initial-password",
                     f"@{argument}"],
                    env={**os.environ, **env}, capture_output=True, text=True,
                )
            finally:
                argument.unlink(missing_ok=True)
            if result.returncode != 0:
                raise ResolutionError(f"neo4j: setting the initial password failed: {result.stderr.strip()[-400:]}")
            write_private(s.neo4j_password_file, password + "\n")
        return Launch(
            [
                *_jvm(self.java(s), s.neo4j_heap),
                "-Dfile.encoding=UTF-8",
                classpath,
                "org.neo4j.server.CommunityEntryPoint",
                f"--home-dir={home}",
                f"--config-dir={conf}",
            ],
            env=env,
        )

    def probe(self, s: StackSettings) -> None:
        if not port_open(s.neo4j_bolt_port):
            raise NotReady(f"nothing listens on 127.0.0.1:{s.neo4j_bolt_port}")
        from neo4j import GraphDatabase
        from neo4j.exceptions import Neo4jError, ServiceUnavailable

        password = s.neo4j_password_file.read_text().strip() if s.neo4j_password_file.is_file() else ""
        try:
            with GraphDatabase.driver(
                f"bolt://127.0.0.1:{s.neo4j_bolt_port}", auth=("neo4j", password), connection_timeout=3
            ) as driver:
                driver.execute_query("RETURN 1")
        except (ServiceUnavailable, Neo4jError, OSError) as exc:
            raise NotReady(f"Bolt query: {exc.__class__.__name__}: {exc}") from None


# Jars the Connect runtime provides itself: a plugin must not bring its own copies (the runtime's API classes are
# loaded parent-first anyway, and an older kafka-clients beside them only confuses).
_RUNTIME_PROVIDED = ("kafka-clients-", "connect-api-", "connect-json-", "slf4j-api-", "zstd-jni-", "lz4-java-",
                     "snappy-java-")
APICURIO_AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"


def _apicurio_converter_jars(s: StackSettings) -> list[str]:
    """Apicurio's registry-aware Kafka Connect converters (Avro, JSON Schema) with their serdes and client."""
    classpath = resolve_classpath(
        s.cache_dir,
        f"apicurio-converter-{s.apicurio_converter_version}",
        [Coordinate("io.apicurio", "apicurio-registry-utils-converter", s.apicurio_converter_version)],
    )
    return [jar for jar in classpath.split(":") if not Path(jar).name.startswith(_RUNTIME_PROVIDED)]


class KafkaConnect(Service):
    """A distributed Connect worker (state in Kafka topics) with the FileStream connectors on its classpath and
    Apicurio's registry-aware converters installed as a plugin (``plugin.path``), so a connector can write Avro
    through the registry by setting ``value.converter`` (see :meth:`avro_converter_config`)."""

    name = "connect"
    depends_on = ("kafka",)

    def ports(self, s: StackSettings) -> list[int]:
        return [s.connect_port]

    def url(self, s: StackSettings) -> str:
        return f"http://127.0.0.1:{s.connect_port}"

    def endpoint(self, s: StackSettings) -> str:
        return self.url(s)

    def fetch(self, s: StackSettings) -> None:
        _kafka_classpath(s)
        _apicurio_converter_jars(s)

    def plugin_path(self, s: StackSettings) -> Path:
        return self.home(s) / "plugins"

    def install_plugins(self, s: StackSettings) -> Path:
        """One plugin directory of links to the converter's jars in Maven's local repository (rebuilt each start,
        so a version change leaves no stale jar behind)."""
        plugin = self.plugin_path(s) / "apicurio-registry-converter"
        if plugin.exists():
            shutil.rmtree(plugin)
        plugin.mkdir(parents=True)
        for jar in _apicurio_converter_jars(s):
            (plugin / Path(jar).name).symlink_to(jar)
        return plugin

    @staticmethod
    def avro_converter_config(registry_port: int, prefix: str = "value.converter") -> dict[str, str]:
        """The connector settings that make it write (or read) ``prefix``'s side as Avro through the stack's
        registry: the schema is registered under ``<topic>-value`` (``-key``), records carry the Confluent framing
        (magic byte, 4-byte content id) so every Confluent-compatible client can read them."""
        return {
            prefix: APICURIO_AVRO_CONVERTER,
            f"{prefix}.apicurio.registry.url": f"http://127.0.0.1:{registry_port}/apis/registry/v2",
            f"{prefix}.apicurio.registry.auto-register": "true",
            f"{prefix}.apicurio.registry.find-latest": "true",
            f"{prefix}.apicurio.registry.as-confluent": "true",
            f"{prefix}.apicurio.registry.use-id": "contentId",
            # The id in the record (magic byte + 4-byte id), not in Apicurio's own headers (the converter's default,
            # which Confluent-format readers such as Flink's avro-confluent reject: "Magic number does not match").
            f"{prefix}.apicurio.registry.headers.enabled": "false",
        }

    def worker_properties(self, s: StackSettings) -> dict[str, object]:
        return {
            "bootstrap.servers": f"127.0.0.1:{s.kafka_port}",
            "group.id": "lineage-connect",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "plugin.path": self.plugin_path(s),
            "config.storage.topic": "_connect-configs",
            "offset.storage.topic": "_connect-offsets",
            "status.storage.topic": "_connect-status",
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.flush.interval.ms": 5000,
            "listeners": f"http://127.0.0.1:{s.connect_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": s.connect_port,
        }

    def prepare(self, s: StackSettings) -> Launch:
        home = self.home(s)
        self.install_plugins(s)
        config = home / "connect-distributed.properties"
        _write_properties(config, self.worker_properties(s))
        log4j = home / "log4j2.properties"
        log4j.write_text(LOG4J2_CONSOLE)
        return Launch(
            [
                *_jvm(self.java(s), s.connect_heap, log4j),
                _classpath_args(home, _kafka_classpath(s)),
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(config),
            ]
        )

    def probe(self, s: StackSettings) -> None:
        _http_probe(f"{self.url(s)}/connectors")


SERVICES: list[Service] = [Kafka(), Neo4j(), SchemaRegistry(), KafkaConnect()]
SERVICES_BY_NAME: dict[str, Service] = {service.name: service for service in SERVICES}
