"""Order statistics for timing samples (no numpy needed): used by the benchmark, the
reports and SCG's profiling."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100], as numpy's default."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": percentile(values, 50),
        "p10": percentile(values, 10),
        "p90": percentile(values, 90),
        "min": min(values),
        "max": max(values),
    }


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """``numerator[r] / denominator[r]`` per sample, over the common prefix: samples of two modes
    taken in the same interleaved round pair up, so drift of the machine cancels."""
    return [a / b for a, b in zip(numerator, denominator)]


def median_ratio_interval(numerator: Sequence[float], denominator: Sequence[float], confidence: float = 0.9,
                          resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A ``confidence`` interval of ``median(numerator) / median(denominator)`` by a paired
    bootstrap over rounds: the same rounds are drawn for both, so that drift shared by a round
    cancels as in :func:`paired_ratios`. Seeded, so a report reads the same every time.

    It says whether a ratio of medians that moves by a few percent is resolved by the rounds: a
    per-sample spread of +-20% still gives a narrow interval over hundreds of rounds, and a wide
    one says more rounds (or iterations per sample) are needed. Each mode's samples come from
    one worker process, so what differs between processes is outside it."""
    import random

    n = min(len(numerator), len(denominator))
    if n == 0:
        raise ValueError("an interval of no samples")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        rounds = [rng.randrange(n) for _ in range(n)]
        ratios.append(percentile([numerator[r] for r in rounds], 50) / percentile([denominator[r] for r in rounds], 50))
    tail = (1 - confidence) / 2 * 100
    return percentile(ratios, tail), percentile(ratios, 100 - tail)
