"""``python -m grace.report.round_position ROWS``: each mode's samples by their place in a round.

The benchmark times its modes in interleaved rounds of ``chunk`` samples each
(:mod:`grace.bench.runner`). A worker whose first samples in a round run slower than its
later ones measures how cold it was after the other modes' turn, not its steady iteration:
without the worker's rewarm (``--rewarm-ms 0``) the first sample of a round ran 1.5 to 3 times
as long as the last. This prints, per (workload, mode), the median of the samples at each place
in the round and the first place's median over the last's, so that a run can show whether its
rounds were warm. Diagnostic of one run, written from its raw rows: nothing is edited or kept.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from grace.bench.results import read_rows


@dataclass(frozen=True)
class RoundPlaces:
    workload: str
    mode: str
    chunk: int  # samples a round
    medians: tuple[float, ...]  # the median of the samples at each place in a round, first place first

    @property
    def first_over_last(self) -> float:
        return self.medians[0] / self.medians[-1]


def round_places(row: dict[str, Any]) -> RoundPlaces | None:
    """A row's samples grouped by their place in a round, or None where its rows do not say how
    many rounds it timed (or it timed fewer than two samples a round)."""
    samples = row.get("samples_us") or []
    rounds = (row.get("rounds") or {}).get("timed")
    if not samples or not rounds:
        return None
    chunk = math.ceil(len(samples) / rounds)
    if chunk < 2:
        return None
    places = [[s for i, s in enumerate(samples) if i % chunk == k] for k in range(chunk)]
    return RoundPlaces(row["workload"], row["mode"], chunk, tuple(statistics.median(p) for p in places if p))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="a run's rows.jsonl")
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.rows)
    except ValueError as e:
        print(f"grace.report.round_position: {e}", file=sys.stderr)
        return 2
    found = [p for p in map(round_places, rows) if p is not None]
    if not found:
        print(f"no row of {args.rows} says how many rounds it timed", file=sys.stderr)
        return 1
    width = max(p.chunk for p in found)
    head = "  ".join(f"{'place ' + str(k + 1):>9}" for k in range(width))
    print(f"{'workload':14} {'mode':20} {head}  first/last   (medians in us of the samples at each place in a round)")
    for p in found:
        cells = "  ".join(f"{m:9.1f}" for m in p.medians)
        print(f"{p.workload:14} {p.mode:20} {cells}  {p.first_over_last:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
