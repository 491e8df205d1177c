"""`lineage` command line. Errors are one clear line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.producers.client.publisher import EventPublisher, PublishError
from kafka_lineage.producers.service.settings import CollectorSettings
from kafka_lineage.runtime.config import ClientSettings, ConfigError, OperationsSettings, port_number
from kafka_lineage.runtime.gc_tuning import tune_gc
from kafka_lineage.runtime.logs import bootstrap_logging
from kafka_lineage.runtime.terminal import shown
from kafka_lineage.server.settings import ServerSettings
from kafka_lineage.sinks.alerts.settings import AlertSettings
from kafka_lineage.sinks.graph.settings import SinkSettings

if TYPE_CHECKING:
    from kafka_lineage.runtime.metrics import Metrics

# Commands that other distributions add (the development tools: stack, demo, bench, workload, faults): each entry
# point is a function given the subparsers. The product never imports them.
COMMANDS_ENTRY_POINTS = "kafka_lineage.commands"
# A probe of the services' states for `lineage status` (the development tools' local stack), if one is installed.
SERVICES_ENTRY_POINTS = "kafka_lineage.services"


class CommandFailed(Exception):
    """A command's failure, said as one line (and its notes) on stderr, exit 1; for commands added by plugins."""


def cmd_schemas(args: argparse.Namespace) -> int:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from kafka_lineage.schemas import registry

    settings = ClientSettings.from_env()
    client = SchemaRegistryClient(settings.registry_config())
    if args.action == "register":
        reports = registry.register(client, settings.value_schemas(), args.compatibility)
    else:
        reports = registry.check(client, settings.value_schemas())
    for report in reports:
        print(f"{'ok ' if report.ok else 'BAD'}  {report.subject:32} {report.schema_name:18} {report.detail}")
    return 0 if all(report.ok for report in reports) else 1


