"""Pipeline components as child processes (the real ``lineage`` CLI): for the demo, benchmarks and tests.

A harness that waits for something a child should produce must not outlive the child: every child started here is
*watched* until its block ends. ``wait_until`` (and ``check_children``/``sleep_watching``) raise ``ChildExited`` at
once — naming the child, its exit code and its last log lines — when a watched child ends without having been
asked to (a signal sent through ``process.send_signal``/``terminate``/``kill`` is asking); a child that ended by
itself also fails its block's exit. ``interrupting_on_child_exit`` brings the same to code that waits in its own
loops (the integration tests): it raises ``ChildExited`` in the main thread wherever it is waiting.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import requests

T = TypeVar("T")
TAIL_LINES = 40


def pipeline_env(prefix: str, partitions: int, data_dir: Path) -> dict[str, str]:
    """Environment for a pipeline of its own: topics and consumer groups named from ``prefix``, the processor's state
    under ``data_dir``. A bench, a fault run or a test then never mixes with real lineage or with another one."""
    return {"LINEAGE_EVENTS_TOPIC": f"{prefix}.events", "LINEAGE_NORMALIZED_TOPIC": f"{prefix}.normalized",
            "LINEAGE_DLQ_TOPIC": f"{prefix}.dlq", "LINEAGE_DRIFT_TOPIC": f"{prefix}.drift",
            "LINEAGE_PROCESSOR_GROUP": f"{prefix}.processor", "LINEAGE_SINK_GROUP": f"{prefix}.sink",
            "LINEAGE_ALERT_GROUP": f"{prefix}.alerts", "LINEAGE_PARTITIONS": str(partitions),
            "LINEAGE_PROCESSOR_DATA_DIR": str(data_dir)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChildExited(RuntimeError):
    """A child process ended although the harness did not ask it to."""

    def __init__(self, name: str, pid: int, code: int, tail: str) -> None:
        self.name, self.pid, self.code, self.tail = name, pid, code, tail
        how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else ""
        super().__init__(f"{name} (pid {pid}) exited with code {code}{f' ({how})' if how else ''} without being "
                         f"asked to; its last {TAIL_LINES} log lines:\n{tail}")


# Signals that end a child: once the harness sends one, the child's exit is expected.
_ENDING = frozenset({signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP})


class _Popen(subprocess.Popen):
    """Remembers whether the harness asked the process to end: ``kill()`` and ``terminate()`` both go through
    ``send_signal``, so every existing way of stopping a child counts without its callers knowing."""

    stop_requested = False

    def send_signal(self, sig: int) -> None:
        # Before the signal (the exit may be seen the instant it is sent), and only while it runs: killing a child
        # that had already died by itself must not hide that death.
        if sig in _ENDING and self.poll() is None:
            self.stop_requested = True
        super().send_signal(sig)


@dataclass(eq=False)
class ChildProcess:
    url: str
    process: subprocess.Popen
    returncode: int | None = None
    output: str = field(default="", repr=False)
    metrics_url: str = ""  # the component's metrics/health endpoint, as it announced it
    log: Any = field(default=None, repr=False)  # the file the child writes to, while it runs
    name: str = ""
    # (exit code, output) → whether an exit the harness did not ask for is still expected (a worker that kills
    # itself at an injected crash point): such an exit is no failure
    expected_exit: Callable[[int, str], bool] | None = field(default=None, repr=False)
    _reported: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def output_so_far(self) -> str:
        """What the child has written until now (``output`` is only filled in once it has ended)."""
        if self.log is None or self.log.closed:
            return self.output
        # pread leaves the file position alone: the watchdog thread may read it while the main thread does.
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.output_so_far().splitlines()[-lines:])

    @property
    def stop_requested(self) -> bool:
        return bool(getattr(self.process, "stop_requested", False))

    def failure(self) -> ChildExited | None:
        """The child's unexpected exit, if it has ended without being asked to."""
        code = self.process.poll()
        if code is None or self.stop_requested:
            return None
        if self.expected_exit is not None and self.expected_exit(code, self.output_so_far()):
            return None
        return ChildExited(self.name or str(self.process.args), self.process.pid, code, self.tail())

    def claim_failure(self) -> ChildExited | None:
        """``failure()``, but only to its first caller: a death is reported once, by whoever sees it first."""
        with self._lock:
            if self._reported or (failure := self.failure()) is None:
                return None
            self._reported = True
            return failure

    def check(self) -> None:
        """Raise ``ChildExited`` if the child ended by itself (every time: each wait on it must end)."""
        if (failure := self.failure()) is not None:
            with self._lock:
                self._reported = True
            raise failure


