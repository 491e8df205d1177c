"""The harnesses' child-process watch (``kafka_lineage_devtools.processes``) with real subprocesses."""

from __future__ import annotations

import sys
import time

import pytest

from kafka_lineage_devtools.processes import (
    ChildExited,
    child_process,
    interrupting_on_child_exit,
    running_children,
    sleep_watching,
    wait_until,
)

# 50 numbered lines, then exit 3 after ``delay`` seconds
DIES = "import sys, time\nfor i in range(50): print(f'line {{i}}', flush=True)\ntime.sleep({delay})\nsys.exit(3)"
LIVES = "import time\nprint('up', flush=True)\ntime.sleep(60)"


def _python(code: str, name: str = "worker", **kwargs):
    return child_process([sys.executable, "-c", code], name, **kwargs)


def _printed_up(_child, output: str) -> bool:
    return "up" in output or "line 0" in output


def test_a_wait_ends_within_a_second_of_an_unexpected_exit_with_the_code_and_the_last_lines() -> None:
    with pytest.raises(ChildExited) as raised, _python(DIES.format(delay=0.5), is_ready=_printed_up) as child:
        started = time.monotonic()
        wait_until(lambda: False, 600, watch=[child])
    waited = time.monotonic() - started
    assert waited < 1.5, waited
    error = raised.value
    assert (error.name, error.code, error.pid) == ("worker", 3, child.process.pid)
    message = str(error)
    assert "worker" in message and "exited with code 3" in message
    assert "line 49" in message and "line 10" in message and "line 9\n" not in message  # the last 40 lines
    assert child not in running_children()


def test_by_default_a_wait_watches_every_running_child() -> None:
    with pytest.raises(ChildExited, match="code 3"), _python(LIVES, "other", is_ready=_printed_up), \
            _python(DIES.format(delay=0.2), is_ready=_printed_up):
        sleep_watching(600)


def test_a_requested_stop_is_not_a_failure() -> None:
    with _python(LIVES, is_ready=_printed_up) as child:
        child.process.kill()  # as the fault suite does: SIGKILL on purpose
        child.process.wait(10)
        sleep_watching(0.5)
        assert wait_until(lambda: 7, 1, watch=[child]) == 7
    assert child.returncode == -9
    with _python(LIVES, is_ready=_printed_up) as child:
        child.process.terminate()
        child.process.wait(10)
    assert child.returncode == -15


def test_a_timeout_is_its_own_error() -> None:
    with _python(LIVES, is_ready=_printed_up) as child:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=r"the sink's output: not within 0\.5 s"):
            wait_until(lambda: False, 0.5, watch=[child], what="the sink's output")
        assert 0.4 < time.monotonic() - started < 1.5
    assert child.returncode == -15  # stopped by the block's end: SIGTERM


def test_a_child_that_ended_by_itself_fails_its_block() -> None:
    with pytest.raises(ChildExited, match="exited with code 3"), _python(DIES.format(delay=0), name="sink"):
        time.sleep(1)  # no wait on the child at all: the block's end still reports it


def test_an_exception_of_the_block_gets_the_dead_childs_story_as_a_note() -> None:
    with pytest.raises(AssertionError) as raised, _python(DIES.format(delay=0), name="sink"):
        time.sleep(1)
        raise AssertionError("no output")
    assert any("sink" in note and "code 3" in note and "line 49" in note for note in raised.value.__notes__)


def test_a_child_that_dies_before_it_is_ready_fails_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(ChildExited, match="code 3"), _python(DIES.format(delay=0),
                                                            is_ready=lambda _child, output: "never" in output):
        pass
    assert time.monotonic() - started < 2


def test_a_child_that_is_never_ready_times_out_with_its_last_lines() -> None:
    with pytest.raises(TimeoutError, match=r"(?s)worker was not ready within 0\.5 s.*\nup"), \
            _python(LIVES, is_ready=lambda _child, output: False, ready_timeout=0.5):
        pass


def test_the_watchdog_interrupts_a_main_thread_waiting_in_its_own_loop() -> None:
    with _python(DIES.format(delay=0.5), name="processor", is_ready=_printed_up) as child:
        started = time.monotonic()
        with pytest.raises(ChildExited, match="processor"), interrupting_on_child_exit():
            time.sleep(60)  # a test's own wait, which knows nothing of its children
        assert time.monotonic() - started < 1.5
    assert child.returncode == 3  # reported once: the block's end does not raise it again


def test_the_watchdog_lets_requested_stops_and_calm_blocks_be() -> None:
    with _python(LIVES, is_ready=_printed_up) as child, interrupting_on_child_exit():
        child.process.kill()
        time.sleep(1)
    with interrupting_on_child_exit():
        time.sleep(0.3)


def test_killing_a_child_that_had_already_died_does_not_hide_its_death() -> None:
    with pytest.raises(ChildExited, match="code 3"), _python(DIES.format(delay=0)) as child:
        child.process.wait(10)
        child.process.kill()  # e.g. the fault suite's SIGKILL, too late


def test_an_exit_the_caller_expects_is_no_failure_for_waits_blocks_or_the_watchdog() -> None:
    def crash_point(code: int, output: str) -> bool:  # as the fault campaign's workers: said so, then died
        return code == 3 and "line 49" in output

    with interrupting_on_child_exit(poll=0.05), \
            _python(DIES.format(delay=0.2), is_ready=_printed_up, expected_exit=crash_point) as child:
        child.process.wait(10)
        sleep_watching(0.5, [child])
        assert child.failure() is None
    assert child.returncode == 3
    with pytest.raises(ChildExited, match="code 3"), \
            _python(DIES.format(delay=0), expected_exit=lambda code, _output: code == 4):
        time.sleep(0.5)
