"""Pure core of the Kafka Connect hook: connector config → datasets, cluster snapshots → OpenLineage RunEvents.

No I/O here; ``connect_watcher`` polls the Connect REST API and feeds :func:`step`.

Design decisions:

* **One run per (cluster, connector, config, attempt).** ``runId = uuid5(cluster, name, sha256(config), attempt)``.
  A reconfigured connector is a new run (the old one is COMPLETEd at once, the new one STARTs from the next poll,
  since task states lag a config change by a moment); a restarted watcher derives the same runId for a
  connector it saw before and re-emits START, which downstream dedupes/treats idempotently. ``attempt`` counts the
  recoveries this watcher observed (RUNNING again after FAIL, or resumed after STOPPED with the same config): a FAILed
  run never becomes RUNNING again, so a recovery has to be a new run. A watcher restart resets the count to 0.
* **Lifecycle.** RUNNING first seen → START; connector or any task FAILED → FAIL (errorMessage facet with the Java
  trace); STOPPED, deleted or reconfigured → COMPLETE (the operator ended it, offsets committed), except a connector
  deleted or reconfigured while last seen UNASSIGNED / RESTARTING → ABORT (cut off while not running normally).
  PAUSED keeps the run open: pausing and resuming emit RUNNING events whose ``kafkaConnect`` facet carries the
  state (a paused connector keeps its offsets; resume continues the same run). UNASSIGNED / RESTARTING are
  transient and emit nothing. While the run is open, a RUNNING heartbeat goes out when ``heartbeat_seconds`` have
  passed since its last event (not while paused). Otherwise identical snapshots emit nothing.
* **Columns** (``connect_schema``): the value subject (``<topic>-value``, its latest version, fetched by the watcher)
  of each topic is the topic's ``schema`` facet; a sink's ``transforms`` chain applied to it gives the sink
  dataset's schema and ``columnLineage`` (topic fields → written fields); a source's topic fields are traced back
  through the chain to the source table's columns (JDBC, Debezium; a file has none). A new subject version of one
  of the connector's topics re-emits the open run as RUNNING with the new facets (so schema drift on a Connect-fed
  topic is seen); the versions are in the ``kafkaConnect`` run facet (``schemaVersions``), and SMTs whose effect on
  the fields is not modelled pass the fields through and are named there (``unknownTransforms``).
* **Namespaces** follow the OpenLineage naming spec through ``kafka_lineage.schemas.naming`` (the same functions the
  processor normalizes with): ``file`` + absolute path, ``kafka://host:port`` (lower-cased, smallest entry of the
  bootstrap list, so any order gives one namespace), JDBC URLs → ``postgres://host:port`` etc., ``s3://bucket``.
* **``topics.regex``** (sinks) cannot be expanded from the config alone. Given the cluster's topic names it is
  expanded (full match, as Kafka's pattern subscription does); without them no pattern "dataset" is invented (it would
  never join the real topic nodes) and the pattern is recorded in the ``kafkaConnect`` run facet instead.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import attr
import openlineage_sql
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    RunFacet,
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    schema_dataset,
)

from kafka_lineage.producers.service import connect_schema as cs
from kafka_lineage.schemas.naming import kafka_namespace, path_dataset, table_dataset

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/0.1.0/producers/connect_watcher"
FACET_SCHEMA = ("https://github.com/kafka-lineage/kafka-lineage/blob/main/schemas/facets/KafkaConnectRunFacet.json"
                "#/$defs/KafkaConnectRunFacet")
_RUN_ID_NAMESPACE = uuid.UUID("5b0c3f0e-4a8e-5d43-9a57-0c6a1f7e2b11")  # fixed: runIds must survive restarts


# --- snapshots of the cluster ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: str
    trace: str | None = None


@dataclass(frozen=True)
class ConnectorStatus:
    """One connector as ``GET /connectors?expand=status&expand=info`` reports it."""

    name: str
    type: str  # "source" | "sink" | "unknown"
    state: str  # RUNNING | PAUSED | STOPPED | FAILED | UNASSIGNED | RESTARTING | UNKNOWN
    config: Mapping[str, str] = field(default_factory=dict)
    tasks: tuple[TaskStatus, ...] = ()
    trace: str | None = None
    worker_id: str | None = None
    known: bool = True  # False when the worker answered without this connector's info or status (mid-rebalance)

    @property
    def connector_class(self) -> str:
        return str(self.config.get("connector.class", ""))

    @property
    def failed_tasks(self) -> tuple[TaskStatus, ...]:
        return tuple(t for t in self.tasks if t.state == "FAILED")

    @property
    def effective_state(self) -> str:
        """A failed task fails the run even while the connector itself reports RUNNING."""
        return "FAILED" if self.state == "FAILED" or self.failed_tasks else self.state

    @property
    def failure_trace(self) -> str | None:
        if self.state == "FAILED" and self.trace:
            return self.trace
        return next((t.trace for t in sorted(self.failed_tasks, key=lambda t: t.id) if t.trace), self.trace)


def parse_connectors(payload: Mapping[str, Any]) -> dict[str, ConnectorStatus]:
    """The expanded ``/connectors`` answer → name → :class:`ConnectorStatus`."""
    connectors: dict[str, ConnectorStatus] = {}
    for name, entry in (payload or {}).items():
        info, status = (entry or {}).get("info"), (entry or {}).get("status")
        if not info or not status:
            connectors[name] = ConnectorStatus(name=name, type="unknown", state="UNKNOWN", known=False)
            continue
        connector = status.get("connector") or {}
        tasks = tuple(
            TaskStatus(id=int(t.get("id", 0)), state=str(t.get("state", "UNKNOWN")), trace=t.get("trace"))
            for t in status.get("tasks") or ()
        )
        connectors[name] = ConnectorStatus(
            name=name,
            type=str(info.get("type") or status.get("type") or "unknown"),
            state=str(connector.get("state", "UNKNOWN")),
            config={str(k): str(v) for k, v in (info.get("config") or {}).items()},
            tasks=tasks,
            trace=connector.get("trace"),
            worker_id=connector.get("worker_id"),
        )
    return connectors


# --- datasets from a connector's config --------------------------------------------------------------------------
class DatasetId(NamedTuple):
    namespace: str
    name: str


@dataclass(frozen=True)
class ConnectorDatasets:
    inputs: tuple[DatasetId, ...] = ()
    outputs: tuple[DatasetId, ...] = ()
    supported: bool = True  # False: unknown connector class, no datasets derived
    topics_regex: str | None = None


def _csv(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def file_dataset(path: str) -> DatasetId:
    """A FileStream ``file`` lives on the worker's host: absolute paths per the spec; a relative one cannot be
    resolved here (the worker's working directory is unknown), so it stays relative, only normalized."""
    return DatasetId(*path_dataset(path)) if posixpath.isabs(path) else DatasetId("file", posixpath.normpath(path))


def _topics(namespace: str, names: Iterable[str]) -> tuple[DatasetId, ...]:
    return tuple(DatasetId(namespace, name) for name in dict.fromkeys(names))


def sink_topics(config: Mapping[str, str], topic_names: Collection[str] | None) -> tuple[list[str], str | None]:
    """Topics a sink reads: ``topics``, or ``topics.regex`` expanded against the cluster's topics when known."""
    regex = config.get("topics.regex") or None
    if not regex:
        return _csv(config.get("topics")), None
    if topic_names is None:
        return [], regex
    try:
        pattern = re.compile(regex)
    except re.error:  # a Java-only construct: keep the pattern in the facet, invent nothing
        return [], regex
    return sorted(t for t in topic_names if pattern.fullmatch(t)), regex


def _kafka_for(config: Mapping[str, str], kind: str, bootstrap_servers: str) -> str:
    # Connectors may override the worker's client config (connector.client.config.override.policy permitting).
    override = config.get(f"{'producer' if kind == 'source' else 'consumer'}.override.bootstrap.servers")
    return kafka_namespace(override or bootstrap_servers)


def _filestream_source(config: Mapping[str, str], kafka: str, _topics_known: Collection[str] | None
                       ) -> ConnectorDatasets:
    path = config.get("file")  # unset: the connector reads the worker's stdin, no dataset
    return ConnectorDatasets(inputs=(file_dataset(path),) if path else (),
                             outputs=_topics(kafka, _csv(config.get("topic"))))


def _filestream_sink(config: Mapping[str, str], kafka: str, topics_known: Collection[str] | None) -> ConnectorDatasets:
    topics, regex = sink_topics(config, topics_known)
    path = config.get("file")  # unset: the connector writes to the worker's stdout
    return ConnectorDatasets(inputs=_topics(kafka, topics), outputs=(file_dataset(path),) if path else (),
                             topics_regex=regex)


_SQL_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlserver": "mssql",
                 "oracle": "generic", "snowflake": "snowflake", "redshift": "redshift", "sqlite": "sqlite"}


