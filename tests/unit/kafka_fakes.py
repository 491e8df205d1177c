"""A Kafka message as confluent-kafka's consumers hand it out, for unit tests of the code that reads them."""

from __future__ import annotations


class FakeMessage:
    def __init__(self, partition: int, offset: int, value: bytes, key: bytes | None = None,
                 timestamp_ms: int = 1_700_000_000_000) -> None:
        self._partition, self._offset, self._value = partition, offset, value
        self._key, self._timestamp_ms = key, timestamp_ms

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp_ms  # (TIMESTAMP_CREATE_TIME, ms)

    def headers(self) -> None:
        return None
