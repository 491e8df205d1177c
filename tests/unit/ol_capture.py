"""In-memory openlineage-python transport for unit tests: keeps each emitted event as its JSON dict."""

from __future__ import annotations

import json
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde
from openlineage.client.transport.transport import Transport


class CaptureTransport(Transport):
    kind = "capture"

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(json.loads(Serde.to_json(event)))


def capturing_client() -> tuple[OpenLineageClient, CaptureTransport]:
    transport = CaptureTransport()
    return OpenLineageClient(transport=transport), transport