def _query_tables(url: str, query: str) -> list[str]:
    """Tables a JDBC source ``query`` reads, through openlineage-sql (unparsable SQL → none)."""
    subprotocol = url.removeprefix("jdbc:").split(":", 1)[0].lower()
    try:
        meta = openlineage_sql.parse([query], dialect=_SQL_DIALECTS.get(subprotocol, "generic"))
    except Exception:  # the parser raises its own error types for unsupported SQL
        return []
    return [table.qualified_name for table in (meta.in_tables if meta else [])]


def _jdbc_source(config: Mapping[str, str], kafka: str, _topics_known: Collection[str] | None) -> ConnectorDatasets:
    url, prefix = config.get("connection.url", ""), config.get("topic.prefix", "")
    if config.get("query"):
        # Query mode publishes everything to exactly ``topic.prefix``.
        tables = _query_tables(url, config["query"])
        return ConnectorDatasets(inputs=tuple(DatasetId(*table_dataset(url, t)) for t in tables),
                                 outputs=_topics(kafka, [prefix] if prefix else []))
    tables = _csv(config.get("table.include.list") or config.get("table.whitelist"))
    # Table mode: one topic per table, named prefix + unqualified table name.
    return ConnectorDatasets(inputs=tuple(DatasetId(*table_dataset(url, t)) for t in tables),
                             outputs=_topics(kafka, [prefix + t.rsplit(".", 1)[-1] for t in tables]))


