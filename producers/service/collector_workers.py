"""Several collector processes on one port (``LINEAGE_COLLECTOR_PROCESSES``): a supervisor and its workers.

One Python event loop answers at most ~1,500-2,000 one-event requests per second (decision 60), so more takes more
processes. The supervisor binds one listening socket per worker, all on the same port with SO_REUSEPORT (the
kernel spreads new connections over them), before any worker starts: connections that arrive while a worker is
still starting wait in its socket's backlog instead of all landing on the first worker up. Each worker is a
fresh ``lineage collector`` process (spawned, not forked: librdkafka's threads do not survive a fork) that serves
its inherited sockets with its own producer; a 200 still means Kafka acknowledged, per worker.

A worker that exits while the supervisor runs stops the others and fails the supervisor at once (exit 1): a
collector quietly running on fewer processes than configured would be a silent loss of capacity. SIGTERM or SIGINT
to the supervisor is passed on as SIGTERM; each worker finishes its requests in flight and flushes its producer.
Workers run in their own session (a terminal's Ctrl-C reaches the supervisor only, which stops them once) and stop
themselves when the supervisor is gone.

Metrics: the workers' counters and histograms live in files of a private directory (prometheus_client's
multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``) and ``/metrics`` on any worker answers their sums; gauges carry a
``pid`` label; the ``process_*``/``python_*`` families are per process and not served in this mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from kafka_lineage.runtime.config import ConfigError

# Between the supervisor and its workers only (not settings): the inherited sockets' descriptors and its pid.
LISTEN_FDS_ENV = "LINEAGE_COLLECTOR_LISTEN_FDS"
SUPERVISOR_ENV = "LINEAGE_COLLECTOR_SUPERVISOR"
WORKER_ENV = "LINEAGE_COLLECTOR_WORKER"  # "i/n", for the workers' log lines
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LISTEN_BACKLOG = 1024
POLL_SECONDS = 0.2  # how often the supervisor looks at its workers (a dead one is noticed within this)
ORPHAN_CHECK_SECONDS = 1.0  # how often a worker looks for its supervisor
STOP_GRACE_SECONDS = 10.0  # beyond the acknowledgement timeout, for a worker's shutdown before it is killed


def listening_sockets(host: str, port: int, count: int) -> list[list[socket.socket]]:
    """``count`` groups of listening sockets, one socket per address of ``host`` in each group, all on one port
    (port 0: the port the first one got). Raises ConfigError when the port is taken."""
    infos = list(dict.fromkeys((family, address) for family, _, _, _, address in socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)))
    groups: list[list[socket.socket]] = []
    chosen = port
    try:
        for _ in range(count):
            group: list[socket.socket] = []
            groups.append(group)
            for family, address in infos:
                sock = socket.socket(family, socket.SOCK_STREAM)
                group.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:  # as asyncio binds: one socket per family
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if not groups[1:]:  # the first group: a port someone else holds is an error, not a shared port
                    _check_free(family, address)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                address = (address[0], chosen, *address[2:])
                try:
                    sock.bind(address)
                except OSError as exc:
                    raise ConfigError(f"collector: cannot listen on {address[0]} port {address[1]}: {exc}") from None
                chosen = chosen or sock.getsockname()[1]
                sock.listen(LISTEN_BACKLOG)
                sock.set_inheritable(True)
    except BaseException:
        for sock in (sock for group in groups for sock in group):
            sock.close()
        raise
    return groups


def _check_free(family: int, address: Any) -> None:
    """Bind without SO_REUSEPORT, then let go: a port another process listens on (even with SO_REUSEPORT, as a
    second collector of the same user would) is refused here instead of silently shared."""
    if address[1] == 0:
        return
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"collector: cannot listen on {address[0]} port {address[1]}: {exc}") from None


def supervise(host: str, port: int, processes: int, stop_timeout: float,
              announce: Callable[[int], None]) -> None:
    """Run ``processes`` workers on ``host``:``port`` until SIGTERM/SIGINT (then stop them, return) or until one
    exits (then stop the others and exit 1 with the reason). ``announce(port)`` once every socket listens."""
    groups = listening_sockets(host, port, processes)
    bound = groups[0][0].getsockname()[1]
    metrics_dir = tempfile.mkdtemp(prefix="lineage-collector-metrics-")  # fresh: old files would be counted
    stopping: list[int] = []
    previous = {number: signal.signal(number, lambda received, _frame: stopping.append(received))
                for number in (signal.SIGTERM, signal.SIGINT)}
    workers: list[subprocess.Popen[bytes]] = []
    failure = ""
    try:
        for index, group in enumerate(groups):
            fds = [sock.fileno() for sock in group]
            env = {**os.environ, LISTEN_FDS_ENV: ",".join(map(str, fds)), SUPERVISOR_ENV: str(os.getpid()),
                   WORKER_ENV: f"{index + 1}/{processes}", MULTIPROC_ENV: metrics_dir,
                   "LINEAGE_COLLECTOR_PROCESSES": "1", "LINEAGE_COLLECTOR_HOST": host,
                   "LINEAGE_COLLECTOR_PORT": str(bound)}
            workers.append(subprocess.Popen([sys.executable, "-m", "kafka_lineage.app.cli", "collector"], env=env,
                                            pass_fds=fds, start_new_session=True))
            for sock in group:  # the worker holds its own copies
                sock.close()
        announce(bound)
        while not stopping:
            dead = next((worker for worker in workers if worker.poll() is not None), None)
            if dead is not None:
                failure = (f"collector worker {workers.index(dead) + 1} of {processes} (pid {dead.pid}) exited "
                           f"with code {dead.returncode}; stopping the others")
                break
            time.sleep(POLL_SECONDS)
    finally:
        for sock in (sock for group in groups for sock in group):
            sock.close()
        _stop(workers, stop_timeout + STOP_GRACE_SECONDS)
        shutil.rmtree(metrics_dir, ignore_errors=True)
        for number, handler in previous.items():
            signal.signal(number, handler)
    if failure:
        raise SystemExit(f"lineage: {failure}")


def _stop(workers: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """SIGTERM to every worker still running, then wait (all at once, ``timeout`` in all) and kill what is left."""
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for worker in workers:
        try:
            worker.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def inherited_sockets() -> list[socket.socket] | None:
    """A worker's listening sockets from its supervisor, or None when this process is not a worker."""
    fds = os.environ.get(LISTEN_FDS_ENV)
    if not fds:
        return None
    return [socket.socket(fileno=int(fd)) for fd in fds.split(",")]


def worker_name() -> str:
    return os.environ.get(WORKER_ENV, "")


async def _orphan_watch(supervisor: int) -> None:
    """SIGTERM to ourselves (aiohttp's graceful stop) once the supervisor is gone: its death, even by SIGKILL,
    must not leave workers answering on the port."""
    while os.getppid() == supervisor:
        await asyncio.sleep(ORPHAN_CHECK_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def watch_supervisor(app: web.Application) -> None:
    """In a worker: stop when the supervisor is gone."""
    supervisor = int(os.environ.get(SUPERVISOR_ENV) or 0)
    if not supervisor:
        return

    async def context(_app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_orphan_watch(supervisor))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(context)


def multiprocess_metrics() -> Callable[[web.Request], Any] | None:
    """In a worker: a ``/metrics`` handler answering every worker's counters summed; None otherwise."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory or not os.environ.get(LISTEN_FDS_ENV):
        return None
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    from kafka_lineage.runtime.metrics import METRICS_CONTENT_TYPE

    async def handler(_request: web.Request) -> web.Response:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)
        body = await asyncio.to_thread(generate_latest, registry)  # reads every worker's files
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE, "Cache-Control": "no-store"})

    return handler
