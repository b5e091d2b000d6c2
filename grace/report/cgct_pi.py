"""Tables 2 and 3 from a run's rows (no torch needed).

- ``tables/table2_cgct_coverage.csv``: per workload and mode, the kernels that ran in the
  profiled iterations and the share launched by CUDA graph replays (rows of a run made with
  ``python -m grace.bench --coverage N``), for PT2-CG and the GraCE modes.
- ``tables/table3_pi_copy.csv``: per workload, for each mode with parameter indirection, the
  bytes PT2-CG copies per replay for the same graphs, the bytes still copied (pointer tables
  included), the pointers written per replay, and the graphs that use PI.
"""

from __future__ import annotations

from typing import Any, Sequence

COVERAGE_MODES = ("pt2-cg", "grace-cgct", "grace-cgct-pi", "grace")


def table2(rows: Sequence[dict]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        cov = row.get("coverage")
        if row["mode"] not in COVERAGE_MODES or not cov:
            continue
        out.append({"workload": row["workload"], "mode": row["mode"], "status": row["status"],
                    "iterations": cov["iterations"], "kernels": cov["kernels"], "in_graphs": cov["in_graphs"],
                    "unlinked": cov["unlinked"], "share_in_graphs": round(cov["share"], 4)})
    return out


def table3(rows: Sequence[dict]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        pi = row.get("pi")
        if not pi:
            continue
        s = pi["summary"]
        out.append({"workload": row["workload"], "mode": row["mode"], "status": row["status"],
                    "graphs": s["graphs"], "graphs_with_pi": s["graphs_with_pi"],
                    "copy_bytes_pt2_cg": s["copy_bytes_pt2_cg"], "copy_bytes_grace": s["copy_bytes_grace"],
                    "pointers_per_replay": s["pointers_per_replay"]})
    return out