def _jdbc_sink(config: Mapping[str, str], kafka: str, topics_known: Collection[str] | None) -> ConnectorDatasets:
    topics, regex = sink_topics(config, topics_known)
    url, table_format = config.get("connection.url", ""), config.get("table.name.format") or "${topic}"
    tables = [table_format.replace("${topic}", topic) for topic in topics]
    return ConnectorDatasets(inputs=_topics(kafka, topics),
                             outputs=tuple(dict.fromkeys(DatasetId(*table_dataset(url, t)) for t in tables)),
                             topics_regex=regex)


def _debezium(scheme: str, default_port: str) -> Callable[..., ConnectorDatasets]:
    def datasets(config: Mapping[str, str], kafka: str, _topics_known: Collection[str] | None) -> ConnectorDatasets:
        host, port = config.get("database.hostname", ""), config.get("database.port") or default_port
        # Debezium 2.x names topics {topic.prefix}.{schema|db}.{table}; 1.x used database.server.name.
        prefix = config.get("topic.prefix") or config.get("database.server.name") or ""
        tables = _csv(config.get("table.include.list") or config.get("table.whitelist"))
        if scheme == "postgresql":  # entries are schema.table inside database.dbname
            url = f"jdbc:postgresql://{host}:{port}/{config.get('database.dbname', '')}"
        else:  # MySQL entries are db.table; the URL names no database
            url = f"jdbc:mysql://{host}:{port}"
        return ConnectorDatasets(inputs=tuple(DatasetId(*table_dataset(url, t)) for t in tables),
                                 outputs=_topics(kafka, [f"{prefix}.{t}" if prefix else t for t in tables]))

    return datasets


def _s3_sink(config: Mapping[str, str], kafka: str, topics_known: Collection[str] | None) -> ConnectorDatasets:
    topics, regex = sink_topics(config, topics_known)
    bucket, topics_dir = config.get("s3.bucket.name", ""), (config.get("topics.dir") or "topics").strip("/")
    # One dataset per topic directory: the connector writes {topics.dir}/{topic}/{partitioning}/objects.
    return ConnectorDatasets(inputs=_topics(kafka, topics),
                             outputs=tuple(DatasetId(*path_dataset(f"s3://{bucket}/{topics_dir}/{t}")) for t in topics),
                             topics_regex=regex)


