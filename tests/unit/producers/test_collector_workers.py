"""Several collector processes on one port: the setting, and the supervisor's sockets (no Kafka needed)."""

from __future__ import annotations

import os
import socket

import pytest

from kafka_lineage.producers.service.collector_workers import listening_sockets
from kafka_lineage.producers.service.settings import MAX_COLLECTOR_PROCESSES, CollectorSettings
from kafka_lineage.runtime.config import ConfigError


def test_one_process_by_default_auto_is_the_usable_cores_and_the_count_is_bounded() -> None:
    assert CollectorSettings.from_env({}).processes == 1
    assert CollectorSettings.from_env({"LINEAGE_COLLECTOR_PROCESSES": "3"}).processes == 3
    cores = len(os.sched_getaffinity(0))
    assert CollectorSettings.from_env({"LINEAGE_COLLECTOR_PROCESSES": " Auto "}).processes == min(
        cores, MAX_COLLECTOR_PROCESSES)
    for bad in ("0", "-2", "1.5", "many", str(MAX_COLLECTOR_PROCESSES + 1)):
        with pytest.raises(ConfigError, match="LINEAGE_COLLECTOR_PROCESSES"):
            CollectorSettings.from_env({"LINEAGE_COLLECTOR_PROCESSES": bad})


def test_every_worker_gets_a_socket_on_the_same_port_and_each_accepts_connections() -> None:
    groups = listening_sockets("127.0.0.1", 0, 3)
    try:
        ports = {sock.getsockname()[1] for group in groups for sock in group}
        assert len(groups) == 3 and all(len(group) == 1 for group in groups) and len(ports) == 1
        port = ports.pop()
        reached: set[int] = set()
        for _ in range(60):  # the kernel spreads connections over the sockets by their addresses
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
            for index, (sock,) in enumerate(groups):
                sock.setblocking(False)
                try:
                    sock.accept()[0].close()
                    reached.add(index)
                except BlockingIOError:
                    pass
        assert reached == {0, 1, 2}
    finally:
        for group in groups:
            for sock in group:
                sock.close()


def test_a_port_another_process_listens_on_is_refused_even_when_it_shares_with_reuseport() -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as another collector's workers would
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match=f"port {taken.getsockname()[1]}"):
            listening_sockets("127.0.0.1", taken.getsockname()[1], 2)
