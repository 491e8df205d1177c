"""Start, stop and inspect the local stack's processes.

Every process we start gets a pid file under ``<state>/run`` holding its pid and kernel start time, so ``down``
stops only what ``up`` started (a recycled pid never matches) and ``status`` can tell a killed service apart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.services import SERVICES, SERVICES_BY_NAME, NotReady, Service, port_open


def ephemeral_ports(ports: Iterable[int], port_range: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")
                    ) -> list[int]:
    """Those of ``ports`` the kernel may hand out as a client's local port."""
    try:
        low, high = (int(bound) for bound in port_range.read_text().split())
    except (OSError, ValueError):
        return []
    return [port for port in ports if low <= port <= high]


class StackError(RuntimeError):
    """A service could not be started or stopped; the message is one line naming it and its log."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    running: bool
    healthy: bool
    endpoint: str
    detail: str
    log: Path

    @property
    def state(self) -> str:
        if self.healthy:
            return "up"
        if self.running:
            return "starting"
        return "down" if self.pid is None else "dead"


# Pipeline processes a stack may leave running beside its servers (started by the demo), stopped by `down`.
BACKGROUND = ("lineage-server",)

def _proc_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); the command name (field 2) may contain spaces, so split after its closing ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie is dead for our purposes
        return None
    return fields[19]


class Stack:
    def __init__(self, settings: StackSettings, report: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.report = report
        self.run_dir = settings.state_dir / "run"
        self.log_dir = settings.state_dir / "logs"

    # --- pid files -------------------------------------------------------------------------------------------
    def _pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def _recorded_pid(self, name: str) -> tuple[int, str] | None:
        try:
            record = json.loads(self._pid_file(name).read_text())
            return int(record["pid"]), str(record["start_time"])
        except (OSError, ValueError, KeyError):
            return None

    def _record(self, name: str, process: subprocess.Popen, command: list[str]) -> None:
        """The pid file ``running_pid`` and ``down`` trust: the pid with the kernel's start time of the process."""
        self._pid_file(name).write_text(json.dumps({"pid": process.pid, "start_time": _proc_start_time(process.pid),
                                                    "command": command}))

    def running_pid(self, name: str) -> int | None:
        """Pid of the service's process if the one we started is still alive."""
        record = self._recorded_pid(name)
        if record is None:
            return None
        pid, start_time = record
        return pid if _proc_start_time(pid) == start_time else None

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    # --- commands --------------------------------------------------------------------------------------------
    def status(self) -> list[ServiceStatus]:
        rows = []
        for service in SERVICES:
            recorded = self._recorded_pid(service.name)
            pid = self.running_pid(service.name)
            healthy, detail = False, ""
            if pid is not None:
                try:
                    service.probe(self.settings)
                    healthy = True
                except NotReady as exc:
                    detail = str(exc)
            elif recorded is not None:
                detail = f"process {recorded[0]} is gone; see {self.log_file(service.name)}"
            else:
                detail = "not started"
            rows.append(
                ServiceStatus(
                    name=service.name,
                    pid=recorded[0] if recorded else None,
                    running=pid is not None,
                    healthy=healthy,
                    endpoint=service.endpoint(self.settings),
                    detail=detail,
                    log=self.log_file(service.name),
                )
            )
        return rows

    def up(self, names: Iterable[str] | None = None) -> list[ServiceStatus]:
        """Start what is not running (with its dependencies), reuse what runs, wait until all are healthy."""
        wanted = self._with_dependencies(names)
        for service in wanted:  # fail fast, before any download, if a port is held by someone else
            self._check_ports_free(service)
            for port in ephemeral_ports(service.ports(self.settings)):
                self.report(f"warning: {service.name}'s port {port} is in the kernel's ephemeral range: a client "
                            "reconnecting while the service is down can take it (a connection to itself), and the "
                            "service then cannot restart; choose ports below it (LINEAGE_*_PORT)")
        for service in wanted:
            self.report(f"fetching {service.name} (cached after the first time) ...")
            service.fetch(self.settings)
        pending = list(wanted)
        started: dict[str, float] = {}
        healthy: set[str] = set()
        while pending:
            for service in list(pending):
                if not set(service.depends_on) <= healthy:
                    continue
                if service.name not in started:
                    self._start(service)
                    started[service.name] = time.monotonic()
                if self._check(service, started[service.name]):
                    healthy.add(service.name)
                    pending.remove(service)
                    self.report(f"{service.name:9} up     {service.endpoint(self.settings)}")
            if pending:
                time.sleep(0.5)
        return [row for row in self.status() if row.name in {s.name for s in wanted}]

    def start_background(self, name: str, command: list[str], is_up: Callable[[], bool], timeout: float = 60.0
                         ) -> int:
        """A pipeline process left running beside the servers (the demo's lineage server), recorded like them so
        that ``down`` stops it; the pid of the one already running, if any."""
        pid = self.running_pid(name)
        if pid is not None:
            return pid
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file(name), "ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self._record(name, process, command)
        deadline = time.monotonic() + timeout
        while not is_up():
            if process.poll() is not None or time.monotonic() > deadline:
                self.down_background(name)
                raise StackError(f"{name} did not come up; see {self.log_file(name)}")
            time.sleep(0.3)
        return process.pid

    def down_background(self, name: str, timeout: float = 15.0) -> bool:
        pid = self.running_pid(name)
        if pid is not None:
            self._terminate(name, pid, timeout)
        self._pid_file(name).unlink(missing_ok=True)
        return pid is not None

    def down(self, names: Iterable[str] | None = None, timeout: float = 30.0, *, crash: bool = False) -> list[str]:
        """Stop the processes this stack started, dependants first (the background ones, such as the demo's
        lineage server, too when no names are given); ``crash``: SIGKILL at once, no shutdown of their own.
        Returns the names stopped."""
        chosen = set(names) if names else {s.name for s in SERVICES}
        stopped = [name for name in BACKGROUND if not names and self.down_background(name)]
        for service in reversed(SERVICES):
            if service.name not in chosen:
                continue
            pid = self.running_pid(service.name)
            if pid is not None:
                self._terminate(service.name, pid, 0.0 if crash else timeout)
                self._wait_ports_closed(service)
                stopped.append(service.name)
            self._pid_file(service.name).unlink(missing_ok=True)
        return stopped

    # --- internals -------------------------------------------------------------------------------------------
    def _with_dependencies(self, names: Iterable[str] | None) -> list[Service]:
        if not names:
            return list(SERVICES)
        unknown = set(names) - set(SERVICES_BY_NAME)
        if unknown:
            raise StackError(f"unknown service(s): {', '.join(sorted(unknown))}; known: {', '.join(SERVICES_BY_NAME)}")
        needed: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(SERVICES_BY_NAME[name].depends_on)
        return [s for s in SERVICES if s.name in needed]

    def _start(self, service: Service) -> None:
        if self.running_pid(service.name) is not None:
            return  # reuse the running process; _check waits for it to become healthy
        self._check_ports_free(service)
        launch = service.prepare(self.settings)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_file(service.name)
        with log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(launch.command)}\n".encode())
            log.flush()
            try:
                process = subprocess.Popen(
                    launch.command,
                    cwd=service.home(self.settings),
                    env={**os.environ, **launch.env},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: a Ctrl-C in the shell does not kill the stack
                )
            except OSError as exc:
                raise StackError(f"{service.name}: cannot launch {launch.command[0]}: {exc}") from None
        self._record(service.name, process, launch.command)
        self.report(f"{service.name:9} starting (pid {process.pid}, log {log_path})")

    def _wait_ports_closed(self, service: Service, timeout: float = 30.0) -> None:
        """Until nothing listens on the service's ports: a killed JVM's main thread shows as a zombie while its
        other threads, which hold the sockets, are still exiting (a crash restart found its port taken)."""
        deadline = time.monotonic() + timeout
        while any(port_open(port, 0.2) for port in service.ports(self.settings)):
            if time.monotonic() > deadline:
                raise StackError(f"{service.name}: its ports are still open {timeout:.0f}s after it was stopped")
            time.sleep(0.1)

    def _check_ports_free(self, service: Service) -> None:
        if self.running_pid(service.name) is not None:
            return
        for port in service.ports(self.settings):
            if port_open(port):
                raise StackError(
                    f"{service.name}: port {port} is taken by a process this stack did not start "
                    f"(another stack or server?); stop it or choose other ports (LINEAGE_*_PORT)"
                )

    def _check(self, service: Service, since: float) -> bool:
        if self.running_pid(service.name) is None:
            raise StackError(f"{service.name} did not come up: its process exited; see {self.log_file(service.name)}")
        try:
            service.probe(self.settings)
            return True
        except NotReady as exc:
            if time.monotonic() - since > service.start_timeout:
                raise StackError(
                    f"{service.name} did not come up within {service.start_timeout:.0f}s ({exc}); "
                    f"see {self.log_file(service.name)}"
                ) from None
            return False

    def _terminate(self, name: str, pid: int, timeout: float) -> None:
        """SIGTERM, and SIGKILL after ``timeout`` (at once when it is 0); returns once the process is gone."""
        if timeout > 0:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _proc_start_time(pid) is None:
                return
            time.sleep(0.2)
        if timeout > 0:
            self.report(f"{name}: still running after {timeout:.0f}s, killing it")
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30.0  # its ports and files are free once it is gone
        while _proc_start_time(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