_EXTRACTORS: dict[str, Callable[[Mapping[str, str], str, Collection[str] | None], ConnectorDatasets]] = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": _filestream_source,
    "org.apache.kafka.connect.file.FileStreamSinkConnector": _filestream_sink,
    "io.confluent.connect.jdbc.JdbcSourceConnector": _jdbc_source,
    "io.confluent.connect.jdbc.JdbcSinkConnector": _jdbc_sink,
    "io.debezium.connector.postgresql.PostgresConnector": _debezium("postgresql", "5432"),
    "io.debezium.connector.mysql.MySqlConnector": _debezium("mysql", "3306"),
    "io.confluent.connect.s3.S3SinkConnector": _s3_sink,
}
# Connect also accepts a plugin's simple class name, and that name without the "Connector" suffix, as aliases.
_ALIASES = {alias: fqcn for fqcn in _EXTRACTORS
            for alias in (fqcn.rsplit(".", 1)[-1], fqcn.rsplit(".", 1)[-1].removesuffix("Connector"))}


def connector_datasets(config: Mapping[str, str], connector_type: str, bootstrap_servers: str,
                       topic_names: Collection[str] | None = None) -> ConnectorDatasets:
    """Inputs and outputs of a connector from its config; unknown classes give no datasets (never raise)."""
    connector_class = str(config.get("connector.class", ""))
    extractor = _EXTRACTORS.get(connector_class) or _EXTRACTORS.get(_ALIASES.get(connector_class, ""))
    if extractor is None:
        return ConnectorDatasets(supported=False)
    try:
        return extractor(config, _kafka_for(config, connector_type, bootstrap_servers), topic_names)
    except ValueError:  # e.g. an unparsable connection.url: report the run, without datasets
        return ConnectorDatasets(supported=False)


# --- events -----------------------------------------------------------------------------------------------------
@attr.define
class KafkaConnectRunFacet(RunFacet):
    """What the Connect REST API says about the connector behind this run (never its config: it holds secrets)."""

    connectorClass: str
    connectorType: str
    state: str
    attempt: int
    workerId: str | None = None
    tasks: list[dict[str, Any]] = attr.field(factory=list)
    datasetsDerived: bool = True
    topicsRegex: str | None = None
    schemaVersions: dict[str, int] = attr.field(factory=dict)  # topic → registry version of ``<topic>-value``
    unknownTransforms: list[str] = attr.field(factory=list)  # SMTs whose effect on fields is not modelled

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA


@dataclass(frozen=True)
class SubjectSchema:
    """The latest version of a topic's ``<topic>-value`` subject in the registry."""

    version: int
    schema: str  # the Avro schema's JSON text
    schema_id: int | None = None


@dataclass(frozen=True)
class HookContext:
    job_namespace: str  # also the cluster identity inside runIds
    bootstrap_servers: str
    topic_names: Collection[str] | None = None
    producer: str = PRODUCER
    value_schemas: Mapping[str, SubjectSchema] = field(default_factory=dict)  # topic → its value subject's latest
    heartbeat_seconds: float | None = None  # a RUNNING event this long after the run's last event; None: never


def value_subject(topic: str) -> str:
    """The subject a topic's values are registered under (TopicNameStrategy, the converters' default)."""
    return f"{topic}-value"


def connector_topics(status: ConnectorStatus, ctx: HookContext) -> list[str]:
    """The Kafka topics a connector reads or writes (whose value subjects give its columns)."""
    datasets = connector_datasets(status.config, status.type, ctx.bootstrap_servers, ctx.topic_names)
    kafka = (datasets.outputs if status.type == "source" else datasets.inputs)
    return [d.name for d in kafka if d.namespace.startswith("kafka://")]


def schema_versions(status: ConnectorStatus, ctx: HookContext) -> tuple[tuple[str, int], ...]:
    return tuple((topic, ctx.value_schemas[topic].version) for topic in connector_topics(status, ctx)
                 if topic in ctx.value_schemas)


