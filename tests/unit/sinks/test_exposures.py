"""Sensitive-tag exposures (``sinks/alerts/exposures.py``): which reached columns are exposures, what changed since
the remembered ones, and the alerts they make."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from kafka_lineage.app.formats import format_alert
from kafka_lineage.graph.column_walk import Hop
from kafka_lineage.graph.sensitive import TaggedColumn
from kafka_lineage.sinks.alerts.exposure_watch import _baseline_config, comparison_config
from kafka_lineage.sinks.alerts.exposures import BASELINE_KEY, compare, exposure_alerts, exposure_key, exposures
from tests.unit.schemas.test_avro_schemas import _round_trip

ORIGIN = ("pg://db", "raw.customers", "email")


def hop(name: str, field: str, how: str = "DIRECT/IDENTITY", job: str = "stage") -> Hop:
    return Hop("pg://db", name, field, how, (("pg://db", job),))


def column(name: str, field: str, path: tuple[Hop, ...], status: str = "derived", cleared: bool = False,
           origin: tuple[str, str, str] = ORIGIN) -> TaggedColumn:
    return TaggedColumn("pg://db", name, field, "pii", status, origin, path, cleared)


STG = column("stg.customers", "email", (hop("stg.customers", "email"),))
MART = column("mart.orders", "email", (hop("stg.customers", "email"), hop("mart.orders", "email", job="mart")))


def test_only_derived_columns_of_datasets_not_cleared_are_exposures_each_at_its_shortest_path() -> None:
    longer = column("mart.orders", "email", (hop("a", "x"), hop("b", "y"), hop("mart.orders", "email")),
                    origin=("pg://db", "raw.other", "mail"))
    found = exposures([
        column("raw.customers", "email", (), status="origin"),
        column("stg.customers", "email_hash", (hop("stg.customers", "email_hash", "DIRECT/HASH(masked)"),),
               status="masked"),
        column("export.contacts", "contact", (hop("export.contacts", "contact"),), cleared=True),
        longer, STG, MART])
    assert set(found) == {exposure_key("pii", "pg://db", "stg.customers", "email"),
                          exposure_key("pii", "pg://db", "mart.orders", "email")}
    assert found[exposure_key("pii", "pg://db", "mart.orders", "email")] is MART


def test_compare_says_what_is_new_and_what_ended_but_forgets_nothing_from_a_cut_answer() -> None:
    stg, mart, ended = (exposure_key("pii", "pg://db", n, "email") for n in ("stg.customers", "mart.orders", "x"))
    found = {stg: STG, mart: MART}
    changes = compare({stg, ended, BASELINE_KEY}, found, complete=True, limit=10)
    assert changes.new == [(mart, MART)] and changes.gone == [ended] and changes.more == 0
    assert compare({stg, ended}, found, complete=False, limit=10).gone == []
    capped = compare(set(), found, complete=True, limit=1)
    assert [key for key, _ in capped.new] == [mart] and capped.more == 1  # by dataset name: mart before stg


def test_one_alert_per_tag_and_dataset_with_the_path_of_each_new_column() -> None:
    second = column("mart.orders", "contact", (hop("stg.customers", "email"), hop("mart.orders", "contact")))
    when = datetime(2026, 12, 5, 12, tzinfo=UTC)
    alerts = exposure_alerts([MART, STG, second], when, depth=5, max_columns=1)
    assert [(a["dataset"]["name"], a["kind"], a["severity"]) for a in alerts] == [
        ("mart.orders", "sensitiveExposure", "UNKNOWN"), ("stg.customers", "sensitiveExposure", "UNKNOWN")]
    mart = alerts[0]
    assert mart["exposure"]["columnsTruncated"] and mart["impactTruncated"]
    (listed,) = mart["exposure"]["columns"]  # nearest first, then by name
    assert listed["field"] == "contact"
    assert listed["origin"] == {"namespace": "pg://db", "name": "raw.customers", "field": "email"}
    assert [(h["name"], h["field"], h["transformation"], h["jobs"]) for h in listed["path"]] == [
        ("stg.customers", "email", "DIRECT/IDENTITY", [{"namespace": "pg://db", "name": "stage"}]),
        ("mart.orders", "contact", "DIRECT/IDENTITY", [{"namespace": "pg://db", "name": "stage"}])]
    assert mart["job"] == {"namespace": "pg://db", "name": "stage"}  # the writer of the last hop
    assert mart["eventTime"] == "2026-12-05T12:00:00Z" and mart["changes"] == []
    assert _round_trip("schema_drift_alert", mart) == mart  # the alert topic's schema takes it
    assert len({a["alertId"] for a in alerts}) == 2
    assert exposure_alerts([STG], datetime(2026, 12, 6, tzinfo=UTC), 5, 10)[0]["alertId"] != alerts[1]["alertId"]


def test_an_exposure_alert_reads_as_one_for_an_operator() -> None:
    (alert,) = exposure_alerts([MART], datetime(2026, 12, 5, tzinfo=UTC), 5, 10)
    text = format_alert(alert)
    assert text.splitlines()[0] == ("[pii] pg://db mart.orders is not cleared for pii and now receives it in 1 "
                                    "columns (detected 2026-12-05T00:00:00Z)")
    assert ("email                          from pg://db raw.customers.email: stg.customers.email (DIRECT/IDENTITY, "
            "stage) → mart.orders.email (DIRECT/IDENTITY, mart)") in text



def test_a_baseline_holds_only_for_the_settings_it_was_taken_with() -> None:
    config = comparison_config(("PII", "gdpr"), False, 10)
    record = json.dumps({"at": "2026-12-05T00:00:00+00:00", "config": config}).encode()
    assert _baseline_config(record) == comparison_config(("gdpr", "pii"), False, 10)
    assert _baseline_config(record) != comparison_config(("pii",), False, 10)  # a tag removed (or added)
    assert _baseline_config(record) != comparison_config(("pii", "gdpr"), True, 10)
    assert _baseline_config(b'{"at": "x"}') is None and _baseline_config(b"not json") is None
