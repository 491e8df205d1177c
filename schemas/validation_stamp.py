"""Validate once: the header the project's own entry points put on the records they validated. Pure.

Every record the ``EventPublisher`` writes (collector, ``lineage emit``, the bridge, the openlineage-python
transport: all validate with ``validate_event`` before they encode) carries the header ``HEADER`` with ``STAMP``, a
digest of everything that decides what is valid: the code of the validation (``spec``, ``limits``, ``openlineage``,
``partitions``), the project's facet schemas, the project's version, and the openlineage-python version whose
generated model the spec's schemas are built from. The processor (and every replay, which runs its core) skips
``validate_event`` for a record whose stamp equals its own: validation was a third of its core's CPU per realistic
event, and the answer cannot differ. A record stamped under other rules (an older collector during an upgrade, a
topic replayed after the rules changed) or without a stamp (written to the topic by anything else, or republished
by ``lineage dlq redrive``) is validated as before. The stamp is a claim, not a signature: whoever can write the
events topic can claim it, as they could write any other record there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

HEADER = "kafka-lineage-validated"
_HERE = Path(__file__).parent
_RULES = ("spec.py", "limits.py", "openlineage.py", "partitions.py")


def rules_digest(directory: Path = _HERE, client_version: str | None = None) -> bytes:
    """The stamp of the rules in ``directory`` (this package's by default) under openlineage-python
    ``client_version`` (the installed one by default)."""
    digest = hashlib.sha256(f"{version('kafka-lineage')}\0{client_version or version('openlineage-python')}".encode())
    for path in [*(directory / name for name in _RULES), *sorted((directory / "facets").glob("*.json"))]:
        # (an installation without sources stamps their absence: every process of it stamps alike)
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"-") + b"\0")
    return b"v1:" + digest.hexdigest()[:32].encode()


STAMP = rules_digest()
STAMPED = [(HEADER, STAMP)]  # the headers a validated record is produced with (librdkafka takes a list)


def is_stamped(headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None) -> bool:
    """Whether a record's headers (confluent-kafka's list of pairs, or a mapping) say it was validated under the
    rules this process holds."""
    if not headers:
        return False
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return any(name == HEADER and value == STAMP for name, value in pairs)
