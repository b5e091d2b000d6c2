"""``python -m grace.report.runs_side_by_side ROWS_A ROWS_B``: one workload and mode in two runs.

A speedup is a ratio of modes timed in one run, interleaved (:mod:`grace.report.paired`). This is
the other question: does a run time the same call as another run does? The replay map's rows,
for instance, are to time what a run without its layer phase times (the sweep, or a plain
reference run on the same machine). Per (workload, mode) in both runs' rows, each run's median
and p10-p90 of the per-iteration samples, and the second median over the first: a check of the
harness between runs, never a speedup. Diagnostic, written from the raw rows: nothing is kept.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from grace.bench.results import read_rows
from grace.report.records import format_rows


@dataclass(frozen=True)
class Side:
    """One run's per-iteration samples of one (workload, mode): their median and p10-p90."""

    median: float
    p10: float
    p90: float
    samples: int


@dataclass(frozen=True)
class Pair:
    workload: str
    mode: str
    first: Side
    second: Side

    @property
    def ratio(self) -> float:
        """The second run's median over the first's."""
        return self.second.median / self.first.median


def _side(row: dict[str, Any]) -> Optional[Side]:
    """A row's per-iteration summary, or None where it has no timed samples (a failed mode)."""
    summary = row.get("iter_us")
    if row.get("status") != "ok" or not summary or not summary.get("median"):
        return None
    return Side(summary["median"], summary["p10"], summary["p90"], len(row.get("samples_us") or []))


def pairs(first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]],
          workloads: Optional[set[str]] = None, modes: Optional[set[str]] = None) -> list[Pair]:
    """Each (workload, mode) with timed samples in both runs, in the first run's order; the last
    row of a (workload, mode) stands where a resumed run wrote it twice."""
    def by_key(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], Side]:
        out: dict[tuple[str, str], Side] = {}
        for row in rows:
            key = (row.get("workload", ""), row.get("mode", ""))
            if (workloads and key[0] not in workloads) or (modes and key[1] not in modes):
                continue
            side = _side(row)
            if side is not None:
                out[key] = side
        return out

    a, b = by_key(first), by_key(second)
    return [Pair(w, m, a[(w, m)], b[(w, m)]) for (w, m) in a if (w, m) in b]


def render(found: list[Pair], first_name: str, second_name: str) -> str:
    def cell(side: Side) -> str:
        return f"{side.median:,.1f} ({side.p10:,.1f}-{side.p90:,.1f})"

    table = format_rows([{"workload": p.workload, "mode": p.mode, "first: median (p10-p90)": cell(p.first),
                          "second: median (p10-p90)": cell(p.second), "second/first": f"{p.ratio:.3f}"}
                         for p in found]) if found else "no (workload, mode) has timed samples in both runs"
    return "\n".join([f"first: {first_name}", f"second: {second_name}",
                      "(per-iteration us; two runs, not interleaved: a check of the harness, not a speedup)", table])


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grace.report.runs_side_by_side", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=Path, help="the first run's rows.jsonl")
    parser.add_argument("second", type=Path, help="the second run's rows.jsonl")
    parser.add_argument("--workloads", default="", help="comma-separated; default: every one in both")
    parser.add_argument("--modes", default="", help="comma-separated; default: every one in both")
    args = parser.parse_args(argv)
    try:
        first, second = read_rows(args.first), read_rows(args.second)
    except ValueError as e:  # no such file, or a line that is not a row
        print(f"runs_side_by_side: {e}", file=sys.stderr)
        return 2
    chosen = [set(filter(None, s.split(","))) or None for s in (args.workloads, args.modes)]
    found = pairs(first, second, *chosen)
    print(render(found, str(args.first), str(args.second)))
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
