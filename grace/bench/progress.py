"""A dependency-free progress bar on stderr (a line per update when stderr is not a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    """``total`` steps (a mode compiled, a round timed). The time left is the elapsed time
    scaled by the steps left, or, once :meth:`expect` has been told, what the run's earlier wall
    times leave: a workload's compilations, which take most of a large one's time, are a few
    steps of many, and the steps' scale read DALLE2's first minutes as a day left."""

    def __init__(self, total: int, label: str = "bench", width: int = 30):
        self.total = max(total, 1)
        self.done = 0
        self.label = label
        self.width = width
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self._expected: tuple[float, float] | None = None  # (seconds left, as of this monotonic time)

    def expect(self, seconds_left: float) -> None:
        """From now, the time left is ``seconds_left`` less the time since."""
        self._expected = (seconds_left, time.monotonic())

    def advance(self, steps: int = 1, note: str = "") -> None:
        self.done = min(self.done + steps, self.total)
        frac = self.done / self.total
        now = time.monotonic()
        elapsed = now - self.start
        if self._expected is not None:
            eta = max(0.0, self._expected[0] - (now - self._expected[1]))
        else:
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
