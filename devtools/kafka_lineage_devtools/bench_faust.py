"""``python -m kafka_lineage_devtools.bench_faust TOPIC COUNT``: the ceiling Faust sets for ``lineage processor`` here.

One Faust worker, configured like the processor (our ``App`` and credentials, raw serializers, the same batch size
and window), consumes ``COUNT`` records of ``TOPIC`` from its beginning with ``take_events`` and does nothing else:
no decode, no output, no table. It prints one JSON line ``{"events": …, "events_per_s": …, "seconds": …}`` (from the
first batch to the last) and exits. The processor bench runs it on the processor's own backlog right after the
processor, so "processor events/s ÷ bare Faust events/s" is a side-by-side ratio of one run: the share of Faust's
consume path left to the processing itself.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid

import faust
import mode

from kafka_lineage.processors.faust_transport import App, broker_credentials, broker_url
from kafka_lineage.processors.settings import ProcessorSettings
from kafka_lineage.runtime.config import ClientSettings


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m kafka_lineage_devtools.bench_faust TOPIC COUNT", file=sys.stderr)
        return 2
    topic_name, count = argv[0], int(argv[1])
    clients, settings = ClientSettings.from_env(), ProcessorSettings.from_env()
    app = App(f"lineage-bench-faust-{uuid.uuid4().hex[:8]}", broker=broker_url(clients.kafka_bootstrap_servers),
              broker_credentials=broker_credentials(clients.kafka_security), store="memory://",
              value_serializer="raw", key_serializer="raw", consumer_auto_offset_reset="earliest",
              web_enabled=False, datadir=tempfile.mkdtemp(prefix="lineage-bench-faust-"),
              stream_buffer_maxsize=max(4096, settings.batch_size * 4),
              agent_supervisor=mode.CrashingSupervisor)  # a crashed agent ends the process, as in the processor
    topic = app.topic(topic_name, value_serializer="raw", key_serializer="raw")
    seen = {"events": 0, "first": 0.0}

    @app.agent(topic)
    async def count_events(stream: faust.Stream) -> None:
        async for batch in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            if not seen["events"]:
                seen["first"] = time.perf_counter()
            seen["events"] += len(batch)
            if seen["events"] >= count:
                seconds = time.perf_counter() - seen["first"]
                print(json.dumps({"events": seen["events"], "seconds": seconds,
                                  "events_per_s": seen["events"] / seconds}), file=sys.__stdout__, flush=True)
                os._exit(0)  # the figure is out; a graceful Faust shutdown would only add seconds
                # (sys.__stdout__ above: the worker redirects sys.stdout into its logging)

    faust.Worker(app, loglevel="warning", quiet=True).execute_from_commandline()
    return 1  # the worker stopped before it saw COUNT records


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
