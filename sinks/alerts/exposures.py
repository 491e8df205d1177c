"""Sensitive-tag exposures: a classification tag reaching a column of a dataset not cleared for it.

Pure: what the alert sink's exposure watch (``exposure_watch.py``) compares and publishes. An *exposure* is a
(tag, dataset, column) the tag reaches as ``derived`` (``graph/sensitive.py``) in a dataset not cleared for it; the
watch remembers the exposures it has alerted (by key) and alerts those it finds that it had not: one alert per tag
and dataset, listing the newly reached columns with the path from the tagged origin. An exposure that ends (a masked
hop, a clearance, a tag removed) is forgotten, so a later return alerts again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kafka_lineage.graph.sensitive import TaggedColumn

KIND = "sensitiveExposure"
# The remembered-exposures topic's record that says the first comparison was made: exposures found then are the
# baseline (remembered, not alerted), so a sink started on a platform's existing graph does not alert its history.
BASELINE_KEY = b"__baseline__"


def exposure_key(tag: str, namespace: str, name: str, field: str) -> bytes:
    """A fixed-size key per (tag, dataset, column): the remembered-exposures topic is compacted by it."""
    return hashlib.sha256("\x1f".join((tag, namespace, name, field)).encode()).hexdigest()[:32].encode()


def exposures(columns: Iterable[TaggedColumn]) -> dict[bytes, TaggedColumn]:
    """The exposures among a tag's reach: derived columns of datasets not cleared, each once (its shortest path)."""
    found: dict[bytes, TaggedColumn] = {}
    for column in columns:
        if column.status != "derived" or column.cleared:
            continue
        key = exposure_key(column.tag, column.namespace, column.name, column.field)
        kept = found.get(key)
        if kept is None or (len(column.path), column.origin) < (len(kept.path), kept.origin):
            found[key] = column
    return found


@dataclass(frozen=True)
class ExposureChanges:
    new: list[tuple[bytes, TaggedColumn]]  # not remembered (at most the limit asked for): by dataset, tag, depth
    gone: list[bytes]  # remembered exposures no longer found
    more: int  # new exposures left for the next comparison (over the limit)


def compare(remembered: Collection[bytes], found: Mapping[bytes, TaggedColumn], *, complete: bool, limit: int
            ) -> ExposureChanges:
    """What changed since the remembered exposures. Nothing is forgotten from an answer that was cut (``complete``
    False): an exposure missing from it may only be beyond the cut."""
    new = sorted(((key, column) for key, column in found.items() if key not in remembered),
                 key=lambda item: (item[1].namespace, item[1].name, item[1].tag, len(item[1].path), item[1].field))
    gone = sorted(key for key in remembered if key not in found and key != BASELINE_KEY) if complete else []
    return ExposureChanges(new[:limit], gone, max(0, len(new) - limit))


def remembered_value(column: TaggedColumn) -> bytes:
    """The remembered-exposures record of one exposure (for an operator reading the topic; only the key is read)."""
    return json.dumps({"tag": column.tag, "namespace": column.namespace, "name": column.name,
                       "field": column.field}).encode()


def exposure_alerts(new: Iterable[TaggedColumn], detected_at: datetime, depth: int, max_columns: int
                    ) -> list[dict[str, Any]]:
    """SchemaDriftAlert records of kind ``sensitiveExposure``: one per tag and dataset, its new columns nearest
    first (at most ``max_columns`` listed)."""
    grouped: dict[tuple[str, str, str], list[TaggedColumn]] = {}
    for column in new:
        grouped.setdefault((column.tag, column.namespace, column.name), []).append(column)
    stamp = detected_at.isoformat().replace("+00:00", "Z")
    alerts = []
    for (tag, namespace, name), columns in grouped.items():
        columns.sort(key=lambda c: (len(c.path), c.field))
        listed = columns[:max_columns]
        writers = listed[0].path[-1].jobs if listed[0].path else ()
        identity = "\x1f".join((KIND, tag, namespace, name, stamp, *(c.field for c in columns)))
        alerts.append({
            "alertId": hashlib.sha256(identity.encode()).hexdigest(),
            "changeId": hashlib.sha256("\x1f".join((KIND, tag, namespace, name)).encode()).hexdigest(),
            "kind": KIND,
            "dataset": {"namespace": namespace, "name": name},
            "job": {"namespace": writers[0][0], "name": writers[0][1]} if writers else {"namespace": "", "name": ""},
            "runId": "", "previousVersion": "", "newVersion": "", "previousSchema": "", "newSchema": "",
            "changes": [], "severity": "UNKNOWN", "eventTime": stamp, "detectedAt": detected_at,
            "impactDepth": depth, "impactedJobs": [], "impactedDatasets": [],
            "impactedColumns": [{"namespace": namespace, "name": name, "field": c.field, "depth": len(c.path)}
                                for c in listed],
            "impactTruncated": len(columns) > max_columns, "impactComplete": True,
            "changedAt": None, "late": False, "supersedes": None, "beyondHistory": False,
            "datasetOwners": [], "datasetTags": [],  # the exposed dataset's: filled by the watch (exposure_watch.py)
            "exposure": {"tag": tag, "columnsTruncated": len(columns) > max_columns, "columns": [{
                "field": c.field,
                "origin": {"namespace": c.origin[0], "name": c.origin[1], "field": c.origin[2]},
                "path": [{"namespace": hop.namespace, "name": hop.name, "field": hop.field,
                          "transformation": hop.transformation,
                          "jobs": [{"namespace": ns, "name": job} for ns, job in hop.jobs]} for hop in c.path],
            } for c in listed]},
        })
    return alerts
