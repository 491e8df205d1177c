from pathlib import Path

import pytest
from kafka_lineage.config import ClientSettings, ConfigError, StackSettings


def test_defaults_point_clients_at_the_local_stack(tmp_path: Path) -> None:
    env = {"LINEAGE_STATE_DIR": str(tmp_path)}
    stack = StackSettings.from_env(env)
    client = ClientSettings.from_env(env)
    assert stack.state_dir == tmp_path
    assert client.kafka_bootstrap_servers == f"127.0.0.1:{stack.kafka_port}"
    assert client.schema_registry_url == f"http://127.0.0.1:{stack.registry_port}/apis/ccompat/v7"
    assert client.neo4j_uri == f"bolt://127.0.0.1:{stack.neo4j_bolt_port}"
    assert client.neo4j_password == ""  # no stack started there yet


def test_neo4j_password_comes_from_the_state_dir_unless_set(tmp_path: Path) -> None:
    (tmp_path / "neo4j").mkdir()
    (tmp_path / "neo4j" / "password").write_text("generated-secret\n")
    assert ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path)}).neo4j_password == "generated-secret"
    env = {"LINEAGE_STATE_DIR": str(tmp_path), "NEO4J_PASSWORD": "explicit"}
    assert ClientSettings.from_env(env).neo4j_password == "explicit"


def test_environment_overrides_yaml_file(tmp_path: Path) -> None:
    config = tmp_path / "lineage.yaml"
    config.write_text("LINEAGE_KAFKA_PORT: 19092\nLINEAGE_REGISTRY_PORT: 18081\n")
    env = {"LINEAGE_CONFIG": str(config), "LINEAGE_REGISTRY_PORT": "28081", "LINEAGE_STATE_DIR": str(tmp_path)}
    stack = StackSettings.from_env(env)
    assert stack.kafka_port == 19092
    assert stack.registry_port == 28081


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("LINEAGE_KAFKA_PORT", "ninety", "LINEAGE_KAFKA_PORT: expected an integer"),
        ("LINEAGE_NEO4J_BOLT_PORT", "70000", "LINEAGE_NEO4J_BOLT_PORT: 70000 is not a valid TCP port"),
        ("LINEAGE_KAFKA_HEAP", "lots", "LINEAGE_KAFKA_HEAP: expected a JVM memory size"),
    ],
)
def test_bad_settings_name_the_setting(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        StackSettings.from_env({key: value})


def test_unreadable_yaml_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "lineage.yaml"
    config.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        StackSettings.from_env({"LINEAGE_CONFIG": str(config)})