def config_hash(config: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def run_id(cluster: str, connector: str, config_digest: str, attempt: int = 0) -> str:
    return str(uuid.uuid5(_RUN_ID_NAMESPACE, "\n".join((cluster, connector, config_digest, str(attempt)))))


def default_job_namespace(connect_url: str) -> str:
    parts = urlsplit(connect_url if "//" in connect_url else f"http://{connect_url}")
    return f"kafka-connect://{(parts.hostname or 'localhost').lower()}:{parts.port or 8083}"


def _schema_facet(root: cs.Field, producer: str) -> schema_dataset.SchemaDatasetFacet | None:
    def convert(entry: dict[str, Any]) -> schema_dataset.SchemaDatasetFacetFields:
        return schema_dataset.SchemaDatasetFacetFields(
            name=entry["name"], type=entry["type"], description=entry.get("description"),
            fields=[convert(c) for c in entry.get("fields", [])])

    fields = cs.facet_fields(root)
    return schema_dataset.SchemaDatasetFacet(fields=[convert(f) for f in fields], producer=producer) if fields else None


def _input_field(namespace: str, name: str, column: str, transformed: bool, masked: bool
                 ) -> column_lineage_dataset.InputField:
    subtype = "TRANSFORMATION" if transformed else "IDENTITY"
    return column_lineage_dataset.InputField(
        namespace=namespace, name=name, field=column,
        transformations=[column_lineage_dataset.Transformation(type="DIRECT", subtype=subtype, masking=masked)])


def _column_lineage(mapping: Mapping[str, list[column_lineage_dataset.InputField]], producer: str
                    ) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
    fields = {name: column_lineage_dataset.Fields(inputFields=inputs) for name, inputs in mapping.items() if inputs}
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, producer=producer) if fields else None


_DEBEZIUM_ROW = ("after.", "before.")


def _source_column(connector_class: str, path: str) -> str | None:
    """The source table's column a field of the record the connector produced holds (JDBC: the row itself;
    Debezium: the envelope's ``before``/``after`` row state), or None when it holds no column (metadata, the whole
    value of a schemaless source such as a file's line)."""
    if not path:
        return None
    if connector_class.startswith("io.debezium."):
        row = next((path[len(p):] for p in _DEBEZIUM_ROW if path.startswith(p)), None)
        return row or None
    return path


def _dataset_facets(status: ConnectorStatus, datasets: ConnectorDatasets, ctx: HookContext
                    ) -> tuple[dict[DatasetId, dict[str, DatasetFacet]], dict[DatasetId, dict[str, DatasetFacet]]]:
    """Schema and column lineage facets of a connector's inputs and outputs, from its topics' value subjects."""
    inputs: dict[DatasetId, dict[str, DatasetFacet]] = {}
    outputs: dict[DatasetId, dict[str, DatasetFacet]] = {}
    chain = cs.transforms_of(status.config)
    roots = {d: cs.avro_root(ctx.value_schemas[d.name].schema) for d in (*datasets.inputs, *datasets.outputs)
             if d.namespace.startswith("kafka://") and d.name in ctx.value_schemas}
    if status.type == "source":
        # The topic's subject is what the chain produced; each field traced back to the source's column.
        for index, topic in enumerate(datasets.outputs):
            root = roots.get(topic)
            if root is None:
                continue
            facets: dict[str, DatasetFacet] = {}
            if schema := _schema_facet(root, ctx.producer):
                facets["schema"] = schema
            # The input the topic's records come from: one table per topic (JDBC table mode, Debezium), or the only one.
            source = (datasets.inputs[index] if len(datasets.inputs) == len(datasets.outputs)
                      else datasets.inputs[0] if len(datasets.inputs) == 1 else None)
            mapping: dict[str, list[column_lineage_dataset.InputField]] = {}
            for path, _ in cs.leaves(root) if source is not None else ():
                back = cs.source_paths(path, chain)
                column = _source_column(status.connector_class, back.path) if back else None
                if back is not None and column is not None and source is not None:
                    mapping[path] = [_input_field(source.namespace, source.name, column, back.transformed,
                                                  back.masked)]
            if lineage := _column_lineage(mapping, ctx.producer):
                facets["columnLineage"] = lineage
            outputs[topic] = facets
        return inputs, outputs
    # Sinks: each topic's subject is the input's schema; the chain gives what the sink writes, field by field.
    written: dict[str, cs.Field] = {}
    mapping = {}
    for topic in datasets.inputs:
        root = roots.get(topic)
        if root is None:
            continue
        if schema := _schema_facet(root, ctx.producer):
            inputs[topic] = {"schema": schema}
        result = cs.apply_chain(root, chain).root
        for field_ in result.fields if result.type == "struct" else ():
            written.setdefault(field_.name, field_)
        for path, leaf in cs.leaves(result):
            mapping.setdefault(path, []).extend(
                _input_field(topic.namespace, topic.name, origin, leaf.transformed, leaf.masked)
                for origin in leaf.origin if origin)
    if written:
        sink_root = cs.Field(cs.ROOT, "struct", False, tuple(written.values()))
        for output in datasets.outputs:
            facets = {}
            if schema := _schema_facet(sink_root, ctx.producer):
                facets["schema"] = schema
            if lineage := _column_lineage(mapping, ctx.producer):
                facets["columnLineage"] = lineage
            outputs[output] = facets
    return inputs, outputs


