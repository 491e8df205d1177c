"""Pure core of the Flink watcher: the listener's events + Flink's job states → the terminal events it missed.

No I/O here; ``flink_watcher`` reads the events topic and polls Flink's REST API (``/jobs/overview``, and
``/jobs/<id>/exceptions`` for a failed job), then feeds :func:`observe` and :func:`step`.

The OpenLineage Flink listener (1.53) names its run with a random id and puts the Flink job id in its ``flink_job``
run facet; a terminal event can only continue that run, so the watcher learns the pairs from the listener's own
events (it finishes jobs it saw start, never invents a run). Cases it covers:

* the listener sent START (and RUNNING heartbeats) but no terminal event — a job submitted detached without
  ``openlineage.enableDetachedJobTracking``, a client that ended before its tracker polled: when Flink reports the
  job FINISHED / FAILED / CANCELED the watcher sends COMPLETE / FAIL / ABORT, at the job's ``end-time``;
* the listener's FAIL carries no error (it never does in 1.53): the watcher sends FAIL again with an
  ``errorMessage`` facet holding Flink's root exception (the graph keeps one FAIL, with the error).

A state is acted on after ``grace`` seconds, so the listener's own terminal event, on its way through the collector
and Kafka, wins when it comes. Flink's other states (RUNNING, RESTARTING, SUSPENDED …) send nothing: RUNNING
heartbeats are the listener's checkpoint events. A job missing from the overview (a cluster that ended with its
job, as a local mini-cluster does) is left as it is: nothing is made up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/0.1.0/producers/flink_watcher"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
ERROR_FACET_SCHEMA = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
RUN_FACET_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
FLINK_JOB_FACET = "flink_job"  # the listener's run facet with the Flink job id
END_EVENT = {"FINISHED": "COMPLETE", "FAILED": "FAIL", "CANCELED": "ABORT"}  # Flink's globally terminal states
TERMINAL_EVENTS = frozenset(END_EVENT.values())


@dataclass(frozen=True)
class Tracked:
    """A Flink job the listener reported: its run, and what has been sent for it so far."""

    flink_job_id: str
    run_id: str
    job_namespace: str
    job_name: str
    last_event: str  # latest event type seen for the run (a terminal one sticks)
    error_sent: bool = False  # a FAIL with an errorMessage facet was seen or sent
    pending_since: float | None = None  # when the watcher first saw Flink's end of a job it still has to report


@dataclass(frozen=True)
class JobState:
    """One job of ``GET /jobs/overview``."""

    jid: str
    name: str
    state: str
    end_time_ms: int | None = None


def flink_job_id(event: Mapping[str, Any]) -> str | None:
    """The Flink job id of a listener's run event (its ``flink_job`` run facet), else None."""
    run = event.get("run") if isinstance(event, Mapping) else None
    facets = run.get("facets") if isinstance(run, Mapping) else None
    facet = facets.get(FLINK_JOB_FACET) if isinstance(facets, Mapping) else None
    jid = facet.get("jobId") if isinstance(facet, Mapping) else None
    return jid if isinstance(jid, str) and jid else None


def _has_error(event: Mapping[str, Any]) -> bool:
    facets = event.get("run", {}).get("facets") or {}
    return isinstance(facets.get("errorMessage"), Mapping)


def observe(tracked: Mapping[str, Tracked], event: Mapping[str, Any]) -> dict[str, Tracked]:
    """``tracked`` after one event of the events topic (events of other producers leave it as it is)."""
    jid = flink_job_id(event)
    job, run = event.get("job"), event.get("run")
    if jid is None or not isinstance(job, Mapping) or not isinstance(run, Mapping):
        return dict(tracked)
    event_type = str(event.get("eventType") or "OTHER")
    old = tracked.get(jid)
    if old is not None and old.run_id != run.get("runId"):
        if event_type != "START":
            return dict(tracked)  # an older run's late event
        old = None  # the job id's newest run: the last START wins
    error = event_type == "FAIL" and _has_error(event)
    if old is None:
        new = Tracked(jid, str(run.get("runId")), str(job.get("namespace")), str(job.get("name")), event_type,
                      error_sent=error)
    else:
        last = old.last_event if old.last_event in TERMINAL_EVENTS else event_type
        new = replace(old, last_event=last, error_sent=old.error_sent or error,
                      pending_since=old.pending_since if last not in TERMINAL_EVENTS or not error else None)
    return {**tracked, jid: new}


