"""Faust's Kafka transport with one fix (a partition without a committed offset restarts from its beginning), and the
pipeline's Kafka security settings as Faust credentials.

During table recovery Faust resumes the stream partitions early, discards what the consumer fetches for them, and
afterwards seeks every partition back to its committed offset. aiokafka only seeks when that offset is above 0, so a
partition the group never committed — a worker killed within its first commit interval — kept the position past
the discarded records: a restarted worker silently skipped them (reproduced: 0 of 1,600 backlog records consumed).
Here such partitions (never the tables' changelogs, which recovery positions itself) are sought to their beginning,
which is what ``consumer_auto_offset_reset="earliest"`` promises; dedupe state absorbs what is read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import faust
from aiokafka import TopicPartition
from aiokafka.helpers import create_ssl_context
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    async def seek_to_committed(self) -> Mapping[TP, int]:
        return await self.call_thread(self._seek_to_committed_or_beginning)

    async def _seek_to_committed_or_beginning(self) -> Mapping[TP, int]:
        consumer = self._ensure_consumer()
        committed = await consumer.seek_to_committed()
        changelogs = self.app.tables.changelog_topics
        uncommitted = [TopicPartition(tp.topic, tp.partition) for tp, offset in committed.items()
                       if not offset and tp.topic not in changelogs]
        if uncommitted:
            await consumer.seek_to_beginning(*uncommitted)
        return committed


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


def broker_credentials(kafka_security: Iterable[tuple[str, str]]) -> faust.types.auth.CredentialsT | None:
    """The pipeline's librdkafka security settings (``ClientSettings.kafka_security``) as Faust credentials."""
    settings = dict(kafka_security)
    protocol = settings.get("security.protocol", "PLAINTEXT")
    context = None
    if protocol.endswith("SSL"):
        context = create_ssl_context(cafile=settings.get("ssl.ca.location"),
                                     certfile=settings.get("ssl.certificate.location"),
                                     keyfile=settings.get("ssl.key.location"),
                                     password=settings.get("ssl.key.password"))
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(username=settings["sasl.username"], password=settings["sasl.password"],
                                     mechanism=settings["sasl.mechanism"], ssl_context=context)
    return faust.SSLCredentials(context) if context is not None else None


class App(faust.App):
    """``faust.App`` whose consumer restarts uncommitted partitions from their beginning (see the module doc)."""

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
