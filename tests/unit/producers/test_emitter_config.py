"""The in-job emitter is configured only from its transport config and the standard environment: inside a user's
Spark driver or Airflow worker it reads no ``lineage.yaml`` and no secret file of a local stack."""

from pathlib import Path

import pytest

from kafka_lineage.producers.client.kafka_avro_transport import KafkaAvroConfig
from kafka_lineage.producers.client.spark import openlineage_spark_conf


def test_transport_ignores_lineage_yaml_and_stack_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lineage.yaml").write_text("KAFKA_BOOTSTRAP_SERVERS: from-yaml:9092\n")
    (tmp_path / "neo4j").mkdir()
    (tmp_path / "neo4j" / "password").write_text("not-for-jobs\n")
    monkeypatch.setenv("LINEAGE_STATE_DIR", str(tmp_path))
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "LINEAGE_KAFKA_PORT"):  # (integration tests set the port for their stack)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://registry.example:8081")
    config = KafkaAvroConfig.from_dict({})
    assert config.config["bootstrap.servers"] == "127.0.0.1:9092"
    assert config.schema_registry["url"] == "http://registry.example:8081"
    assert "not-for-jobs" not in repr(config)


def test_spark_helper_uses_the_standard_openlineage_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENLINEAGE_URL", "https://lineage.example:5000")
    monkeypatch.setenv("OPENLINEAGE_API_KEY", "k")
    conf = openlineage_spark_conf()
    assert conf["spark.openlineage.transport.url"] == "https://lineage.example:5000"
    assert conf["spark.openlineage.transport.auth.apiKey"] == "k"
