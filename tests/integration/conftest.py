"""One real local stack per test session, started from a clean state directory by the project's own code.

The state dir is `.lineage/test-stack` in the repository (override: LINEAGE_TEST_STATE_DIR); downloads stay in
the shared caches (Maven's local repository, LINEAGE_CACHE_DIR), so only the first run on a machine is slow.
Set LINEAGE_TEST_KEEP_STACK=1 to leave the stack running after the session for inspection, and
LINEAGE_TEST_REUSE_STACK=1 to run against that stack as it is (no clean restart): quick iterations while developing,
and several test sessions at once. Every test uses its own topics and ids, so sessions do not disturb each other.
A pipeline component a test started (``kafka_lineage_devtools.processes``) that ends by itself fails the running
test at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_lineage.graph.driver import graph_fingerprint
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas import registry
from kafka_lineage.schemas.openlineage import record_to_event
from kafka_lineage_devtools.processes import collector_process, interrupting_on_child_exit, sleep_watching
from kafka_lineage_devtools.stack.config import StackSettings
from kafka_lineage_devtools.stack.manager import Stack
from kafka_lineage_devtools.stack.smoke import ensure_topic

REPO = Path(__file__).resolve().parents[2]


def lineage(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real `lineage` CLI in a subprocess, as a user would."""
    result = subprocess.run(
        [sys.executable, "-m", "kafka_lineage.app.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"lineage {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


# The test stack's own ports (each default + 20,000), so the tests run beside a stack `make demo` left running;
# any of them set in the environment wins.
TEST_PORTS = {
    "LINEAGE_KAFKA_PORT": "29092", "LINEAGE_KAFKA_CONTROLLER_PORT": "29093", "LINEAGE_KAFKA_SASL_PORT": "29094",
    "LINEAGE_REGISTRY_PORT": "28081", "LINEAGE_REGISTRY_MANAGEMENT_PORT": "28091",
    "LINEAGE_NEO4J_BOLT_PORT": "27687", "LINEAGE_NEO4J_HTTP_PORT": "27474", "LINEAGE_CONNECT_PORT": "28083",
    "LINEAGE_SERVER_PORT": "25050",  # the demo's lineage server
}


@pytest.fixture(scope="session")
def stack_settings() -> Iterator[StackSettings]:
    state_dir = Path(os.environ.get("LINEAGE_TEST_STATE_DIR", REPO / ".lineage" / "test-stack")).resolve()
    previous = {name: os.environ.get(name) for name in ("LINEAGE_STATE_DIR", *TEST_PORTS)}
    # The CLI subprocesses and ClientSettings see them too.
    os.environ["LINEAGE_STATE_DIR"] = str(state_dir)
    for name, port in TEST_PORTS.items():
        os.environ.setdefault(name, port)
    settings = StackSettings.from_env()
    stack = Stack(settings)
    reuse = bool(os.environ.get("LINEAGE_TEST_REUSE_STACK"))
    if not reuse:
        stack.down()
        shutil.rmtree(state_dir, ignore_errors=True)
    started = time.monotonic()
    stack.up()
    how = "reused" if reuse else "from a clean state dir"
    print(f"\nstack up ({how}) in {time.monotonic() - started:.1f}s", file=sys.stderr)
    yield settings
    if not (reuse or os.environ.get("LINEAGE_TEST_KEEP_STACK")):
        stack.down()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def children_fail_fast() -> Iterator[None]:
    """A processor, sink or collector the test runs (its own or a module fixture's) that ends without being asked to
    fails the test at once with its exit code and last log lines, whatever the test is waiting on: no test waits
    out its own timeout for output from a dead child."""
    with interrupting_on_child_exit():
        yield


@pytest.fixture(scope="session")
def clients(stack_settings: StackSettings) -> ClientSettings:
    return ClientSettings.from_env()


@pytest.fixture
def events_topic(clients: ClientSettings) -> str:
    """A fresh topic with the OpenLineage event schema registered under its subject."""
    name = f"test.events.{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.kafka_bootstrap_servers, name, partitions=3)
    client = SchemaRegistryClient(clients.registry_config())
    assert all(report.ok for report in registry.register(client, {name: "openlineage_event"}))
    return name


def settled_fingerprint(driver: Any, quiet: float = 2.0, timeout: float = 30.0, watch: Iterable[Any] = ()) -> str:
    """The graph's fingerprint once it has not changed for ``quiet`` seconds (the processor holds a run's events
    back for 2 s at most); fails when it keeps changing for ``timeout``, or when a ``watch``ed child dies."""
    last, since, deadline = graph_fingerprint(driver), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"the graph kept changing for {timeout:.0f} s"
        sleep_watching(0.3, watch)
        if (current := graph_fingerprint(driver)) != last:
            last, since = current, time.monotonic()
    return last


def consume(bootstrap: str | Mapping[str, object], topic: str, count: int, timeout: float = 30.0) -> list[Message]:
    """Up to ``count`` messages of ``topic`` from the beginning, waiting at most ``timeout`` seconds. ``bootstrap``:
    servers or a whole client config (security settings included)."""
    connection = dict(bootstrap) if isinstance(bootstrap, Mapping) else {"bootstrap.servers": bootstrap}
    consumer = Consumer({**connection, "group.id": f"test-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    messages: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                messages.append(message)
    finally:
        consumer.close()
    return messages


def consume_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Message]:
    """Every message of ``topic`` up to its end offsets at the time of the call (committed records only)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        watermarks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                      for p in metadata.topics[topic].partitions}
        # Only partitions with records: an empty one is never fetched, and its position stays invalid (-1001), which
        # once made every read of a topic with an empty partition wait out the whole timeout.
        ends = {p: high for p, (low, high) in watermarks.items() if high > low}
        partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends]
        messages: list[Message] = []
        if not partitions:
            return messages
        consumer.assign(partitions)
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                messages.append(message)
            # positions, not the last record + 1: a transactional topic ends with a commit marker, never delivered
            positions = {tp.partition: tp.offset for tp in consumer.position(partitions)}
        return messages
    finally:
        consumer.close()


def decoded_events(clients: ClientSettings, topic: str, count: int, timeout: float = 30.0) -> list[tuple[str, dict]]:
    """(key, OpenLineage event JSON) of up to ``count`` Avro records on ``topic``."""
    deserializer = AvroDeserializer(SchemaRegistryClient(clients.registry_config()))
    context = SerializationContext(topic, MessageField.VALUE)
    return [(m.key().decode(), record_to_event(deserializer(m.value(), context)))
            for m in consume(clients.kafka_bootstrap_servers, topic, count, timeout)]


@contextlib.contextmanager
def running_collector(topic: str, **env: str) -> Iterator[str]:
    """The real collector publishing to ``topic``; it must shut down cleanly on SIGTERM."""
    with collector_process({"LINEAGE_EVENTS_TOPIC": topic, **env}) as child:
        yield child.url
    assert child.returncode == 0, child.output
    assert "collector stopped" in child.output


# --- a real browser (Playwright driving Debian's Chromium, which `make install` puts there) ------------------------
SCREENSHOTS = REPO / ".lineage" / "screenshots"
README_SCREENSHOTS = REPO / "docs" / "screenshots"  # written when LINEAGE_UPDATE_SCREENSHOTS is set


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Per module: Playwright's sync API keeps an event loop running while it is open, which would make every later
    test's asyncio.run() fail."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                              args=["--no-sandbox"])
        yield launched
        launched.close()


@contextlib.contextmanager
def browser_page(browser: Any, width: int = 1400, height: int = 850) -> Iterator[Any]:
    """A page of that size, closed after; no script error may happen on it (those seen are reported either way)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    except BaseException as exc:
        if errors:
            exc.add_note(f"script errors on the page: {errors}")
        raise
    finally:
        page.close()
    assert not errors, errors


def screenshot(page: Any, name: str, readme: bool = False) -> None:
    """A test's screenshot kept as an artifact (.lineage/screenshots/NAME.png); with ``readme`` and
    LINEAGE_UPDATE_SCREENSHOTS set, also the README's copy."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    if readme and os.environ.get("LINEAGE_UPDATE_SCREENSHOTS"):
        README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(README_SCREENSHOTS / f"{name}.png"))
