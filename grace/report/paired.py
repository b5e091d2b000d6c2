"""``python -m grace.report.paired ROWS --baseline MODE``: each mode against one baseline mode,
round by round, from one interleaved run's rows.

The benchmark runs its modes in rounds of ``--chunk`` iterations each (``grace.bench.runner``),
in an order rotated every round, so that drift of the machine reaches every mode alike. A ratio
of two medians over the whole run still mixes in rounds where the machine was slower for
everyone; the ratio of the two modes' medians *within* each round pairs samples taken seconds
apart. This prints, for each workload and mode, the median of those per-round ratios with their
quartiles (the spread a 2% claim has to beat), and the ratio of the runs' tenth percentiles.
Diagnostic of one run, written from its raw rows: nothing is edited or kept.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

DEFAULT_CHUNK = 5  # grace.bench's --chunk default


@dataclass(frozen=True)
class Paired:
    workload: str
    mode: str
    rounds: int
    median: float  # median over rounds of (mode's round median / baseline's round median)
    p25: float
    p75: float
    p10_ratio: float  # the mode's tenth percentile over the baseline's, whole run


def chunk_of(row: dict[str, Any]) -> int:
    """The iterations per round the run used: ``--chunk`` in its command, else the default."""
    found = re.search(r"--chunk[ =](\d+)", row.get("command") or "")
    return int(found.group(1)) if found else DEFAULT_CHUNK


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def paired(rows: list[dict[str, Any]], baseline: str) -> list[Paired]:
    """Per-round ratios of every mode to ``baseline``, per workload, in the rows' order."""
    samples = {(r["workload"], r["mode"]): r for r in rows if r.get("samples_us")}
    out = []
    for (workload, mode), row in samples.items():
        base = samples.get((workload, baseline))
        if base is None or mode == baseline:
            continue
        chunk = chunk_of(row)
        a, b = row["samples_us"], base["samples_us"]
        n = min(len(a), len(b))
        whole = n - n % chunk or n  # a last, partial round is left out, unless it is the only one
        ratios = sorted(statistics.median(a[i:i + chunk]) / statistics.median(b[i:i + chunk])
                        for i in range(0, whole, chunk))
        out.append(Paired(workload, mode, len(ratios), statistics.median(ratios), _quantile(ratios, 0.25),
                          _quantile(ratios, 0.75), _quantile(sorted(a), 0.1) / _quantile(sorted(b), 0.1)))
    return out


def format_paired(results: list[Paired], baseline: str) -> str:
    lines = [f"{'workload':<14} {'mode':<14} {'rounds':>6} {'median ratio':>12} {'p25':>6} {'p75':>6} {'p10 ratio':>9}"
             f"   (ratio: mode / {baseline}, per round; above 1 is slower)"]
    lines += [f"{p.workload:<14} {p.mode:<14} {p.rounds:>6} {p.median:>12.3f} {p.p25:>6.3f} {p.p75:>6.3f} {p.p10_ratio:>9.3f}"
              for p in results]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="a run's rows.jsonl")
    parser.add_argument("--baseline", required=True, help="the mode every other mode is divided by")
    args = parser.parse_args(argv)
    if not args.rows.is_file():
        print(f"grace.report.paired: no rows at {args.rows}", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    results = paired(rows, args.baseline)
    if not results:
        print(f"grace.report.paired: no mode beside {args.baseline!r} with samples in {args.rows}", file=sys.stderr)
        return 2
    print(format_paired(results, args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
