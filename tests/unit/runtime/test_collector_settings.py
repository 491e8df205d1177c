"""The collector's producer linger (LINEAGE_COLLECTOR_LINGER_MS): what reaches librdkafka, and what is refused."""

from __future__ import annotations

import pytest

from kafka_lineage.producers.service.settings import CollectorSettings
from kafka_lineage.runtime.config import ConfigError


def test_collector_producer_lingers_briefly_by_default() -> None:
    # the pipeline's 20 ms would be paid by every one-event request
    assert CollectorSettings.from_env({}).producer_config()["linger.ms"] == "1"


@pytest.mark.parametrize(("raw", "expected"), [("0", "0"), ("0.5", "0.5"), ("20", "20"), ("", "1")])
def test_collector_linger_is_passed_to_the_producer(raw: str, expected: str) -> None:
    settings = CollectorSettings.from_env({"LINEAGE_COLLECTOR_LINGER_MS": raw})
    assert settings.producer_config()["linger.ms"] == expected


@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "1e9", "5ms"])
def test_collector_linger_outside_librdkafkas_range_is_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="LINEAGE_COLLECTOR_LINGER_MS"):
        CollectorSettings.from_env({"LINEAGE_COLLECTOR_LINGER_MS": raw})


def test_collector_access_log_is_off_unless_asked_for() -> None:
    # one INFO line per request cost ~200 µs of a one-event request's ~700; refusals are logged as warnings anyway
    assert CollectorSettings.from_env({}).access_log is False
    assert CollectorSettings.from_env({"LINEAGE_COLLECTOR_ACCESS_LOG": "true"}).access_log is True
    with pytest.raises(ConfigError, match="LINEAGE_COLLECTOR_ACCESS_LOG"):
        CollectorSettings.from_env({"LINEAGE_COLLECTOR_ACCESS_LOG": "sometimes"})
