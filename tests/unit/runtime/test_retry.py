import threading
import time

import pytest

from kafka_lineage.runtime.retry import Backoff, Stopped


def test_delays_double_up_to_the_cap_and_reset() -> None:
    backoff = Backoff(first=0.001, cap=0.004)
    seen = []
    for _ in range(4):
        seen.append(backoff.delay)
        backoff.wait()
    assert seen == [0.001, 0.002, 0.004, 0.004]
    backoff.reset()
    assert backoff.delay == 0.001


def test_a_stop_ends_the_wait_at_once() -> None:
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Stopped):
        Backoff(first=30.0).wait(stop)
    assert time.monotonic() - started < 5
