"""OpenLineage events → the rows of the Neo4j lineage graph (``graph_batch``). Pure.

``graph_batch(events)`` folds a batch of (normalized) events into one row per node and per relationship;
``statements(batch)`` pairs each row list with its constant ``UNWIND $rows AS row MERGE …`` statement, nodes first,
for the sink to run in one transaction. Labels, relationship types and property names are constants: no event value
ever reaches a statement's text.

Order independence. Every property is written by a rule whose result does not depend on the order events are
applied in, or on applying them twice, so a replay converges to the live graph:

- edges and nodes are set unions (MERGE); nothing is ever deleted (a field dropped from a schema keeps its
  ``HAS_FIELD`` edge; the ``SchemaVersion`` nodes record the history);
- run state only moves forward: START(0) < RUNNING(1) < COMPLETE/FAIL/ABORT(2), compared in Cypher against the stored
  ``stateRank``; between two events of one rank the later eventTime wins, then the larger state name;
- ``startTime`` is the earliest START eventTime, ``endTime`` the latest terminal one, ``lastEventTime`` the latest;
- facet-derived values (nominal times, error message, job type, statistics, data quality, a dataset's current
  schema) are "latest observation wins": each group is stored with an ``…Order`` property, a string ordering key
  (run facets: rank, eventTime; job/dataset facets: eventTime; then a digest of the value, so ties break
  deterministically) and replaced only by a larger key. ``SchemaVersion`` keeps its *first* observation (smallest
  key): the fields JSON and ``firstSeen``.

Times are compared as strings, so every eventTime is normalized to UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``
(``utc_time``), which sorts chronologically.

Data-quality metrics (``dataQualityMetrics`` input facet) go on the ``READ`` edge as canonical JSON
(``READ.dataQuality``): they describe one input dataset as one run read it, which a single Run property could only
hold as a map keyed by dataset. ``inputStatistics``/``outputStatistics`` give ``READ``/``WROTE`` ``rowCount`` and
``bytes``; the run's totals (``inputRowCount``, ``outputRowCount``, ``inputBytes``, ``outputBytes``) are recomputed from
its edges after every batch that touches them, so they too are order independent.

A dataset's ``symlinks`` identifiers (other names of the same data: the table of a path, the catalog name of a
topic) become ``(Dataset)-[:SAME_AS {type}]->(Dataset)`` to a node of that name, created if needed, so that an event
naming only the path or only the table joins the same lineage; the lineage queries follow ``SAME_AS`` either way
without counting it as a hop (ARCHITECTURE 52). Names in Flink's per-job in-memory catalog (``default_catalog.…``)
are not linked: they name a different table in every job.

Facets of jobs and datasets are kept as documents, one ``Facet {of, namespace, name, key}`` node each (JSON,
bounded like run facets, latest eventTime wins, so every facet a job or dataset was ever sent accumulates); a facet
sent with ``"_deleted": true`` is a later value that hides it. Schema and column lineage are modelled instead
(SchemaVersion nodes, DERIVES_FROM edges). The column-lineage facet's dataset-level ``dataset`` list (input columns
the whole output depends on: join keys, filters, grouping) becomes ``(Dataset)-[:DEPENDS_ON]->(Field)``; a
transformation's ``masking`` flag is kept in the transformation text (``DIRECT/HASH(masked)``). Input datasets'
``dataQualityAssertions`` go on the ``READ`` edge (``READ.assertions``, JSON list) beside the metrics.

Partitions: a ``kafkaLineage_partition`` facet (``schemas/partitions.py``) never makes a dataset; it gives
``(Dataset)-[:HAS_PARTITION]->(Partition {namespace, name, key})`` (``key``: ``date=2025-12-24/region=eu``, in the
order sent). In an output's ``outputFacets``, the run's own version: ``(Partition)-[:HAS_VERSION]->(PartitionVersion
{namespace, name, key, runId})`` and ``(Run)-[:WROTE_PARTITION]->(PartitionVersion)`` carrying that output's
statistics, data quality, failed/passed assertion names and reported markers; in an input's ``inputFacets``
``(Run)-[:READ_PARTITION]->(Partition)`` (with the reader's assertions); in a DatasetEvent's ``facets`` a marker
report. The partition keeps its marker reports (``"<eventTime> <file>"``) and the dataset's ``requiredMarker``
(latest wins). A facet's ``stale`` request (``lineage backfill plan --mark-stale``) is kept on the partition as
``staleMarks`` (``"<requestedAt> <reason>"``, a set union like the markers). A run's ``kafkaLineage_backfill`` facet
(``{"window": {"from", "to"}, "planId"}``) is kept on the Run (``backfillPlanId``, ``backfillFrom``, ``backfillTo``;
latest wins) and tells its partition versions apart from live ones.
Failed/passed assertions and markers are set unions, so a failure once reported stays. Only facts are
written: states (RUNNING/SUCCESS/FAILED/STALE), version numbers and readiness are computed when asked
(``partitions.py``), so nothing depends on the order facts arrived in.

Not mapped (yet): the parent facet's ``root`` (only the direct parent is linked), error stack traces.

Lineage edges (``INPUT_TO``, ``OUTPUTS``, ``DERIVES_FROM``, ``DEPENDS_ON``, ``SAME_AS``) keep
``firstSeen``/``lastSeen``: the earliest and latest eventTime of an event that carried them (min/max rules, so order
free). As-of questions ("the graph as it was at T") read them; they are event times, not wall-clock times, so a
replay reproduces them.

The rows' merge rules are in ``graph.batch``, the statements that write them in ``graph.statements``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from kafka_lineage.graph.batch import ROW_IDENTITY, GraphBatch, RowBuilder, property_group
from kafka_lineage.graph.facets import (
    add_facet_documents,
    as_dict,
    as_list,
    as_text,
    assertion_results,
    facet_content,
    field_paths,
    run_facets_json,
    statistics,
    transformation_text,
)
from kafka_lineage.graph.keys import NO_TIME_MAX, NO_TIME_MIN, TERMINAL, canonical_json, state_rank, utc_time
from kafka_lineage.schemas.openlineage import lifecycle_rank
from kafka_lineage.schemas.partitions import BACKFILL_FACET_KEY as BACKFILL_FACET
from kafka_lineage.schemas.partitions import FACET_KEY as PARTITION_FACET
from kafka_lineage.schemas.partitions import partition_key_text, partition_keys
from kafka_lineage.schemas.schema_diff import schema_fields, schema_version


def _identity(b: RowBuilder, obj: Any) -> tuple[str, str] | None:
    """Stored keys of (namespace, name) of a job or dataset object; None when either is missing (MERGE cannot key
    on null). An empty string is an identity the spec allows (Flink's listener names a filesystem table by its
    catalog name in the empty namespace): kept."""
    namespace, name = as_dict(obj).get("namespace"), as_dict(obj).get("name")
    return (b.key(namespace), b.key(name)) if isinstance(namespace, str) and isinstance(name, str) else None


# Flink's default catalog is in memory, per job: `default_catalog.default_database.orders` of one job is not that of
# another, so linking such a name would merge unrelated lineage (the symlinks facet keeps it, as a document).
_SESSION_CATALOG = "default_catalog."


def _session_catalog_name(name: str) -> bool:
    return name.startswith(_SESSION_CATALOG)


def _dataset_facets(b: RowBuilder, dataset: Any, first: str | None, last: str | None) -> tuple[str, str] | None:
    """Dataset node, its fields and schema version (schema facet) and field lineage (columnLineage facet), as seen
    from ``first`` to ``last`` (an event's time, both; properties kept by min or earliest take ``first``, those
    kept by max or latest take ``last``)."""
    ident = _identity(b, dataset)
    if ident is None:
        return None
    namespace, name = ident
    facets = as_dict(dataset.get("facets"))
    fields = schema_fields(dataset)
    if fields:
        known = b.schema_texts.get(id(fields))
        if known is None or known[0] is not fields:
            fields_json = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)  # as the drift alert writes it
            version = b.versions.get(fields_json)
            if version is None:  # the processor's hash, so alerts and graph name versions alike
                if len(b.versions) > 20_000:  # bounded (~1 KB a key for 20 fields)
                    b.versions.clear()
                version = b.versions[fields_json] = schema_version(fields)
            known = b.schema_texts[id(fields)] = (fields, fields_json, version)
        _, fields_json, version = known
        b.dataset(namespace, name, property_group(last or NO_TIME_MAX, version=version))
        version_row = {"namespace": namespace, "name": name, "hash": version,
                       "first": property_group(first or NO_TIME_MIN, fields=fields_json, firstSeen=first)}
        b.add("schema_versions", version_row)
        b.full_names("schema_versions", version_row)
        b.add("has_schema", {"namespace": namespace, "name": name, "hash": version})
        if (namespace, name, version) not in b.schemas_done:  # field rows have no merge rules: once is enough
            b.schemas_done.add((namespace, name, version))
            paths = tuple(b.key(path) for path in field_paths(fields))
            b.schema_paths[(namespace, name, version)] = paths
            if b.schema_field_rows:
                for path in paths:
                    b.field(namespace, name, path, with_dataset=False)
            elif b.originals:  # the version writes its fields; the whole values behind hashed keys still need rows
                for path in paths:
                    b.full_names("fields", {"namespace": namespace, "name": name, "field": path})
    else:
        b.dataset(namespace, name)
    for identifier in as_list(as_dict(facets.get("symlinks")).get("identifiers")):
        alias = _identity(b, identifier)
        if alias is not None and alias != (namespace, name) and not _session_catalog_name(alias[1]):
            b.dataset(*alias)
            b.add("same_as", {"namespace": namespace, "name": name, "aliasNamespace": alias[0],
                              "aliasName": alias[1], "type": as_text(identifier.get("type")), "firstSeen": first,
                              "lastSeen": last})
    add_facet_documents(b, "Dataset", namespace, name, facets, last)
    lineage = as_dict(facets.get("columnLineage"))
    for entry in as_list(lineage.get("dataset")):  # input columns the whole dataset depends on (join, filter, …)
        source, in_field = _identity(b, entry), as_text(as_dict(entry).get("field"))
        if source is not None and in_field is not None:
            in_key = b.key(in_field)
            b.field(*source, in_key)
            b.add("depends_on", {"namespace": namespace, "name": name, "inputNamespace": source[0],
                                 "inputName": source[1], "inputField": in_key,
                                 "lineage": property_group(last or NO_TIME_MAX,
                                                           transformation=transformation_text(entry)),
                                 "firstSeen": first, "lastSeen": last})
    for out_field, spec in as_dict(lineage.get("fields")).items():
        if not as_text(out_field):
            continue
        spec = as_dict(spec)
        for entry in as_list(spec.get("inputFields")):
            source, in_field = _identity(b, entry), as_text(as_dict(entry).get("field"))
            if source is None or in_field is None:
                continue
            out_key, in_key = b.key(out_field), b.key(in_field)
            text = transformation_text(entry) or (as_text(spec.get("transformationType")) or "")
            b.field(namespace, name, out_key)
            b.field(*source, in_key)
            b.add("derives_from", {"namespace": namespace, "name": name, "field": out_key,
                                   "inputNamespace": source[0], "inputName": source[1], "inputField": in_key,
                                   "lineage": property_group(last or NO_TIME_MAX, transformation=text),
                                   "firstSeen": first, "lastSeen": last})
    return ident



class _Seen:
    """The eventTimes something was seen at in a batch: the earliest, the latest, and whether once without one."""

    __slots__ = ("earliest", "latest", "untimed")

    def __init__(self) -> None:
        self.earliest: str | None = None
        self.latest: str | None = None
        self.untimed = False

    def seen(self, time: str | None) -> None:
        if time is None:
            self.untimed = True
            return
        if self.earliest is None or time < self.earliest:
            self.earliest = time
        if self.latest is None or time > self.latest:
            self.latest = time


class _Repeats(_Seen):
    """When a dataset with one facets object was seen, after its rows were first built at ``done`` (``_dataset``)."""

    __slots__ = ("dataset", "done")

    def __init__(self, dataset: Any, time: str | None) -> None:
        super().__init__()
        self.dataset, self.done = dataset, time
        self.seen(time)


class _SeenJob(_Seen):
    """When a job object was seen, and its stored identity (``_job``)."""

    __slots__ = ("ident", "job")

    def __init__(self, job: dict[str, Any], ident: tuple[str, str]) -> None:
        super().__init__()
        self.job, self.ident = job, ident


def _dataset(b: RowBuilder, dataset: Any, time: str | None) -> tuple[str, str] | None:
    """``_dataset_facets``, once per dataset identity and facets object: a decoder that shares one object per
    distinct facets text (the FacetCache) hands every run of a job the same facets of its datasets, and their rows
    differ only by time. Every time-dependent property of those rows merges by min, earliest, max or latest, so the
    rows built once more over the span of the other times (and without a time, if one had none) merge to what
    building them at every time gives; that is done when the batch is built (``_built_repeats``)."""
    known = b.datasets_seen.get(id(dataset))  # the same dataset object again (an input: shared as a whole)
    if known is not None and known[0] is dataset:
        known[1].seen(time)
        return known[2]
    facets = as_dict(dataset).get("facets")
    if not facets:
        return _dataset_facets(b, dataset, time, time)
    ident = _identity(b, dataset)
    if ident is None:
        return None
    key = (ident, id(facets))
    repeats = b.repeats.get(key)
    fresh = repeats is None or repeats.dataset.get("facets") is not facets  # (kept alive, so an id stays its own)
    if fresh:
        b.repeats[key] = repeats = _Repeats(dataset, time)
    else:
        repeats.seen(time)
    b.datasets_seen[id(dataset)] = (dataset, repeats, ident)
    return _dataset_facets(b, dataset, time, time) if fresh else ident


def _built_repeats(b: RowBuilder) -> None:
    for repeats in b.repeats.values():
        if repeats.earliest is not None and (repeats.earliest, repeats.latest) != (repeats.done, repeats.done):
            _dataset_facets(b, repeats.dataset, repeats.earliest, repeats.latest)
        if repeats.untimed and repeats.done is not None:
            _dataset_facets(b, repeats.dataset, None, None)
    b.repeats.clear()
    b.datasets_seen.clear()


def _job(b: RowBuilder, job: Any) -> _SeenJob | None:
    """A job object's ``_SeenJob`` (None: no identity). Its rows are built when the batch is (``_built_jobs``), once
    per object: the decoder shares one object per distinct job (the FacetCache), so every run of a job hands over
    the same one, and its rows (node, job type, facet documents) differ only by time, merged by max or latest."""
    seen = b.jobs_seen.get(id(job))
    if seen is None or seen.job is not job:  # (kept alive, so an id stays its own)
        ident = _identity(b, job)
        if ident is None:
            return None
        seen = b.jobs_seen[id(job)] = _SeenJob(job, ident)
    return seen


def _job_rows(b: RowBuilder, job: dict[str, Any], ident: tuple[str, str], time: str | None) -> None:
    facets = as_dict(job.get("facets"))
    job_type = facet_content(as_dict(facets.get("jobType")))
    type_group = property_group(time or NO_TIME_MAX, processingType=job_type.get("processingType"),
                                integration=job_type.get("integration"), jobType=job_type.get("jobType"),
                                eventContentMode=as_text(as_dict(job_type.get("emissionPattern")).get(
                                    "eventContentMode")))
    b.job(*ident, time, type_group if job_type else None)
    add_facet_documents(b, "Job", *ident, facets, time)


def _built_jobs(b: RowBuilder) -> None:
    """Each job's rows at the latest time it was seen, and without a time if it once was: what building them at
    every time merges to (every time-dependent property of a job's rows is kept by max or latest)."""
    for seen in b.jobs_seen.values():
        if seen.latest is not None:
            _job_rows(b, seen.job, seen.ident, seen.latest)
        if seen.untimed:
            _job_rows(b, seen.job, seen.ident, None)
    b.jobs_seen.clear()


def _seen_edge(b: RowBuilder, kind: str, key: tuple[str, str, str, str], time: str | None) -> None:
    """An ``input_to``/``outputs`` edge seen at ``time``: one row per edge and batch, its ``firstSeen``/``lastSeen``
    the earliest/latest time (what merging a row per event by min/max gives; ``_built_edges``)."""
    seen = b.edge_spans.get((kind, key))
    if seen is None:
        seen = b.edge_spans[(kind, key)] = _Seen()
    seen.seen(time)


def _built_edges(b: RowBuilder) -> None:
    for (kind, key), seen in b.edge_spans.items():
        b.add(kind, {**dict(zip(ROW_IDENTITY[kind], key, strict=True)), "firstSeen": seen.earliest,
                     "lastSeen": seen.latest})
    b.edge_spans.clear()


def _partition(b: RowBuilder, ident: tuple[str, str], facet: Any, time: str | None) -> str | None:
    """The ``Partition`` row (and its ``HAS_PARTITION``) of a ``kafkaLineage_partition`` facet; its stored key text,
    None when the facet names no valid keys. A ``marker`` is a report "the marker file exists" at the event's time;
    ``requiredMarker`` is the dataset's rule, latest event wins."""
    keys = partition_keys(facet)
    if keys is None:
        return None
    key = b.key(partition_key_text(keys))
    marker, required = as_text(facet.get("marker")), as_text(facet.get("requiredMarker"))
    stale = as_dict(facet.get("stale"))
    stale_at = utc_time(stale.get("requestedAt")) if stale else None
    b.add("partitions", {"namespace": ident[0], "name": ident[1], "key": key,
                         "requiredMarker": property_group(time or NO_TIME_MAX, marker=required) if required else None,
                         "markers": [f"{time} {marker}"] if marker and time else None,
                         "staleMarks": [f"{stale_at} {as_text(stale.get('reason')) or 'marked stale'}"]
                         if stale_at else None})
    b.add("has_partition", {"namespace": ident[0], "name": ident[1], "key": key})
    return key


def _partition_io(b: RowBuilder, kind: str, run_id: str, ident: tuple[str, str], facets: dict[str, Any],
                  order: str, time: str | None) -> None:
    """A run's read (``READ_PARTITION`` to the partition) or write (its own ``PartitionVersion``, ``HAS_VERSION``,
    ``WROTE_PARTITION``) of the partition its input/output facets name, with that dataset's statistics and data
    quality (the writer's checks of what it wrote decide the version's state; see ``partitions``)."""
    facet = facets.get(PARTITION_FACET)
    key = _partition(b, ident, facet, time) if facet is not None else None
    if key is None:
        return
    where = {"runId": run_id, "namespace": ident[0], "name": ident[1], "key": key}
    quality = facet_content(facets.get("dataQualityMetrics"))
    assertions = as_list(as_dict(facets.get("dataQualityAssertions")).get("assertions"))
    failed, passed = assertion_results(facets.get("dataQualityAssertions"))
    row = {**where, "dataQuality": property_group(order, json=canonical_json(quality)) if quality else None,
           "assertions": property_group(order, json=canonical_json(assertions)) if assertions else None,
           "failed": failed or None, "passed": passed or None, "firstSeen": time, "lastSeen": time}
    if kind == "read":
        b.add("read_partition", row)
        return
    stats = statistics(facets.get("outputStatistics"))
    marker = as_text(as_dict(facet).get("marker"))
    b.add("partition_versions", dict(where))
    b.add("has_version", dict(where))
    b.add("wrote_partition", {**row, "stats": property_group(order, **stats) if stats else None,
                              "markers": [marker] if marker else None})


def _add_event(b: RowBuilder, event: Mapping[str, Any]) -> None:
    time = utc_time(event.get("eventTime"))
    if isinstance(event.get("dataset"), dict) and not ("run" in event and "job" in event):  # DatasetEvent
        ident = _dataset(b, event["dataset"], time)
        facet = as_dict(event["dataset"].get("facets")).get(PARTITION_FACET)
        if ident is not None and facet is not None:
            _partition(b, ident, facet, time)  # a completion-marker report (or the dataset's marker rule)
        return
    seen_job = _job(b, event.get("job"))
    job_ident = None
    if seen_job is not None:
        seen_job.seen(time)
        job_ident = seen_job.ident

    run = as_dict(event.get("run"))
    run_id = as_text(run.get("runId"))
    event_type = event.get("eventType")
    rank = state_rank(event_type) if run_id else None
    order = f"{rank if rank is not None else lifecycle_rank(event_type)}|{time or NO_TIME_MAX}"
    if run_id is not None:
        facets = as_dict(run.get("facets"))
        nominal, error = as_dict(facets.get("nominalTime")), as_dict(facets.get("errorMessage"))
        backfill = as_dict(facets.get(BACKFILL_FACET))
        window = as_dict(backfill.get("window"))
        b.run(run_id, state=event_type if rank is not None else None, rank=rank,
              stateOrder=f"{time or NO_TIME_MAX}|{event_type}" if rank is not None else None,
              startTime=time if event_type == "START" else None,
              endTime=time if event_type in TERMINAL else None,
              lastEventTime=time,
              nominalTime=property_group(order, nominalStartTime=utc_time(nominal.get("nominalStartTime")),
                                 nominalEndTime=utc_time(nominal.get("nominalEndTime"))) if nominal else None,
              errorMessage=property_group(order, message=as_text(error.get("message")),
                                  programmingLanguage=as_text(error.get("programmingLanguage"))) if error else None,
              **({"backfill": property_group(order, planId=as_text(backfill.get("planId")) or "",
                                             start=as_text(window.get("from")), end=as_text(window.get("to")))}
                 if backfill else {}),
              **({"startRunFacets" if event_type == "START" else "runFacets":
                  property_group(order, json=run_facets_json(facets))} if facets else {}))
        if job_ident is not None:
            b.add("of_job", {"runId": run_id, "namespace": job_ident[0], "name": job_ident[1]})
        parent = as_dict(facets.get("parent"))
        parent_id, parent_job = as_text(as_dict(parent.get("run")).get("runId")), _identity(b, parent.get("job"))
        if parent_id is not None and parent_id != run_id:
            b.run(parent_id)
            b.add("child_of", {"runId": run_id, "parentRunId": parent_id})
            if parent_job is not None:
                b.job(*parent_job)
                b.add("of_job", {"runId": parent_id, "namespace": parent_job[0], "name": parent_job[1]})

    for dataset in as_list(event.get("inputs")):
        ident = _dataset(b, dataset, time)
        if ident is None:
            continue
        if job_ident is not None:
            _seen_edge(b, "input_to", (*ident, *job_ident), time)
        if run_id is not None:
            input_facets = as_dict(dataset.get("inputFacets"))
            _partition_io(b, "read", run_id, ident, input_facets, order, time)
            stats = statistics(input_facets.get("inputStatistics"))
            quality = facet_content(input_facets.get("dataQualityMetrics"))
            assertions = as_list(as_dict(input_facets.get("dataQualityAssertions")).get("assertions"))
            b.add("read", {"runId": run_id, "namespace": ident[0], "name": ident[1],
                           "stats": property_group(order, **stats) if stats else None,
                           "dataQuality": property_group(order, json=canonical_json(quality)) if quality else None,
                           "assertions": property_group(order, json=canonical_json(assertions))
                           if assertions else None})
            if stats:
                b.add("run_totals", {"runId": run_id})
    for dataset in as_list(event.get("outputs")):
        ident = _dataset(b, dataset, time)
        if ident is None:
            continue
        if job_ident is not None:
            _seen_edge(b, "outputs", (*job_ident, *ident), time)
        if run_id is not None:
            output_facets = as_dict(dataset.get("outputFacets"))
            _partition_io(b, "wrote", run_id, ident, output_facets, order, time)
            stats = statistics(output_facets.get("outputStatistics"))
            b.add("wrote", {"runId": run_id, "namespace": ident[0], "name": ident[1],
                            "stats": property_group(order, **stats) if stats else None})
            if stats:
                b.add("run_totals", {"runId": run_id})


def graph_batch(events: Iterable[Mapping[str, Any]], schema_field_rows: bool = True) -> GraphBatch:
    """Fold events (OpenLineage JSON dicts, names already normalized) into one row per node and relationship.

    The result does not depend on the events' order or on repeats. Malformed facets are skipped, not fatal: an
    event that passed validation must reach the graph. ``schema_field_rows=False``: no Field or HAS_FIELD rows for
    the fields of schema versions (``schema_paths`` has them; ``statements`` sends them with their version), only
    for fields outside them — what a writer through ``statements`` needs, ~30 rows an event fewer.
    """
    b = RowBuilder(schema_field_rows)
    for event in events:
        if isinstance(event, Mapping):
            _add_event(b, event)
    _built_repeats(b)
    _built_jobs(b)
    _built_edges(b)
    return b.batch()


def graph_batches(events: Iterable[Mapping[str, Any]], events_per_batch: int) -> Iterator[GraphBatch]:
    """``graph_batch`` of each run of ``events_per_batch`` consecutive events: a fold's memory bounded by the slice,
    not by the stream (``merge_batches`` of them all is ``graph_batch`` of the whole)."""
    stream = iter(events)
    while chunk := list(islice(stream, events_per_batch)):
        yield graph_batch(chunk)
