"""Every thread's Python stack, printed at an interval while a long run lasts.

A rank of a tensor-parallel launch that stalls (in a collective, or in a peer's compile) says
where only if something prints its stack before the launch's deadline kills it.
``faulthandler.dump_traceback_later`` does that from a C thread that walks the other threads'
frames without holding the GIL; when the main thread is running Python at that moment
(compiling, tracing) a frame can be popped under the walk and the process dies of a
segmentation fault (CPython issues 116008, 131580). The stacks here are taken from a Python
thread with the GIL held, through ``sys._current_frames()``, a consistent snapshot: the
dump can be late while a C call keeps the GIL, but it cannot crash the rank it watches.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import TextIO


def format_stacks(title: str) -> str:
    """Every live thread's stack, most recent call last, under ``title``."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    parts = [f"{title}\n"]
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        parts.append(f"Thread {names.get(ident, '?')} ({ident:#x}), most recent call last:\n")
        parts.extend(traceback.format_stack(frame))
        parts.append("\n")
    return "".join(parts)


class StackWatchdog:
    """Prints :func:`format_stacks` to ``stream`` every ``interval_s`` seconds until cancelled."""

    def __init__(self, interval_s: float, stream: TextIO | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"StackWatchdog: interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="grace-stack-watchdog", daemon=True)
        self._started = time.monotonic()

    def start(self) -> StackWatchdog:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Stops the dumps; returns once the watchdog's thread has ended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            elapsed = time.monotonic() - self._started
            self.stream.write(format_stacks(f"grace.tp: stacks at {elapsed:.0f} s"))
            self.stream.flush()
