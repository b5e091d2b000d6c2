"""How long each workload took in an earlier run, so that a call of limited time starts only the
workloads that fit in it.

A sweep on one GPU goes on over many calls of ten minutes. With ``--stop-after`` alone, a call
starts workloads until a fixed time before its end whatever they take: a long one started late
is cut by the call's deadline and compiles again from the start in a later call, the first
attempt's minutes wasted, while a short one that would have fitted waits. Given each workload's
wall time in an earlier run of the same workloads (``workload_wall_s`` in its rows, compilation
of every mode and timing included), the runner skips for this call a workload that would not
end by ``--end-after`` and goes on with the next one that would. The first workload of a call
starts whatever its wall time, since no later call has more time for it, unless the call began
with other work (``--walls-strict``): then a later call has more, and only workloads whose wall
time is known and fits start.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Iterable

from grace.bench import results

MARGIN = 1.15  # an earlier run's wall times, scaled up: the same workload's varies from run to run


def read(spec: str, results_dir: Path) -> dict[str, float]:
    """``EXPERIMENT/RUN`` -> each workload's longest ``workload_wall_s`` in that run's rows (a
    run packed into its ``.tar.xz`` is read through :mod:`grace.report.archive`). ValueError
    where the spec is not of that form, the run is in neither form, or no row has a wall time."""
    from grace.report import archive

    experiment, _, run_id = spec.partition("/")
    if not run_id or "/" in run_id:
        raise ValueError(f"--walls-from {spec!r}: expected EXPERIMENT/RUN, e.g. single_gpu/20261127-s25-sweep")
    root = results_dir / "raw" / results.check_name("--walls-from's experiment", experiment)
    folder = archive.resolve(root, results.check_name("--walls-from's run", run_id))
    if folder is None:
        raise ValueError(f"--walls-from {spec!r}: no run {run_id} under {root} (nor its archive)")
    walls: dict[str, float] = {}
    for row in results.read_rows(folder / "rows.jsonl"):
        wall = row.get("workload_wall_s")
        if isinstance(wall, (int, float)) and wall > 0:
            walls[row["workload"]] = max(walls.get(row["workload"], 0.0), float(wall))
    if not walls:
        raise ValueError(f"--walls-from {spec!r}: no row there records a workload's wall time")
    return walls


def fits(expected_s: float, left_s: float) -> bool:
    """Whether a workload that took ``expected_s`` before ends within ``left_s``, with a margin."""
    return expected_s * MARGIN <= left_s


def seconds_left(expected: dict[str, float], workloads: Iterable[str]) -> float | None:
    """The earlier run's wall times of ``workloads`` summed, a workload it lacks counted at the
    median of those it has; None without an earlier run."""
    if not expected:
        return None
    typical = median(expected.values())
    return sum(expected.get(name, typical) for name in workloads)
