"""The graph's answers in Marquez's JSON shapes (Marquez's OpenAPI spec, ``spec/openapi.yml``), so Marquez clients,
scripts and UIs read them unchanged. Pure.

Fields the graph cannot fill are answered as Marquez answers an unknown value (null, [] or {}), listed in the
README: ``ownerName``/``description`` of namespaces, ``parentJobName``, run ``args``. Jobs and datasets carry their
facet documents (a dataset's schema and column lineage are in ``fields`` and the column-lineage graph instead); the
description is the documentation facet's, the tags the tags facet's, a job's location its source-code location.
A dataset's ``currentVersion`` and a version's ``version`` are the schema version hash (Marquez: a UUID per write).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from kafka_lineage.graph.node_ids import NodeId, dataset_id, job_id
from kafka_lineage.graph.store import Graph, facet_documents, schema_fields
from kafka_lineage.schemas.tags import TAGS_FACET

# OpenLineage run states → Marquez's (RunState: NEW, RUNNING, COMPLETED, FAILED, ABORTED)
RUN_STATES = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "COMPLETED", "FAIL": "FAILED",
              "ABORT": "ABORTED"}
# ... and back: the OpenLineage states of each of Marquez's (``NEW``: a job without a run)
OPENLINEAGE_STATES = {"NEW": ("NEW",), "RUNNING": ("START", "RUNNING"), "COMPLETED": ("COMPLETE",),
                      "FAILED": ("FAIL",), "ABORTED": ("ABORT",)}


def millis_between(start: str | None, end: str | None) -> int | None:
    """Milliseconds from one ISO time to another; None when either is missing or unreadable."""
    if not start or not end:
        return None
    try:
        delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return int(delta.total_seconds() * 1000)


def dataset_type(namespace: str) -> str:
    """Marquez's dataset types: a Kafka topic is a STREAM, everything else a DB_TABLE."""
    return "STREAM" if namespace.startswith("kafka://") else "DB_TABLE"


def fields(fields_json: str | None) -> list[dict[str, Any]]:
    return [{"name": f.get("name"), "type": f.get("type"), "tags": [], "description": f.get("description")}
            for f in schema_fields(fields_json) if isinstance(f.get("name"), str)]


def namespace(row: list[Any]) -> dict[str, Any]:
    name, first, last = row
    return {"name": name, "createdAt": first, "updatedAt": last, "ownerName": None, "description": None,
            "isHidden": False}


def _description(facets: Mapping[str, Any]) -> str | None:
    text = _dict(facets.get("documentation")).get("description")
    return text if isinstance(text, str) else None


def _tags(facets: Mapping[str, Any]) -> list[str]:
    """The tags facet's tags as Marquez's tag names (``key`` or ``key:value``)."""
    names = []
    for tag in _dict(facets.get("tags")).get("tags") or ():
        key, value = _dict(tag).get("key"), _dict(tag).get("value")
        if isinstance(key, str):
            names.append(f"{key}:{value}" if isinstance(value, str) and value and value != key else key)
    return sorted(set(names))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dataset(row: list[Any]) -> dict[str, Any]:
    ns, name, version, fields_json, first_seen, last_write, facet_texts, column_inputs = row
    facets = facet_documents(facet_texts)
    lifecycle = _dict(facets.get("lifecycleStateChange")).get("lifecycleStateChange")
    return {
        "id": {"namespace": ns, "name": name}, "type": dataset_type(ns), "name": name, "physicalName": name,
        "createdAt": first_seen, "updatedAt": max(filter(None, (first_seen, last_write)), default=None),
        "namespace": ns, "sourceName": ns, "fields": fields(fields_json), "tags": _tags(facets),
        "lastModifiedAt": last_write, "lastLifecycleState": lifecycle if isinstance(lifecycle, str) else None,
        "description": _description(facets), "facets": facets, "currentVersion": version,
        "deleted": lifecycle == "DROP", "columnLineage": column_lineage(column_inputs or []),
    }


