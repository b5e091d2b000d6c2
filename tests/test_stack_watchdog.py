"""The tensor-parallel runner's stack dumps (``grace.tp.stack_watchdog``): they show a busy
thread's Python stack while it runs, stop when cancelled, and are taken with the GIL held."""

from __future__ import annotations

import io
import threading
import time

import pytest

from grace.tp.stack_watchdog import StackWatchdog, format_stacks


def _marker_busy_loop(stop: threading.Event) -> None:
    """Pure Python work that keeps pushing and popping frames, as a compiling rank does."""
    while not stop.is_set():
        sum(i * i for i in range(200))


def _wait_for(predicate, limit_s: float = 20.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_dumps_show_a_busy_thread_and_stop_when_cancelled() -> None:
    stop = threading.Event()
    busy = threading.Thread(target=_marker_busy_loop, args=(stop,), name="busy-rank")
    busy.start()
    out = io.StringIO()
    watchdog = StackWatchdog(0.02, stream=out).start()
    try:
        assert _wait_for(lambda: out.getvalue().count("grace.tp: stacks at") >= 3)
    finally:
        watchdog.cancel()
        stop.set()
        busy.join()
    text = out.getvalue()
    assert "Thread busy-rank" in text and "_marker_busy_loop" in text
    assert "grace-stack-watchdog" not in text  # its own stack is left out
    after_cancel = len(text)
    time.sleep(0.1)
    assert len(out.getvalue()) == after_cancel


def test_format_stacks_leaves_out_the_calling_thread_and_shows_the_others() -> None:
    seen = {}
    def probe() -> None:
        seen["text"] = format_stacks("title")
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert seen["text"].startswith("title\n")
    assert "test_format_stacks_leaves_out_the_calling_thread_and_shows_the_others" in seen["text"]  # the main thread's
    assert "probe" not in seen["text"]


def test_a_nonpositive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s must be positive"):
        StackWatchdog(0)
