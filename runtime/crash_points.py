"""Named points where a component can be made to die on purpose, for fault campaigns.

A setting such as ``outputs-sent=0.02,before-commit=1`` gives each named point the probability (per pass) that the
component SIGKILLs itself there, after saying so on its log: the only way to crash a process reliably *between* two
writes of one batch, where outside signals land by chance. Unset, no point does anything but one dict lookup.
"""

from __future__ import annotations

import logging
import os
import random
import signal
from collections.abc import Callable, Collection, Mapping

log = logging.getLogger(__name__)


def parse_crash_points(text: str, known: Collection[str]) -> dict[str, float]:
    """``name=probability,...`` → {name: probability}; ValueError names what is wrong."""
    points: dict[str, float] = {}
    for part in filter(None, (item.strip() for item in text.split(","))):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in known:
            raise ValueError(f"unknown crash point {name!r}; known: {', '.join(sorted(known))}")
        try:
            probability = float(value) if value.strip() else 1.0
        except ValueError:
            raise ValueError(f"crash point {name}: {value!r} is not a probability") from None
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"crash point {name}: probability {probability} is not between 0 and 1")
        points[name] = probability
    return points


class CrashPoints:
    def __init__(self, points: Mapping[str, float], component: str, rng: random.Random | None = None) -> None:
        self.points, self.component = dict(points), component
        self._rng = rng or random.Random()

    def reach(self, name: str, prepare: Callable[[], object] | None = None) -> None:
        """Die here with the point's probability; ``prepare`` first (e.g. put what is produced on the broker)."""
        probability = self.points.get(name)
        if probability and self._rng.random() < probability:
            if prepare is not None:
                prepare()
            log.critical("crash point %s: killing this %s", name, self.component)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