def column_lineage(inputs: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Marquez's Dataset.columnLineage from (column, input namespace, input dataset, input column, transformation)
    rows: each column with its input fields, by column name."""
    by_column: dict[str, list[dict[str, Any]]] = {}
    for column, namespace, dataset_name, field, text in inputs:
        kind, description = _transformation(text or "")
        by_column.setdefault(column, []).append({"namespace": namespace, "dataset": dataset_name, "field": field,
                                                 "transformationDescription": description,
                                                 "transformationType": kind})
    return [{"name": column, "inputFields": sorted(found, key=lambda f: (f["namespace"], f["dataset"], f["field"])),
             "transformationDescription": found[0]["transformationDescription"],
             "transformationType": found[0]["transformationType"]}
            for column, found in sorted(by_column.items())]


def dataset_version(ns: str, name: str, version: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": {"namespace": ns, "name": name, "version": version["version"]}, "type": dataset_type(ns),
        "name": name, "physicalName": name, "createdAt": version["firstSeen"], "version": version["version"],
        "namespace": ns, "sourceName": ns, "fields": fields(version["fields"]), "tags": [], "description": None,
        "createdByRun": None, "facets": {},
    }


def run(row: Mapping[str, Any], inputs: Iterable[Mapping[str, Any]] = (), outputs: Iterable[Mapping[str, Any]] = ()
        ) -> dict[str, Any]:
    """Marquez's Run (its facets when the row has them: the job's runs list), with the versions of the datasets it
    read and wrote when given (``{namespace, name, version}``). ``jobVersion`` is null: the graph keeps no job
    versions (Marquez answers null for a run without one too)."""
    start, end = row.get("startTime"), row.get("endTime")
    return {
        "id": row["runId"], "createdAt": start or row.get("lastEventTime"), "updatedAt": row.get("lastEventTime"),
        "nominalStartTime": row.get("nominalStartTime"), "nominalEndTime": row.get("nominalEndTime"),
        "state": RUN_STATES.get(row.get("state") or "", "NEW"), "startedAt": start, "endedAt": end,
        "durationMs": millis_between(start, end), "args": {}, "jobVersion": None,
        "inputDatasetVersions": _dataset_versions(inputs), "outputDatasetVersions": _dataset_versions(outputs),
        "facets": row.get("facets") or {},
    }


def _dataset_versions(datasets: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"datasetVersionId": {"namespace": d["namespace"], "name": d["name"], "version": d["version"]},
             "facets": {}} for d in sorted(datasets, key=lambda d: (d["namespace"], d["name"]))]


def source(namespace_name: str) -> dict[str, Any]:
    """Marquez's Source of a dataset namespace (a dataset's ``sourceName`` is its namespace): its type is the
    namespace's scheme, upper-cased (``POSTGRES``, ``S3``, ``KAFKA``)."""
    scheme = namespace_name.partition("://")[0] if "://" in namespace_name else ""
    return {"type": scheme.upper() or None, "name": namespace_name, "createdAt": None, "updatedAt": None,
            "connectionUrl": namespace_name, "description": None}


def tag_names(facet_texts: Iterable[str]) -> list[str]:
    """Marquez's tag names (``key`` or ``key:value``) of every tags facet document given: producers' ``tags`` and
    those set through the API (``kafkaLineage_tags``)."""
    names: set[str] = set()
    for text in facet_texts:
        facets = facet_documents([text])
        names.update(_tags(facets), _tags({"tags": facets.get(TAGS_FACET)}))
    return sorted(names)


def job_type(processing_type: str | None) -> str:
    return "STREAM" if (processing_type or "").upper() == "STREAMING" else "BATCH"


def job(row: list[Any]) -> dict[str, Any]:
    ns, name, last_event, processing, _job_type, _integration, first_run, inputs, outputs, runs, facet_texts = row
    latest = [run(r) for r in runs]
    facets = facet_documents(facet_texts)
    return {
        "id": {"namespace": ns, "name": name}, "type": job_type(processing), "name": name,
        "simpleName": name.rsplit(".", 1)[-1], "parentJobName": None, "parentJobUuid": None,
        "createdAt": first_run or last_event, "updatedAt": last_event, "namespace": ns,
        "inputs": [{"namespace": i[0], "name": i[1]} for i in sorted(inputs)],
        "outputs": [{"namespace": o[0], "name": o[1]} for o in sorted(outputs)],
        "location": _dict(facets.get("sourceCodeLocation")).get("url"), "context": {},
        "description": _description(facets), "latestRun": latest[0] if latest else None, "latestRuns": latest,
        "facets": facets, "currentVersion": None, "tags": _tags(facets), "labels": [],
    }


