"""The Avro schemas of every topic, shipped as package data in ``schemas/avro/*.avsc``."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """The parsed JSON of ``schemas/avro/<name>.avsc``."""
    text = resources.files("kafka_lineage.schemas").joinpath("avro", f"{name}.avsc").read_text()
    return json.loads(text)


def schema_text(name: str) -> str:
    return json.dumps(load_schema(name))
