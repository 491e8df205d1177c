"""Run lifecycle shared by the hooks: build OpenLineage run events (pure) and emit them around a block of work.

``TaskRun`` is a context manager and a decorator: START on enter, COMPLETE on a clean exit, FAIL (``errorMessage``
facet with the stack trace) when the block raises — the exception is re-raised untouched — and ABORT on
``KeyboardInterrupt``/``SystemExit``. Lineage never breaks the job: a client that cannot be built or an emit that
raises is logged and skipped. Naming errors in arguments the author passes are still raised at once (they are bugs
in the call, and would otherwise silently lose lineage).

Partitions: a path ending in partition directories (``s3://lake/events/date=2025-12-24/``) is named by
its table root, and the partition travels as the ``kafkaLineage_partition`` facet in the dataset's
``inputFacets``/``outputFacets`` (source ``path``); a ``partition=`` argument (mapping or ``date=…/region=…``) wins
(source ``hook``). One run may read or write several partitions of one table: each is its own entry.
"""

from __future__ import annotations

import functools
import logging
import os
import traceback
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

import attr
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    RunFacet,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
)
from openlineage.client.utils import RedactMixin
from openlineage.client.uuid import generate_new_uuid

from kafka_lineage.schemas.naming import path_dataset, table_dataset
from kafka_lineage.schemas.partitions import (
    FACET_KEY,
    SCHEMA_URL,
    PartitionKeys,
    as_keys,
    partition_facet,
    partition_keys,
    split_partition,
)

log = logging.getLogger(__name__)

PRODUCER = "https://github.com/kafka-lineage/kafka-lineage/tree/main/producers/hooks"
NAMESPACE_ENV = "OPENLINEAGE_NAMESPACE"

_CURRENT: ContextVar[TaskRun | None] = ContextVar("kafka_lineage_current_run", default=None)
P = ParamSpec("P")
R = TypeVar("R")


def current_run() -> TaskRun | None:
    """The innermost active run in this thread/task: how a decorated function reaches its run (``add_output``)."""
    return _CURRENT.get()


def default_job_namespace(env: Mapping[str, str] | None = None) -> str:
    """The job namespace when none is given: ``$OPENLINEAGE_NAMESPACE``, else ``default`` (openlineage's rule)."""
    return (os.environ if env is None else env).get(NAMESPACE_ENV) or "default"


@functools.cache
def default_client() -> OpenLineageClient | None:
    """One ``OpenLineageClient()`` per process (configured by openlineage.yml / OPENLINEAGE_CONFIG): a Kafka
    transport holds a producer and a thread, so every task must not build its own. ``None`` if it cannot be built."""
    try:
        return OpenLineageClient()
    except Exception as exc:  # a broken lineage config must not fail the job
        log.warning("OpenLineage client could not be created, lineage is not emitted: %s", exc)
        return None


# --- pure builders ------------------------------------------------------------------------------------------------
def dataset_ref(dataset: Any) -> tuple[str, str]:
    """(namespace, name) of a path/URI (via ``path_dataset``) or of an already named ``(namespace, name)`` pair."""
    if isinstance(dataset, tuple):
        if len(dataset) != 2 or not all(isinstance(p, str) and p for p in dataset):
            raise ValueError(f"a dataset tuple must be (namespace, name), got {dataset!r}")
        return dataset
    return path_dataset(dataset)


PartitionArg = Mapping[str, Any] | str  # what `partition=` accepts: {"date": "2025-12-24"} or "date=2025-12-24/…"


@attr.define
class PartitionKey(RedactMixin):
    name: str
    value: str


@attr.define
class PartitionDatasetFacet(DatasetFacet):
    """``kafkaLineage_partition`` (``schemas/facets/PartitionDatasetFacet.json``) as an openlineage-python facet."""

    keys: list[PartitionKey]
    source: str
    marker: str | None = attr.field(default=None)
    requiredMarker: str | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def partition_dataset_facet(keys: PartitionArg | PartitionKeys, source: str, *, marker: str | None = None,
                            required_marker: str | None = None) -> PartitionDatasetFacet:
    """The partition facet (checked by ``schemas.partitions.partition_facet``: ``ValueError`` when invalid)."""
    checked = partition_facet(keys, source, marker, required_marker, producer=PRODUCER)
    return PartitionDatasetFacet(keys=[PartitionKey(k["name"], k["value"]) for k in checked["keys"]], source=source,
                                 marker=marker, requiredMarker=required_marker, producer=PRODUCER)