def build_event(event_type: RunState, status: ConnectorStatus, run: str, attempt: int, ctx: HookContext,
                now: datetime, state: str | None = None) -> RunEvent:
    datasets = connector_datasets(status.config, status.type, ctx.bootstrap_servers, ctx.topic_names)
    input_facets, output_facets = _dataset_facets(status, datasets, ctx)
    facets: dict[str, RunFacet] = {"kafkaConnect": KafkaConnectRunFacet(
        connectorClass=status.connector_class, connectorType=status.type, state=state or status.state,
        attempt=attempt, workerId=status.worker_id, tasks=[{"id": t.id, "state": t.state} for t in status.tasks],
        datasetsDerived=datasets.supported, topicsRegex=datasets.topics_regex,
        schemaVersions=dict(schema_versions(status, ctx)),
        unknownTransforms=list(cs.unknown_transforms(cs.transforms_of(status.config))), producer=ctx.producer)}
    trace = status.failure_trace if event_type == RunState.FAIL else None
    if event_type == RunState.FAIL:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=(trace or f"connector {status.name} failed").splitlines()[0], programmingLanguage="JAVA",
            stackTrace=trace, producer=ctx.producer)
    job_facets = {"jobType": job_type_job.JobTypeJobFacet(
        processingType="STREAMING", integration="KAFKA_CONNECT", jobType=status.type.upper(), producer=ctx.producer)}
    return RunEvent(
        eventType=event_type, eventTime=now.isoformat(), producer=ctx.producer,
        run=Run(runId=run, facets=facets), job=Job(namespace=ctx.job_namespace, name=status.name, facets=job_facets),
        inputs=[InputDataset(namespace=d.namespace, name=d.name, facets=input_facets.get(d) or None)
                for d in datasets.inputs],
        outputs=[OutputDataset(namespace=d.namespace, name=d.name, facets=output_facets.get(d) or None)
                 for d in datasets.outputs])


# --- the state machine ------------------------------------------------------------------------------------------
PENDING, OPEN, PAUSED, CLOSED = "pending", "open", "paused", "closed"  # phases of a tracked connector's run


@dataclass(frozen=True)
class Tracked:
    """The watcher's memory of one connector: its current run and what was last emitted for it."""

    run_id: str
    config_hash: str
    attempt: int
    phase: str  # PENDING (no event yet) | OPEN (started) | PAUSED (started, paused) | CLOSED (FAIL/COMPLETE sent)
    status: ConnectorStatus  # last seen: a deleted connector's datasets come from here
    schemas: tuple[tuple[str, int], ...] = ()  # (topic, value subject version) the last event described
    last_event: datetime | None = None  # when the last event of this run was emitted (heartbeats count from it)


