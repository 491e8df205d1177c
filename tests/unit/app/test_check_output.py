"""``lineage check``'s report formats: text, SARIF 2.1.0, GitHub workflow commands."""

from __future__ import annotations

import json

from kafka_lineage.app.check_output import github, render, sarif, text
from kafka_lineage.graph.check import BREAKING_WITH_CONSUMERS, PASS, CheckReport, DatasetCheck, Finding
from kafka_lineage.graph.column_walk import Consumer, Hop
from kafka_lineage.schemas.proposals import ProposedSchema
from kafka_lineage.schemas.schema_diff import FieldChange

NS = "postgres://db:5432"
PROPOSAL = ProposedSchema(NS, "shop.orders", None, source="migrations/0042,new.sql", line=7, origin="DDL ALTER TABLE")
STG = Hop(NS, "shop.stg_orders", "email_hash", "DIRECT/TRANSFORMATION(masked)", (("dbt", "stg_orders"),))
MART = Hop("s3://lake", "mart/contacts", "email", "DIRECT/IDENTITY", (("spark", "contacts"),))
REMOVED = Finding(FieldChange("email", "REMOVED", "varchar(100)", None, "BREAKING"),
                  (Consumer((STG,)), Consumer((STG, MART))))
ADDED = Finding(FieldChange("note", "ADDED", None, "text", "COMPATIBLE"))


def report(*findings: Finding, readers: tuple[tuple[str, str], ...] = (), count: bool = True) -> CheckReport:
    return CheckReport((DatasetCheck(PROPOSAL, "checked", "v1", findings, readers),), count)


def test_verdicts() -> None:
    assert report(REMOVED, ADDED).verdict == BREAKING_WITH_CONSUMERS
    assert report(ADDED).verdict == PASS
    lonely = Finding(REMOVED.change)
    assert report(lonely).verdict == PASS
    assert report(lonely, readers=(("spark", "export"),)).verdict == BREAKING_WITH_CONSUMERS
    assert report(lonely, readers=(("spark", "export"),), count=False).verdict == PASS
    allowed = Finding(REMOVED.change, REMOVED.consumers, allowed=True)
    assert report(allowed).verdict == PASS


def test_text_names_every_consumer_with_its_path() -> None:
    out = text(report(REMOVED, ADDED))
    assert out.startswith("lineage check: FAIL: 1 breaking change with consumers")
    assert "✗ email REMOVED (was varchar(100)): BREAKING" in out
    assert "jobs: dbt/stg_orders, spark/contacts" in out
    assert ("email → [stg_orders: DIRECT/TRANSFORMATION(masked)] shop.stg_orders.email_hash → "
            "[contacts: DIRECT/IDENTITY] s3://lake mart/contacts.email") in out
    assert "✓ note ADDED (text): COMPATIBLE" in out


def test_sarif_is_2_1_0_with_locations_and_levels() -> None:
    document = json.loads(render(report(REMOVED, ADDED), "sarif"))
    assert document["version"] == "2.1.0" and len(document["runs"]) == 1
    run = document["runs"][0]
    rules = {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("breaking-change-with-consumers", "error"),
                                                             ("compatible-change", "note")]
    assert {r["ruleId"] for r in results} <= rules
    location = results[0]["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": "migrations/0042,new.sql"}, "region": {"startLine": 7}}
    assert "mart/contacts.email" in results[0]["message"]["text"]
    assert results[0]["properties"]["jobs"] == [{"namespace": "dbt", "name": "stg_orders"},
                                                {"namespace": "spark", "name": "contacts"}]
    assert sarif(report(ADDED))["runs"][0]["properties"]["verdict"] == PASS


def test_github_commands_escape_properties_and_data() -> None:
    lines = github(report(REMOVED, ADDED)).splitlines()
    assert lines[0].startswith("::error file=migrations/0042%2Cnew.sql,line=7,title=BREAKING schema change%3A "
                               "shop.orders.email::")
    assert "\n" not in lines[0] and lines[1].startswith("::notice ")
    assert lines[-1] == f"lineage check: {BREAKING_WITH_CONSUMERS}"
    placed = Finding(REMOVED.change, REMOVED.consumers, line=9)  # an ALTER's own statement line
    assert github(report(placed)).startswith("::error file=migrations/0042%2Cnew.sql,line=9,")
    assert sarif(report(placed))["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 9}
    assert Finding.from_dict(placed.as_dict()) == placed
    multiline = Finding(FieldChange("a\nb%", "REMOVED", "int", None, "BREAKING"), REMOVED.consumers)
    assert "a%0Ab%25" in github(report(multiline)).splitlines()[0]


def test_json_is_the_report() -> None:
    document = json.loads(render(report(REMOVED), "json"))
    (dataset,) = document["datasets"]
    assert document["verdict"] == BREAKING_WITH_CONSUMERS and dataset["breaking"] is True
    (change,) = dataset["changes"]
    assert [c["depth"] for c in change["consumers"]] == [1, 2]
    assert change["consumers"][0]["path"][0]["masked"] is True
