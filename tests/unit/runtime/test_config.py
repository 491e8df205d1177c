from pathlib import Path

import pytest

from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.producers.service.settings import CollectorSettings
from kafka_lineage.runtime.config import ClientSettings, ConfigError, port_number
from kafka_lineage.sinks.alerts.settings import AlertSettings
from kafka_lineage.sinks.graph.settings import SinkSettings
from kafka_lineage_devtools.stack.config import StackSettings


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


def test_neo4j_password_file_is_read_and_a_missing_one_named(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("mounted\n")
    assert ClientSettings.from_env({"NEO4J_PASSWORD_FILE": str(secret)}).neo4j_password == "mounted"
    with pytest.raises(ConfigError, match="NEO4J_PASSWORD_FILE: no such file"):
        ClientSettings.from_env({"NEO4J_PASSWORD_FILE": str(tmp_path / "absent")})


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


def test_sasl_settings_reach_every_kafka_client_config(tmp_path: Path) -> None:
    env = {"LINEAGE_STATE_DIR": str(tmp_path), "KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
           "KAFKA_SASL_USERNAME": "lineage", "KAFKA_SASL_PASSWORD": "s3cret", "SCHEMA_REGISTRY_BASIC_AUTH": "u:p4ss"}
    client = ClientSettings.from_env(env)
    assert client.kafka_config({"group.id": "g"}) == {
        "bootstrap.servers": client.kafka_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "lineage", "sasl.password": "s3cret", "group.id": "g"}
    assert client.registry_config()["basic.auth.user.info"] == "u:p4ss"
    assert {"s3cret", "p4ss"} <= set(client.secrets)


def test_plaintext_is_the_default_and_adds_nothing(tmp_path: Path) -> None:
    client = ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path)})
    assert client.kafka_config() == {"bootstrap.servers": client.kafka_bootstrap_servers}
    assert "basic.auth.user.info" not in client.registry_config()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL: one of PLAINTEXT, SSL"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "u"}, "KAFKA_SASL_PASSWORD: required"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "KERBEROS", "KAFKA_SASL_USERNAME": "u",
          "KAFKA_SASL_PASSWORD": "p"}, "KAFKA_SASL_MECHANISM: one of PLAIN"),
        ({"KAFKA_SASL_USERNAME": "u"}, "KAFKA_SASL_\\*: set, but KAFKA_SECURITY_PROTOCOL=PLAINTEXT"),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_LOCATION": "/nonexistent/ca.pem"},
         "KAFKA_SSL_CA_LOCATION: no such file"),
        ({"SCHEMA_REGISTRY_BASIC_AUTH": "no-colon"}, "SCHEMA_REGISTRY_BASIC_AUTH: expected user:password"),
        ({"NEO4J_URI": "http://127.0.0.1:7474"}, "NEO4J_URI: expected bolt"),
    ],
)
def test_bad_security_settings_name_the_setting(env: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path), **env})


def test_tls_settings_need_a_tls_protocol(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    with pytest.raises(ConfigError, match="KAFKA_SSL_CA_LOCATION: set, but KAFKA_SECURITY_PROTOCOL=PLAINTEXT"):
        ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path), "KAFKA_SSL_CA_LOCATION": str(ca)})
    client = ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path), "KAFKA_SECURITY_PROTOCOL": "SSL",
                                      "KAFKA_SSL_CA_LOCATION": str(ca), "NEO4J_URI": "neo4j+s://db.example:7687"})
    assert client.kafka_config()["ssl.ca.location"] == str(ca)
    assert client.neo4j_uri == "neo4j+s://db.example:7687"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("LINEAGE_PARTITIONS", "nan", "LINEAGE_PARTITIONS: expected a number"),
        ("LINEAGE_PARTITIONS", "0.5", "LINEAGE_PARTITIONS: expected a number \\(a positive integer\\), got '0.5'"),
        ("LINEAGE_PARTITIONS", "0", "LINEAGE_PARTITIONS: must be positive"),
        ("LINEAGE_PROCESSOR_BATCH", "inf", "LINEAGE_PROCESSOR_BATCH: expected a number"),
        ("LINEAGE_REORDER_WINDOW", "nan", "LINEAGE_REORDER_WINDOW: expected a finite number"),
        ("LINEAGE_DEDUPE_TTL", "inf", "LINEAGE_DEDUPE_TTL: expected a finite number"),
        ("LINEAGE_REORDER_WINDOW", "-1", "LINEAGE_REORDER_WINDOW: must be positive"),
    ],
)
def test_counts_are_positive_integers_and_durations_finite(key: str, value: str, message: str,
                                                            tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        ProcessorSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path), key: value})


def test_every_count_setting_is_checked_as_a_count() -> None:
    for settings, key in ((SinkSettings, "LINEAGE_SINK_BATCH"), (SinkSettings, "LINEAGE_PARTITIONS"),
                          (SinkSettings, "LINEAGE_SINK_KNOWN_ROWS"), (AlertSettings, "LINEAGE_IMPACT_DEPTH"),
                          (AlertSettings, "LINEAGE_IMPACT_MAX"),
                          (CollectorSettings, "LINEAGE_COLLECTOR_MAX_BYTES")):
        with pytest.raises(ConfigError, match=f"{key}: expected a number"):
            settings.from_env({key: "inf"})
    assert SinkSettings.from_env({"LINEAGE_SINK_BATCH": " 500 "}).batch_size == 500
    assert SinkSettings.from_env({"LINEAGE_SINK_KNOWN_ROWS": "5000"}).known_rows == 5000
    with pytest.raises(ConfigError, match="LINEAGE_COLLECTOR_MAX_BYTES: expected a number"):
        CollectorSettings.from_env({"LINEAGE_COLLECTOR_MAX_BYTES": "16MB"})


def test_malformed_yaml_is_one_line_naming_the_file_and_place(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("KAFKA_BOOTSTRAP_SERVERS: 127.0.0.1:9092\nLINEAGE_PARTITIONS: [x\n")
    with pytest.raises(ConfigError) as caught:
        StackSettings.from_env({"LINEAGE_CONFIG": str(config)})
    message = str(caught.value)
    assert "\n" not in message and str(config) in message and "at line 3, column 1" in message


def test_port_number() -> None:
    assert port_number("--port", 5000) == 5000
    for bad in (0, -1, 70000):
        with pytest.raises(ConfigError, match=f"--port: {bad} is not a valid TCP port"):
            port_number("--port", bad)


def test_tune_gc_freezes_start_up_objects_and_collects_young_objects_less_often() -> None:
    import gc

    from kafka_lineage.runtime.gc_tuning import YOUNG_THRESHOLD, tune_gc

    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD > before[0]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_kafka_debug_reaches_every_librdkafka_config_only_when_set() -> None:
    assert "debug" not in ClientSettings.from_values({}, neo4j=False).kafka_config()
    settings = ClientSettings.from_values({"LINEAGE_KAFKA_DEBUG": " eos,protocol "}, neo4j=False)
    assert settings.kafka_config({"linger.ms": "5"}) == {"bootstrap.servers": "127.0.0.1:9092", "debug": "eos,protocol",
                                                         "linger.ms": "5"}
