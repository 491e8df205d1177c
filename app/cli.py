"""`lineage` command line. Errors are one clear line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_lineage.config import (
    AlertSettings,
    ClientSettings,
    CollectorSettings,
    ConfigError,
    OperationsSettings,
    ProcessorSettings,
    SinkSettings,
    StackSettings,
    port_number,
)
from kafka_lineage.gc_tuning import tune_gc
from kafka_lineage.processes import ChildExited
from kafka_lineage.producers.publisher import EventPublisher, PublishError
from kafka_lineage.stack.manager import ServiceStatus, Stack, StackError
from kafka_lineage.stack.maven import ResolutionError
from kafka_lineage.stack.services import SERVICES_BY_NAME
from kafka_lineage.terminal import shown
from neo4j.exceptions import DriverError, Neo4jError

if TYPE_CHECKING:
    from kafka_lineage.metrics import Metrics


def _print_status(rows: list[ServiceStatus]) -> None:
    print(f"{'service':9} {'state':8} {'pid':>8}  endpoint / detail")
    for row in rows:
        pid = str(row.pid) if row.pid else "-"
        print(f"{row.name:9} {row.state:8} {pid:>8}  {row.endpoint}")
        if row.detail:
            print(f"{'':28}{row.detail}")


def cmd_stack(args: argparse.Namespace) -> int:
    settings = StackSettings.from_env()
    stack = Stack(settings)
    if args.action == "up":
        rows = stack.up(args.services)
        print(f"stack is up (state in {settings.state_dir}); stop it with: lineage stack down")
        _print_status(rows)
        return 0
    if args.action == "down":
        stopped = stack.down(args.services)
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing of this stack was running")
        return 0
    if args.action == "status":
        rows = stack.status()
        if args.json:
            print(json.dumps([{**row.__dict__, "state": row.state, "log": str(row.log)} for row in rows], indent=2))
        else:
            print(f"state dir: {settings.state_dir}")
            _print_status(rows)
        return 0 if all(row.healthy for row in rows) else 1
    if args.action == "logs":
        if len(args.services) != 1:
            raise StackError("logs takes exactly one service: " + ", ".join(SERVICES_BY_NAME))
        (name,) = args.services
        if name not in SERVICES_BY_NAME:
            raise StackError(f"unknown service {name!r}; known: {', '.join(SERVICES_BY_NAME)}")
        log = stack.log_file(name)
        if not log.is_file():
            raise StackError(f"{name} has no log yet ({log})")
        tail = ["tail", "-n", str(args.lines), *(["-F"] if args.follow else []), str(log)]
        try:
            return subprocess.call(tail)
        except KeyboardInterrupt:
            return 0
    raise AssertionError(args.action)


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
    from kafka_lineage.producers.collector import serve

    settings = CollectorSettings.from_env()
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if args.port is not None:  # argparse takes any int, and replace() skips the check from_env does
        port_number("--port", args.port)
    settings = dataclasses.replace(settings, **overrides)
    clients = ClientSettings.from_env()
    _configure_logging(clients, OperationsSettings.from_env())
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
    from kafka_lineage.metrics import Metrics, kafka_check, registry_check
    from kafka_lineage.sinks.graph_sink import GraphSink

    clients, operations = ClientSettings.from_env(), OperationsSettings.from_env()
    _configure_logging(clients, operations)
    metrics = Metrics()
    sink = GraphSink(clients, SinkSettings.from_env(), metrics=metrics)
    checks = {"kafka": kafka_check(clients.kafka_config()), "registry": registry_check(clients.registry_config()),
              "neo4j": sink.driver.verify_connectivity, "neo4j-writes": sink.check_writable}
    _run_with_endpoint("graph sink", "LINEAGE_SINK_METRICS_PORT", operations.sink_metrics_port, operations, metrics,
                       checks, sink.run)
    return 0


def _configure_logging(clients: ClientSettings, operations: OperationsSettings) -> None:
    from kafka_lineage.logs import LOG_LEVELS, configure_logging

    level = os.environ.get("LINEAGE_LOG_LEVEL", "info").lower()
    if level not in LOG_LEVELS:
        raise ConfigError(f"LINEAGE_LOG_LEVEL: one of {', '.join(LOG_LEVELS)}; got {level!r}")
    configure_logging(LOG_LEVELS[level], operations.log_format == "json", secrets=clients.secrets)


def _run_with_endpoint(component: str, setting: str, port: int, operations: OperationsSettings, metrics: Metrics,
                       checks: dict[str, Callable[[], None]], run: Callable[[threading.Event], None]) -> None:
    """A long-running component with its metrics/health endpoint, stopped gracefully by SIGTERM/SIGINT."""
    from kafka_lineage.metrics import start_endpoint

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
    if args.action == "run":
        from kafka_lineage.metrics import Metrics, kafka_check, registry_check
        from kafka_lineage.sinks.alert_sink import AlertSink

        operations = OperationsSettings.from_env()
        _configure_logging(clients, operations)
        metrics = Metrics()
        sink = AlertSink(clients, AlertSettings.from_env(), metrics=metrics)
        checks = {"kafka": kafka_check(clients.kafka_config()),
                  "registry": registry_check(clients.registry_config()), "neo4j": sink.driver.verify_connectivity}
        _run_with_endpoint("alert sink", "LINEAGE_ALERT_METRICS_PORT", operations.alert_metrics_port, operations,
                           metrics, checks, sink.run)
        return 0
    from kafka_lineage.sinks.tail import format_alert, tail

    for alert in tail(clients, clients.drift_topic, "schema_drift_alert", args.lines, args.follow,
                      _report_unreadable("a schema-drift alert")):
        print(json.dumps(alert, default=str) if args.json else format_alert(alert), flush=True)
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    from kafka_lineage.sinks.tail import format_dead_letter, tail

    clients = ClientSettings.from_env()
    if args.action == "redrive":
        from kafka_lineage.sinks.redrive import format_report, redrive

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
    from kafka_lineage.sinks import render
    from kafka_lineage.sinks.graph_sink import driver_for
    from kafka_lineage.sinks.queries import as_rows, closest_datasets, traverse

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
    from kafka_lineage.sinks.graph_sink import driver_for
    from kafka_lineage.sinks.queries import closest_datasets, closest_fields, field_exists, field_lineage

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


def cmd_replay(args: argparse.Namespace) -> int:
    from kafka_lineage.sinks.replay import progress_bar, replay

    tune_gc()
    if args.fresh and not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError("--fresh empties the whole graph before rebuilding it: add --yes to confirm")
        answer = input("--fresh empties the whole graph before rebuilding it from the topic. Go on? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed")
            return 1
    partial = args.allow_partial_history
    try:
        if args.engine == "spark":
            from kafka_lineage.sinks.spark_replay import replay_on_spark

            report = replay_on_spark(ClientSettings.from_env(), start=args.from_, end=args.to, fresh=args.fresh,
                                     master=args.spark_master, allow_partial_history=partial)
        else:
            report = replay(ClientSettings.from_env(), start=args.from_, end=args.to, fresh=args.fresh,
                            progress=progress_bar(), allow_partial_history=partial)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    print(f"\nreplayed {report.records} records in {report.seconds:.1f}s "
          f"({report.records / max(report.seconds, 1e-9):,.0f} events/s): {report.written} events written, "
          f"{report.dead_letters} records not processable")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from kafka_lineage import status

    report = status.collect_status(StackSettings.from_env(), ClientSettings.from_env(), status.default_groups(),
                                   lag_threshold=args.lag_threshold)
    print(json.dumps(status.status_json(report), indent=2, default=str) if args.json else status.format_status(report))
    return status.exit_code(report)


def cmd_faults(args: argparse.Namespace) -> int:
    from kafka_lineage.checker import format_report
    from kafka_lineage.faults import run_faults

    report = run_faults(StackSettings.from_env(), ClientSettings.from_env(), jobs=args.jobs,
                        runs_per_job=args.runs_per_job, seed=args.seed, rate=args.rate,
                        neo4j_outage=args.neo4j_outage, inject=args.inject)
    assert report.check is not None
    print(format_report(report.check))
    print(f"{report.events} events; faults: {'; '.join(report.faults)}; converged after "
          f"{report.converge_seconds:.0f}s: {'OK' if report.ok else 'NOT OK'}")
    return 0 if report.ok else 1


def cmd_graph(args: argparse.Namespace) -> int:
    from kafka_lineage.sinks.graph_sink import driver_for, graph_fingerprint

    with driver_for(ClientSettings.from_env()) as driver:
        print(graph_fingerprint(driver))
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    from kafka_lineage.producers.backfill import backfill, open_source, progress_printer

    try:
        source = open_source(args.file)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    publisher = EventPublisher.from_settings(ClientSettings.from_env(), args.topic)
    started = time.monotonic()
    with source:
        report = backfill(source, publisher, progress_printer())
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
    from kafka_lineage.producers.connect_watcher import watch

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    emitted = watch(args.url, interval=args.interval, once=args.once, job_namespace=args.job_namespace)
    print(f"{emitted} OpenLineage events emitted")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from kafka_lineage import bench

    output = Path(args.output or f".lineage/bench/{args.stage}.json")
    if args.events < 2 or args.graph_jobs < 1:
        raise ConfigError("--events must be at least 2 and --graph-jobs at least 1")
    if not (math.isfinite(args.dedupe_ttl) and args.dedupe_ttl > 0):
        raise ConfigError(f"--dedupe-ttl: a positive number of seconds, got {args.dedupe_ttl}")
    if args.stage == "emit":
        result = bench.run_emit_bench(args.events, output)
        print(bench.format_emit(result))
    elif args.stage == "all":
        print(bench.format_suite(bench.run_suite(args.events, args.graph_jobs, output)))
    elif args.stage == "processor":
        print(bench.format_processor(bench.run_processor_bench(args.events, output)))
    elif args.stage == "memory":
        print(bench.format_memory(bench.run_memory_bench(args.events, output, args.dedupe_ttl)))
    else:
        print(bench.format_graph(bench.run_graph_bench(args.stage, args.events, args.graph_jobs, output)))
    print(f"results: {output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from kafka_lineage.demo import run_demo
    from kafka_lineage.stack.smoke import prove_stack

    settings = StackSettings.from_env()
    Stack(settings).up()
    print("\nproving that each service answers:")
    for line in prove_stack(ClientSettings.from_env()):
        print(f"  ok  {line}")
    run_demo(ClientSettings.from_env(), settings)
    print("\nThe stack stays up for exploration; stop it with: lineage stack down")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lineage", description="Event-streaming OpenLineage pipeline on Kafka")
    sub = parser.add_subparsers(dest="command", required=True)

    stack = sub.add_parser("stack", help="run the real local servers (Kafka, registry, Neo4j, Connect)")
    stack.add_argument("action", choices=["up", "down", "status", "logs"])
    stack.add_argument("services", nargs="*", help=f"subset of: {', '.join(SERVICES_BY_NAME)} (default: all)")
    stack.add_argument("--json", action="store_true", help="status as JSON")
    stack.add_argument("-n", "--lines", type=int, default=50, help="logs: how many lines")
    stack.add_argument("-f", "--follow", action="store_true", help="logs: keep following")
    stack.set_defaults(handler=cmd_stack)

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

    alerts = sub.add_parser("alerts", help="schema-drift alerts: run the alert sink, or tail the alert topic")
    alerts.add_argument("action", choices=["run", "tail"])
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

    replay = sub.add_parser("replay", help="rebuild the graph (or repair a time window) from openlineage.events")
    replay.add_argument("--from", dest="from_", default="earliest", help="earliest (default) or an ISO time")
    replay.add_argument("--to", help="an ISO time (default: the end of the topic when replay starts)")
    replay.add_argument("--fresh", action="store_true", help="empty the graph first (a full rebuild; asks first)")
    replay.add_argument("--yes", action="store_true", help="with --fresh: empty the graph without asking")
    replay.add_argument("--allow-partial-history", action="store_true",
                        help="with --fresh: rebuild even when the topic no longer holds its first records")
    replay.add_argument("--engine", choices=["local", "spark"], default="local",
                        help="local: this process (default); spark: a PySpark job, one task per topic partition")
    replay.add_argument("--spark-master", default=os.environ.get("LINEAGE_SPARK_MASTER", "local[*]"),
                        help="Spark master URL for --engine spark (default $LINEAGE_SPARK_MASTER or local[*])")
    replay.set_defaults(handler=cmd_replay)

    faults = sub.add_parser("faults", help="fault suite: a ground-truth workload through the pipeline while "
                                           "processor and sink are killed, Kafka restarted and Neo4j stopped; "
                                           "then an exact check of graph and alerts")
    faults.add_argument("--jobs", type=int, default=2000, help="jobs in the workload (default 2000)")
    faults.add_argument("--runs-per-job", type=int, default=20, help="runs per job (default 20: ~100k events)")
    faults.add_argument("--seed", type=int, default=7)
    faults.add_argument("--rate", type=float, default=2000.0, help="events/s published (default 2000)")
    faults.add_argument("--neo4j-outage", type=float, default=30.0, help="seconds Neo4j is down (default 30)")
    faults.set_defaults(handler=cmd_faults, inject=True)
    workload = sub.add_parser("workload", help="the fault suite's ground-truth workload without faults: publish, "
                                               "let the pipeline run, check graph and alerts exactly")
    workload.add_argument("--jobs", type=int, default=200)
    workload.add_argument("--runs-per-job", type=int, default=10)
    workload.add_argument("--seed", type=int, default=7)
    workload.add_argument("--rate", type=float, default=2000.0, help="events/s published (default 2000)")
    workload.set_defaults(handler=cmd_faults, inject=False, neo4j_outage=0.0)

    status_cmd = sub.add_parser("status", help="pipeline health: services, consumer lag and last event per stage, "
                                               "dead letters, alerts in the last hour (exit 1 degraded, 2 no Kafka)")
    status_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    status_cmd.add_argument("--lag-threshold", type=int, default=1000,
                            help="lag above which a stage counts as behind (default 1000 records)")
    status_cmd.set_defaults(handler=cmd_status)

    graph = sub.add_parser("graph", help="the lineage graph in Neo4j")
    graph.add_argument("action", choices=["fingerprint"], help="fingerprint: canonical hash of nodes and edges")
    graph.set_defaults(handler=cmd_graph)

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
    connect.set_defaults(handler=cmd_connect)

    bench = sub.add_parser("bench", help="measure throughput/latency side by side (writes a JSON result file)")
    bench.add_argument("stage", choices=["all", "emit", "processor", "memory", "sink", "query", "graph"],
                       help="all: every bench below (but memory) plus the whole pipeline end to end, in one JSON "
                            "file; memory: one processor worker's memory over --events (e.g. 1000000) with the "
                            "dedupe TTL --dedupe-ttl; sink: "
                            "graph sink backlog and replay events/s; query: impact/upstream latency on a generated "
                            "DAG; graph: both")
    bench.add_argument("--events", type=int, default=20_000, help="events per measurement (default 20000)")
    bench.add_argument("--graph-jobs", type=int, default=100_000,
                       help="query/graph: jobs in the generated DAG (3 relationships each; default 100000)")
    bench.add_argument("--dedupe-ttl", type=float, default=60.0,
                       help="memory: the processor's LINEAGE_DEDUPE_TTL in seconds (default 60)")
    bench.add_argument("--output", help="JSON result file (default .lineage/bench/<stage>.json)")
    bench.set_defaults(handler=cmd_bench)

    demo = sub.add_parser("demo", help="start the stack and run the end-to-end demo")
    demo.set_defaults(handler=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, StackError, ResolutionError, PublishError) as exc:
        print(f"lineage: {shown(exc)}", file=sys.stderr)
        return 1
    except ChildExited as exc:  # a bench's, fault run's or the demo's component died: say which, and how
        print("\n".join([f"lineage: {exc}", *getattr(exc, "__notes__", ())]), file=sys.stderr)
        return 1
    except (Neo4jError, DriverError) as exc:
        print(f"lineage: Neo4j: {shown(getattr(exc, 'message', None) or exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lineage: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
