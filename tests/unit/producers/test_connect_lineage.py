"""Kafka Connect hook core: connector config → datasets, cluster snapshots → OpenLineage run events."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.serde import Serde

from kafka_lineage.producers.service.connect_lineage import (
    ConnectorStatus,
    DatasetId,
    HookContext,
    SubjectSchema,
    TaskStatus,
    config_hash,
    connector_datasets,
    default_job_namespace,
    parse_connectors,
    run_id,
    step,
)
from kafka_lineage.schemas.openlineage import validate_event

KAFKA = "kafka://broker-a:9092"
BOOTSTRAP = "Broker-B:9092, broker-a:9092"
CTX = HookContext(job_namespace="kafka-connect://connect:8083", bootstrap_servers=BOOTSTRAP)
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
TRACE = "org.apache.kafka.connect.errors.ConnectException: Couldn't find file\n\tat Foo.bar(Foo.java:1)"


def datasets(config: dict[str, str], kind: str, topics: set[str] | None = None) -> tuple[list, list]:
    result = connector_datasets(config, kind, BOOTSTRAP, topics)
    return list(result.inputs), list(result.outputs)


# --- namespaces ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("servers", ["broker-a:9092,broker-b:9092", " BROKER-B:9092 ,Broker-A:9092",
                                     "PLAINTEXT://broker-b:9092,SASL_SSL://broker-a:9092", "broker-a,broker-b"])
def test_topic_namespace_is_canonical_for_any_bootstrap_list(servers: str) -> None:
    config = {"connector.class": FILE_SOURCE, "file": "/in", "topic": "t"}
    assert connector_datasets(config, "source", servers).outputs == (DatasetId(KAFKA, "t"),)


def test_default_job_namespace_from_connect_url() -> None:
    assert default_job_namespace("http://Connect.Example:8083/") == "kafka-connect://connect.example:8083"
    assert default_job_namespace("https://connect") == "kafka-connect://connect:8083"


# --- config → datasets --------------------------------------------------------------------------------------------
def test_filestream_source_reads_the_file_and_writes_the_topic() -> None:
    config = {"connector.class": FILE_SOURCE, "file": "/data/in/../in.txt", "topic": "lines"}
    assert datasets(config, "source") == ([DatasetId("file", "/data/in.txt")], [DatasetId(KAFKA, "lines")])
    assert datasets({**config, "connector.class": "FileStreamSource"}, "source")[0]  # Connect's plugin aliases
    assert datasets({"connector.class": FILE_SOURCE, "topic": "lines"}, "source") == ([], [DatasetId(KAFKA, "lines")])
    assert datasets({**config, "file": "data/./in.txt"}, "source")[0] == [DatasetId("file", "data/in.txt")]


def test_filestream_sink_reads_every_listed_topic() -> None:
    config = {"connector.class": FILE_SINK, "topics": "a, b,,a", "file": "/out/sink.txt"}
    assert datasets(config, "sink") == ([DatasetId(KAFKA, "a"), DatasetId(KAFKA, "b")],
                                        [DatasetId("file", "/out/sink.txt")])


def test_topics_regex_is_expanded_only_against_known_topics() -> None:
    config = {"connector.class": FILE_SINK, "topics.regex": "orders\\..*", "file": "/out/sink.txt"}
    unknown = connector_datasets(config, "sink", BOOTSTRAP)
    assert unknown.inputs == () and unknown.topics_regex == "orders\\..*"
    assert unknown.outputs == (DatasetId("file", "/out/sink.txt"),)
    expanded = connector_datasets(config, "sink", BOOTSTRAP, {"orders.eu", "orders.us", "xorders.eu", "orders"})
    assert expanded.inputs == (DatasetId(KAFKA, "orders.eu"), DatasetId(KAFKA, "orders.us"))
    invalid = connector_datasets({**config, "topics.regex": "(?<x>java"}, "sink", BOOTSTRAP, {"orders.eu"})
    assert invalid.inputs == () and invalid.topics_regex == "(?<x>java"


def test_connector_level_bootstrap_override_picks_the_cluster() -> None:
    config = {"connector.class": FILE_SOURCE, "file": "/in", "topic": "t",
              "producer.override.bootstrap.servers": "other:9094"}
    assert datasets(config, "source")[1] == [DatasetId("kafka://other:9094", "t")]


def test_jdbc_source_tables_become_prefixed_topics() -> None:
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": "jdbc:postgresql://DB.example:5432/shop",
              "table.whitelist": "public.orders,public.items", "topic.prefix": "pg-"}
    assert datasets(config, "source") == (
        [DatasetId("postgres://db.example:5432", "shop.public.orders"),
         DatasetId("postgres://db.example:5432", "shop.public.items")],
        [DatasetId(KAFKA, "pg-orders"), DatasetId(KAFKA, "pg-items")])
    renamed = {**config, "table.include.list": "public.orders"}
    del renamed["table.whitelist"]
    assert datasets(renamed, "source")[1] == [DatasetId(KAFKA, "pg-orders")]


def test_jdbc_source_query_reads_the_tables_of_the_query_into_the_prefix_topic() -> None:
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": "jdbc:mysql://mysql:3306/shop", "topic.prefix": "orders-joined",
              "query": "SELECT o.id, c.name FROM shop.orders o JOIN shop.customers c ON o.customer_id = c.id"}
    inputs, outputs = datasets(config, "source")
    assert sorted(inputs) == [DatasetId("mysql://mysql:3306", "shop.customers"),
                              DatasetId("mysql://mysql:3306", "shop.orders")]
    assert outputs == [DatasetId(KAFKA, "orders-joined")]
    assert datasets({**config, "query": "THIS IS NOT SQL ((("}, "source") == ([], [DatasetId(KAFKA, "orders-joined")])


def test_jdbc_sink_writes_one_table_per_topic_through_the_name_format() -> None:
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders,items",
              "connection.url": "jdbc:postgresql://warehouse:5432/dwh", "table.name.format": "staging.kafka_${topic}"}
    assert datasets(config, "sink") == (
        [DatasetId(KAFKA, "orders"), DatasetId(KAFKA, "items")],
        [DatasetId("postgres://warehouse:5432", "dwh.staging.kafka_orders"),
         DatasetId("postgres://warehouse:5432", "dwh.staging.kafka_items")])


def test_debezium_postgres_and_mysql_capture_tables_into_prefixed_topics() -> None:
    postgres = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": "PG", "database.port": "5433", "database.dbname": "shop",
                "topic.prefix": "cdc", "table.include.list": "public.orders"}
    assert datasets(postgres, "source") == ([DatasetId("postgres://pg:5433", "shop.public.orders")],
                                            [DatasetId(KAFKA, "cdc.public.orders")])
    mysql = {"connector.class": "io.debezium.connector.mysql.MySqlConnector", "database.hostname": "mysql",
             "topic.prefix": "cdc", "table.include.list": "inventory.customers,inventory.orders"}
    assert datasets(mysql, "source") == (
        [DatasetId("mysql://mysql:3306", "inventory.customers"), DatasetId("mysql://mysql:3306", "inventory.orders")],
        [DatasetId(KAFKA, "cdc.inventory.customers"), DatasetId(KAFKA, "cdc.inventory.orders")])


def test_s3_sink_writes_one_directory_dataset_per_topic() -> None:
    config = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": "orders",
              "s3.bucket.name": "lake", "topics.dir": "/raw/"}
    assert datasets(config, "sink") == ([DatasetId(KAFKA, "orders")], [DatasetId("s3://lake", "raw/orders")])
    del config["topics.dir"]
    assert datasets(config, "sink")[1] == [DatasetId("s3://lake", "topics/orders")]


def test_unparsable_connection_settings_give_a_run_without_datasets() -> None:
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders",
              "connection.url": "not a url"}
    assert connector_datasets(config, "sink", BOOTSTRAP).supported is False


def test_unknown_connector_class_has_no_datasets_and_never_raises() -> None:
    result = connector_datasets({"connector.class": "com.acme.MagicSink", "topics": "x"}, "sink", BOOTSTRAP)
    assert result.inputs == result.outputs == () and result.supported is False


# --- snapshots → events -------------------------------------------------------------------------------------------
def source(state: str = "RUNNING", *, tasks: tuple[TaskStatus, ...] | None = None, topic: str = "lines",
           trace: str | None = None, name: str = "file-in") -> ConnectorStatus:
    return ConnectorStatus(name=name, type="source", state=state, trace=trace, worker_id="127.0.0.1:8083",
                           config={"connector.class": FILE_SOURCE, "file": "/in.txt", "topic": topic, "name": name},
                           tasks=tasks if tasks is not None else (TaskStatus(0, state),))


def run(*snapshots: dict[str, ConnectorStatus]) -> list[list[RunEvent]]:
    """Feed snapshots in order; the events of each step."""
    memory: dict = {}
    emitted = []
    for snapshot in snapshots:
        memory, events = step(memory, snapshot, CTX, NOW)
        emitted.append(events)
    return emitted


def kinds(events: list[RunEvent]) -> list[str]:
    return [e.eventType.value for e in events]


def test_new_running_connector_starts_a_valid_run_with_datasets_and_facets() -> None:
    ((event,),) = run({"file-in": source()})
    assert event.eventType == RunState.START
    assert event.run.runId == run_id(CTX.job_namespace, "file-in", config_hash(source().config))
    assert (event.job.namespace, event.job.name) == (CTX.job_namespace, "file-in")
    assert [(d.namespace, d.name) for d in event.inputs] == [("file", "/in.txt")]
    assert [(d.namespace, d.name) for d in event.outputs] == [(KAFKA, "lines")]
    as_json: dict[str, Any] = Serde.to_dict(event)
    assert validate_event(as_json) == "RunEvent"  # the pipeline's own validator accepts it
    job_type = as_json["job"]["facets"]["jobType"]
    assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == (
        "STREAMING", "KAFKA_CONNECT", "SOURCE")
    facet = as_json["run"]["facets"]["kafkaConnect"]
    assert facet["connectorClass"] == FILE_SOURCE and facet["state"] == "RUNNING" and facet["attempt"] == 0
    assert "config" not in facet  # configs carry credentials
    assert facet["_schemaURL"].endswith("/schemas/facets/KafkaConnectRunFacet.json#/$defs/KafkaConnectRunFacet")
    _connect_facet_validator().validate(facet)  # the facet's own published schema
    assert not _connect_facet_validator().is_valid({**facet, "attempt": -1})


def _connect_facet_validator() -> Any:
    import jsonschema_rs

    import kafka_lineage.schemas as schemas_package

    document = json.loads((Path(schemas_package.__file__).parent / "facets" / "KafkaConnectRunFacet.json").read_text())
    base = {"$defs": {"RunFacet": {"type": "object", "required": ["_producer", "_schemaURL"]}}}
    return jsonschema_rs.validator_for({**document, "$ref": "#/$defs/KafkaConnectRunFacet"}, retriever=lambda _u: base)


def test_repeated_identical_snapshots_emit_nothing() -> None:
    assert [kinds(e) for e in run({"file-in": source()}, {"file-in": source()}, {"file-in": source()})] == [
        ["START"], [], []]


def test_running_to_failed_emits_fail_with_the_java_trace() -> None:
    _, (fail,), again = run({"file-in": source()}, {"file-in": source("FAILED", trace=TRACE)},
                            {"file-in": source("FAILED", trace=TRACE)})
    assert fail.eventType == RunState.FAIL and again == []
    error = fail.run.facets["errorMessage"]
    assert error.programmingLanguage == "JAVA" and error.stackTrace == TRACE
    assert error.message == "org.apache.kafka.connect.errors.ConnectException: Couldn't find file"


def test_task_failure_while_connector_running_fails_the_run() -> None:
    failed_task = (TaskStatus(0, "RUNNING"), TaskStatus(1, "FAILED", TRACE))
    (start,), (fail,) = run({"file-in": source()}, {"file-in": source(tasks=failed_task)})
    assert fail.eventType == RunState.FAIL and fail.run.runId == start.run.runId
    assert fail.run.facets["errorMessage"].stackTrace == TRACE
    assert fail.run.facets["kafkaConnect"].tasks == [{"id": 0, "state": "RUNNING"}, {"id": 1, "state": "FAILED"}]


def test_first_seen_failed_emits_only_fail() -> None:
    assert [kinds(e) for e in run({"file-in": source("FAILED", trace=TRACE)})] == [["FAIL"]]


def test_delete_completes_the_run_with_its_last_datasets() -> None:
    (start,), (complete,), after = run({"file-in": source()}, {}, {})
    assert complete.eventType == RunState.COMPLETE and complete.run.runId == start.run.runId
    assert [(d.namespace, d.name) for d in complete.outputs] == [(KAFKA, "lines")]
    assert after == []


def test_deleting_a_failed_connector_emits_nothing_more() -> None:
    assert [kinds(e) for e in run({"file-in": source("FAILED", trace=TRACE)}, {})] == [["FAIL"], []]


def test_reconfigure_completes_the_old_run_and_starts_a_new_one_from_the_next_poll() -> None:
    (start,), (complete,), (new_start,) = run({"file-in": source()}, {"file-in": source(topic="lines-v2")},
                                              {"file-in": source(topic="lines-v2")})
    assert (complete.eventType, new_start.eventType) == (RunState.COMPLETE, RunState.START)
    assert complete.run.runId == start.run.runId != new_start.run.runId
    assert [d.name for d in complete.outputs] == ["lines"] and [d.name for d in new_start.outputs] == ["lines-v2"]


def test_fixing_a_failed_connector_by_reconfiguring_starts_a_new_run_without_complete() -> None:
    failed_task = (TaskStatus(0, "FAILED", TRACE),)
    steps = run({"file-in": source(tasks=failed_task)},
                {"file-in": source(topic="fixed", tasks=failed_task)},  # the old task's state, not yet restarted
                {"file-in": source(topic="fixed")})
    assert [kinds(e) for e in steps] == [["FAIL"], [], ["START"]]


def test_a_reconfiguration_that_still_fails_is_a_new_failed_run() -> None:
    failed_task = (TaskStatus(0, "FAILED", TRACE),)
    steps = run({"file-in": source(tasks=failed_task)}, {"file-in": source(topic="other", tasks=failed_task)},
                {"file-in": source(topic="other", tasks=failed_task)})
    assert [kinds(e) for e in steps] == [["FAIL"], [], ["FAIL"]]
    assert steps[0][0].run.runId != steps[2][0].run.runId


def test_recovery_after_fail_with_the_same_config_is_a_new_attempt() -> None:
    (start,), (fail,), (restart,) = run({"file-in": source()}, {"file-in": source("FAILED", trace=TRACE)},
                                        {"file-in": source()})
    assert restart.eventType == RunState.START and restart.run.runId not in (start.run.runId, fail.run.runId)
    assert restart.run.facets["kafkaConnect"].attempt == 1


def test_watcher_restart_derives_the_same_run_id() -> None:
    (first,), = run({"file-in": source()})
    (again,), = run({"file-in": source()})  # a fresh memory, as after a watcher restart
    assert first.run.runId == again.run.runId


def test_stop_completes_and_resume_starts_the_next_attempt() -> None:
    steps = run({"file-in": source()}, {"file-in": source("STOPPED", tasks=())}, {"file-in": source()})
    assert [kinds(e) for e in steps] == [["START"], ["COMPLETE"], ["START"]]
    assert steps[0][0].run.runId != steps[2][0].run.runId


def test_pause_and_resume_emit_running_events_of_the_same_run() -> None:
    steps = run({"file-in": source()}, {"file-in": source("PAUSED")}, {"file-in": source("PAUSED")},
                {"file-in": source()})
    assert [kinds(e) for e in steps] == [["START"], ["RUNNING"], [], ["RUNNING"]]
    assert len({e.run.runId for events in steps for e in events}) == 1
    assert [events[0].run.facets["kafkaConnect"].state for events in steps if events] == [
        "RUNNING", "PAUSED", "RUNNING"]


def test_transient_states_wait_for_a_real_one() -> None:
    steps = run({"file-in": source("UNASSIGNED", tasks=())}, {"file-in": source("RESTARTING")}, {"file-in": source()})
    assert [kinds(e) for e in steps] == [[], [], ["START"]]


def test_a_connector_reported_without_status_is_neither_deleted_nor_changed() -> None:
    unknown = ConnectorStatus(name="file-in", type="unknown", state="UNKNOWN", known=False)
    steps = run({"file-in": source()}, {"file-in": unknown}, {"file-in": source()})
    assert [kinds(e) for e in steps] == [["START"], [], []]


def test_unknown_connector_class_runs_without_datasets_but_with_its_class() -> None:
    magic = ConnectorStatus(name="magic", type="sink", state="RUNNING", config={"connector.class": "com.acme.Magic"})
    ((event,),) = run({"magic": magic})
    assert event.inputs == [] and event.outputs == []
    facet = event.run.facets["kafkaConnect"]
    assert facet.connectorClass == "com.acme.Magic" and facet.datasetsDerived is False


def test_parse_connectors_reads_the_expanded_rest_answer() -> None:
    payload = {
        "file-in": {
            "status": {"name": "file-in", "type": "source",
                       "connector": {"state": "RUNNING", "worker_id": "127.0.0.1:8083"},
                       "tasks": [{"id": 0, "state": "FAILED", "worker_id": "127.0.0.1:8083", "trace": TRACE}]},
            "info": {"name": "file-in", "type": "source", "tasks": [{"connector": "file-in", "task": 0}],
                     "config": {"connector.class": FILE_SOURCE, "topic": "lines", "file": "/in.txt"}},
        },
        "half": {"info": {"name": "half", "config": {}, "type": "sink", "tasks": []}},
    }
    parsed = parse_connectors(payload)
    connector = parsed["file-in"]
    assert (connector.type, connector.state, connector.effective_state) == ("source", "RUNNING", "FAILED")
    assert connector.failure_trace == TRACE and connector.worker_id == "127.0.0.1:8083"
    assert parsed["half"].known is False


# --- columns from the registry, heartbeats, ABORT -------------------------------------------------------------------
T = "org.apache.kafka.connect.transforms."
LINE_SCHEMA = json.dumps({"type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro",
                          "fields": [{"name": "line", "type": "string"},
                                     {"name": "origin", "type": ["null", "string"], "default": None}]})
WIDER_SCHEMA = json.dumps({"type": "record", "name": "ConnectDefault", "fields": [
    {"name": "line", "type": "string"}, {"name": "origin", "type": ["null", "string"], "default": None},
    {"name": "host", "type": ["null", "string"], "default": None}]})
HOIST_INSERT = {"transforms": "hoist,origin", "transforms.hoist.type": T + "HoistField$Value",
                "transforms.hoist.field": "line", "transforms.origin.type": T + "InsertField$Value",
                "transforms.origin.static.field": "origin", "transforms.origin.static.value": "file"}
SINK_CHAIN = {"transforms": "rename,mask,stamp,custom",
              "transforms.rename.type": T + "ReplaceField$Value", "transforms.rename.renames": "line:text",
              "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "origin",
              "transforms.stamp.type": T + "InsertField$Value", "transforms.stamp.timestamp.field": "ts",
              "transforms.custom.type": "com.example.Custom"}


def with_schemas(**schemas: tuple[int, str]) -> HookContext:
    return dataclasses.replace(CTX, value_schemas={t: SubjectSchema(v, s) for t, (v, s) in schemas.items()})


def file_sink(**extra: str) -> ConnectorStatus:
    return ConnectorStatus("file-out", "sink", "RUNNING", {"connector.class": FILE_SINK, "file": "/out.txt",
                                                           "topics": "lines", **extra})


def facet(dataset: Any, name: str) -> Any:
    return Serde.to_dict(dataset.facets[name])


def test_source_topic_gets_its_value_subject_as_schema_facet() -> None:
    status = dataclasses.replace(source(), config={**source().config, **HOIST_INSERT})
    _, (start,) = step({}, {"file-in": status}, with_schemas(lines=(1, LINE_SCHEMA)), NOW)
    (topic,) = start.outputs
    assert [(f["name"], f["type"]) for f in facet(topic, "schema")["fields"]] == [
        ("line", "string NOT NULL"), ("origin", "string")]
    assert "columnLineage" not in topic.facets  # a file has no columns to trace back to
    assert start.inputs[0].facets in (None, {})
    assert start.run.facets["kafkaConnect"].schemaVersions == {"lines": 1}
    assert validate_event(Serde.to_dict(start)) == "RunEvent"


def test_sink_writes_the_chain_applied_fields_with_column_lineage() -> None:
    _, (start,) = step({}, {"file-out": file_sink(**SINK_CHAIN)}, with_schemas(lines=(3, LINE_SCHEMA)), NOW)
    (topic,), (out,) = start.inputs, start.outputs
    assert [f["name"] for f in facet(topic, "schema")["fields"]] == ["line", "origin"]
    assert [(f["name"], f["type"]) for f in facet(out, "schema")["fields"]] == [
        ("text", "string NOT NULL"), ("origin", "string"), ("ts", "timestamp")]
    lineage = facet(out, "columnLineage")["fields"]
    assert set(lineage) == {"text", "origin"}  # ts comes from record metadata, not a column
    (text,) = lineage["text"]["inputFields"]
    assert (text["namespace"], text["name"], text["field"]) == (KAFKA, "lines", "line")
    assert text["transformations"] == [{"type": "DIRECT", "subtype": "IDENTITY", "masking": False}]
    (origin,) = lineage["origin"]["inputFields"]
    assert origin["transformations"] == [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}]
    assert start.run.facets["kafkaConnect"].unknownTransforms == ["com.example.Custom"]
    assert validate_event(Serde.to_dict(start)) == "RunEvent"


def test_jdbc_source_columns_traced_back_to_the_table() -> None:
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": "jdbc:postgresql://db:5432/shop", "table.whitelist": "public.orders",
              "topic.prefix": "pg-", "transforms": "r", "transforms.r.type": T + "ReplaceField$Value",
              "transforms.r.renames": "id:order_id"}
    schema = json.dumps({"type": "record", "name": "orders", "fields": [{"name": "order_id", "type": "int"},
                                                                        {"name": "total", "type": "double"}]})
    status = ConnectorStatus("jdbc", "source", "RUNNING", config)
    _, (start,) = step({}, {"jdbc": status}, with_schemas(**{"pg-orders": (1, schema)}), NOW)
    (table,) = start.inputs
    lineage = facet(start.outputs[0], "columnLineage")["fields"]
    assert {name: [(i["namespace"], i["name"], i["field"]) for i in value["inputFields"]]
            for name, value in lineage.items()} == {
        "order_id": [(table.namespace, table.name, "id")], "total": [(table.namespace, table.name, "total")]}


def test_new_subject_version_re_emits_running_with_the_new_columns() -> None:
    memory, _ = step({}, {"file-out": file_sink()}, with_schemas(lines=(1, LINE_SCHEMA)), NOW)
    memory, same = step(memory, {"file-out": file_sink()}, with_schemas(lines=(1, LINE_SCHEMA)), NOW)
    memory, (changed,) = step(memory, {"file-out": file_sink()}, with_schemas(lines=(2, WIDER_SCHEMA)), NOW)
    assert same == [] and changed.eventType == RunState.RUNNING
    assert [f["name"] for f in facet(changed.outputs[0], "schema")["fields"]] == ["line", "origin", "host"]
    assert changed.run.facets["kafkaConnect"].schemaVersions == {"lines": 2}
    # a subject appearing after the START (the first record registers it) is a change too
    memory, (first,) = step({}, {"file-out": file_sink()}, CTX, NOW)
    _, (appeared,) = step(memory, {"file-out": file_sink()}, with_schemas(lines=(1, LINE_SCHEMA)), NOW)
    assert (first.eventType, appeared.eventType) == (RunState.START, RunState.RUNNING)


def test_heartbeat_while_running_not_while_paused() -> None:
    ctx = dataclasses.replace(CTX, heartbeat_seconds=60)
    memory, _ = step({}, {"file-in": source()}, ctx, NOW)
    memory, quiet = step(memory, {"file-in": source()}, ctx, NOW + timedelta(seconds=59))
    memory, (beat,) = step(memory, {"file-in": source()}, ctx, NOW + timedelta(seconds=60))
    memory, again = step(memory, {"file-in": source()}, ctx, NOW + timedelta(seconds=90))
    assert quiet == [] and again == [] and beat.eventType == RunState.RUNNING
    assert beat.run.facets["kafkaConnect"].state == "RUNNING"
    memory, (paused,) = step(memory, {"file-in": source("PAUSED")}, ctx, NOW + timedelta(seconds=100))
    _, none = step(memory, {"file-in": source("PAUSED")}, ctx, NOW + timedelta(seconds=1000))
    assert paused.eventType == RunState.RUNNING and none == []
    _, off = step(memory, {"file-in": source()}, CTX, NOW + timedelta(days=1))  # resumed: no heartbeat option
    assert kinds(off) == ["RUNNING"]


def test_deleted_while_unassigned_aborts_deleted_while_running_completes() -> None:
    memory, _ = step({}, {"file-in": source()}, CTX, NOW)
    cut_off, _ = step(memory, {"file-in": source("UNASSIGNED")}, CTX, NOW)
    assert kinds(step(cut_off, {}, CTX, NOW)[1]) == ["ABORT"]
    assert kinds(step(memory, {}, CTX, NOW)[1]) == ["COMPLETE"]


def test_the_watcher_s_heartbeat_setting_is_read_from_the_given_environment() -> None:
    from kafka_lineage.producers.service.connect_watcher import WatchSettings

    assert WatchSettings.from_env({}).heartbeat == 60.0
    assert WatchSettings.from_env({"LINEAGE_CONNECT_HEARTBEAT": "5"}).heartbeat == 5.0
    assert WatchSettings.from_env({"LINEAGE_CONNECT_HEARTBEAT": "0"}).heartbeat is None
    with pytest.raises(ValueError, match="LINEAGE_CONNECT_HEARTBEAT"):
        WatchSettings.from_env({"LINEAGE_CONNECT_HEARTBEAT": "soon"})