def parse_overview(payload: Any) -> dict[str, JobState]:
    """``GET /jobs/overview`` → job id → :class:`JobState`."""
    jobs = payload.get("jobs") if isinstance(payload, Mapping) else None
    states = {}
    for job in jobs if isinstance(jobs, list) else ():
        if isinstance(job, Mapping) and isinstance(job.get("jid"), str):
            end = job.get("end-time")
            states[job["jid"]] = JobState(job["jid"], str(job.get("name", "")), str(job.get("state", "")),
                                          end if isinstance(end, int) and end > 0 else None)
    return states


def root_exception(payload: Any) -> tuple[str, str | None] | None:
    """``GET /jobs/<id>/exceptions`` → (message, stack trace) of the root exception, if any."""
    if not isinstance(payload, Mapping):
        return None
    history = payload.get("exceptionHistory")
    entries = history.get("entries") if isinstance(history, Mapping) else None
    first = entries[0] if isinstance(entries, list) and entries and isinstance(entries[0], Mapping) else {}
    trace = first.get("stacktrace") or payload.get("root-exception")
    name = first.get("exceptionName")
    if not isinstance(trace, str) or not trace.strip():
        return None
    lines = trace.strip().splitlines()
    message = name if isinstance(name, str) and name else lines[0]
    # Flink's top exception is mostly the scheduler's ("JobException: Recovery is suppressed by …"); the innermost
    # cause is what the operator needs to read first.
    causes = [line.strip().removeprefix(_CAUSED_BY) for line in lines if line.strip().startswith(_CAUSED_BY)]
    if causes:
        message = f"{message} (root cause: {causes[-1]})"
    return message[:MAX_ERROR_MESSAGE], trace


_CAUSED_BY = "Caused by: "
MAX_ERROR_MESSAGE = 2000  # the stack trace carries the rest


def wants_exception(tracked: Mapping[str, Tracked], overview: Mapping[str, JobState]) -> list[str]:
    """Failed jobs whose FAIL has no error yet: the shell fetches their exceptions for :func:`step`."""
    return sorted(jid for jid, t in tracked.items()
                  if jid in overview and overview[jid].state == "FAILED" and not t.error_sent)


def _due(t: Tracked, state: JobState) -> bool:
    end = END_EVENT.get(state.state)
    if end is None:
        return False
    if t.last_event not in TERMINAL_EVENTS:
        return True
    return end == "FAIL" and t.last_event == "FAIL" and not t.error_sent


def _event_time(state: JobState, now: float) -> str:
    seconds = state.end_time_ms / 1000 if state.end_time_ms else now
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def terminal_event(t: Tracked, state: JobState, now: float, error: tuple[str, str | None] | None = None
                   ) -> dict[str, Any]:
    """The run event that reports ``state``'s end for ``t``'s run."""
    facets: dict[str, Any] = {FLINK_JOB_FACET: {"_producer": PRODUCER, "_schemaURL": RUN_FACET_SCHEMA,
                                                "jobId": t.flink_job_id}}
    event_type = END_EVENT[state.state]
    if event_type == "FAIL" and error is not None:
        message, trace = error
        facets["errorMessage"] = {"_producer": PRODUCER, "_schemaURL": ERROR_FACET_SCHEMA, "message": message,
                                  "programmingLanguage": "JAVA", **({"stackTrace": trace} if trace else {})}
    return {"eventType": event_type, "eventTime": _event_time(state, now), "producer": PRODUCER,
            "schemaURL": SCHEMA_URL, "run": {"runId": t.run_id, "facets": facets},
            "job": {"namespace": t.job_namespace, "name": t.job_name}}


def step(tracked: Mapping[str, Tracked], overview: Mapping[str, JobState], now: float, *, grace: float = 10.0,
         errors: Mapping[str, tuple[str, str | None]] | None = None) -> tuple[dict[str, Tracked],
                                                                              list[dict[str, Any]]]:
    """One poll: (new tracked state, events to send). ``now`` in seconds (monotonic or wall, used consistently),
    ``errors``: root exceptions of failed jobs (:func:`wants_exception`)."""
    errors = errors or {}
    out, events = dict(tracked), []
    for jid, t in tracked.items():
        state = overview.get(jid)
        if state is None or not _due(t, state):
            if t.pending_since is not None:
                out[jid] = replace(t, pending_since=None)
            continue
        if t.pending_since is None:
            out[jid] = replace(t, pending_since=now)
            if grace > 0:
                continue
            t = out[jid]
        if now - (t.pending_since or now) < grace:
            continue
        error = errors.get(jid)
        if t.last_event == "FAIL" and error is None:
            continue  # the listener's FAIL stands; the error is sent when Flink tells it
        events.append(terminal_event(t, state, now, error))
        out[jid] = replace(t, last_event=END_EVENT[state.state], pending_since=None,
                           error_sent=t.error_sent or error is not None or END_EVENT[state.state] != "FAIL")
    return out, events