def cmd_collector(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.service.collector import serve

    settings = CollectorSettings.from_env()
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if args.port is not None:  # argparse takes any int, and replace() skips the check from_env does
        port_number("--port", args.port)
    settings = dataclasses.replace(settings, **overrides)
    clients = ClientSettings.from_env()
    publisher = EventPublisher.from_settings(clients, producer=settings.producer_config())
    tune_gc()
    serve(publisher, settings)
    return 0


def cmd_processor(args: argparse.Namespace) -> int:
    from kafka_lineage.processors.normalize import parse_aliases
    from kafka_lineage.processors.stream import run_worker

    settings = ProcessorSettings.from_env()
    if settings.aliases:
        try:
            parse_aliases(settings.aliases)
        except ValueError as exc:
            raise ConfigError(f"LINEAGE_NAMESPACE_ALIASES: {exc}") from None
    tune_gc()
    run_worker(ClientSettings.from_env(), settings, OperationsSettings.from_env())
    return 0


def cmd_sink(args: argparse.Namespace) -> int:
    from kafka_lineage.runtime.metrics import Metrics, pipeline_checks
    from kafka_lineage.sinks.graph.sink import GraphSink

    clients, operations = ClientSettings.from_env(), OperationsSettings.from_env()
    metrics = Metrics()
    sink = GraphSink(clients, SinkSettings.from_env(), metrics=metrics)
    checks = pipeline_checks(clients, **{"neo4j": sink.driver.verify_connectivity, "neo4j-writes": sink.check_writable})
    _run_with_endpoint("graph sink", "LINEAGE_SINK_METRICS_PORT", operations.sink_metrics_port, operations, metrics,
                       checks, sink.run)
    return 0


def _run_with_endpoint(component: str, setting: str, port: int, operations: OperationsSettings, metrics: Metrics,
                       checks: dict[str, Callable[[], None]], run: Callable[[threading.Event], None]) -> None:
    """A long-running component with its metrics/health endpoint, stopped gracefully by SIGTERM/SIGINT."""
    from kafka_lineage.runtime.metrics import start_endpoint

    endpoint = start_endpoint(component, setting, operations.metrics_host, port, metrics, checks)
    tune_gc()
    try:
        run(_stop_on_signals())
    finally:
        endpoint.close()


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # finish the batch, commit, leave the group
        signal.signal(signum, lambda *_: stop.set())
    return stop


def cmd_alerts(args: argparse.Namespace) -> int:
    clients = ClientSettings.from_env()
    if args.action == "route":
        return _route_alerts(clients, args.check)
    if args.action == "run":
        from kafka_lineage.runtime.metrics import Metrics, pipeline_checks
        from kafka_lineage.sinks.alerts.sink import AlertSink

        operations = OperationsSettings.from_env()
        metrics = Metrics()
        sink = AlertSink(clients, AlertSettings.from_env(), metrics=metrics)
        checks = pipeline_checks(clients, neo4j=sink.driver.verify_connectivity)
        _run_with_endpoint("alert sink", "LINEAGE_ALERT_METRICS_PORT", operations.alert_metrics_port, operations,
                           metrics, checks, sink.run)
        return 0
    from kafka_lineage.app.formats import format_alert
    from kafka_lineage.runtime.tail import tail

    for alert in tail(clients, clients.drift_topic, "schema_drift_alert", args.lines, args.follow,
                      _report_unreadable("a schema-drift alert")):
        print(json.dumps(alert, default=str) if args.json else format_alert(alert), flush=True)
    return 0


def _route_alerts(clients: ClientSettings, check: bool) -> int:
    from kafka_lineage.runtime.metrics import Metrics, pipeline_checks
    from kafka_lineage.sinks.alerts.routing.router import AlertRouter, load_routes_checked
    from kafka_lineage.sinks.alerts.routing.settings import RouterSettings

    settings = RouterSettings.from_env()
    ui_url, routes = load_routes_checked(settings)
    if check:
        for route in routes:
            match = route.route.match.model_dump(exclude_defaults=True) or "every alert"
            print(f"{route.name}: {route.where()}, {match}")
        print(f"{len(routes)} routes valid; links point to {ui_url}")
        return 0
    operations = OperationsSettings.from_env()
    metrics = Metrics()
    router = AlertRouter(clients, settings, routes, ui_url, metrics)
    _run_with_endpoint("alert router", "LINEAGE_ROUTER_METRICS_PORT", operations.router_metrics_port, operations,
                       metrics, pipeline_checks(clients), router.run)
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    from kafka_lineage.app.formats import format_dead_letter
    from kafka_lineage.runtime.tail import tail

    clients = ClientSettings.from_env()
    if args.action == "redrive":
        from kafka_lineage.replay.redrive import format_report, redrive

        report = redrive(clients, args.reason, _moment(args.from_, "--from"), _moment(args.to, "--to"), args.dry_run)
        print(format_report(report, args.dry_run))
        return 0
    for letter in tail(clients, clients.dlq_topic, "dead_letter", args.lines, args.follow,
                       _report_unreadable("a dead letter")):
        if args.json:
            print(json.dumps({k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                              for k, v in letter.items()}, default=str), flush=True)
        else:
            print(format_dead_letter(letter), flush=True)
    return 0


def _moment(text: str | None, option: str) -> datetime | None:
    """An ISO time (UTC unless it says otherwise)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option}: not an ISO time such as 2025-12-24T10:00:00Z: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _report_unreadable(what: str) -> Callable[[int, int, Exception], None]:
    """tail's handler of a record that does not decode: one line on stderr (stdout may be JSON), then go on."""

    def report(partition: int, offset: int, error: Exception) -> None:
        print(f"lineage: record at partition {partition} offset {offset} is not {what}: {shown(error)}",
              file=sys.stderr, flush=True)

    return report


_CUT = {"nodes": "more nodes exist within the depth", "edges": "a level had more edges than a query may return",
        "time": "the time budget ran out"}


def cmd_impact(args: argparse.Namespace) -> int:
    from kafka_lineage.app import render
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.queries import as_rows, closest_datasets, traverse

    direction = "down" if args.command == "impact" else "up"
    if args.column:
        return _column_lineage(args, direction)
    try:
        with driver_for(ClientSettings.from_env()) as driver:
            graph = traverse(driver, args.namespace, args.name, args.depth, direction)
            if not graph.found:
                return _not_found(f"dataset {args.namespace} {args.name}", [
                    f"{ns} {name}" for ns, name in closest_datasets(driver, args.namespace, args.name)])
    except ValueError as exc:
        raise ConfigError(f"--depth: {exc}") from None
    title = f"{'downstream of' if direction == 'down' else 'upstream of'} {args.namespace} {args.name}"
    if args.format == "json":
        print(json.dumps(as_rows(graph.nodes, graph.unwritten), indent=2))
    elif args.format == "dot":
        print(render.to_dot(graph), end="")
    elif args.format in ("svg", "html"):
        picture = (render.to_svg(graph, direction == "up") if args.format == "svg"
                   else render.to_html(graph, title, direction == "up"))
        output = Path(args.output or f".lineage/pictures/{args.command}.{args.format}")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(picture)
        print(f"{len(graph.nodes)} nodes {shown(title)}: picture in {shown(output.resolve())}")
    else:
        print(f"{len(graph.nodes)} nodes {shown(title)} (depth ≤ {args.depth})")
        if graph.truncated:
            print(f"  (truncated: {_CUT[graph.stopped]}; the nearest {len(graph.nodes)} are listed)")
        for row in as_rows(graph.nodes, graph.unwritten):
            never = "  (declared only: no completed run wrote it)" if row.get("written") is False else ""
            print(f"  {row['depth']:>3}  {row['kind']:8} {shown(row['namespace'])}  {shown(row['name'])}{never}")
    return 0


def _not_found(what: str, hints: list[str]) -> int:
    """An unknown node: one line naming what was asked, the closest existing names, exit 1 (an empty answer would
    read as "nothing depends on it")."""
    print(f"lineage: not found in the graph: {shown(what)}", file=sys.stderr)
    if hints:
        print("  closest existing: " + "; ".join(shown(hint) for hint in hints), file=sys.stderr)
    return 1


def _column_lineage(args: argparse.Namespace, direction: str) -> int:
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.queries import closest_datasets, closest_fields, field_exists, field_lineage

    if args.format not in ("table", "json"):
        raise ConfigError("--column: pictures are table-level; use --format table or json")
    try:
        with driver_for(ClientSettings.from_env()) as driver:
            fields = field_lineage(driver, args.namespace, args.name, args.column, args.depth, direction)
            if not fields and not field_exists(driver, args.namespace, args.name, args.column):
                hints = closest_fields(driver, args.namespace, args.name, args.column)
                return _not_found(f"column {args.column} of dataset {args.namespace} {args.name}", [
                    f"{args.namespace} {args.name} --column {hint}" for hint in hints] or [
                    f"{ns} {name}" for ns, name in closest_datasets(driver, args.namespace, args.name)])
    except ValueError as exc:
        raise ConfigError(f"--depth: {exc}") from None
    rows = [{"depth": f.depth, "namespace": f.namespace, "name": f.name, "field": f.field} for f in fields]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    relation = "derived from" if direction == "down" else "that feed"
    print(f"{len(rows)} columns {relation} {shown(args.namespace)} {shown(args.name)}.{shown(args.column)} "
          f"(depth ≤ {args.depth})")
    for row in rows:
        print(f"  {row['depth']:>3}  {shown(row['namespace'])}  {shown(row['name'])}.{shown(row['field'])}")
    return 0


# `lineage ready` exit codes, for schedulers: ready, not ready (what is missing is named), the question itself is
# wrong (bad key, unknown dataset: retrying will not help), the graph could not answer (retry later).
READY, NOT_READY, BAD_QUESTION, NO_ANSWER = 0, 1, 2, 3


def _bad_question(message: str, hints: list[str] | None = None) -> int:
    print(f"lineage: {shown(message)}", file=sys.stderr)
    if hints:
        print("  closest existing: " + "; ".join(shown(hint) for hint in hints), file=sys.stderr)
    return BAD_QUESTION


def _unknown_dataset(driver: Any, namespace: str, name: str) -> int:
    from kafka_lineage.graph.queries import closest_datasets

    return _bad_question(f"not found in the graph: dataset {namespace} {name}",
                         [f"{ns} {nm}" for ns, nm in closest_datasets(driver, namespace, name)])


def cmd_ready(args: argparse.Namespace) -> int:
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.partitions import UnknownDataset, ready

    try:
        with driver_for(ClientSettings.from_env()) as driver:
            try:
                ok, missing, _ = ready(driver, args.namespace, args.name, args.key)
            except UnknownDataset:
                return _unknown_dataset(driver, args.namespace, args.name)
    except ValueError as exc:
        return _bad_question(f"--key: {exc}")
    except Exception as exc:  # Neo4j unreachable or too slow: not an answer, the caller retries
        if not _is_neo4j_error(exc):
            raise
        print(f"lineage: Neo4j could not answer: {shown(getattr(exc, 'message', None) or exc)}", file=sys.stderr)
        return NO_ANSWER
    if args.json:
        print(json.dumps({"ready": ok, "missing": missing}, indent=2))
    elif ok:
        print(f"ready: {shown(args.namespace)} {shown(args.name)} {shown(args.key)}")
    else:
        print(f"not ready: {shown(args.namespace)} {shown(args.name)} {shown(args.key)}")
        for item in missing:
            print(f"  {item['role']:9} {shown(item['namespace'])} {shown(item['name'])} {shown(item['key'])}: "
                  f"{item['state'] or 'UNKNOWN'}{' — ' + shown(item['reason']) if item['reason'] else ''}")
    return READY if ok else NOT_READY


def cmd_partitions(args: argparse.Namespace) -> int:
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.partitions import UnknownDataset, dataset_partitions

    if args.limit < 1:
        return _bad_question(f"--limit: at least 1, got {args.limit}")
    try:
        with driver_for(ClientSettings.from_env()) as driver:
            try:
                found = dataset_partitions(driver, args.namespace, args.name, args.key, args.state, args.limit)
            except UnknownDataset:
                return _unknown_dataset(driver, args.namespace, args.name)
    except ValueError as exc:
        return _bad_question(f"--key: {exc}")
    if args.json:
        print(json.dumps([status.as_dict(versions=args.runs) for status in found], indent=2))
        return 0
    print(f"{len(found)} partitions of {shown(args.namespace)} {shown(args.name)}")
    for status in found:
        latest = status.latest
        rows = "" if latest is None or latest.version.row_count is None else f"  rows {latest.version.row_count}"
        run = "" if latest is None else f"  v{latest.number}/{status.facts.version_count} run {latest.version.run_id}"
        job = "" if latest is None or latest.version.job is None else f" ({shown(latest.version.job[1])})"
        reason = f"  — {shown(status.reason)}" if status.reason and status.state != "SUCCESS" else ""
        print(f"  {shown(status.facts.key):32} {status.state or 'UNKNOWN':8}{run}{job}{rows}{reason}")
        if args.runs:
            for version in reversed(status.versions):
                v = version.version
                print(f"      v{version.number} {version.state:8} run {v.run_id} {v.run_state or '-'} "
                      f"{v.start or '-'} → {v.end or '-'}"
                      + (f" rows {v.row_count}" if v.row_count is not None else "")
                      + (f" failed: {', '.join(v.failed)}" if v.failed else ""))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.partitions import run_partitions

    with driver_for(ClientSettings.from_env()) as driver:
        found = run_partitions(driver, args.run_id)
    if not found.found:
        return _bad_question(f"not found in the graph: run {args.run_id}")
    if args.json:
        print(json.dumps({"runId": args.run_id, "state": found.state,
                          "job": {"namespace": found.job[0], "name": found.job[1]} if found.job else None,
                          "wrote": found.wrote, "read": found.read}, indent=2))
        return 0
    job = f" of job {shown(found.job[0])} {shown(found.job[1])}" if found.job else ""
    print(f"run {args.run_id}{job}: {found.state or '-'}")
    print(f"  wrote {len(found.wrote)} partitions")
    for w in found.wrote:
        print(f"    {shown(w['namespace'])} {shown(w['name'])} {shown(w['key'])}: v{w.get('version', '?')} "
              f"{w.get('state', '-')}" + (f" rows {w['rowCount']}" if w.get("rowCount") is not None else ""))
    print(f"  read {len(found.read)} partitions")
    for r in found.read:
        print(f"    {shown(r['namespace'])} {shown(r['name'])} {shown(r['key'])}: {r['state'] or 'UNKNOWN'}")
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    from kafka_lineage.graph.backfill import PlanError, fetch_facts, parse_day, plan, stale_events
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.partitions import UnknownDataset

    try:
        start, end = parse_day(args.from_, "--from"), parse_day(args.to, "--to")
        with driver_for(ClientSettings.from_env()) as driver:
            try:
                result = plan(fetch_facts(driver, args.namespace, args.name, args.depth), start, end, args.depth)
            except UnknownDataset:
                return _unknown_dataset(driver, args.namespace, args.name)
    except PlanError as exc:
        return _bad_question(str(exc))
    except Exception as exc:
        if not _is_neo4j_error(exc):
            raise
        print(f"lineage: Neo4j could not answer: {shown(getattr(exc, 'message', None) or exc)}", file=sys.stderr)
        return NO_ANSWER
    marked = None
    if args.mark_stale:  # through the pipeline, never into Neo4j directly: a replay rebuilds the marks
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        events, skipped = stale_events(result, now)
        publisher = EventPublisher.from_settings(ClientSettings.from_env(), args.topic)
        try:
            sent = publisher.send([publisher.encode(event) for event in events]).result() if events else 0
        finally:
            publisher.close()
        marked = {"published": sent, "skipped": skipped, "topic": publisher.topic, "requestedAt": now}
    if args.json:
        print(json.dumps({**result, **({"markStale": marked} if marked is not None else {})}, indent=2))
        return 0
    items = sum(len(stage["items"]) for stage in result["stages"])
    print(f"backfill plan {result['planId']}: {shown(args.namespace)} {shown(args.name)} "
          f"{result['window']['from']}..{result['window']['to']} (depth ≤ {result['depth']}): "
          f"{len(result['partitions'])} partitions in the window → {items} items in {len(result['stages'])} stages, "
          f"{len(result['jobs'])} jobs")
    for stage in result["stages"]:
        print(f"stage {stage['stage']} ({len(stage['items'])} in parallel)")
        for item in stage["items"]:
            run = item["lastRun"]
            last = "no run known" if run is None else (f"last run {run['runId']} {run['state'] or '-'} "
                                                       f"{run['startTime'] or '-'}"
                                                       + (" (backfill)" if run["backfill"] else ""))
            targets = ", ".join(f"{shown(o['name'])} {shown(o['key'])}" for o in item["rebuild"])
            unknown = "  partitions: unknown, by window" if item["partitions"] == "unknown" else ""
            print(f"  {shown(item['job']['namespace'])} {shown(item['job']['name'])}  {shown(item['key'])}"
                  f"  → {targets}  {last}{unknown}")
    for cycle in result["cycles"]:
        print("cycle: " + " → ".join(f"{shown(j['namespace'])} {shown(j['name'])}" for j in cycle)
              + " (its items share a stage)", file=sys.stderr)
    if result["truncated"]:
        print(f"cut at depth {result['depth']}: more jobs are downstream (--depth)", file=sys.stderr)
    if marked is None:
        print("dry run: nothing changed (--mark-stale marks the planned partitions STALE)")
    else:
        print(f"marked stale: {marked['published']} partitions (events on {marked['topic']}); "
              f"{marked['skipped']} by-window partitions not marked")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from kafka_lineage.replay.local import progress_bar, replay

    tune_gc()
    if args.fresh and not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError("--fresh empties the whole graph before rebuilding it: add --yes to confirm")
        answer = input("--fresh empties the whole graph before rebuilding it from the topic. Go on? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed")
            return 1
    clients, processing = ClientSettings.from_env(), ProcessorSettings.from_env()  # aliases as the processor's
    window = {"start": args.from_, "end": args.to, "fresh": args.fresh,
              "allow_partial_history": args.allow_partial_history, "processing": processing}
    if args.repair and args.engine == "spark":
        raise ConfigError("--repair runs on the local engine (a window is small; the removals need the whole window)")
    if args.bulk and (not args.fresh or args.repair):
        raise ConfigError("--bulk rebuilds the whole graph: with --fresh, without --repair")
    if args.task_records is not None and (not args.bulk or args.engine != "spark" or args.task_records < 1):
        raise ConfigError("--task-records N (N >= 1) sizes the tasks of --bulk --engine spark: only with both")
    if args.work_dir is not None and not args.bulk:
        raise ConfigError("--work-dir is where --bulk writes its import files: only with --bulk")
    if args.export is not None and (not args.bulk or args.work_dir is not None):
        raise ConfigError("--export DIR writes the import files of --bulk for a Neo4j elsewhere: with --bulk, "
                          "without --work-dir")
    try:
        if args.bulk:
            from kafka_lineage.replay.bulk import importer
            from kafka_lineage.replay.bulk.progress import PhaseProgress

            spark_master = args.spark_master if args.engine == "spark" else None
            try:
                if args.export is not None:
                    report = importer.export_bulk(clients, args.export, start=args.from_, end=args.to,
                                                  processing=processing, phases=PhaseProgress(),
                                                  allow_partial_history=args.allow_partial_history,
                                                  task_records=args.task_records, spark_master=spark_master)
                else:
                    report = importer.bulk_replay(clients, start=args.from_, end=args.to, processing=processing,
                                                  allow_partial_history=args.allow_partial_history,
                                                  phases=PhaseProgress(), work_dir=args.work_dir,
                                                  task_records=args.task_records, spark_master=spark_master)
            except importer.BulkImportUnavailable as exc:
                print(f"lineage: {exc}", file=sys.stderr)
                return importer.EXIT_UNAVAILABLE
            except importer.BulkImportFailed as exc:
                raise CommandFailed(f"bulk replay: {exc}") from None
        elif args.engine == "spark":
            from kafka_lineage.replay.spark import replay_on_spark

            report = replay_on_spark(clients, master=args.spark_master, **window)
        else:
            report = replay(clients, progress=progress_bar(), repair=args.repair, **window)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    print(f"\nreplayed {report.records} records in {report.seconds:.1f}s "
          f"({report.records / max(report.seconds, 1e-9):,.0f} events/s): {report.written} events written, "
          f"{report.dead_letters} records not processable ({report.scanned} records read)")
    if args.bulk and report.resumed_after:
        print(f"a rebuild killed in its {report.resumed_after} phase had left its mark: this one started over")
    if args.bulk:
        stored = (f"import files in {args.export}: {report.files_bytes / 1024 ** 2:,.0f} MiB, the steps to import "
                  f"them in {args.export / 'IMPORT.md'}" if args.export is not None else
                  f"import files {report.files_bytes / 1024 ** 2:,.0f} MiB, imported store "
                  f"{report.store_bytes / 1024 ** 2:,.0f} MiB")
        print(f"{stored}; seconds per phase: "
              + ", ".join(f"{name} {seconds:.1f}" for name, seconds in report.phases.items()))
        ends = report.coverage.ends
        print(f"the live graph sink takes over at {report.coverage.topic} offsets "
              + (", ".join(f"{partition}:{ends[partition]}" for partition in sorted(ends)) or "(none)")
              + f" (rebuild {report.coverage.rebuild}): it leaves out every record below them")
    breaking = sum(1 for change in report.schema_changes if change.severity == "BREAKING")
    print(f"schema changes by event time: {len(report.schema_changes)} ({breaking} breaking)")
    if args.schema_changes:
        with open(args.schema_changes, "w", encoding="utf-8") as out:
            for change in report.schema_changes:
                record = change.as_record()
                del record["late"], record["supersedes"]  # a replay's history is whole: nothing late, nothing split
                out.write(json.dumps(record, separators=(",", ":")) + "\n")
        print(f"written to {args.schema_changes}, one JSON object per line")
    if (removed := report.repaired) is not None:
        print(f"repaired: removed {removed.runs} runs, {removed.edges} edges, {removed.partitions} partitions, "
              f"{removed.datasets} datasets and {removed.jobs} jobs the window's events no longer produce")
    return 0


def _services_probe() -> Callable[[], Any] | None:
    """The installed probe of the services' states (the development tools' local stack), if any."""
    probes = [entry.load() for entry in entry_points(group=SERVICES_ENTRY_POINTS)]
    return probes[0] if probes else None


def cmd_serve(args: argparse.Namespace) -> int:
    from kafka_lineage.server.serve import serve

    settings = ServerSettings.from_env()
    if args.port is not None:
        port_number("--port", args.port)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    from kafka_lineage.app.stage_groups import default_groups

    serve(dataclasses.replace(settings, **overrides), ClientSettings.from_env(), default_groups(), _services_probe())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from kafka_lineage.app.stage_groups import default_groups
    from kafka_lineage.app.status_text import format_status
    from kafka_lineage.runtime import status

    report = status.collect_status(_services_probe(), ClientSettings.from_env(), default_groups(),
                                   lag_threshold=args.lag_threshold)
    print(json.dumps(status.status_json(report), indent=2, default=str) if args.json else format_status(report))
    return status.exit_code(report)


def cmd_graph(args: argparse.Namespace) -> int:
    from kafka_lineage.graph import epoch
    from kafka_lineage.graph.driver import driver_for, ensure_indexes_online, graph_fingerprint

    with driver_for(ClientSettings.from_env()) as driver:
        if args.action == "indexes":
            ensure_indexes_online(driver)
            print("constraints and indexes online")
        elif args.action == "forget":
            epoch.renew(driver)
            print("the graph has a new epoch: running graph sinks and replays forget the rows they knew it held")
        else:
            print(graph_fingerprint(driver))
    return 0


# `lineage check` exit codes, for CI: no breaking change with consumers, one at least, the input is wrong (a retry
# will not help), the graph could not answer (retry later).
CHECK_PASS, CHECK_BREAKING, CHECK_BAD_INPUT, CHECK_NO_ANSWER = 0, 1, 2, 3


def cmd_check(args: argparse.Namespace) -> int:
    from kafka_lineage.app.check_output import render, text
    from kafka_lineage.graph.check import BREAKING_WITH_CONSUMERS, CheckReport
    from kafka_lineage.schemas.proposals import MAX_PROPOSAL_BYTES, ProposalError, read_proposals

    allow = list(args.allow or [])
    documents, sent, proposals = [], [], []
    try:
        for path in args.allow_file or []:
            allow += [line.split("#", 1)[0].strip() for line in Path(path).read_text().splitlines()
                      if line.split("#", 1)[0].strip()]
        for path in args.files:
            if args.format == "dbt" or (path != "-" and (Path(path).is_dir() or Path(path).name == "manifest.json")):
                read = _dbt_proposals(Path(path), args.namespace or "")
                proposals += read
                sent += [{"namespace": p.namespace, "name": p.name, "fields": p.fields, "complete": p.complete,
                          "source": p.source, "origin": p.origin} for p in read]
                continue
            source = "<stdin>" if path == "-" else path
            content = sys.stdin.read(MAX_PROPOSAL_BYTES + 1) if path == "-" else _read_bounded(Path(path),
                                                                                             MAX_PROPOSAL_BYTES)
            document = {"text": content, "source": source, "format": args.format, "namespace": args.namespace or "",
                        "dialect": args.dialect, "dataset": list(args.dataset) if args.dataset else None}
            proposals += read_proposals(content, source=source, format=args.format,
                                        dataset=tuple(args.dataset) if args.dataset else None,
                                        namespace=args.namespace or "", dialect=args.dialect)
            documents.append(document)
    except (ProposalError, OSError, UnicodeDecodeError) as exc:
        print(f"lineage check: {shown(exc)}", file=sys.stderr)
        return CHECK_BAD_INPUT
    server = args.server or os.environ.get("LINEAGE_CHECK_SERVER")
    try:
        if server:
            report = CheckReport.from_dict(_check_on_server(server, {
                "documents": documents, "proposals": sent, "allow": allow, "depth": args.depth,
                "knownConsumersOnly": args.known_consumers_only}))
        else:
            report = _check_here(proposals, args.depth, allow, args.known_consumers_only)
    except _CheckRefused as exc:
        print(f"lineage check: {shown(exc)}", file=sys.stderr)
        return CHECK_BAD_INPUT
    except _CheckUnanswered as exc:
        print(f"lineage check: the lineage graph did not answer ({shown(exc)}); retry later", file=sys.stderr)
        return CHECK_NO_ANSWER
    rendered = render(report, args.output)
    if args.output_file:
        Path(args.output_file).write_text(rendered)
        if args.output != "text":
            print(text(report), end="")
    else:
        print(rendered, end="")
    return CHECK_BREAKING if report.verdict == BREAKING_WITH_CONSUMERS else CHECK_PASS


class _CheckRefused(Exception):
    """The check's question is wrong (exit 2)."""


class _CheckUnanswered(Exception):
    """Neo4j or the server did not answer (exit 3)."""


def _check_here(proposals: list[Any], depth: int, allow: list[str], known_only: bool) -> Any:
    from kafka_lineage.graph.check import check
    from kafka_lineage.graph.driver import driver_for

    try:
        with driver_for(ClientSettings.from_env()) as driver:
            return check(driver, proposals, depth=depth, allow=allow, unknown_readers_count=not known_only)
    except ValueError as exc:  # a bad depth, an ALTER of a column the current schema lacks
        raise _CheckRefused(str(exc)) from None
    except Exception as exc:
        if not _is_neo4j_error(exc) and not isinstance(exc, OSError):
            raise
        raise _CheckUnanswered(f"Neo4j: {getattr(exc, 'message', None) or exc}") from None


def _check_on_server(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /api/v2/check`` on a lineage server (``LINEAGE_SERVER_TOKEN``: its bearer token, if it has one)."""
    import requests

    token = os.environ.get("LINEAGE_SERVER_TOKEN")
    try:
        answer = requests.post(url.rstrip("/") + "/api/v2/check", json=body, timeout=(10, 300),
                               headers={"Authorization": f"Bearer {token}"} if token else {})
    except requests.RequestException as exc:
        raise _CheckUnanswered(f"{url}: {exc}") from None
    if answer.status_code in (400, 401, 403, 404, 413):
        try:
            message = answer.json().get("message") or answer.text
        except ValueError:
            message = answer.text
        raise _CheckRefused(f"{url} answered {answer.status_code}: {message[:500]}")
    if answer.status_code != 200:
        raise _CheckUnanswered(f"{url} answered {answer.status_code}: {answer.text[:300]}")
    return answer.json()


def _dbt_proposals(path: Path, namespace: str) -> list[Any]:
    """A dbt target directory (or its manifest.json): manifest.json and, if there, catalog.json beside it. Model
    files are named relative to the project (the nearest directory up with a dbt_project.yml), as the repository
    has them."""
    from kafka_lineage.schemas.proposals import MAX_PROPOSAL_BYTES, ProposalError, from_dbt

    target = path if path.is_dir() else path.parent
    manifest_path, catalog_path = target / "manifest.json", target / "catalog.json"
    if not manifest_path.is_file():
        raise ProposalError(f"{target} holds no manifest.json (dbt parse, compile or build writes it)")
    try:
        manifest = json.loads(_read_bounded(manifest_path, MAX_PROPOSAL_BYTES))
        catalog = json.loads(_read_bounded(catalog_path, MAX_PROPOSAL_BYTES)) if catalog_path.is_file() else None
    except ValueError as exc:
        raise ProposalError(f"{target}: a dbt artifact is not JSON: {exc}") from None
    project = next((folder for folder in (target, *target.resolve().parents[:2])
                    if (folder / "dbt_project.yml").is_file()), None)
    root = ""
    if project is not None:
        with contextlib.suppress(ValueError):
            root = str(project.resolve().relative_to(Path.cwd().resolve()))
    return from_dbt(manifest, catalog, namespace, "" if root == "." else root)


def _read_bounded(path: Path, limit: int) -> str:
    if path.stat().st_size > limit:
        raise OSError(f"{path} is over {limit:,} bytes")
    return path.read_text(encoding="utf-8")


def cmd_tags(args: argparse.Namespace) -> int:
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.keys import utc_time
    from kafka_lineage.graph.sensitive import sensitive_columns

    if args.import_dbt:
        return _import_dbt_tags(Path(args.import_dbt), args.namespace or "")
    settings = ServerSettings.from_env()
    tags = tuple(args.tag) if args.tag else settings.sensitive_tags
    as_of = utc_time(args.as_of) if args.as_of else None
    if args.as_of and as_of is None:
        raise ConfigError(f"--as-of: an ISO-8601 time such as 2024-05-01T12:00:00Z, got {args.as_of!r}")
    try:
        with driver_for(ClientSettings.from_env()) as driver:
            columns, cut = sensitive_columns(driver, tags, depth=args.depth, as_of=as_of,
                                             stop_at_aggregation=settings.sensitive_stop_at_aggregation)
    except ValueError as exc:
        raise ConfigError(f"--depth: {exc}") from None
    if args.dataset:
        columns = [c for c in columns if (c.namespace, c.name) == tuple(args.dataset)]
    if args.json:
        print(json.dumps({"tags": list(tags), "truncated": cut, "columns": [c.as_dict() for c in columns]}, indent=2))
        return 0
    print(f"{len(columns)} columns {', '.join(tags)} reaches{' (cut: more exist)' if cut else ''}")
    for c in columns:
        where = f"{shown(c.namespace)} {shown(c.name)}.{shown(c.field)}"
        if c.status == "origin":
            print(f"  [{c.tag}] {where}  (tagged)")
            continue
        hops = " → ".join(f"{shown(h.name)}.{shown(h.field)}"
                          + (f" ({shown(h.transformation)})" if h.transformation else "") for h in c.path)
        origin = f"{shown(c.origin[1])}.{shown(c.origin[2])}"
        verdict = "masked: stops here" if c.status == "masked" else "cleared" if c.cleared else "NOT CLEARED"
        print(f"  [{c.tag}] {where}  {c.status} from {origin}: {origin} → {hops}  [{verdict}]")
    return 0


def _import_dbt_tags(target: Path, namespace: str) -> int:
    """dbt's column tags and ``meta`` classifications as tags set on the datasets (``kafkaLineage_tags``, source
    ``DBT CORE``; the other tags set there are kept), one event per dataset whose dbt tags changed."""
    from kafka_lineage.graph.driver import driver_for
    from kafka_lineage.graph.sensitive import dataset_tags
    from kafka_lineage.schemas.proposals import ProposalError
    from kafka_lineage.schemas.tags import TAGS_FACET, checked_tag, merged, tags_event

    try:
        proposals = _dbt_proposals(target, namespace)
    except (ProposalError, OSError) as exc:
        raise ConfigError(f"--import-dbt: {exc}") from None
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    events = []
    with driver_for(ClientSettings.from_env()) as driver:
        for proposal in proposals:
            current = dataset_tags(driver, proposal.namespace, proposal.name)[TAGS_FACET]
            kept = [tag for tag in current if tag.get("source") != "DBT CORE"]
            from_dbt = [checked_tag({"key": tag, "field": column}, source="DBT CORE")
                        for column, names in sorted(proposal.tags.items()) for tag in names]
            tags = merged(kept, from_dbt)
            if tags != merged(current):
                events.append(tags_event(proposal.namespace, proposal.name, tags, now))
    publisher = EventPublisher.from_settings(ClientSettings.from_env())
    try:
        publisher.send([publisher.encode(event) for event in events]).result(60)
    finally:
        publisher.close()
    print(f"{len(events)} datasets' dbt tags recorded ({sum(bool(p.tags) for p in proposals)} of {len(proposals)} "
          "dbt datasets have tagged columns)")
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.service.emit import emit_lines, open_source, progress_printer

    try:
        source = open_source(args.file)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    publisher = EventPublisher.from_settings(ClientSettings.from_env(), args.topic)
    started = time.monotonic()
    with source:
        report = emit_lines(source, publisher, progress_printer())
    publisher.close()
    for problem in report.problems[:50]:
        print(f"  {shown(problem)}", file=sys.stderr)
    if len(report.problems) > 50:
        print(f"  ... and {len(report.problems) - 50} more", file=sys.stderr)
    if report.failure is not None:  # the lines read before it are published (and counted) all the same
        print(f"lineage: {shown(args.file)}: {shown(report.failure)}", file=sys.stderr)
    elapsed = time.monotonic() - started
    print(f"published {report.published} events to {publisher.topic} in {elapsed:.1f}s; "
          f"{len(report.problems)} problems")
    return 0 if report.ok else 1


def cmd_connect(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.service.connect_watcher import WatchSettings, watch

    heartbeat = WatchSettings.from_env(os.environ).heartbeat if args.heartbeat < 0 else args.heartbeat or None
    emitted = watch(ClientSettings.from_env(), args.url, interval=args.interval, once=args.once,
                    job_namespace=args.job_namespace, heartbeat=heartbeat)
    print(f"{emitted} OpenLineage events emitted")
    return 0


def cmd_flink(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.service.flink_watcher import watch

    emitted = watch(ClientSettings.from_env(), args.rest_url, interval=args.interval, grace=args.grace, once=args.once)
    print(f"{emitted} OpenLineage events emitted")
    return 0


def cmd_bridge(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.service.bridge import Bridge
    from kafka_lineage.runtime.metrics import Metrics, pipeline_checks

    clients, operations = ClientSettings.from_env(), OperationsSettings.from_env()
    metrics = Metrics()
    bridge = Bridge(clients, args.topic, args.group, metrics=metrics)
    if args.once:  # until the topic has nothing more to read
        stop = threading.Event()
        bridge.run(stop, idle=stop.set)
    else:
        _run_with_endpoint("bridge", "LINEAGE_BRIDGE_METRICS_PORT", operations.bridge_metrics_port, operations,
                           metrics, pipeline_checks(clients), bridge.run)
    print(f"{bridge.published} events published, {bridge.dead_lettered} records dead-lettered")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lineage", description="Event-streaming OpenLineage pipeline on Kafka")
    sub = parser.add_subparsers(dest="command", required=True)

    schemas = sub.add_parser("schemas", help="register / check the Avro schemas in the schema registry")
    schemas.add_argument("action", choices=["register", "check"])
    schemas.add_argument(
        "--compatibility",
        default="BACKWARD",
        choices=["BACKWARD", "BACKWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"],
        help="register: level set on each subject (default BACKWARD)",
    )
    schemas.set_defaults(handler=cmd_schemas)

    collector = sub.add_parser("collector", help="OpenLineage HTTP endpoint (POST /api/v1/lineage) into Kafka")
    collector.add_argument("--host", help="listen address (default LINEAGE_COLLECTOR_HOST or 127.0.0.1)")
    collector.add_argument("--port", type=int, help="listen port (default LINEAGE_COLLECTOR_PORT or 5000)")
    collector.set_defaults(handler=cmd_collector)

    processor = sub.add_parser("processor", help="stream processor: reorder, dedupe, normalize, detect schema drift")
    processor.set_defaults(handler=cmd_processor)

    sink = sub.add_parser("sink", help="Neo4j graph sink: normalized events → the lineage graph")
    sink.set_defaults(handler=cmd_sink)

    alerts = sub.add_parser("alerts", help="schema-drift alerts: run the alert sink, route alerts to webhooks, chat "
                                           "and on-call (LINEAGE_ALERT_ROUTES), or tail the alert topic")
    alerts.add_argument("action", choices=["run", "route", "tail"])
    alerts.add_argument("--check", action="store_true", help="route: validate the routes file (secrets read, "
                        "templates tried on sample alerts) and exit")
    alerts.add_argument("--json", action="store_true", help="tail: one JSON object per alert")
    alerts.add_argument("-n", "--lines", type=int, default=20, help="tail: how many of the latest alerts")
    alerts.add_argument("-f", "--follow", action="store_true", help="tail: keep following")
    alerts.set_defaults(handler=cmd_alerts)

    dlq = sub.add_parser("dlq", help="dead letters: what a stage could not process, and why")
    dlq.add_argument("action", choices=["tail", "redrive"],
                     help="tail: show the latest; redrive: publish dead letters back to their source topic (once)")
    dlq.add_argument("--json", action="store_true", help="tail: one JSON object per dead letter")
    dlq.add_argument("-n", "--lines", type=int, default=20, help="tail: how many of the latest dead letters")
    dlq.add_argument("-f", "--follow", action="store_true", help="tail: keep following")
    dlq.add_argument("--reason", help="redrive: only dead letters of this error class (e.g. neo4j-rejected)")
    dlq.add_argument("--from", dest="from_", help="redrive: only those that failed at or after this ISO time")
    dlq.add_argument("--to", help="redrive: only those that failed before this ISO time")
    dlq.add_argument("--dry-run", action="store_true", help="redrive: count what would go where, publish nothing")
    dlq.set_defaults(handler=cmd_dlq)

    for name, text in (("impact", "jobs and datasets downstream of a dataset"),
                       ("upstream", "jobs and datasets a dataset comes from (root cause)")):
        query = sub.add_parser(name, help=text)
        query.add_argument("namespace", help="dataset namespace, e.g. s3://lake or postgres://db:5432")
        query.add_argument("name", help="dataset name, e.g. mart/orders or shop.public.orders")
        query.add_argument("--depth", type=int, default=5, help="how many jobs (or column hops) deep (default 5)")
        query.add_argument("--column", help="column-level: follow this field of the dataset")
        query.add_argument("--format", default="table", choices=["table", "json", "dot", "svg", "html"],
                           help="svg/html: a picture written to --output (default .lineage/pictures/)")
        query.add_argument("--output", help="where the svg/html picture goes")
        query.set_defaults(handler=cmd_impact)

    partitions = sub.add_parser("partitions", help="a dataset's partitions: state, versions, rows, quality, writer")
    partitions.add_argument("namespace", help="dataset namespace (the table root's), e.g. s3://lake")
    partitions.add_argument("name", help="dataset name (the table root), e.g. events")
    partitions.add_argument("--key", help="only partitions holding these keys, e.g. date=2025-12-24")
    partitions.add_argument("--state", choices=["RUNNING", "SUCCESS", "FAILED", "STALE"], help="only in this state")
    partitions.add_argument("--runs", action="store_true", help="every version: the runs that wrote the partition")
    partitions.add_argument("--limit", type=int, default=1000, help="at most this many partitions (default 1000)")
    partitions.add_argument("--json", action="store_true", help="machine-readable output")
    partitions.set_defaults(handler=cmd_partitions)

    ready = sub.add_parser("ready", help="is a partition complete and good, and what it was built from? exit 0 "
                                         "ready, 1 not ready, 2 bad key or unknown dataset, 3 no answer (retry)")
    ready.add_argument("namespace", help="dataset namespace, e.g. s3://lake")
    ready.add_argument("name", help="dataset name (the table root), e.g. events")
    ready.add_argument("--key", required=True, help="the partition, e.g. date=2025-12-24 or date=2025-12-24/region=eu")
    ready.add_argument("--json", action="store_true", help='{"ready": …, "missing": […]}')
    ready.set_defaults(handler=cmd_ready)

    run = sub.add_parser("run", help="the partitions a run wrote (its versions, their states) and read")
    run.add_argument("run_id")
    run.add_argument("--json", action="store_true", help="machine-readable output")
    run.set_defaults(handler=cmd_run)

    backfill = sub.add_parser("backfill", help="time-window repair: what must re-run, in which order, after a "
                                               "dataset's partitions in a date window were wrong")
    backfill.add_argument("action", choices=["plan"])
    backfill.add_argument("namespace", help="dataset namespace (the table root's), e.g. s3://lake")
    backfill.add_argument("name", help="dataset name (the table root), e.g. events")
    backfill.add_argument("--from", dest="from_", required=True, help="first day of the window, e.g. 2025-12-01")
    backfill.add_argument("--to", required=True, help="last day of the window (inclusive), e.g. 2025-12-07")
    backfill.add_argument("--depth", type=int, default=10, help="how many jobs deep (default 10, at most 50)")
    backfill.add_argument("--json", action="store_true", help="the plan as JSON, for a scheduler")
    backfill.add_argument("--mark-stale", action="store_true",
                          help="publish a stale request for every planned partition (STALE until rewritten)")
    backfill.add_argument("--topic", help="with --mark-stale: the topic (default: the events topic)")
    backfill.set_defaults(handler=cmd_backfill)

    replay = sub.add_parser("replay", help="rebuild the graph (or repair a time window) from openlineage.events")
    replay.add_argument("--from", dest="from_", default="earliest",
                        help="earliest (default) or an ISO time: events from this eventTime on")
    replay.add_argument("--to", help="an ISO time: events up to this eventTime (default: no end)")
    replay.add_argument("--fresh", action="store_true", help="empty the graph first (a full rebuild; asks first)")
    replay.add_argument("--repair", action="store_true",
                        help="with --from: also remove, inside the window, what its events no longer produce (runs, "
                             "edges, partitions, datasets and jobs left without lineage); nothing outside changes")
    replay.add_argument("--yes", action="store_true", help="with --fresh: empty the graph without asking")
    replay.add_argument("--bulk", action="store_true",
                        help="with --fresh: rebuild by an offline neo4j-admin import into the local Neo4j "
                             "(LINEAGE_NEO4J_HOME; stops and restarts it); exit 3 when that is not possible here")
    replay.add_argument("--task-records", type=int, metavar="N",
                        help="with --bulk --engine spark: records one Spark task reads and folds (default 50,000; "
                             "smaller: more tasks, finer progress, less memory per task)")
    replay.add_argument("--work-dir", type=Path, metavar="DIR",
                        help="with --bulk: where the import files are written (removed after; default: the "
                             "temporary directory); checked for space before Neo4j is stopped")
    replay.add_argument("--export", type=Path, metavar="DIR",
                        help="with --bulk, for a Neo4j on another machine, stopped first: write the import files, "
                             "import.sh and IMPORT.md (the steps) into DIR instead of importing here")
    replay.add_argument("--allow-partial-history", action="store_true",
                        help="with --fresh: rebuild even when the topic no longer holds its first records")
    replay.add_argument("--engine", choices=["local", "spark"], default="local",
                        help="local: this process (default); spark: a PySpark job, one task per topic partition")
    replay.add_argument("--spark-master", default=os.environ.get("LINEAGE_SPARK_MASTER", "local[*]"),
                        help="Spark master URL for --engine spark (default $LINEAGE_SPARK_MASTER or local[*])")
    replay.add_argument("--schema-changes", metavar="FILE",
                        help="write the schema changes the records hold, found by event time as the processor finds "
                             "them (the alerts' changes), one JSON object per line")
    replay.set_defaults(handler=cmd_replay)

    serve = sub.add_parser("serve", help="the lineage server: Marquez-compatible HTTP API over the graph")
    serve.add_argument("--host", help="listen address (default LINEAGE_SERVER_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default LINEAGE_SERVER_PORT or 5050)")
    serve.set_defaults(handler=cmd_serve)

    status_cmd = sub.add_parser("status", help="pipeline health: services, consumer lag and last event per stage, "
                                               "dead letters, alerts in the last hour (exit 1 degraded, 2 no Kafka)")
    status_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    status_cmd.add_argument("--lag-threshold", type=int, default=1000,
                            help="lag above which a stage counts as behind (default 1000 records)")
    status_cmd.set_defaults(handler=cmd_status)

    graph = sub.add_parser("graph", help="the lineage graph in Neo4j")
    graph.add_argument("action", choices=["fingerprint", "indexes", "forget"],
                       help="fingerprint: canonical hash of nodes and edges; indexes: create the constraints and "
                            "indexes (after an import) and wait until they are online; forget: a new graph epoch, "
                            "after deleting from the graph by hand: running writers forget the rows they knew it "
                            "held and write them again")
    graph.set_defaults(handler=cmd_graph)

    tags_cmd = sub.add_parser("tags", help="where sensitive tags (pii, …) reach along column lineage: tagged, derived "
                                          "and masked columns, each with its path and whether its dataset is cleared")
    tags_cmd.add_argument("--tag", action="append", help="a tag to follow (repeatable; default LINEAGE_SENSITIVE_TAGS, "
                                                          "pii)")
    tags_cmd.add_argument("--dataset", nargs=2, metavar=("NAMESPACE", "NAME"), help="only this dataset's columns")
    tags_cmd.add_argument("--depth", type=int, default=10, help="column hops to follow (default 10)")
    tags_cmd.add_argument("--as-of", help="the lineage as it was then (ISO time)")
    tags_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    tags_cmd.add_argument("--import-dbt", metavar="TARGET_DIR",
                          help="record dbt's column tags and meta classifications (manifest.json there) as the "
                               "datasets' tags, as events; needs --namespace")
    tags_cmd.add_argument("--namespace", help="--import-dbt: the namespace dbt-ol gives the warehouse")
    tags_cmd.set_defaults(handler=cmd_tags)

    check_cmd = sub.add_parser(
        "check", help="schema-change gate for CI: diff proposed schemas against the graph's current ones and list "
                      "who consumes each changed column; exit 0 no breaking change with consumers, 1 there is one, "
                      "2 bad input, 3 the graph did not answer")
    check_cmd.add_argument("files", nargs="+", help="proposed schemas: DDL (.sql), Avro (.avsc), JSON Schema, "
                                                    "OpenLineage events or schema facets (.json, .ndjson), a dbt "
                                                    "target directory (manifest.json, catalog.json); - for stdin")
    check_cmd.add_argument("--format", default="auto",
                           choices=["auto", "openlineage", "avro", "json-schema", "ddl", "dbt"],
                           help="how to read the files (default: by extension, then by content; a directory or a "
                                "manifest.json: dbt artifacts)")
    check_cmd.add_argument("--dataset", nargs=2, metavar=("NAMESPACE", "NAME"),
                           help="the dataset an Avro schema, JSON Schema or bare schema facet is for")
    check_cmd.add_argument("--namespace", help="DDL and dbt: the namespace of the tables, as their events name it "
                                               "(e.g. postgres://db:5432; dbt-ol: duckdb:///path/to.duckdb)")
    check_cmd.add_argument("--dialect", help="DDL: the SQL dialect (sqlglot's names: postgres, snowflake, spark, …)")
    check_cmd.add_argument("--allow", action="append", metavar="PATTERN",
                           help="an accepted break: NAMESPACE/NAME:COLUMN, NAME:COLUMN or a dataset, * wildcards "
                                "(repeatable)")
    check_cmd.add_argument("--allow-file", action="append", metavar="FILE",
                           help="accepted breaks, one pattern a line (# comments)")
    check_cmd.add_argument("--depth", type=int, default=10, help="column hops to follow downstream (default 10)")
    check_cmd.add_argument("--known-consumers-only", action="store_true",
                           help="do not count jobs that read the dataset without reporting column lineage")
    check_cmd.add_argument("--output", default="text", choices=["text", "json", "sarif", "github"],
                           help="text for people, json, sarif (code scanning), github (workflow annotations)")
    check_cmd.add_argument("--output-file", help="write the report there (and the text summary to stdout)")
    check_cmd.add_argument("--server", help="ask this lineage server (POST /api/v2/check; LINEAGE_SERVER_TOKEN: its "
                                            "token) instead of Neo4j; default LINEAGE_CHECK_SERVER, else Neo4j")
    check_cmd.set_defaults(handler=cmd_check)

    emit = sub.add_parser("emit", help="backfill OpenLineage events from an NDJSON file (- for stdin, .gz ok)")
    emit.add_argument("file")
    emit.add_argument("--topic", help="target topic (default: the events topic)")
    emit.set_defaults(handler=cmd_emit)

    connect = sub.add_parser("connect", help="Kafka Connect hook: OpenLineage run events per connector")
    connect.add_argument("action", choices=["watch"])
    connect.add_argument("--interval", type=float, default=10.0, help="seconds between polls (default 10)")
    connect.add_argument("--once", action="store_true", help="poll once and exit")
    connect.add_argument("--url", help="Connect REST URL (default LINEAGE_CONNECT_URL)")
    connect.add_argument("--job-namespace", help="job namespace (default kafka-connect://host:port of the URL)")
    connect.add_argument("--heartbeat", type=float, default=-1.0,
                         help="seconds between RUNNING heartbeats of a running connector (0: none; default "
                              "LINEAGE_CONNECT_HEARTBEAT, else 60)")
    connect.set_defaults(handler=cmd_connect)

    flink = sub.add_parser("flink", help="Flink: finish the runs the OpenLineage listener left open (REST API)")
    flink.add_argument("action", choices=["watch"])
    flink.add_argument("--rest-url", default="http://127.0.0.1:8081", help="Flink REST URL (default %(default)s)")
    flink.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    flink.add_argument("--grace", type=float, default=10.0,
                       help="seconds the listener has to send a job's end itself (default 10)")
    flink.add_argument("--once", action="store_true", help="read the events topic, poll once and exit")
    flink.set_defaults(handler=cmd_flink)

    bridge = sub.add_parser("bridge", help="events from OpenLineage's Kafka transport (JSON on a topic) onto the "
                                           "events topic as Avro")
    bridge.add_argument("--topic", required=True, help="the topic OpenLineage's Kafka transport writes")
    bridge.add_argument("--group", default="lineage-bridge", help="consumer group (default lineage-bridge)")
    bridge.add_argument("--once", action="store_true", help="bridge what the topic holds now, then exit")
    bridge.set_defaults(handler=cmd_bridge)

    for entry in entry_points(group=COMMANDS_ENTRY_POINTS):
        entry.load()(sub)
    return parser


def _long_running(args: argparse.Namespace) -> bool:
    return args.command in ("collector", "processor", "sink", "connect", "flink", "serve") or (
        args.command == "bridge" and not args.once) or (
        args.command == "alerts" and args.action in ("run", "route") and not args.check)


def _is_neo4j_error(exc: BaseException) -> bool:
    """The driver's errors (Neo4jError, DriverError), without importing it: the core distribution has no driver."""
    return type(exc).__module__.startswith("neo4j.")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # `kill -QUIT <pid>` prints every thread's stack to stderr and the process goes on (as a JVM's thread dump): what
    # a component that looks stuck is doing, without a debugger on the host
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no stderr file (embedded, captured): no dumps
        faulthandler.register(signal.SIGQUIT, file=sys.__stderr__, all_threads=True)
    try:
        # one logging set-up for every command: components log their work (info), one-shot commands only problems
        bootstrap_logging(OperationsSettings.from_env(), ClientSettings.from_env().secrets,
                          default_level="info" if _long_running(args) else "warn")
        return args.handler(args)
    except (ConfigError, PublishError) as exc:
        print(f"lineage: {shown(exc)}", file=sys.stderr)
        return 1
    except CommandFailed as exc:
        print("\n".join([f"lineage: {exc}", *getattr(exc, "__notes__", ())]), file=sys.stderr)
        return 1
    except Exception as exc:
        if not _is_neo4j_error(exc):
            raise
        print(f"lineage: Neo4j: {shown(getattr(exc, 'message', None) or exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lineage: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # `python -m kafka_lineage.app.cli`: run the module under its own name, so that the CommandFailed the
    # development tools raise (imported from kafka_lineage.app.cli) is the class main() catches, not __main__'s copy
    from kafka_lineage.app import cli

    sys.exit(cli.main())
