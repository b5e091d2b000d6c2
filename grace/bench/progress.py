"""A dependency-free progress bar on stderr (a line per update when stderr is not a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str = "bench", width: int = 30):
        self.total = max(total, 1)
        self.done = 0
        self.label = label
        self.width = width
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()

    def advance(self, steps: int = 1, note: str = "") -> None:
        self.done = min(self.done + steps, self.total)
        frac = self.done / self.total
        elapsed = time.monotonic() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        bar = "#" * int(frac * self.width)
        line = (f"[{self.label}] [{bar:<{self.width}}] {self.done}/{self.total} "
                f"{elapsed:5.0f}s elapsed, ~{eta:4.0f}s left  {note}")
        if self.tty:
            sys.stderr.write("\r" + line[:160].ljust(160))
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
