"""Timing the choices for one candidate graph, robustly enough to act on.

Each sample is one call, synchronized before and after, in wall-clock time: what the CPU spends
launching (the cost a graph removes) and what the GPU spends running (the cost a graph's input
copies add) both count, as they do in an iteration of the program. Every choice first runs a
few calls untimed (a graph records on its second call). Then rounds interleave the choices in
rotating order (:func:`grace.scg.choose.schedule`), several calls each, so drift during the
profile (clocks, another process) hits every choice alike; the decision compares medians.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from grace.scg.choose import Choice, schedule


@dataclass(frozen=True)
class ProfileSettings:
    warmup: int = 3  # untimed calls per choice (a graph's first two calls warm up and record)
    rounds: int = 5  # interleaved rounds
    calls: int = 10  # timed calls per choice per round

    def __post_init__(self) -> None:
        if self.warmup < 2 or self.rounds < 1 or self.calls < 1:
            raise ValueError(f"SCG profile needs warmup >= 2, rounds >= 1, calls >= 1; got {self}")


def time_choices(runners: Mapping[Choice, Callable[[], object]], sync: Callable[[], None],
                 settings: ProfileSettings = ProfileSettings(),
                 clock: Callable[[], float] = time.perf_counter) -> dict[Choice, list[float]]:
    """Microseconds per call of each runner; a runner's result is dropped as soon as it returns."""
    for runner in runners.values():
        for _ in range(settings.warmup):
            runner()
    samples: dict[Choice, list[float]] = {choice: [] for choice in runners}
    for choice in schedule(list(runners), settings.rounds):
        runner = runners[choice]
        for _ in range(settings.calls):
            sync()
            start = clock()
            runner()
            sync()
            samples[choice].append((clock() - start) * 1e6)
    return samples