def _advance(tracked: Tracked, status: ConnectorStatus, ctx: HookContext, now: datetime
             ) -> tuple[Tracked, list[RunEvent]]:
    """One connector, same config: move its run along the connector's effective state."""
    state, phase = status.effective_state, tracked.phase
    if state in ("RUNNING", "PAUSED") and phase == CLOSED:
        # Recovered after FAIL or resumed after STOP: a closed run never reopens, so this is the next attempt.
        attempt = tracked.attempt + 1
        tracked = replace(tracked, attempt=attempt, phase=PENDING,
                          run_id=run_id(ctx.job_namespace, status.name, tracked.config_hash, attempt))
        phase = PENDING

    def emit(event_type: RunState, new_phase: str) -> tuple[Tracked, list[RunEvent]]:
        event = build_event(event_type, status, tracked.run_id, tracked.attempt, ctx, now, state=state)
        return replace(tracked, phase=new_phase, status=status, schemas=schema_versions(status, ctx),
                       last_event=now), [event]

    if state == "RUNNING":
        if phase == PENDING:
            return emit(RunState.START, OPEN)
        if phase == PAUSED:
            return emit(RunState.RUNNING, OPEN)  # resumed
    elif state == "PAUSED":
        if phase == PENDING:
            return emit(RunState.START, PAUSED)  # first seen paused: the run exists, it is just not moving
        if phase == OPEN:
            return emit(RunState.RUNNING, PAUSED)
    elif state == "FAILED":
        if phase != CLOSED:
            return emit(RunState.FAIL, CLOSED)
    elif state == "STOPPED" and phase in (OPEN, PAUSED):
        return emit(RunState.COMPLETE, CLOSED)
    if phase in (OPEN, PAUSED) and state in ("RUNNING", "PAUSED"):
        if schema_versions(status, ctx) != tracked.schemas:
            return emit(RunState.RUNNING, phase)  # a topic's value subject has a new version: the new columns
        due = ctx.heartbeat_seconds and tracked.last_event is not None and (
            (now - tracked.last_event).total_seconds() >= ctx.heartbeat_seconds)
        if phase == OPEN and due:
            return emit(RunState.RUNNING, OPEN)  # heartbeat: the streaming run is alive
    # UNASSIGNED / RESTARTING / unchanged: nothing to say
    return replace(tracked, status=status), []


def _new(status: ConnectorStatus, ctx: HookContext) -> Tracked:
    digest = config_hash(status.config)
    return Tracked(run_id=run_id(ctx.job_namespace, status.name, digest), config_hash=digest, attempt=0,
                   phase=PENDING, status=status)


def _close(tracked: Tracked, ctx: HookContext, now: datetime) -> list[RunEvent]:
    """A run whose connector was deleted or reconfigured: COMPLETE when it was last seen running or paused (the
    operator ended it; offsets are committed), ABORT when it was cut off mid-recovery (last seen UNASSIGNED or
    RESTARTING: its tasks were not running normally when it ended)."""
    if tracked.phase not in (OPEN, PAUSED):
        return []
    normal = tracked.status.effective_state in ("RUNNING", "PAUSED", "STOPPED")
    return [build_event(RunState.COMPLETE if normal else RunState.ABORT, tracked.status, tracked.run_id,
                        tracked.attempt, ctx, now)]


def step(tracked: Mapping[str, Tracked], snapshot: Mapping[str, ConnectorStatus], ctx: HookContext, now: datetime
         ) -> tuple[dict[str, Tracked], list[RunEvent]]:
    """Next memory and the events that take downstream from the previous snapshot to this one."""
    memory: dict[str, Tracked] = {}
    events: list[RunEvent] = []
    for name in sorted(set(tracked) - set(snapshot)):  # deleted
        events += _close(tracked[name], ctx, now)
    for name in sorted(snapshot):
        status, previous = snapshot[name], tracked.get(name)
        if not status.known:  # answered without info/status: wait for the next poll, change nothing
            if previous is not None:
                memory[name] = previous
            continue
        if previous is not None and previous.config_hash != config_hash(status.config):
            # Reconfigured: the old run ends and the new config is a new run, judged from the next poll on — right
            # after the change the status endpoint can still show the previous configuration's (failed) tasks.
            events += _close(previous, ctx, now)
            memory[name] = _new(status, ctx)
            continue
        memory[name], new_events = _advance(previous or _new(status, ctx), status, ctx, now)
        events += new_events
    return memory, events


def uses_topic_regex(statuses: Iterable[ConnectorStatus]) -> bool:
    """Whether resolving datasets needs the cluster's topic names (lets the watcher skip listing them)."""
    return any(s.config.get("topics.regex") for s in statuses)
