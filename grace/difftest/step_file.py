"""The step a child is at, kept in a file, so that the parent can name the step a child died or
hung in: a crash (SIGSEGV in a kernel launcher, an abort in the allocator) leaves no result line,
and a child killed at its timeout none either.

The child writes ``<index> <kind>`` over the file's first bytes before each step (one ``pwrite``,
no flush needed: the kernel has the bytes when the call returns, whatever kills the process
after); the parent reads it once the child has ended without a result.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

# The environment variable through which the parent tells a child where its step file is.
ENV = "GRACE_DIFFTEST_STEP_FILE"
_WIDTH = 48  # an index and a kind's name fit; the padding overwrites a longer line before


class StepWriter:
    """``ProgramRun``'s ``on_step`` in a child: each step's index and kind, before it runs."""

    __slots__ = ("_fd",)

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def __call__(self, index: int, step: Any) -> None:
        os.pwrite(self._fd, f"{index} {step.kind}".ljust(_WIDTH).encode(), 0)


def read_step(path: Path) -> Optional[tuple[int, str]]:
    """The step a child was at when it ended, or None (no file, nothing written yet)."""
    try:
        index, kind = path.read_text().split()
        return int(index), kind
    except (OSError, ValueError):
        return None
