"""`lineage replay` offsets, `lineage dlq tail` over records that are not dead letters, `lineage collector --port`:
the pure parts, with fake Kafka consumers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from kafka_lineage.app import cli
from kafka_lineage.replay import local as replay
from kafka_lineage.runtime import tail
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.schemas.wire import WireFormatError
from tests.unit.kafka_fakes import FakeMessage


def test_times_before_the_epoch_are_the_epoch() -> None:
    assert replay.parse_moment("0001-01-01T00:00:00Z", "--from") == 0
    assert replay.parse_moment("1969-12-31T23:59:59+00:00", "--to") == 0
    assert replay.parse_moment("1970-01-01T00:00:01Z", "--from") == 1000
    assert replay.parse_moment("earliest", "--from") is None
    assert replay.parse_moment("9999-12-31T23:59:59Z", "--from") == 253_402_300_799_000


class FakeConsumer:
    """Two partitions; offsets_for_times answers from ``found`` (-1: no record at or after the time)."""

    def __init__(self, found: dict[int, int]) -> None:
        self.found = found

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None, 1: None})})

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        assert all(tp.offset >= 0 for tp in partitions), "a negative time is refused by the broker"
        return [TopicPartition(tp.topic, tp.partition, self.found[tp.partition]) for tp in partitions]


def test_no_record_at_or_after_the_time_means_the_end_of_the_partition() -> None:
    high = {0: 10, 1: 7}
    consumer: Any = FakeConsumer({0: 4, 1: -1})
    assert replay._offsets(consumer, "t", 123, lambda _p: OFFSET_BEGINNING, high) == {0: 4, 1: 7}
    assert replay._offsets(consumer, "t", None, lambda _p: OFFSET_BEGINNING, high) == {0: OFFSET_BEGINNING,
                                                                                        1: OFFSET_BEGINNING}


class FakeTailConsumer:
    def __init__(self, _config: dict[str, Any]) -> None:
        self.messages = [FakeMessage(0, 0, b"garbage"), FakeMessage(0, 1, b"good")]
        self.position_at = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None}, error=None)})

    def get_watermark_offsets(self, _tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, 2

    def assign(self, _partitions: list[TopicPartition]) -> None:
        pass

    def poll(self, _timeout: float) -> FakeMessage | None:
        if not self.messages:
            return None
        self.position_at += 1
        return self.messages.pop(0)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.position_at) for tp in partitions]

    def close(self) -> None:
        pass


class FakeCodec:
    def __init__(self, *_args: Any) -> None:
        pass

    def decode(self, payload: bytes) -> dict[str, Any]:
        if payload != b"good":
            raise WireFormatError("bad-magic-byte", "first byte is 0x67, not the Confluent magic byte 0x00")
        return {"ok": True}


def test_tail_reports_a_record_it_cannot_decode_and_goes_on(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setattr(tail, "reading_consumer", lambda _clients, _purpose: FakeTailConsumer({}))
    monkeypatch.setattr(tail, "AvroCodec", FakeCodec)
    clients = ClientSettings.from_env({"LINEAGE_STATE_DIR": str(tmp_path)})
    unreadable: list[tuple[int, int, str]] = []
    records = list(tail.tail(clients, "dlq", "dead_letter", 20, False,
                             lambda p, o, exc: unreadable.append((p, o, exc.error_class))))
    assert records == [{"ok": True}] and unreadable == [(0, 0, "bad-magic-byte")]
    with pytest.raises(WireFormatError):  # without a handler (the sinks' own use): as before
        list(tail.tail(clients, "dlq", "dead_letter", 20, False))


@pytest.mark.parametrize("port", ["70000", "-1", "0"])
def test_collector_port_flag_out_of_range_is_one_line(port: str, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no ./lineage.yaml
    monkeypatch.delenv("LINEAGE_CONFIG", raising=False)
    assert cli.main(["collector", "--port", port]) == 1
    assert capsys.readouterr().err == f"lineage: --port: {port} is not a valid TCP port\n"
