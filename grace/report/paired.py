"""``python -m grace.report.paired ROWS --baseline MODE``: each mode against one baseline mode, from
one interleaved run's rows.

The benchmark runs its modes round by round (``grace.bench.runner``), so sample ``r`` of two
modes was taken seconds apart, under the same state of the machine. As Figures 10 and 11 do
(:mod:`grace.report.figures`), a mode's slowdown is the ratio of its median to the baseline's,
and its spread the percentiles of the paired per-sample ratios, which cancel the drift that
unpaired percentiles would show as noise. A 90% interval of the ratio of medians (a bootstrap
over rounds, paired) says whether the rounds resolve a difference of a few percent; what differs
between worker processes it does not see, and replicas of a mode (``grace~2``) measure that.
Ratios here are mode over baseline: above 1 is slower.
Diagnostic of one run, written from its raw rows: nothing is edited or kept.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from grace.bench.results import measured_together, read_rows
from grace.stats import median_ratio_interval, paired_ratios, percentile


@dataclass(frozen=True)
class Paired:
    workload: str
    mode: str
    samples: int  # paired samples
    ratio: float  # the mode's median over the baseline's
    lo: float  # a 90% interval of that ratio (paired bootstrap over rounds)
    hi: float
    p10: float  # percentiles of the paired per-sample ratios, mode over baseline
    p50: float
    p90: float


def paired(rows: list[dict[str, Any]], baseline: str) -> list[Paired]:
    """Every mode against ``baseline``, per workload, in the rows' order; a mode timed in another
    process than the baseline (rerun in a later call) is left out, as nothing pairs its rounds."""
    timed = {(r["workload"], r["mode"]): r for r in rows if r.get("samples_us")}
    out = []
    for (workload, mode), row in timed.items():
        base_row = timed.get((workload, baseline))
        if base_row is None or mode == baseline or not measured_together(row, base_row):
            continue
        mine, base = row["samples_us"], base_row["samples_us"]
        ratios = paired_ratios(mine, base)
        lo, hi = median_ratio_interval(mine, base)
        out.append(Paired(workload, mode, len(ratios), percentile(mine, 50) / percentile(base, 50), lo, hi,
                          percentile(ratios, 10), percentile(ratios, 50), percentile(ratios, 90)))
    return out


def format_paired(results: list[Paired], baseline: str) -> str:
    lines = [f"{'workload':<14} {'mode':<14} {'samples':>7} {'ratio':>6} {'90% interval':>13} {'p10':>6} {'p50':>6} {'p90':>6}"
             f"   (mode / {baseline}: ratio of medians and its 90% interval by a paired bootstrap; "
             f"p10-p90 of paired ratios; above 1 is slower)"]
    lines += [f"{p.workload:<14} {p.mode:<14} {p.samples:>7} {p.ratio:>6.3f} {p.lo:>6.3f}-{p.hi:<6.3f} "
              f"{p.p10:>6.3f} {p.p50:>6.3f} {p.p90:>6.3f}" for p in results]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="a run's rows.jsonl")
    parser.add_argument("--baseline", required=True, help="the mode every other mode is divided by")
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.rows)
    except ValueError as e:
        print(f"grace.report.paired: {e}", file=sys.stderr)
        return 2
    results = paired(rows, args.baseline)
    if not results:
        print(f"grace.report.paired: no mode beside {args.baseline!r} with samples in {args.rows}", file=sys.stderr)
        return 2
    print(format_paired(results, args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