def dataset_partition(dataset: Any) -> tuple[tuple[str, str], PartitionKeys | None, str | None]:
    """(identity, keys from the path, the data file after them) of a path/URI or ``(namespace, name)`` pair: a
    partitioned path is named by its table root; a pair is taken as it is."""
    identity = dataset_ref(dataset)
    if isinstance(dataset, tuple):
        return identity, None, None
    found = split_partition(*identity)
    return ((identity[0], found.root), found.keys, found.file) if found is not None else (identity, None, None)


def job_type_facet(integration: str, job_type: str) -> job_type_job.JobTypeJobFacet:
    return job_type_job.JobTypeJobFacet(processingType="BATCH", integration=integration, jobType=job_type,
                                        producer=PRODUCER)


def error_facet(error: BaseException) -> error_message_run.ErrorMessageRunFacet:
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage="python", stackTrace=trace,
                                                  producer=PRODUCER)


def statistics_facet(row_count: int | None = None, size: int | None = None
                     ) -> output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet:
    return output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=row_count, size=size,
                                                                               producer=PRODUCER)


@dataclass(frozen=True)
class RunRef:
    """A run other runs can name as their parent (root = the top of the hierarchy, for the Kafka key)."""

    run_id: str
    job_namespace: str
    job_name: str
    root: RunRef | None = None

    def parent_facet(self) -> parent_run.ParentRunFacet:
        root = self.root or self
        return parent_run.ParentRunFacet(
            run=parent_run.Run(runId=self.run_id),
            job=parent_run.Job(namespace=self.job_namespace, name=self.job_name),
            root=parent_run.Root(run=parent_run.RootRun(runId=root.run_id),
                                 job=parent_run.RootJob(namespace=root.job_namespace, name=root.job_name)),
            producer=PRODUCER,
        )


@dataclass
class DatasetState:
    namespace: str
    name: str
    facets: dict[str, DatasetFacet] = field(default_factory=dict)
    io_facets: dict[str, Any] = field(default_factory=dict)  # inputFacets / outputFacets

    @property
    def partition(self) -> PartitionKeys | None:
        """The partition this entry read or wrote, if one is known."""
        facet = self.io_facets.get(FACET_KEY)
        if isinstance(facet, PartitionDatasetFacet):
            return tuple((key.name, key.value) for key in facet.keys)
        return partition_keys(facet)

    def key(self) -> tuple[str, str, PartitionKeys | None]:
        return self.namespace, self.name, self.partition


def dataset_state(dataset: Any, partition: PartitionArg | None = None, required_marker: str | None = None
                  ) -> DatasetState:
    """A dataset entry of a path/URI or pair, with its partition facet when the path or ``partition`` names one."""
    identity, path_keys, _ = dataset_partition(dataset)
    state = DatasetState(*identity)
    keys, source = (as_keys(partition), "hook") if partition is not None else (path_keys, "path")
    if keys is not None:
        state.io_facets[FACET_KEY] = partition_dataset_facet(keys, source, required_marker=required_marker)
    elif required_marker is not None:
        raise ValueError(f"required_marker needs a partition: {dataset!r} names none and no partition= was given")
    return state


def run_event(event_type: RunState, *, run_id: str, job_namespace: str, job_name: str,
              job_facets: Mapping[str, JobFacet] | None = None, run_facets: Mapping[str, RunFacet] | None = None,
              inputs: Iterable[DatasetState] = (), outputs: Iterable[DatasetState] = (),
              event_time: datetime | None = None) -> RunEvent:
    """One RunEvent built with openlineage-python's classes (pure: pass ``event_time`` for a fixed time)."""
    return RunEvent(
        eventType=event_type,
        eventTime=(event_time or datetime.now(UTC)).isoformat(),
        run=Run(runId=run_id, facets=dict(run_facets or {})),
        job=Job(namespace=job_namespace, name=job_name, facets=dict(job_facets or {})),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=d.namespace, name=d.name, facets=dict(d.facets), inputFacets=dict(d.io_facets))
                for d in inputs],
        outputs=[OutputDataset(namespace=d.namespace, name=d.name, facets=dict(d.facets),
                               outputFacets=dict(d.io_facets)) for d in outputs],
    )


