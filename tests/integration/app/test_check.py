"""``lineage check`` and ``POST /api/v2/check`` on the real stack: a shop's lineage written to Neo4j, proposed
schema changes from DDL, Avro and OpenLineage files, exit codes as CI reads them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from kafka_lineage.graph.driver import driver_for, ensure_constraints, write_events
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage_devtools.processes import ChildProcess, server_process
from tests.integration.conftest import REPO, lineage

pytestmark = pytest.mark.integration


class Shop:
    """raw orders → stg_orders (email kept, email hashed with masking, amount) → contacts (email) and revenue
    (total: an aggregation of amount); a fourth job reads the raw orders without reporting column lineage."""

    def __init__(self) -> None:
        self.ns = f"postgres://db-{uuid.uuid4().hex[:8]}:5432"
        raw = self.dataset("shop.public.orders", [("id", "bigint"), ("email", "varchar(100)"),
                                                  ("amount", "decimal(10,2)"), ("note", "text")])
        stg = self.dataset("shop.stg.orders", [("id", "bigint"), ("email", "varchar(100)"), ("email_hash", "text"),
                                               ("amount", "decimal(10,2)")], {
            "id": [("shop.public.orders", "id", "IDENTITY", False)],
            "email": [("shop.public.orders", "email", "IDENTITY", False)],
            "email_hash": [("shop.public.orders", "email", "TRANSFORMATION", True)],
            "amount": [("shop.public.orders", "amount", "IDENTITY", False)]})
        contacts = self.dataset("shop.mart.contacts", [("email", "varchar(100)")],
                                {"email": [("shop.stg.orders", "email", "IDENTITY", False)]})
        revenue = self.dataset("shop.mart.revenue", [("total", "decimal(18,2)")],
                               {"total": [("shop.stg.orders", "amount", "AGGREGATION", False)]})
        # the same table read by its files' path (a symlinks facet names the table): its columns are the table's
        self.files = f"raw/{uuid.uuid4().hex[:8]}/orders"  # this shop's own: every test run adds a shop
        files = {"namespace": "s3://lake", "name": self.files, "facets": {"symlinks": {
            "_producer": "t", "_schemaURL": "t",
            "identifiers": [{"namespace": self.ns, "name": "shop.public.orders", "type": "TABLE"}]}}}
        copy = self.dataset("shop.lake.orders_copy", [("email", "text")])
        copy["facets"]["columnLineage"] = {"_producer": "t", "_schemaURL": "t", "fields": {"email": {"inputFields": [
            {"namespace": "s3://lake", "name": self.files, "field": "email"}]}}}
        self.events = [self.event("stg_orders", [raw], [stg]), self.event("contacts", [stg], [contacts]),
                       self.event("revenue", [stg], [revenue]), self.event("lake_copy", [files], [copy])]
        self.export = self.event("export", [raw], [self.dataset("shop.export", [("x", "text")])])

    def dataset(self, name: str, fields: list[tuple[str, str]],
                lineage: dict[str, list[tuple[str, str, str, bool]]] | None = None) -> dict[str, Any]:
        facets: dict[str, Any] = {"schema": {"_producer": "t", "_schemaURL": "t",
                                             "fields": [{"name": f, "type": t} for f, t in fields]}}
        if lineage:
            facets["columnLineage"] = {"_producer": "t", "_schemaURL": "t", "fields": {
                out: {"inputFields": [{"namespace": self.ns, "name": source, "field": field, "transformations": [
                    {"type": "DIRECT", "subtype": subtype, **({"masking": True} if masked else {})}]}
                    for source, field, subtype, masked in inputs]} for out, inputs in lineage.items()}}
        return {"namespace": self.ns, "name": name, "facets": facets}

    def event(self, job: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"eventType": "COMPLETE", "eventTime": "2026-12-05T10:00:00Z", "producer": "t",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
                "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": self.ns, "name": job},
                "inputs": inputs, "outputs": outputs}


@pytest.fixture(scope="module")
def shop(clients: ClientSettings) -> Shop:
    shop = Shop()
    with driver_for(clients) as driver:
        ensure_constraints(driver)
        write_events(driver, shop.events)
    return shop


def check(shop: Shop, tmp_path: Path, ddl: str, *args: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "change.sql"
    path.write_text(ddl)
    result = lineage("check", str(path), "--namespace", shop.ns, "--dialect", "postgres", "--output", "json", *args,
                     check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def consumers(report: dict[str, Any], column: str) -> dict[str, list[tuple[str, str, bool]]]:
    """Each consumer column of a changed column, with its path as (dataset.field, transformation, masked) hops."""
    (dataset,) = report["datasets"]
    (change,) = [c for c in dataset["changes"] if c["path"] == column]
    return {f"{c['name']}.{c['field']}": [(f"{h['name']}.{h['field']}", h["transformation"], h["masked"])
                                         for h in c["path"]] for c in change["consumers"]}


def test_dropping_a_consumed_column_fails_naming_every_consumer_and_path(shop: Shop, tmp_path: Path) -> None:
    code, report = check(shop, tmp_path, "ALTER TABLE shop.public.orders DROP COLUMN email;")
    assert code == 1 and report["verdict"] == "BREAKING_WITH_CONSUMERS"
    assert consumers(report, "email") == {
        "shop.stg.orders.email": [("shop.stg.orders.email", "DIRECT/IDENTITY", False)],
        "shop.stg.orders.email_hash": [("shop.stg.orders.email_hash", "DIRECT/TRANSFORMATION(masked)", True)],
        "shop.mart.contacts.email": [("shop.stg.orders.email", "DIRECT/IDENTITY", False),
                                     ("shop.mart.contacts.email", "DIRECT/IDENTITY", False)],
        "shop.lake.orders_copy.email": [("shop.lake.orders_copy.email", "", False)]}  # through the path's name
    (change,) = report["datasets"][0]["changes"]
    assert [job["name"] for job in change["jobs"]] == ["stg_orders", "lake_copy", "contacts"]


def test_a_retyped_column_walks_through_an_aggregation_and_text_says_so(shop: Shop, tmp_path: Path) -> None:
    code, report = check(shop, tmp_path, "ALTER TABLE shop.public.orders ALTER COLUMN amount TYPE INT;")
    assert code == 1
    assert consumers(report, "amount")["shop.mart.revenue.total"][-1] == (
        "shop.mart.revenue.total", "DIRECT/AGGREGATION", False)
    path = tmp_path / "change.sql"
    text = lineage("check", str(path), "--namespace", shop.ns, check=False)
    assert text.returncode == 1
    assert ("amount → [stg_orders: DIRECT/IDENTITY] shop.stg.orders.amount → [revenue: DIRECT/AGGREGATION] "
            "shop.mart.revenue.total") in text.stdout


def test_compatible_unconsumed_and_allowed_changes_pass(shop: Shop, tmp_path: Path) -> None:
    code, report = check(shop, tmp_path, "ALTER TABLE shop.public.orders ALTER COLUMN amount TYPE DECIMAL(14, 2);"
                                         "\nALTER TABLE shop.public.orders ADD COLUMN coupon TEXT;")
    assert code == 0 and [c["severity"] for c in report["datasets"][0]["changes"]] == ["COMPATIBLE"] * 2
    code, report = check(shop, tmp_path, "ALTER TABLE shop.public.orders DROP COLUMN note;")
    assert code == 0 and report["datasets"][0]["changes"][0]["consumers"] == []
    code, _ = check(shop, tmp_path, "ALTER TABLE shop.public.orders DROP COLUMN email;",
                    "--allow", "shop.public.orders:email")
    assert code == 0


def test_readers_without_column_lineage_count_unless_told(shop: Shop, clients: ClientSettings,
                                                          tmp_path: Path) -> None:
    with driver_for(clients) as driver:
        write_events(driver, [shop.export])
    code, report = check(shop, tmp_path, "ALTER TABLE shop.public.orders DROP COLUMN note;")
    assert code == 1 and report["datasets"][0]["unknownReaders"] == [{"namespace": shop.ns, "name": "export"}]
    code, _ = check(shop, tmp_path, "ALTER TABLE shop.public.orders DROP COLUMN note;", "--known-consumers-only")
    assert code == 0


def test_other_inputs_and_exit_codes(shop: Shop, tmp_path: Path) -> None:
    avro = tmp_path / "orders.avsc"
    avro.write_text(json.dumps({"type": "record", "name": "Orders", "fields": [
        {"name": "id", "type": "long"}, {"name": "email", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "note", "type": ["null", "string"]}]}))
    assert lineage("check", str(avro), "--dataset", shop.ns, "shop.public.orders", check=False).returncode == 0
    event = shop.event("stg_orders", [], [shop.dataset("shop.stg.orders", [("id", "bigint")])])
    ol = tmp_path / "run.json"
    ol.write_text(json.dumps(event))
    result = lineage("check", str(ol), "--output", "github", check=False)
    assert result.returncode == 1, result.stderr
    assert any(line.startswith(f"::error file={ol},title=BREAKING schema change%3A shop.stg.orders.email::")
               for line in result.stdout.splitlines())
    new = tmp_path / "new.sql"
    new.write_text("CREATE TABLE shop.public.refunds (id BIGINT);")
    result = lineage("check", str(new), "--namespace", shop.ns, "--output", "sarif", check=False)
    assert result.returncode == 0
    assert json.loads(result.stdout)["runs"][0]["results"][0]["ruleId"] == "unknown-dataset"
    bad = tmp_path / "bad.sql"
    bad.write_text("ALTER TABLE shop.public.orders DROP COLUMN nope;")
    result = lineage("check", str(bad), "--namespace", shop.ns, check=False)
    assert result.returncode == 2 and "nope" in result.stderr
    result = lineage("check", str(bad), "--namespace", shop.ns, check=False,
                     env={"NEO4J_URI": "bolt://127.0.0.1:9"})
    assert result.returncode == 3 and "retry later" in result.stderr


@pytest.fixture(scope="module")
def server(shop: Shop) -> Iterator[ChildProcess]:
    with server_process() as child:
        yield child


def test_the_server_answers_the_same_report(shop: Shop, server: ChildProcess) -> None:
    body = {"documents": [{"text": "ALTER TABLE shop.public.orders DROP COLUMN email;", "format": "ddl",
                           "namespace": shop.ns, "source": "change.sql"}],
            "proposals": [{"namespace": shop.ns, "name": "shop.stg.orders",
                           "fields": [{"name": "id"}, {"name": "email"}, {"name": "email_hash"}]}]}
    answer = requests.post(f"{server.url}/api/v2/check", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["verdict"] == "BREAKING_WITH_CONSUMERS"
    stg, orders = report["datasets"]  # proposals first, then documents
    assert {c["name"] + "." + c["field"] for c in orders["changes"][0]["consumers"]} == {
        "shop.stg.orders.email", "shop.stg.orders.email_hash", "shop.mart.contacts.email",
        "shop.lake.orders_copy.email"}
    assert [(c["path"], c["kind"]) for c in stg["changes"]] == [("amount", "REMOVED")]
    assert [c["name"] + "." + c["field"] for c in stg["changes"][0]["consumers"]] == ["shop.mart.revenue.total"]
    bad = requests.post(f"{server.url}/api/v2/check", json={"documents": [{"text": "ALTER", "format": "ddl"}]},
                        timeout=30)
    assert bad.status_code == 400 and "namespace" in bad.json()["message"]
    assert requests.post(f"{server.url}/api/v2/check", data="{", timeout=30).status_code == 400


def test_the_cli_through_a_server_says_what_it_says_through_neo4j(shop: Shop, server: ChildProcess,
                                                                    tmp_path: Path) -> None:
    change = tmp_path / "change.sql"
    change.write_text("ALTER TABLE shop.public.orders DROP COLUMN email;\n")
    args = ("check", str(change), "--namespace", shop.ns, "--output", "json")
    direct, remote = lineage(*args, check=False), lineage(*args, "--server", server.url, check=False)
    assert (direct.returncode, remote.returncode) == (1, 1), remote.stderr
    assert json.loads(remote.stdout) == json.loads(direct.stdout)
    text = lineage("check", str(change), "--namespace", shop.ns, env={"LINEAGE_CHECK_SERVER": server.url},
                   check=False)
    assert text.returncode == 1 and "✗ email REMOVED" in text.stdout
    change.write_text("ALTER TABLE shop.public.orders DROP COLUMN nope;\n")
    refused = lineage(*args, "--server", server.url, check=False)
    assert refused.returncode == 2 and "400" in refused.stderr and "nope" in refused.stderr
    assert lineage(*args, "--server", "http://127.0.0.1:9", check=False).returncode == 3


WORKFLOW = REPO / "docs" / "ci" / "lineage-check.yml"
PRE_COMMIT = REPO / "docs" / "ci" / "pre-commit-config.yaml"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def _repository(tmp_path: Path, migration: str) -> Path:
    """A team's repository: main with its first migration, a branch adding ``migration`` (origin/main as the
    checkout action leaves it)."""
    repo = tmp_path / "repo"
    (repo / "migrations").mkdir(parents=True)
    (repo / "migrations" / "0001_orders.sql").write_text("CREATE TABLE shop.public.orders (id BIGINT);\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "checkout", "-q", "-b", "change")
    (repo / "migrations" / "0002_change.sql").write_text(migration)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "change")
    return repo


def _run_workflow(repo: Path, values: dict[str, str]) -> subprocess.CompletedProcess:
    """Every ``run`` step of the documented workflow, in order, as the runner runs them (bash -eo pipefail, the
    step's env with its ``${{ }}`` expressions filled from ``values``); ``uses`` steps are the runner's own."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["lineage-check"]["steps"]
    bin_dir = str(Path(sys.executable).parent)  # the runner's PATH has the installed CLI
    result = None
    for step in steps:
        if "run" not in step:
            continue
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        for name, value in (step.get("env") or {}).items():
            env[name] = re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: values[m[1]], str(value))
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo,
                                env=env, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            return result
    assert result is not None
    return result


