"""The development tools' `lineage` commands: stack, demo, bench, workload, faults (added through the
``kafka_lineage.commands`` entry point), and the local stack's probe for `lineage status`."""

from __future__ import annotations

import argparse
import functools
import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path

from kafka_lineage.app.cli import CommandFailed
from kafka_lineage.runtime.config import ClientSettings, ConfigError
from kafka_lineage.runtime.status import ServiceProbe, ServiceState
from kafka_lineage_devtools.processes import ChildExited
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import ServiceStatus, Stack, StackError
from kafka_lineage_devtools.stack.maven import ResolutionError
from kafka_lineage_devtools.stack.services import SERVICES, SERVICES_BY_NAME

Handler = Callable[[argparse.Namespace], int]


def _failing_as_commands(handler: Handler) -> Handler:
    """The tools' own errors as the CLI's one-line failures (a component that died: which, how, its last lines)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (StackError, ResolutionError) as exc:
            raise CommandFailed(str(exc)) from exc
        except ChildExited as exc:
            failure = CommandFailed(str(exc))
            for note in getattr(exc, "__notes__", ()):
                failure.add_note(note)
            raise failure from exc

    return run


def local_stack_probe(settings: StackSettings) -> ServiceProbe:
    """The local stack's services as `lineage status` shows them (pid files and health probes)."""

    def states() -> tuple[ServiceState, ...]:
        try:
            rows = Stack(settings, report=lambda _line: None).status()
        except Exception as exc:
            reason = f"service probes failed: {exc.__class__.__name__}: {exc}"
            return tuple(ServiceState(service.name, "unknown", reason) for service in SERVICES)
        return tuple(ServiceState(row.name, row.state, "" if row.healthy else row.detail, row.pid) for row in rows)

    return states


def service_states() -> tuple[ServiceState, ...]:
    """The ``kafka_lineage.services`` entry point: the local stack of this environment's settings."""
    return local_stack_probe(StackSettings.from_env())()


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


def cmd_faults(args: argparse.Namespace) -> int:
    from kafka_lineage_devtools.checker import format_report
    from kafka_lineage_devtools.faults import run_faults

    report = run_faults(StackSettings.from_env(), ClientSettings.from_env(), jobs=args.jobs,
                        runs_per_job=args.runs_per_job, seed=args.seed, rate=args.rate,
                        neo4j_outage=args.neo4j_outage, inject=args.inject)
    assert report.check is not None
    print(format_report(report.check))
    print(f"{report.events} events; faults: {'; '.join(report.faults)}; converged after "
          f"{report.converge_seconds:.0f}s: {'OK' if report.ok else 'NOT OK'}")
    return 0 if report.ok else 1


def cmd_campaign(args: argparse.Namespace) -> int:
    from kafka_lineage_devtools.campaign import CampaignReport, format_summary, read_ledger, run_campaign

    if args.only_run is not None and args.only_run < 0:
        raise CommandFailed("--only-run: a run index, 0 or more")
    if args.summary:
        if not args.ledger:
            raise CommandFailed("--summary: needs --ledger FILE")
        recorded = read_ledger(Path(args.ledger), args.seed, args.events_per_run, args.publish_seconds)
        print(format_summary(CampaignReport(args.seed, recorded=[recorded[run] for run in sorted(recorded)])))
        return 0
    campaign = run_campaign(StackSettings.from_env(), seed=args.seed, runs=args.runs, events=args.events_per_run,
                            publish_seconds=args.publish_seconds, only_run=args.only_run,
                            keep_going=args.keep_going, quiesce_patience=args.quiesce_patience,
                            workdir=Path(args.workdir), ledger=Path(args.ledger) if args.ledger else None)
    print()
    print(format_summary(campaign))
    return 0 if campaign.ok else 1


