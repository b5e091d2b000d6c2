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