class Watched(Protocol):
    def check(self) -> None:
        """Raise ``ChildExited`` if the process behind it ended by itself."""


_running: set[ChildProcess] = set()  # every child of this process whose block has not ended
_running_lock = threading.Lock()


def running_children() -> list[ChildProcess]:
    with _running_lock:
        return list(_running)


def check_children(watch: Iterable[Watched] | None = None) -> None:
    """Raise ``ChildExited`` if a watched child (by default: every child still in its block) ended by itself."""
    for child in running_children() if watch is None else list(watch):
        child.check()


def sleep_watching(seconds: float, watch: Iterable[Watched] | None = None, step: float = 0.2) -> None:
    """``time.sleep(seconds)`` that ends early with ``ChildExited`` when a watched child ends by itself."""
    watched = None if watch is None else list(watch)
    deadline = time.monotonic() + seconds
    while True:
        check_children(watched)
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(step, left))


def wait_until(condition: Callable[[], T], timeout: float, *, watch: Iterable[Watched] | None = None,
               interval: float = 0.2, what: str = "the condition") -> T:
    """The first truthy value of ``condition()``, polled every ``interval`` seconds while the watched children (by
    default every running child of this process) are checked every 0.2 s: ``ChildExited`` at once when one ends by
    itself, ``TimeoutError`` naming ``what`` after ``timeout`` seconds."""
    watched = None if watch is None else list(watch)
    deadline = time.monotonic() + timeout
    while True:
        check_children(watched)
        if value := condition():
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        sleep_watching(min(interval, left), watched)


_INTERRUPT = signal.SIGUSR2  # the watchdog's wake-up call to the main thread (nothing else here uses it)


