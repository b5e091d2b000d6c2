"""Tables 2 and 3 from a run's rows (no torch needed).

- ``tables/table2_cgct_coverage.csv``: per workload and mode, the kernels that ran in the
  profiled iterations and the share launched by CUDA graph replays (rows of a run made with
  ``python -m grace.bench --coverage N``), for PT2-CG and the GraCE modes; and the mode's
  compile time with what it adds to PT2-CG's in the same run (warm-up included, as measured).
- ``tables/table3_pi_copy_debug.csv`` (the artifact's name): per workload, for each mode with parameter indirection, the
  bytes PT2-CG copies per replay for the same graphs, the bytes still copied (pointer tables
  included), the pointers written per replay, the graphs that use PI, the peak memory of a
  timed iteration (allocator statistics, which do not see graph pools) and the bytes of the
  CUDA graph pools after timing (where placeholders live), each against PT2-CG's in the same run.

A workload with several rows for a mode (retries) is taken at its last one. Rows may come from
several runs (``python -m grace.report tables23 --also``): a later run's row replaces an
earlier one, each row names its run, and PT2-CG's columns come from PT2-CG's row of that run.
"""

from __future__ import annotations

from typing import Any, Sequence

COVERAGE_MODES = ("pt2-cg", "grace-cgct", "grace-cgct-pi", "grace")


def _latest(rows: Sequence[dict]) -> dict[tuple[str, str], dict]:
    return {(row["workload"], row["mode"]): row for row in rows}


def _pt2_cg_rows(rows: Sequence[dict]) -> dict[tuple[Any, str], dict]:
    """PT2-CG's latest row per run and workload: a mode is compared with PT2-CG of its own run."""
    return {(row.get("run_id"), row["workload"]): row for row in rows if row["mode"] == "pt2-cg"}


def _pt2_cg(baselines: dict[tuple[Any, str], dict], row: dict, key: str) -> Any:
    base = baselines.get((row.get("run_id"), row["workload"]))
    return None if base is None else base.get(key)


def table2(rows: Sequence[dict]) -> list[dict[str, Any]]:
    latest, baselines = _latest(rows), _pt2_cg_rows(rows)
    out = []
    for row in latest.values():
        cov = row.get("coverage")
        if row["mode"] not in COVERAGE_MODES or not cov:
            continue
        out.append({"workload": row["workload"], "mode": row["mode"], "status": row["status"],
                    "iterations": cov["iterations"], "kernels": cov["kernels"], "in_graphs": cov["in_graphs"],
                    "unlinked": cov["unlinked"], "share_in_graphs": round(cov["share"], 4),
                    "compile_s": row.get("compile_s"),
                    "compile_s_over_pt2_cg": _difference(row.get("compile_s"),
                                                         _pt2_cg(baselines, row, "compile_s"))})
    return out


def table3(rows: Sequence[dict]) -> list[dict[str, Any]]:
    latest, baselines = _latest(rows), _pt2_cg_rows(rows)
    out = []
    for row in latest.values():
        pi = row.get("pi")
        if not pi:
            continue
        s = pi["summary"]
        out.append({"workload": row["workload"], "mode": row["mode"], "status": row["status"],
                    "graphs": s["graphs"], "graphs_with_pi": s["graphs_with_pi"],
                    "pi_strategies": pi_strategies(pi.get("graphs") or []),
                    "copy_bytes_pt2_cg": s["copy_bytes_pt2_cg"], "copy_bytes_grace": s["copy_bytes_grace"],
                    "pointers_per_replay": s["pointers_per_replay"],
                    "peak_mem_bytes": row.get("peak_replay_mem_bytes"),
                    "peak_mem_bytes_pt2_cg": _pt2_cg(baselines, row, "peak_replay_mem_bytes"),
                    "graph_pool_bytes": row.get("graph_pool_bytes"),
                    "graph_pool_bytes_pt2_cg": _pt2_cg(baselines, row, "graph_pool_bytes"),
                    "run_id": row.get("run_id")})
    return out


def pi_strategies(graphs: Sequence[dict]) -> str:
    """The strategy each graph with PI got, counted (``ptx:2 prelude:1``); graphs that copy
    every input as PT2-CG does are counted as ``copies``, whatever the reason."""
    counts: dict[str, int] = {}
    for g in graphs:
        name = g["strategy"] if g.get("indirected") else "copies"
        counts[name] = counts.get(name, 0) + 1
    return " ".join(f"{name}:{n}" for name, n in sorted(counts.items()))


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 3)
