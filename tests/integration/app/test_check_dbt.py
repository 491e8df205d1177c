"""A real dbt project through dbt-ol (openlineage-dbt) on the real stack: ``lineage check`` on a branch that drops a
column two downstream models use (built as CI builds it: the changed model, then ``dbt docs generate`` for
catalog.json), and dbt's partial schema facets through the whole pipeline (documenting a column raises no alert).
dbt and dbt-ol live in their own virtualenv (``make dbt``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.producers.client.publisher import EventPublisher
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import alert_sink_process, pipeline_env, processor_process, sink_process
from tests.integration.conftest import REPO, consume, consume_all, lineage

pytestmark = pytest.mark.integration

PROJECT = REPO / "tests" / "data" / "dbt_shop"
DBT_BIN = REPO / ".lineage" / "dbt-venv" / "bin"


def dbt(project: Path, database: Path, *args: str, events: Path | None = None) -> None:
    """A dbt command in ``project`` on the DuckDB file ``database``; with ``events``, through dbt-ol, its
    OpenLineage events appended to that file (openlineage-python's file transport)."""
    assert (DBT_BIN / "dbt").exists(), "dbt is not installed: `make dbt` (part of make install and make test)"
    env = {**os.environ, "PATH": f"{DBT_BIN}:{os.environ['PATH']}", "DBT_DUCKDB_PATH": str(database),
           "DBT_TARGET_PATH": str(project / "target"), "DBT_LOG_PATH": str(project / "logs"),
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    command = ["dbt", *args, "--profiles-dir", str(project)]
    if events is not None:
        config = project / "openlineage.yml"
        config.write_text(f"transport:\n  type: file\n  log_file_path: {events}\n  append: true\n")
        env["OPENLINEAGE_CONFIG"] = str(config)
        command[0] = "dbt-ol"
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def test_a_branch_dropping_a_column_two_models_use_fails_naming_both(clients: ClientSettings,
                                                                     tmp_path: Path) -> None:
    main, branch = tmp_path / "main", tmp_path / "branch"
    shutil.copytree(PROJECT, main)
    (tmp_path / "prod").mkdir()
    prod = tmp_path / "prod" / "shop.duckdb"
    events = tmp_path / "events.jsonl"
    dbt(main, prod, "build", events=events)
    emitted = [json.loads(line) for line in events.read_text().splitlines()]
    namespace = f"duckdb://{prod}"  # as dbt-ol names the warehouse of a DuckDB profile
    assert {o["namespace"] for e in emitted for o in e.get("outputs", [])} == {namespace}
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, emitted)

    shutil.copytree(PROJECT, branch)
    (branch / "models" / "stg_customers.sql").write_text("select id, name, country from {{ ref('raw_customers') }}\n")
    (tmp_path / "ci").mkdir()
    ci = tmp_path / "ci" / "shop.duckdb"  # the CI build's own database file, named like the warehouse's
    dbt(branch, ci, "seed")
    dbt(branch, ci, "run", "--select", "stg_customers")
    dbt(branch, ci, "docs", "generate")

    result = lineage("check", str(branch / "target"), "--namespace", namespace, "--output", "json", check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    (stg,) = [d for d in report["datasets"] if d["name"] == "shop.main.stg_customers"]
    assert stg["origin"] == "dbt model stg_customers" and stg["complete"] is True
    (email,) = [c for c in stg["changes"] if c["path"] == "email"]
    assert email["kind"] == "REMOVED" and email["severity"] == "BREAKING"
    paths = {f"{c['name']}.{c['field']}": [f"{h['name']}.{h['field']}" for h in c["path"]] for c in email["consumers"]}
    assert paths == {
        "shop.main.customer_orders.email": ["shop.main.customer_orders.email"],
        "shop.main.customer_emails_hashed.email_hash": ["shop.main.customer_emails_hashed.email_hash"],
        "shop.main.customer_contacts.email": ["shop.main.customer_orders.email", "shop.main.customer_contacts.email"]}
    jobs = {job["name"] for job in email["jobs"]}
    assert {"shop.main.shop.customer_orders.build.run", "shop.main.shop.customer_emails_hashed.build.run"} <= jobs
    # columns the graph knew without a type (dbt-ol's schema facet lists documented columns, untyped) did not change
    assert [c["path"] for c in stg["changes"] if c["severity"] != "COMPATIBLE"] == ["email"]

    text = lineage("check", str(branch / "target"), "--namespace", namespace, check=False)
    assert text.returncode == 1
    assert ("email → [shop.main.shop.customer_orders.build.run] shop.main.customer_orders.email → "
            "[shop.main.shop.customer_contacts.build.run] shop.main.customer_contacts.email") in text.stdout


def _dbt_ol_runs(tmp_path: Path) -> list[dict]:
    """The events of four real dbt-ol runs of the shop: a build (documented columns only), a run after one more
    column was documented, a run with catalog.json (every column, typed), a run after `name` was dropped (typed)."""
    project = tmp_path / "shop"
    shutil.copytree(PROJECT, project)
    (tmp_path / "warehouse").mkdir()
    database, events = tmp_path / "warehouse" / "shop.duckdb", tmp_path / "events.jsonl"
    dbt(project, database, "build", events=events)
    schema = project / "models" / "schema.yml"
    schema.write_text(schema.read_text() + "      - name: country\n        description: Where the customer lives.\n")
    dbt(project, database, "run", "--select", "stg_customers", events=events)
    dbt(project, database, "docs", "generate")  # dbt-ol now builds schema facets from catalog.json
    dbt(project, database, "run", "--select", "stg_customers", events=events)
    (project / "models" / "stg_customers.sql").write_text("select id, email, country from {{ ref('raw_customers') }}\n")
    dbt(project, database, "run", "--select", "stg_customers")
    dbt(project, database, "docs", "generate")
    dbt(project, database, "run", "--select", "stg_customers", events=events)
    return [json.loads(line) for line in events.read_text().splitlines()]


def test_documenting_a_column_in_dbt_raises_no_alert_and_dropping_one_does(clients: ClientSettings,
                                                                          tmp_path: Path) -> None:
    emitted = _dbt_ol_runs(tmp_path)
    stg = [o["facets"]["schema"]["fields"] for e in emitted if e["eventType"] == "COMPLETE"
           for o in e.get("outputs", []) if o["name"] == "shop.main.stg_customers"]
    assert [[f["name"] for f in fields] for fields in stg] == [  # what dbt-ol really sent, run by run
        ["id", "email"], ["id", "email", "country"], ["id", "name", "email", "country"], ["id", "email", "country"]]
    assert all("type" not in f for f in stg[0] + stg[1]) and all(f.get("type") for f in stg[2] + stg[3])

    prefix = f"test.dbt.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    with processor_process(env), sink_process(env), alert_sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        publisher.send([publisher.encode(event) for event in emitted]).result(60)
        publisher.close()
        normalized = consume(settings.kafka_bootstrap_servers, settings.normalized_topic, len(emitted), timeout=90)
        assert len(normalized) == len(emitted)
        deadline, alerts = time.monotonic() + 60, []
        while time.monotonic() < deadline and not alerts:
            alerts = consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)
            time.sleep(0.5)
        time.sleep(3)  # a second alert, if one were coming, has had its time
        alerts = consume_all(settings.kafka_bootstrap_servers, settings.drift_topic)
    tail = lineage("alerts", "tail", "--json", env=env)
    found = [json.loads(line) for line in tail.stdout.splitlines() if line.startswith("{")]
    assert len(alerts) == 1 and len(found) == 1, tail.stdout
    (alert,) = found
    assert alert["dataset"]["name"] == "shop.main.stg_customers"
    assert [(c["path"], c["kind"]) for c in alert["changes"]] == [("name", "REMOVED")]


def test_dbt_column_tags_become_tags_that_follow_column_lineage(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    shutil.copytree(PROJECT, project)
    (tmp_path / "warehouse").mkdir()
    database, events = tmp_path / "warehouse" / "shop.duckdb", tmp_path / "events.jsonl"
    dbt(project, database, "build", events=events)
    namespace = f"duckdb://{database}"
    prefix = f"test.dbt-tags.{uuid.uuid4().hex[:8]}"
    env = {**pipeline_env(prefix, 3, tmp_path / "processor"), "LINEAGE_SINK_POLL_SECONDS": "0.2"}
    settings = ClientSettings.from_env({**os.environ, **env})
    with processor_process(env), sink_process(env):
        publisher = EventPublisher.from_settings(settings)
        publisher.send([publisher.encode(json.loads(line)) for line in events.read_text().splitlines()]).result(60)
        publisher.close()
        with driver_for(settings) as driver:  # the lineage is in the graph before its tags are imported
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not driver.execute_query(
                    "MATCH (:Field {namespace: $ns, name: 'shop.main.customer_contacts'})-[:DERIVES_FROM]->() "
                    "RETURN count(*) AS n", ns=namespace).records[0]["n"]:
                time.sleep(0.3)
        imported = lineage("tags", "--import-dbt", str(project / "target"), "--namespace", namespace, env=env)
        assert "1 datasets' dbt tags recorded" in imported.stdout
        deadline, reached = time.monotonic() + 60, {}
        while time.monotonic() < deadline and "shop.main.customer_contacts.email" not in reached:
            reached = _columns(namespace, env)
            time.sleep(0.5)
    # schema.yml tags stg_customers.email `pii` (tags: [pii], meta: {classification: pii})
    assert reached == {"shop.main.stg_customers.email": "origin", "shop.main.customer_orders.email": "derived",
                       "shop.main.customer_contacts.email": "derived",
                       # dbt-ol names no transformation, so md5() is not known as masking: carrying is the safe reading
                       "shop.main.customer_emails_hashed.email_hash": "derived"}
    again = lineage("tags", "--import-dbt", str(project / "target"), "--namespace", namespace, env=env)
    assert "0 datasets' dbt tags recorded" in again.stdout  # unchanged tags are not recorded twice


def _columns(namespace: str, env: dict[str, str]) -> dict[str, str]:
    answer = json.loads(lineage("tags", "--json", env=env).stdout)
    return {f"{c['name']}.{c['field']}": c["status"] for c in answer["columns"] if c["namespace"] == namespace}