def search_result(row: list[Any]) -> dict[str, Any]:
    """A store search row (a dataset or a job) as Marquez's SearchResult."""
    kind, ns, name, _field, updated = row
    node = dataset_id(ns, name) if kind == "DATASET" else job_id(ns, name)
    return {"type": kind, "name": name, "updatedAt": updated, "namespace": ns, "nodeId": node}


# --- lineage graphs ------------------------------------------------------------------------------------------------
def lineage_graph(graph: Graph, latest_runs: Mapping[str, Mapping[str, Any]] | None = None,
                  schemas: Mapping[str, str] | None = None, written: set[str] | None = None) -> dict[str, Any]:
    """Marquez's LineageGraph of jobs and datasets: a job's inEdges come from the datasets it reads and its
    outEdges go to those it writes; a dataset's inEdges come from the jobs writing it, its outEdges go to readers.
    ``latest_runs`` (element id → run row) fills the jobs' ``latestRun``, ``schemas`` (element id → fields JSON)
    the datasets' ``fields``; with ``written`` (the datasets a completed run wrote), a dataset some job writes that
    is not among them carries ``declaredOnly: true`` (not a Marquez field: its outputs were only declared)."""
    latest_runs, schemas = latest_runs or {}, schemas or {}
    ids = {element: str(node) for element, node in graph.nodes.items()}
    ins: dict[str, list[str]] = {element: [] for element in graph.nodes}
    outs: dict[str, list[str]] = {element: [] for element in graph.nodes}
    for start, end in graph.edges:
        outs[start].append(end)
        ins[end].append(start)
    by_id = ids.__getitem__
    nodes = []
    for element, node in graph.nodes.items():
        node_id = ids[element]
        sources, targets = ins[element], outs[element]
        if len(sources) > 1:
            sources.sort(key=by_id)
        if len(targets) > 1:
            targets.sort(key=by_id)
        edges_in = [{"origin": ids[o], "destination": node_id} for o in sources]
        edges_out = [{"origin": node_id, "destination": ids[d]} for d in targets]
        # Marquez's JobData / DatasetData: what the walk does not read (creation times, descriptions, locations,
        # parents) is null; a job's updatedAt is its latest run's last known time.
        if node.kind == "job":
            latest = run(latest_runs[element]) if element in latest_runs else None
            data: dict[str, Any] = {
                "id": {"namespace": node.namespace, "name": node.name}, "type": "BATCH", "name": node.name,
                "simpleName": node.name.rsplit(".", 1)[-1], "parentJobName": None, "parentJobUuid": None,
                "currentRunUuid": None, "createdAt": None,
                "updatedAt": (latest["updatedAt"] or latest["endedAt"] or latest["startedAt"]) if latest else None,
                "namespace": node.namespace, "inputs": _dataset_ids(graph.nodes[o] for o in sources),
                "outputs": _dataset_ids(graph.nodes[d] for d in targets), "location": None, "description": None,
                "latestRun": latest}
        else:
            data = {"id": {"namespace": node.namespace, "name": node.name}, "type": dataset_type(node.namespace),
                    "name": node.name, "physicalName": node.name, "createdAt": None, "updatedAt": None,
                    "namespace": node.namespace, "sourceName": node.namespace, "fields": fields(schemas.get(element)),
                    "tags": [], "lastModifiedAt": None, "description": None, "lastLifecycleState": None}
            if written is not None and sources and element not in written:
                data["declaredOnly"] = True
        nodes.append({"id": node_id, "type": node.kind.upper(), "data": data,
                      "inEdges": edges_in, "outEdges": edges_out})
    nodes.sort(key=lambda n: n["id"])
    return {"graph": nodes}


def _dataset_ids(nodes: Iterable[NodeId]) -> list[dict[str, str]]:
    return [{"namespace": namespace, "name": name} for namespace, name in sorted((n.namespace, n.name) for n in nodes)]


