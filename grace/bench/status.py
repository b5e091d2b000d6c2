"""Where a resumable run stands: per workload, its rows, the calls that cut it, or nothing yet.

A sweep of the 25 workloads takes many ten-minute calls (``scripts/run_single_gpu_experiments.sh``
with ``STOP_AFTER``), and what each call left is spread over ``rows.jsonl`` and
``attempts.jsonl``. ``python -m grace.bench.status --run-id R`` reads both the way
``--resume`` does (:func:`grace.bench.targets.pending`) and says, for each workload of the run's
list, one of:

- ``done``: a row for every mode it runs in, each ``ok`` (with ``K of N rounds`` where
  ``--end-after`` left rounds out);
- ``done, N failed``: a row for every mode, some of them ``error``, ``timeout`` or
  ``mismatch`` (named; ``--retry`` runs them again);
- ``cut Nx``: started N times and never finished (a call's deadline), run after the others;
- ``not started``.

It ends with the counts and the GPU time the finished workloads took (``workload_wall_s``,
their compilation and timing in all modes): what is left, and, given an earlier run's wall
times (``--walls-from``, as the runner takes them: :mod:`grace.bench.walls`), about how long the
rest takes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from grace.bench import walls
from grace.bench.configs import ConfigError, resolve
from grace.bench.modes import DEFAULT_MODES, Mode, parse_modes
from grace.bench.targets import Target, cut_attempts, latest_rows, modes_for
from grace.paths import RESULTS_DIR


@dataclass(frozen=True)
class WorkloadStatus:
    """One workload's standing in a run."""

    workload: str
    state: str  # done | failed | cut | not started
    detail: str  # the failed modes' statuses, or how many times it was cut
    wall_s: float | None  # its finished rows' workload_wall_s


def statuses(targets: list[Target], modes: list[Mode], out_dir: Path) -> list[WorkloadStatus]:
    """Each target's standing in the run at ``out_dir``, in the list's order."""
    latest = latest_rows(out_dir)
    cuts = cut_attempts(out_dir)
    out = []
    for target in targets:
        name = target.workload.name
        rows = [latest.get((name, m.name)) for m in modes_for(target, modes)]
        if rows and all(rows):
            failed = [f"{r['mode']}: {r['status']}" for r in rows if r["status"] != "ok"]
            wall = max((r.get("workload_wall_s") or 0.0 for r in rows), default=0.0) or None
            short = [r["rounds"] for r in rows if r.get("rounds") and r["rounds"]["timed"] < r["rounds"]["planned"]]
            # where --end-after left rounds out to write the rows in time
            rounds = [f"{short[0]['timed']} of {short[0]['planned']} rounds"] if short else []
            out.append(WorkloadStatus(name, "failed" if failed else "done", ", ".join(failed + rounds), wall))
        elif cuts[name] > 0:
            out.append(WorkloadStatus(name, "cut", f"{cuts[name]}x", None))
        else:
            out.append(WorkloadStatus(name, "not started", "", None))
    return out


def report(found: list[WorkloadStatus], run: str, env: str = "", expected: dict[str, float] | None = None,
           expected_from: str = "") -> str:
    """The table and its summary, as printed; ``env`` is what the sweep script needs besides
    ``RUN_ID`` to go on with this run (its experiment, workloads and modes where not the default);
    ``expected``: the wall times of run ``expected_from``, shown with a ``~`` for those left."""
    lines = [f"{'workload':<14} {'state':<12} {'wall s':>8}  detail"]
    left = [s.workload for s in found if s.state in ("cut", "not started")]
    for s in found:
        wall = (f"{s.wall_s:,.0f}" if s.wall_s is not None else
                f"~{expected[s.workload]:,.0f}" if expected and s.workload in left and s.workload in expected else "")
        lines.append(f"{s.workload:<14} {s.state:<12} {wall:>8}  {s.detail}")
    count = {state: sum(s.state == state for s in found) for state in ("done", "failed", "cut", "not started")}
    timed = [s.wall_s for s in found if s.wall_s is not None]
    took = (f"the finished ones took {sum(timed) / 3600:.2f} GPU-hours" +
            (f" ({len(timed)} of them timed)" if len(timed) < count["done"] + count["failed"] else "")
            if timed else "no finished one's wall time recorded")
    rest = walls.seconds_left(expected or {}, left) if left else None
    if rest is not None:
        took += f"; the rest about {rest / 3600:.2f} GPU-hours by {expected_from}'s wall times"
    lines.append(f"run {run}: {count['done'] + count['failed']} of {len(found)} workloads have rows "
                 f"({count['failed']} with failed modes), {count['cut']} cut by a call's deadline, "
                 f"{count['not started']} not started; {took}")
    if count["cut"] + count["not started"]:
        lines.append(f"to go on: {env}RUN_ID={run} STOP_AFTER=420 bash scripts/run_single_gpu_experiments.sh")
    if count["failed"]:
        lines.append(f"to run the failed ones again in every mode: {env}RETRY=error,timeout,mismatch RUN_ID={run} "
                     "bash scripts/run_single_gpu_experiments.sh")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grace.bench.status", description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--experiment", default="single_gpu")
    parser.add_argument("--workloads", default="single_gpu_25", help="the run's --workloads (default: %(default)s)")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help="the run's --modes (default: the sweep's)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--walls-from", default=None, metavar="EXP/RUN",
                        help="an earlier run of these workloads, whose wall times say about how long the rest takes")
    args = parser.parse_args(argv)
    out_dir = args.results_dir / "raw" / args.experiment / args.run_id
    if not out_dir.is_dir():
        packed = out_dir.with_name(out_dir.name + ".tar.xz")
        hint = (f" (packed: `python -m grace.report.archive restore {out_dir}` unpacks it)"
                if packed.is_file() else "")
        print(f"grace.bench.status: no run {args.run_id} in {out_dir.parent}{hint}", file=sys.stderr)
        return 2
    try:
        targets, modes = resolve(args.workloads), parse_modes(args.modes)
        expected = walls.read(args.walls_from, args.results_dir) if args.walls_from else None
    except (ConfigError, ValueError) as e:
        print(f"grace.bench.status: {e}", file=sys.stderr)
        return 2
    defaults = {"EXPERIMENT": "single_gpu", "WORKLOADS": "single_gpu_25", "MODES": ",".join(DEFAULT_MODES)}
    given = {"EXPERIMENT": args.experiment, "WORKLOADS": args.workloads, "MODES": args.modes}
    env = "".join(f"{k}={v} " for k, v in given.items() if v != defaults[k])
    print(report(statuses(targets, modes, out_dir), args.run_id, env, expected, args.walls_from or ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
