"""A standing Flink session cluster (one JobManager, one TaskManager) from PyFlink's own distribution.

What production Flink has and PyFlink's local execution lacks: a REST API that outlives its jobs, and jobs that run
on after the client that submitted them has gone — the cases ``lineage flink watch`` exists for. Started from the
wheel's ``bin/`` scripts in the foreground as watched child processes, with the configuration, library folder (the
wheel's jars plus ``extra_jars``) and logs under ``workdir``; nothing in the installed package is changed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import requests
import yaml

from kafka_lineage_devtools.processes import child_process, free_port


def _flink_home() -> Path:
    import pyflink

    return Path(pyflink.__file__).parent


def _config(home: Path, rest_port: int) -> dict[str, object]:
    default = yaml.safe_load((home / "conf" / "config.yaml").read_text()) or {}
    java_opts = default.get("env", {}).get("java", {}).get("opts", {}).get("all", "")  # the JDK 17 module opens
    return {
        "env.java.opts.all": java_opts,
        "jobmanager.rpc.address": "127.0.0.1", "jobmanager.bind-host": "127.0.0.1",
        "jobmanager.rpc.port": free_port(),
        "taskmanager.host": "127.0.0.1", "taskmanager.bind-host": "127.0.0.1",
        "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1", "rest.port": rest_port,
        "jobmanager.memory.process.size": "1024m", "taskmanager.memory.process.size": "1536m",
        "taskmanager.numberOfTaskSlots": 2, "parallelism.default": 1,
    }


def _answers(url: str) -> bool:
    try:
        return requests.get(f"{url}/overview", timeout=2).json().get("taskmanagers", 0) >= 1
    except (requests.RequestException, ValueError):
        return False


@contextlib.contextmanager
def flink_session_cluster(workdir: Path, rest_port: int, extra_jars: Sequence[Path] = ()) -> Iterator[str]:
    """A running session cluster; yields its REST URL (``http://127.0.0.1:<rest_port>``). Stopped on exit."""
    home = _flink_home()
    lib, conf, logs = workdir / "lib", workdir / "conf", workdir / "log"
    for folder in (lib, conf, logs):
        folder.mkdir(parents=True, exist_ok=True)
    for jar in [*sorted((home / "lib").glob("*.jar")), *extra_jars]:
        if not (lib / jar.name).exists():
            (lib / jar.name).symlink_to(jar)
    (conf / "config.yaml").write_text(yaml.safe_dump(_config(home, rest_port)))
    for name in ("log4j-console.properties", "logback-console.xml"):
        (conf / name).write_text((home / "conf" / name).read_text())
    env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_LIB_DIR": str(lib), "FLINK_LOG_DIR": str(logs)}
    url = f"http://127.0.0.1:{rest_port}"
    # Both are watched children: one that dies fails the caller's block at once.
    with child_process(["bash", str(home / "bin" / "jobmanager.sh"), "start-foreground"], "flink jobmanager",
                       env=env), \
            child_process(["bash", str(home / "bin" / "taskmanager.sh"), "start-foreground"], "flink taskmanager",
                          env=env, is_ready=lambda _c, _o: _answers(url), ready_timeout=120):
        yield url
