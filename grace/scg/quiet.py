"""SCG's profiles run while no other process of the same benchmark compiles.

Design note
-----------
SCG decides by timing each choice at capture time, and most of what it times is host work (a
graph's replay path against the compiled code's launches). A benchmark that compiles several
modes at once (``--compile-together``) runs one mode's profiles beside the others' compilations,
which share the CPU: the same function of VM's, profiled that way in two modes of one run,
timed its graph at 138 and 46 us and its compiled code at 132 and 74 us, and one mode kept 182
of its 190 functions out of graphs where the other kept 23. A user's process compiles alone, so
a benchmark whose profiles share the CPU measures decisions no user would get.

The gate is an ``flock`` on one file that the benchmark's processes share
(``grace.config.scg_quiet_lock``, ``GRACE_SCG_QUIET_LOCK``; empty: no gate, as in a user's
process):

1. A process holds it shared while it compiles (:meth:`QuietGate.compiling`: the benchmark's
   worker, from building the model to the end of its warm-up).
2. Each profile takes it exclusive (:meth:`QuietGate.alone`), so it runs once no other process
   holds it: every other one has compiled, or waits to profile itself. Taking it converts this
   process's own shared hold (``flock`` drops it first, so two processes waiting to profile do
   not wait on each other), and the hold is taken back after.
3. The waits of a process are bounded in total (``grace.config.scg_quiet_wait_s``): a process
   whose compilations outlast it would otherwise hold the others past their time limits. Once
   it is spent, profiles run beside whatever runs, and the decisions say so.
4. The seconds waited (:attr:`QuietGate.waited_s`) are not compile time: the benchmark reports
   them apart and leaves them out of the warm-up's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from typing import Optional

from grace.log import get_logger

log = get_logger("grace.scg")

POLL_S = 0.05  # how often a waiting profile asks for the lock again


class QuietGate:
    """The benchmark's shared lock, as this process holds it."""

    def __init__(self, path: str, wait_budget_s: float) -> None:
        self.path = path
        self.wait_budget_s = wait_budget_s
        self.waited_s = 0.0  # seconds this process's profiles waited for the others
        self.spent = False  # the wait budget ran out: profiles no longer wait
        self._fd: Optional[int] = None
        self._shared = False  # this process is compiling (invariant 1)

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """Held shared for the body: this process compiles (invariant 1)."""
        fcntl.flock(self._file(), fcntl.LOCK_SH)
        self._shared = True
        try:
            yield
        finally:
            self._shared = False
            fcntl.flock(self._file(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self) -> Iterator[bool]:
        """Held exclusive for the body where the budget allows; yields whether it is (invariants 2, 3)."""
        fd = self._file()
        exclusive = not self.spent and self._take_exclusive(fd)
        try:
            yield exclusive
        finally:
            if exclusive:
                fcntl.flock(fd, fcntl.LOCK_SH if self._shared else fcntl.LOCK_UN)

    def _take_exclusive(self, fd: int) -> bool:
        begun = time.monotonic()
        deadline = begun + max(0.0, self.wait_budget_s - self.waited_s)
        try:
            while True:
                try:
                    # converts this process's shared hold: flock drops it before it waits
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(POLL_S)
        finally:
            self.waited_s += time.monotonic() - begun
        self.spent = True
        if self._shared:  # the failed conversion may have dropped the shared hold: take it back
            fcntl.flock(fd, fcntl.LOCK_SH)
        log.warning("SCG: waited %.0f s for the benchmark's other processes to finish compiling; from now on "
                    "this process profiles beside them (GRACE_SCG_QUIET_WAIT_S)", self.waited_s)
        return False


_gates: dict[tuple[str, float], QuietGate] = {}


def gate() -> Optional[QuietGate]:
    """The process's gate where ``grace.config.scg_quiet_lock`` names one, else None."""
    from grace import config
    from grace.option_values import checked

    path = config.scg_quiet_lock
    if not path:
        return None
    key = (path, float(checked("scg_quiet_wait_s")))
    if key not in _gates:
        _gates[key] = QuietGate(path, key[1])
    return _gates[key]


@contextlib.contextmanager
def profiling_alone() -> Iterator[Optional[bool]]:
    """Around one profile: None without a gate, else whether it ran alone."""
    g = gate()
    if g is None:
        yield None
        return
    with g.alone() as exclusive:
        yield exclusive


@contextlib.contextmanager
def compiling() -> Iterator[Optional[QuietGate]]:
    """Around a process's compilation: the gate held shared, if there is one; yields the gate."""
    g = gate()
    if g is None:
        yield None
        return
    with g.compiling():
        yield g