def cmd_workload(args: argparse.Namespace) -> int:
    if not args.partitions:
        args.jobs = 200 if args.jobs is None else args.jobs
        args.seed = 7 if args.seed is None else args.seed
        return cmd_faults(args)
    from kafka_lineage_devtools.partition_checker import format_partition_report, run_partition_workload

    jobs, seed = 50 if args.jobs is None else args.jobs, 22 if args.seed is None else args.seed
    report = run_partition_workload(ClientSettings.from_env(), jobs=jobs, days=args.days, seed=seed,
                                    rate=args.rate, timeout=args.timeout)
    if report.check is None:
        raise CommandFailed("the graph was never read")
    print(format_partition_report(report.check))
    print(f"{report.events} events; published in {report.publish_seconds:.1f}s, processor and sink caught up after "
          f"{report.caught_up_seconds:.1f}s, checked after {report.converge_seconds:.1f}s: "
          f"{'OK' if report.ok else 'NOT OK'}")
    return 0 if report.ok else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from kafka_lineage_devtools import bench

    output = Path(args.output or f".lineage/bench/{args.stage}.json")
    if args.events < 2 or args.graph_jobs < 1 or args.partitions < 1:
        raise ConfigError("--events must be at least 2, --graph-jobs and --partitions at least 1")
    if not (math.isfinite(args.dedupe_ttl) and args.dedupe_ttl > 0):
        raise ConfigError(f"--dedupe-ttl: a positive number of seconds, got {args.dedupe_ttl}")
    bench.EVENT_SHAPE = args.shape
    if args.stage == "e2e":
        print(bench.format_e2e(bench.run_e2e_bench(args.events, output)))
    elif args.stage == "scaling":
        from kafka_lineage_devtools import bench_scaling

        print(bench_scaling.format_scaling(bench_scaling.run_scaling_bench(args.events, output)))
    elif args.stage == "collector":
        print(bench.format_collector(bench.run_collector_bench(args.events, output)))
    elif args.stage in ("rebuild", "replay-bulk"):
        print(bench.format_bulk_replay(bench.run_bulk_replay_bench(args.events, output)))
    elif args.stage == "peer":
        from kafka_lineage_devtools import bench_peer

        print(bench_peer.format_peer(bench_peer.run_peer_bench(args.events, output)))
    elif args.stage == "emit":
        result = bench.run_emit_bench(args.events, output)
        print(bench.format_emit(result))
    elif args.stage == "all":
        print(bench.format_suite(bench.run_suite(args.events, args.graph_jobs, output)))
    elif args.stage == "processor":
        print(bench.format_processor(bench.run_processor_bench(args.events, output)))
    elif args.stage == "memory":
        print(bench.format_memory(bench.run_memory_bench(args.events, output, args.dedupe_ttl)))
    elif args.stage == "partitions":
        print(bench.format_partitions(bench.run_partition_bench(args.partitions, output)))
    elif args.stage == "sink-stream":
        from kafka_lineage_devtools import bench_sink

        print(bench_sink.format_stream(bench_sink.run_stream_bench(args.events, args.workload, args.baseline,
                                                                   args.rounds, output)))
    else:
        print(bench.format_graph(bench.run_graph_bench(args.stage, args.events, args.graph_jobs, output)))
    print(f"results: {output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from kafka_lineage_devtools.demo import run_demo
    from kafka_lineage_devtools.stack.smoke import prove_stack

    settings = StackSettings.from_env()
    Stack(settings).up()
    print("\nproving that each service answers:")
    for line in prove_stack(ClientSettings.from_env()):
        print(f"  ok  {line}")
    run_demo(ClientSettings.from_env(), settings, streaming=args.streaming)
    print("\nThe stack stays up for exploration; stop it with: lineage stack down")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the development tools' commands to `lineage`."""
    stack = sub.add_parser("stack", help="run the real local servers (Kafka, registry, Neo4j, Connect)")
    stack.add_argument("action", choices=["up", "down", "status", "logs"])
    stack.add_argument("services", nargs="*", help=f"subset of: {', '.join(SERVICES_BY_NAME)} (default: all)")
    stack.add_argument("--json", action="store_true", help="status as JSON")
    stack.add_argument("-n", "--lines", type=int, default=50, help="logs: how many lines")
    stack.add_argument("-f", "--follow", action="store_true", help="logs: keep following")
    stack.set_defaults(handler=_failing_as_commands(cmd_stack))

    faults = sub.add_parser("faults", help="fault suite: a ground-truth workload through the pipeline while "
                                           "processor and sink are killed, Kafka restarted and Neo4j stopped; "
                                           "then an exact check of graph and alerts")
    faults.add_argument("--jobs", type=int, default=2000, help="jobs in the workload (default 2000)")
    faults.add_argument("--runs-per-job", type=int, default=20, help="runs per job (default 20: ~100k events)")
    faults.add_argument("--seed", type=int, default=7)
    faults.add_argument("--rate", type=float, default=2000.0, help="events/s published (default 2000)")
    faults.add_argument("--neo4j-outage", type=float, default=30.0, help="seconds Neo4j is down (default 30)")
    faults.set_defaults(handler=_failing_as_commands(cmd_faults), inject=True)
    campaign = faults.add_subparsers(dest="faults_command", metavar="campaign").add_parser(
        "campaign", help="seeded, randomized fault runs on small workloads, each checked for exactly-once output, "
                         "offsets, state, lifecycle order, graph and lag; a failed run prints its seed, index and "
                         "schedule (replay it with --seed S --only-run K)")
    campaign.add_argument("--seed", type=int, required=True, help="the campaign's seed (each run's schedule and "
                                                                  "workload come from seed and run index)")
    campaign.add_argument("--runs", type=int, default=5, help="runs (default 5)")
    campaign.add_argument("--only-run", type=int, default=None, metavar="K", help="only run K (a replay)")
    campaign.add_argument("--events-per-run", type=int, default=2400, help="events per run's workload (default 2400)")
    campaign.add_argument("--publish-seconds", type=float, default=60.0,
                          help="seconds over which each run's workload is published (default 60)")
    campaign.add_argument("--quiesce-patience", type=float, default=120.0,
                          help="after the faults, seconds without progress towards quiescence (lag, graph "
                               "differences) before a run fails (default 120)")
    campaign.add_argument("--keep-going", action="store_true", help="go on after a failed run")
    campaign.add_argument("--workdir", default=".lineage/campaign", help="components' logs and state")
    campaign.add_argument("--ledger", default=None, metavar="FILE",
                          help="append each finished run to FILE (JSON lines) and count the runs already there "
                               "instead of running them again: a long campaign over several invocations")
    campaign.add_argument("--summary", action="store_true",
                          help="only print the summary of the runs in --ledger (same seed and run shape)")
    campaign.set_defaults(handler=_failing_as_commands(cmd_campaign))
    workload = sub.add_parser("workload", help="the fault suite's ground-truth workload without faults: publish, "
                                               "let the pipeline run, check graph and alerts exactly; "
                                               "--partitions: the daily-partition workload, checked through "
                                               "`lineage partitions` / `lineage ready` reads")
    workload.add_argument("--partitions", action="store_true",
                          help="daily-partitioned jobs over --days days with a failed day, a failing assertion, a "
                               "missing marker, late and duplicated events and a 7-day backfill; every partition's "
                               "state, versions and rows and every (dataset, day) ready answer checked exactly")
    workload.add_argument("--jobs", type=int, default=None, help="jobs (default 200; --partitions: 50)")
    workload.add_argument("--runs-per-job", type=int, default=10)
    workload.add_argument("--days", type=int, default=30, help="--partitions: days (default 30)")
    workload.add_argument("--seed", type=int, default=None, help="default 7 (--partitions: 22)")
    workload.add_argument("--rate", type=float, default=2000.0, help="events/s published (default 2000)")
    workload.add_argument("--timeout", type=float, default=300.0,
                          help="--partitions: seconds to wait for the graph to catch up (default 300)")
    workload.set_defaults(handler=_failing_as_commands(cmd_workload), inject=False, neo4j_outage=0.0)

    bench = sub.add_parser("bench", help="measure throughput/latency side by side (writes a JSON result file)")
    bench.add_argument("stage", choices=["all", "e2e", "collector", "emit", "processor", "memory", "sink",
                                        "sink-stream", "query", "graph", "api", "partitions", "rebuild",
                                        "replay-bulk", "peer", "scaling"],
                       help="all: every bench below (but memory) plus the whole pipeline end to end, in one JSON "
                            "file; e2e: the whole pipeline end to end (HTTP in) with each component's CPU "
                            "µs/event (the budget table); scaling: e2e on 1 core (everything pinned) vs 2 cores "
                            "vs 2 processor workers + 2 graph sinks (6, then 24 partitions), alternated (events/s "
                            "and CPU µs/event of each); collector: one event per request from 8 clients (and 100 "
                            "per request); rebuild (or replay-bulk): the live replay vs the bulk rebuild folded in "
                            "one process and on Spark local[2], same topic (replaces the stack's graph); peer: "
                            "Marquez beside us on the same events (make peer-deps first; "
                            "use --events 2000); sink-stream: one graph sink on a running platform's stream "
                            "(--workload steady: new runs of a known 2,000-job DAG; churn: every run's output "
                            "schema new), its Neo4j time "
                            "per statement, beside --baseline (a checkout) over --rounds; memory: one processor "
                            "worker's memory over --events "
                            "(e.g. 1000000) with the dedupe TTL --dedupe-ttl; sink: "
                            "graph sink backlog and replay events/s; query: impact/upstream latency on a generated "
                            "DAG; graph: both; api: the lineage server (lineage, column lineage, search over HTTP, "
                            "the web UI's first render in Chromium) on a DAG of --graph-jobs jobs; partitions: "
                            "`lineage ready` p50/p99 on a graph of --partitions partitions")
    bench.add_argument("--events", type=int, default=20_000, help="events per measurement (default 20000)")
    bench.add_argument("--shape", choices=["light", "realistic", "heavy"], default="realistic",
                       help="events: realistic (default; ~6.6 KB: a 2,000-job DAG, 20-field schemas on every "
                            "dataset, column lineage, SQL), heavy (~29 KB, 150-field schemas) or light (~1.1 KB, "
                            "the old synthetic events)")
    bench.add_argument("--graph-jobs", type=int, default=100_000,
                       help="query/graph: jobs in the generated DAG (3 relationships each; default 100000)")
    bench.add_argument("--partitions", type=int, default=1_095_000,
                       help="partitions: partitions in the generated graph (365 days per dataset; default 1095000 = "
                            "3000 datasets)")
    bench.add_argument("--dedupe-ttl", type=float, default=60.0,
                       help="memory: the processor's LINEAGE_DEDUPE_TTL in seconds (default 60)")
    bench.add_argument("--workload", choices=["steady", "churn"], default="steady",
                       help="sink-stream: the stream (default steady)")
    bench.add_argument("--baseline", help="sink-stream: a checkout of an older commit measured alongside "
                                          "(git worktree add DIR COMMIT)")
    bench.add_argument("--rounds", type=int, default=2, help="sink-stream: alternated rounds (default 2)")
    bench.add_argument("--output", help="JSON result file (default .lineage/bench/<stage>.json)")
    bench.set_defaults(handler=_failing_as_commands(cmd_bench))

    demo = sub.add_parser("demo", help="start the stack and run the end-to-end demo")
    demo.add_argument("--streaming", action="store_true",
                      help="then the streaming engines too: a Kafka Connect source → a Flink job → a Spark batch job "
                           "→ a SQL task, in one graph (needs the flink extra; Flink adds ~1 minute)")
    demo.set_defaults(handler=_failing_as_commands(cmd_demo))