@contextlib.contextmanager
def interrupting_on_child_exit(poll: float = 0.2) -> Iterator[None]:
    """While the block runs in the main thread, a running child that ends by itself raises ``ChildExited`` in the
    main thread at once, wherever it is waiting (a signal interrupts sleeps, socket reads and lock waits; the
    handler raises). For code whose waits cannot all call ``wait_until``: a test's own polling loops."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers live in the main thread only; the blocks' exits still report a dead child
        return
    pending: list[ChildExited] = []
    armed = threading.Event()
    armed.set()

    def raise_pending(_signum: int, _frame: Any) -> None:
        if armed.is_set() and pending:
            raise pending.pop()

    stop = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def watch() -> None:
        while not stop.wait(poll):
            for child in running_children():
                if (failure := child.claim_failure()) is not None:
                    pending.append(failure)
                    signal.pthread_kill(main, _INTERRUPT)

    previous = signal.signal(_INTERRUPT, raise_pending)
    watcher = threading.Thread(target=watch, name="child-watchdog", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        try:
            armed.clear()  # first: from here on the handler raises nothing
        finally:
            stop.set()
            watcher.join()
            signal.signal(_INTERRUPT, previous)
    if pending:  # seen, but the block ended before the signal was handled
        raise pending.pop()


# Children listen on any free port unless the caller chose one: tests and the demo run several at once.
ANY_FREE_PORT = {"LINEAGE_PROCESSOR_METRICS_PORT": "0", "LINEAGE_SINK_METRICS_PORT": "0",
                  "LINEAGE_ALERT_METRICS_PORT": "0", "LINEAGE_ROUTER_METRICS_PORT": "0"}
_ENDPOINT = re.compile(r"metrics: (http://\S+)/metrics")


@contextlib.contextmanager
def child_process(command: list[str], name: str, *, env: dict[str, str] | None = None, url: str = "",
                  is_ready: Callable[[ChildProcess, str], bool] | None = None, ready_timeout: float = 90.0,
                  stop_timeout: float = 90.0, expected_exit: Callable[[int, str], bool] | None = None
                  ) -> Iterator[ChildProcess]:
    """``command`` as a watched child process, ready (``is_ready(child, output so far)``) before yielding; stopped
    with SIGTERM (graceful; SIGKILL after ``stop_timeout``) on exit unless it already ended. A child that ended by
    itself fails the block: ``ChildExited`` when the block ended normally, a note on the block's own exception;
    unless ``expected_exit(code, output)`` says that exit was expected."""
    # Output goes to a file, not a pipe: a chatty child can never block on a full pipe.
    with tempfile.TemporaryFile(mode="w+") as log:
        # PYTHONFAULTHANDLER: a child that crashes in native code (SIGSEGV) leaves every thread's Python stack in
        # its log instead of nothing
        process = _Popen(command, env={**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"},
                         stdout=log, stderr=subprocess.STDOUT, text=True)
        child = ChildProcess(url, process, log=log, name=name, expected_exit=expected_exit)
        with _running_lock:
            _running.add(child)
        try:
            if is_ready is not None:
                try:
                    wait_until(lambda: is_ready(child, child.output_so_far()), ready_timeout, watch=[child])
                except TimeoutError:
                    raise TimeoutError(f"{name} was not ready within {ready_timeout:g} s; its last {TAIL_LINES} "
                                       f"log lines:\n{child.tail()}") from None
            yield child
        except BaseException as exc:
            if (failure := child.claim_failure()) is not None:
                exc.add_note(str(failure))
            raise
        finally:
            with _running_lock:
                _running.discard(child)
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                child.returncode = process.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                child.returncode = process.wait()
            child.output = child.output_so_far()
        if (failure := child.claim_failure()) is not None:
            raise failure


@contextlib.contextmanager
def lineage_process(args: list[str], is_ready: Callable[[ChildProcess, str], bool], env: dict[str, str] | None = None,
                    url: str = "", ready_timeout: float = 90.0,
                    expected_exit: Callable[[int, str], bool] | None = None) -> Iterator[ChildProcess]:
    """``lineage ARGS`` as a child process (``child_process``), ready before yielding, its metrics endpoint noted."""

    def ready(child: ChildProcess, output: str) -> bool:
        if not is_ready(child, output):
            return False
        if endpoint := _ENDPOINT.search(output):
            child.metrics_url = endpoint.group(1)
        return True

    with child_process([sys.executable, "-m", "kafka_lineage.app.cli", *args], f"lineage {' '.join(args)}",
                       env={**ANY_FREE_PORT, **os.environ, **(env or {})}, url=url, is_ready=ready,
                       ready_timeout=ready_timeout, expected_exit=expected_exit) as child:
        yield child


def http_live(url: str) -> bool:
    """Whether a component at ``url`` answers its liveness endpoint."""
    try:
        return requests.get(f"{url}/health/live", timeout=2).ok
    except requests.RequestException:
        return False


def _http_live(child: ChildProcess, _output: str) -> bool:
    return http_live(child.url)


def collector_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """``lineage collector`` on a free port, answering before the block starts."""
    port = free_port()
    return lineage_process(["collector", "--port", str(port)], _http_live, env, url=f"http://127.0.0.1:{port}")


def server_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """``lineage serve`` on a free port, answering before the block starts."""
    port = free_port()
    return lineage_process(["serve", "--port", str(port)], _http_live, env, url=f"http://127.0.0.1:{port}")


def processor_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage processor`` worker that has joined its group and recovered its tables."""
    return lineage_process(["processor"], lambda _child, output: "Worker]: Ready" in output, env)


def sink_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage sink`` that has created its constraints and subscribed."""
    return lineage_process(["sink"], lambda _child, output: "graph sink ready" in output, env)


def alert_sink_process(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage alerts run`` sink that has subscribed."""
    return lineage_process(["alerts", "run"], lambda _child, output: "alert sink ready" in output, env)


def alert_router_process(env: dict[str, str] | None = None,
                         expected_exit: Callable[[int, str], bool] | None = None
                         ) -> contextlib.AbstractContextManager[ChildProcess]:
    """A ``lineage alerts route`` router that has subscribed."""
    return lineage_process(["alerts", "route"], lambda _child, output: "alert router ready" in output, env,
                           expected_exit=expected_exit)
