"""``python -m grace.report figure10|figure11``: draw a figure from a run's rows, print its speedups.

Exit status 2, with one line on stderr, when there is no run to draw from (or no matplotlib),
so that ``make figures`` before ``make experiments`` says what to do instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import Sequence

from grace.log import get_logger
from grace.paths import FIGURES_DIR, RESULTS_DIR

FIGURES = ("figure10", "figure11")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grace.report", description=__doc__.splitlines()[0])
    p.add_argument("figure", choices=FIGURES)
    p.add_argument("--experiment", default="single_gpu",
                   help="results/raw/<experiment>/ (default: %(default)s)")
    p.add_argument("--run-id", default=None, help="default: the run latest.txt names")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR,
                   help="holds raw/ (input) and processed/ (csv output); default: %(default)s")
    p.add_argument("--figures-dir", type=Path, default=FIGURES_DIR, help="default: %(default)s")
    return p.parse_args(argv)


def import_figures() -> ModuleType:
    """grace.report.figures, or a one-line reason (matplotlib missing from this interpreter)."""
    try:
        from grace.report import figures
    except ModuleNotFoundError as e:
        print(f"grace.report: {e.name} is not installed for {sys.executable}; "
              "run `make setup` or set PYTHON to an interpreter that has it", file=sys.stderr)
        raise SystemExit(2) from None
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    get_logger("grace.report")  # configures the grace logger (GRACE_LOGS=info to see more)
    figures = import_figures()
    try:
        rows = figures.load_run(args.experiment, args.run_id, args.results_dir)
    except figures.ReportError as e:
        print(f"grace.report: {e}", file=sys.stderr)
        return 2
    draw = figures.figure10 if args.figure == "figure10" else figures.figure11
    modes = (figures.FIG10_MODES if args.figure == "figure10"
             else {figures.PT2_CG: "PT2-CG", **figures.FIG11_MODES})
    for path in draw(rows, args.figures_dir, args.results_dir / "processed"):
        print(f"wrote {path}")
    print()
    print(f"speedup over PT2-NoCG ({rows[0].get('experiment', '?')}, run {rows[0].get('run_id', '?')}):")
    print(figures.speedup_table(rows, modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