def _transformation(text: str) -> tuple[str | None, str | None]:
    """(transformationType, transformationDescription) from the stored ``DIRECT/IDENTITY,INDIRECT/FILTER`` text."""
    if not text:
        return None, None
    return text.split(",", 1)[0].split("/", 1)[0], text


def column_lineage_graph(graph: Graph, types: Mapping[tuple[str, str], Mapping[str, str]]) -> dict[str, Any]:
    """Marquez's column-lineage graph: DATASET_FIELD nodes, each with the input fields it derives from; as Marquez
    answers, a field's inEdges go from it to its inputs and an input's outEdges go from it to what derives from it."""
    ids = {element: str(node) for element, node in graph.nodes.items()}
    inputs: dict[str, list[tuple[str, str]]] = {element: [] for element in graph.nodes}
    derived: dict[str, list[str]] = {element: [] for element in graph.nodes}
    for (output, source), text in graph.edges.items():  # DERIVES_FROM: derived column → its input
        inputs[output].append((source, text))
        derived[source].append(output)
    nodes = []
    for element, node in graph.nodes.items():
        node_id = ids[element]
        input_fields = []
        for source, text in sorted(inputs[element], key=lambda pair: ids[pair[0]]):
            kind, description = _transformation(text)
            source_node = graph.nodes[source]
            input_fields.append({"namespace": source_node.namespace, "dataset": source_node.name,
                                 "datasetVersion": None, "field": source_node.field,
                                 "transformationDescription": description, "transformationType": kind})
        data = {"namespace": node.namespace, "dataset": node.name, "datasetVersion": None, "field": node.field,
                "fieldType": types.get((node.namespace, node.name), {}).get(node.field or "") or None,
                "transformationDescription": None, "transformationType": None, "inputFields": input_fields}
        nodes.append({
            "id": node_id, "type": "DATASET_FIELD", "data": data,
            "inEdges": [{"origin": node_id, "destination": ids[s]} for s, _ in sorted(
                inputs[element], key=lambda pair: ids[pair[0]])],
            "outEdges": [{"origin": node_id, "destination": ids[d]} for d in sorted(derived[element],
                                                                                     key=ids.__getitem__)],
        })
    return {"graph": sorted(nodes, key=lambda n: n["id"])}


def upstream_run_lineage(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Marquez's UpstreamRunLineage: each run's job (no job versions here: null), its summary and the dataset
    versions it read with the run that produced each."""
    return {"runs": [{
        "job": {"namespace": run["job"][0], "name": run["job"][1], "version": None} if run["job"] else None,
        "run": {"id": run["runId"], "start": run["startTime"], "end": run["endTime"],
                "status": RUN_STATES.get(run["state"] or "", "NEW")},
        "inputs": [{"namespace": i["namespace"], "name": i["name"], "version": i["version"],
                    "producedByRunId": i["producedBy"]} for i in run["inputs"]]} for run in runs]}


def job_versions(namespace: str, name: str, runs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Marquez's JobVersions of a job, derived from its completed runs (given newest first): a version per distinct
    pair of the datasets a run read and wrote (Marquez versions a job by its inputs, outputs and location; the graph
    keeps no location history, and a run writes its outputs only when it completes), its id a UUID of that pair,
    created with its first run, its latest run the newest. Newest version first."""
    versions: dict[str, dict[str, Any]] = {}
    for item in runs:  # newest first
        if item["run"].get("state") != "COMPLETE":
            continue
        inputs, outputs = sorted(map(tuple, item["inputs"])), sorted(map(tuple, item["outputs"]))
        version = str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps([namespace, name, inputs, outputs])))
        row = item["run"]
        created = row.get("startTime") or row.get("lastEventTime")
        if version not in versions:
            versions[version] = {
                "id": {"namespace": namespace, "name": name, "version": version}, "name": name,
                "createdAt": created, "version": version, "namespace": namespace, "location": None,
                "inputs": [{"namespace": ns, "name": n} for ns, n in inputs],
                "outputs": [{"namespace": ns, "name": n} for ns, n in outputs], "latestRun": run(row)}
        elif created and (versions[version]["createdAt"] or "~") > created:
            versions[version]["createdAt"] = created
    return sorted(versions.values(), key=lambda v: v["createdAt"] or "", reverse=True)

