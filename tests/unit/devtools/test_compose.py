"""docker-compose.yml describes the same topology as the native stack: versions, host ports, settings, memory."""

from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import Kafka, KafkaConnect

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


@pytest.fixture(scope="module")
def settings() -> StackSettings:
    return StackSettings.from_env({})


def _host_ports(service: dict) -> set[int]:
    return {int(mapping.split(":")[1]) for mapping in service.get("ports", [])}


def test_same_versions(compose: dict, settings: StackSettings) -> None:
    assert compose["kafka"]["image"] == f"apache/kafka:{settings.kafka_version}"
    assert compose["connect"]["image"] == f"apache/kafka:{settings.kafka_version}"
    assert compose["registry"]["image"] == f"apicurio/apicurio-registry:{settings.apicurio_version}"
    assert compose["neo4j"]["image"] == f"neo4j:{settings.neo4j_version}-community"


def test_same_host_ports_on_loopback(compose: dict, settings: StackSettings) -> None:
    assert _host_ports(compose["kafka"]) == {settings.kafka_port, settings.kafka_sasl_port}
    assert _host_ports(compose["registry"]) == {settings.registry_port}
    assert _host_ports(compose["neo4j"]) == {settings.neo4j_bolt_port, settings.neo4j_http_port}
    assert _host_ports(compose["connect"]) == {settings.connect_port}
    for service in compose.values():
        assert all(mapping.startswith("127.0.0.1:") for mapping in service.get("ports", []))


def test_same_broker_settings(compose: dict, settings: StackSettings) -> None:
    env = {key: str(value) for key, value in compose["kafka"]["environment"].items()}
    networking = {
        "listeners",
        "advertised.listeners",
        "controller.quorum.voters",
        "inter.broker.listener.name",
        "listener.security.protocol.map",
        "log.dirs",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",  # holds the generated password (compose: from env)
    }
    for key, value in Kafka().server_properties(settings).items():
        if key not in networking:
            assert env.get("KAFKA_" + key.upper().replace(".", "_")) == str(value), key
    assert f"HOST://127.0.0.1:{settings.kafka_port}" in env["KAFKA_ADVERTISED_LISTENERS"]


def test_same_connect_worker_settings(settings: StackSettings) -> None:
    lines = (REPO / "docker" / "connect-distributed.properties").read_text().splitlines()
    docker = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    networking = {"bootstrap.servers", "listeners", "rest.advertised.host.name", "plugin.path"}
    native = {k: str(v) for k, v in KafkaConnect().worker_properties(settings).items() if k not in networking}
    assert {k: v for k, v in docker.items() if k not in networking} == native
    assert docker["listeners"].endswith(f":{settings.connect_port}")


def test_same_memory(compose: dict, settings: StackSettings) -> None:
    assert compose["kafka"]["environment"]["KAFKA_HEAP_OPTS"] == f"-Xms{settings.kafka_heap} -Xmx{settings.kafka_heap}"
    assert compose["connect"]["environment"]["KAFKA_HEAP_OPTS"] == (
        f"-Xms{settings.connect_heap} -Xmx{settings.connect_heap}"
    )
    assert compose["registry"]["environment"]["JAVA_OPTS_APPEND"] == (
        f"-Xms{settings.registry_heap} -Xmx{settings.registry_heap}"
    )
    neo4j = compose["neo4j"]["environment"]
    assert neo4j["NEO4J_server_memory_heap_max__size"] == settings.neo4j_heap
    assert neo4j["NEO4J_server_memory_pagecache_size"] == settings.neo4j_pagecache


def test_pipeline_services_reach_the_same_endpoints(compose: dict, settings: StackSettings) -> None:
    for name in ("processor", "sink", "collector"):
        env = compose[name]["environment"]
        registry = urlparse(env["SCHEMA_REGISTRY_URL"])
        assert (registry.hostname, registry.port, registry.path) == (
            "registry",
            settings.registry_port,
            "/apis/ccompat/v7",
        )
        assert urlparse(env["NEO4J_URI"]).port == settings.neo4j_bolt_port
        assert urlparse(env["LINEAGE_CONNECT_URL"]).port == settings.connect_port
        assert (
            f"INTERNAL://{env['KAFKA_BOOTSTRAP_SERVERS']}"
            in compose["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        )


PIPELINE = {"processor", "sink", "alert-sink", "alert-router", "collector", "connect-watcher"}


def test_every_long_running_component_has_a_service(compose: dict) -> None:
    assert set(compose) == {"kafka", "registry", "neo4j", "connect"} | PIPELINE
    commands = {name: compose[name]["command"] for name in PIPELINE}
    assert commands["alert-sink"] == ["lineage", "alerts", "run"]
    assert commands["alert-router"] == ["lineage", "alerts", "route"]
    assert commands["connect-watcher"] == ["lineage", "connect", "watch"]


def test_the_collector_listens_on_every_interface_of_its_container(compose: dict) -> None:
    # 127.0.0.1 inside a container is unreachable through the published port
    assert compose["collector"]["environment"]["LINEAGE_COLLECTOR_HOST"] == "0.0.0.0"
    assert compose["collector"]["ports"] == ["127.0.0.1:5000:5000"]  # published on the host's loopback only


def test_every_service_has_a_health_check_and_a_restart_policy(compose: dict) -> None:
    for name, service in compose.items():
        assert service.get("restart") == "unless-stopped", name
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name
    for name, port in (("processor", 9101), ("sink", 9102), ("alert-sink", 9103), ("collector", 5000)):
        assert compose[name]["healthcheck"]["test"][-1] == f"http://127.0.0.1:{port}/health/ready", name


def test_no_secret_has_a_default(compose: dict) -> None:
    text = (REPO / "docker-compose.yml").read_text()
    for variable in ("NEO4J_PASSWORD", "LINEAGE_KAFKA_SASL_PASSWORD"):
        assert f"${{{variable}:-" not in text and f"${{{variable}-" not in text, variable
        assert f"${{{variable}:?" in text, variable
    assert "lineage-dev" not in text


def test_the_pipeline_image_copies_every_package_it_installs() -> None:
    import tomllib

    folders = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values())
    copied = {line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")}
    assert folders <= copied, f"the image would install without {sorted(folders - copied)}"