def test_the_documented_workflow_fails_a_breaking_pull_request(shop: Shop, server: ChildProcess,
                                                              tmp_path: Path) -> None:
    repo = _repository(tmp_path, "ALTER TABLE shop.public.orders ADD COLUMN coupon TEXT;\n-- drop the column "
                                 "nobody should use\nALTER TABLE shop.public.orders DROP COLUMN email;\n")
    values = {"vars.LINEAGE_SERVER_URL": server.url, "secrets.LINEAGE_SERVER_TOKEN": "",
              "vars.LINEAGE_NAMESPACE": shop.ns, "github.base_ref": "main"}
    failed = _run_workflow(repo, values)
    assert failed.returncode == 1, failed.stderr
    assert any(line.startswith("::error file=migrations/0002_change.sql,line=3,title=BREAKING schema change%3A "
                               "shop.public.orders.email::") for line in failed.stdout.splitlines()), failed.stdout
    (repo / ".lineage-allow").write_text("# agreed with the contacts team\nshop.public.orders:email\n")
    passed = _run_workflow(repo, values)
    assert passed.returncode == 0 and "::notice file=migrations/0002_change.sql" in passed.stdout


def test_the_documented_pre_commit_hook_stops_the_commit(shop: Shop, server: ChildProcess, tmp_path: Path) -> None:
    repo = _repository(tmp_path, "ALTER TABLE shop.public.orders ADD COLUMN coupon TEXT;\n")
    (repo / ".pre-commit-config.yaml").write_text(PRE_COMMIT.read_text().replace("postgres://db:5432", shop.ns))
    (repo / "migrations" / "0003_drop.sql").write_text("ALTER TABLE shop.public.orders ALTER COLUMN amount TYPE INT;\n")
    _git(repo, "add", ".")
    env = {**os.environ, "LINEAGE_CHECK_SERVER": server.url, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    hook = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "migrations/0003_drop.sql"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert hook.returncode == 1 and "✗ amount TYPE_CHANGED decimal(10,2) → INT: BREAKING" in hook.stdout, hook.stdout
    (repo / "migrations" / "0003_drop.sql").write_text("ALTER TABLE shop.public.orders ADD COLUMN note2 TEXT;\n")
    _git(repo, "add", ".")
    hook = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "migrations/0003_drop.sql"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert hook.returncode == 0, hook.stdout