# --- the lifecycle shell ------------------------------------------------------------------------------------------
class TaskRun:
    """One run of a job, emitted around a ``with`` block or each call of a decorated function."""

    def __init__(self, job_name: str, *, job_namespace: str | None = None, client: OpenLineageClient | None = None,
                 parent: Parent | None = None,
                 job_facets: Mapping[str, JobFacet] | None = None, run_facets: Mapping[str, RunFacet] | None = None,
                 inputs: Iterable[DatasetState] = (), outputs: Iterable[DatasetState] = ()) -> None:
        if not isinstance(job_name, str) or not job_name.strip():
            raise ValueError("job_name must be a non-empty string")
        self.job_name = job_name
        self.job_namespace = job_namespace or default_job_namespace()
        self.run_id = str(generate_new_uuid())
        self._client = client
        self._parent = parent
        self.job_facets: dict[str, JobFacet] = dict(job_facets or {})
        self.run_facets: dict[str, RunFacet] = dict(run_facets or {})
        # One entry per dataset and partition: a run may read several partitions of one table.
        self._inputs: dict[tuple[str, str, PartitionKeys | None], DatasetState] = {}
        self._outputs: dict[tuple[str, str, PartitionKeys | None], DatasetState] = {}
        for dataset in inputs:
            self._inputs[dataset.key()] = dataset
        for dataset in outputs:
            self._outputs[dataset.key()] = dataset
        self._entered = False
        self._token: Token[TaskRun | None] | None = None
        self.events: list[RunEvent] = []  # what this run emitted (or tried to), for callers and tests

    # --- datasets --------------------------------------------------------------------------------------------------
    def add_input(self, dataset: Any, *, partition: PartitionArg | None = None) -> tuple[str, str]:
        """Record an input: a path/URI (named by ``path_dataset``; partition directories become the partition) or a
        ``(namespace, name)`` pair; ``partition``: the partition read, when the path does not say it."""
        state = self._entry(self._inputs, dataset_state(dataset, partition))
        return state.namespace, state.name

    def add_output(self, dataset: Any, *, row_count: int | None = None, size: int | None = None,
                   partition: PartitionArg | None = None, required_marker: str | None = None) -> tuple[str, str]:
        """Record an output (as ``add_input``), optionally with its ``outputStatistics`` (rows, bytes), the
        partition written and the completion marker (``_SUCCESS``) the dataset requires before that partition
        counts as written (``report_marker`` reports it)."""
        state = self._entry(self._outputs, dataset_state(dataset, partition, required_marker))
        if row_count is not None or size is not None:
            state.io_facets["outputStatistics"] = statistics_facet(row_count, size)
        return state.namespace, state.name

    @staticmethod
    def _entry(entries: dict[tuple[str, str, PartitionKeys | None], DatasetState], new: DatasetState
               ) -> DatasetState:
        """The entry ``new`` names: the same dataset and partition, or — when ``new`` names no partition — the
        dataset's only entry (statistics for a partitioned output); else ``new`` added. Its partition facet (a
        required marker) is the latest given."""
        key = new.key()
        if key[2] is None:
            same = [k for k in entries if k[:2] == key[:2]]
            key = same[0] if len(same) == 1 else key
        state = entries.setdefault(key, new)
        if state is not new and FACET_KEY in new.io_facets:
            state.io_facets[FACET_KEY] = new.io_facets[FACET_KEY]
        return state

    def add_table_input(self, url: str, table: str, default_schema: str | None = None) -> tuple[str, str]:
        return self.add_input(table_dataset(url, table, default_schema))

    def add_table_output(self, url: str, table: str, default_schema: str | None = None, *,
                         row_count: int | None = None, size: int | None = None) -> tuple[str, str]:
        return self.add_output(table_dataset(url, table, default_schema), row_count=row_count, size=size)

    def set_output_statistics(self, row_count: int | None = None, size: int | None = None,
                              output: Any = None) -> None:
        """Statistics of ``output`` (default: the run's only output) for the COMPLETE/FAIL event."""
        if output is None:
            if len(self._outputs) != 1:
                raise ValueError(f"run has {len(self._outputs)} outputs; name the one the statistics are for")
            (state,) = self._outputs.values()  # by its entry: a partitioned output's path is no longer at hand
            if row_count is not None or size is not None:
                state.io_facets["outputStatistics"] = statistics_facet(row_count, size)
            return
        self.add_output(output, row_count=row_count, size=size)

    @property
    def inputs(self) -> list[DatasetState]:
        return list(self._inputs.values())

    @property
    def outputs(self) -> list[DatasetState]:
        return list(self._outputs.values())

    # --- parenting -------------------------------------------------------------------------------------------------
    def ref(self) -> RunRef:
        """This run as a parent for child runs (their Kafka key becomes this run's root job)."""
        return RunRef(self.run_id, self.job_namespace, self.job_name, root=self._root())

    def _root(self) -> RunRef | None:
        parent = self._parent
        if isinstance(parent, TaskRun):
            return parent.ref().root or parent.ref()
        if isinstance(parent, RunRef):
            return parent.root or parent
        if isinstance(parent, parent_run.ParentRunFacet):
            root = parent.root
            if root is not None:
                return RunRef(root.run.runId, root.job.namespace, root.job.name)
            return RunRef(parent.run.runId, parent.job.namespace, parent.job.name)
        return None

    def _parent_facet(self) -> parent_run.ParentRunFacet | None:
        parent = self._parent
        if isinstance(parent, TaskRun):
            return parent.ref().parent_facet()
        if isinstance(parent, RunRef):
            return parent.parent_facet()
        return parent

    # --- lifecycle -------------------------------------------------------------------------------------------------
    def event(self, event_type: RunState, error: BaseException | None = None) -> RunEvent:
        run_facets: dict[str, RunFacet] = dict(self.run_facets)
        parent = self._parent_facet()
        if parent is not None:
            run_facets["parent"] = parent
        if error is not None:
            run_facets["errorMessage"] = error_facet(error)
        return run_event(event_type, run_id=self.run_id, job_namespace=self.job_namespace, job_name=self.job_name,
                         job_facets=self.job_facets, run_facets=run_facets, inputs=self.inputs, outputs=self.outputs)

    def emit(self, event_type: RunState, error: BaseException | None = None) -> None:
        try:
            event = self.event(event_type, error)
            self.events.append(event)
            client = self._client or default_client()
            if client is not None:
                client.emit(event)
        except Exception as exc:  # lineage must never break the job
            log.warning("OpenLineage %s event for %s/%s not emitted: %s", event_type.value, self.job_namespace,
                        self.job_name, exc)

    def __enter__(self) -> TaskRun:
        if self._entered:
            raise RuntimeError(f"run {self.run_id} of {self.job_name} was already started; use a new task per run")
        self._entered = True
        self._token = _CURRENT.set(self)
        self.emit(RunState.START)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None
        if exc is None:
            self.emit(RunState.COMPLETE)
        elif isinstance(exc, KeyboardInterrupt | SystemExit):
            self.emit(RunState.ABORT, exc)
        else:
            self.emit(RunState.FAIL, exc)
        return False  # re-raise

    def fresh(self) -> TaskRun:
        """A new run of the same job (new runId, same datasets, partitions and facets, no statistics): one per
        decorated call."""
        return TaskRun(self.job_name, job_namespace=self.job_namespace, client=self._client, parent=self._parent,
                       job_facets=self.job_facets, run_facets=self.run_facets,
                       inputs=[_copy(d) for d in self.inputs], outputs=[_copy(d) for d in self.outputs])

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorator: every call of ``func`` is one run of this job."""

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.fresh():
                return func(*args, **kwargs)

        return wrapper


def _copy(state: DatasetState) -> DatasetState:
    kept = {FACET_KEY: state.io_facets[FACET_KEY]} if FACET_KEY in state.io_facets else {}
    return DatasetState(state.namespace, state.name, dict(state.facets), kept)


Parent = RunRef | TaskRun | parent_run.ParentRunFacet  # what `parent=` accepts: a run of ours, or any parent facet
