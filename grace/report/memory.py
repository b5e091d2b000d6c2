"""Device memory per workload, GraCE against PT2-CG: a timed iteration's peak and the graphs' pools.

A row of the single-GPU sweep carries two memory figures (``grace.bench.worker``): the peak of
the caching allocator's allocated bytes over the timed iterations (``peak_replay_mem_bytes``)
and the bytes of every CUDA graph pool's segments at the end (``graph_pool_bytes``). The first
does not count a recorded graph's memory, which the tree hands out without allocating; the
second holds it. So a graph SCG keeps out moves its memory from the pool to the peak: judged on
either figure alone, a kept-out graph looks like a cost on one and a saving on the other. Their
sum is what the iteration holds on the device, and the verdict here is on it; both parts stay in
the table.

``python -m grace.report memory`` writes ``results/processed/memory.csv`` and ``memory.md``.
No torch here.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from grace.report.figures import index_rows, workloads_in_order

COLUMNS = ("workload", "grace_peak_mb", "grace_pool_mb", "grace_total_mb", "pt2_cg_peak_mb", "pt2_cg_pool_mb",
           "pt2_cg_total_mb", "pt2_nocg_peak_mb", "total_over_pt2_cg", "graphs_grace", "graphs_pt2_cg", "verdict")
NO_LARGER = "no larger"
WITHIN = "within 0.5%"
# How far above PT2-CG's a total still counts as equal: the same mode's pools move between runs by
# more than this (docs/pi.md: PT2-CG's DGPT2 6.07 and 6.40 GB), and a peak by a few hundred KB.
TOLERANCE = 0.005


def _mb(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value / 1e6, 1)


def _parts(row: Optional[dict]) -> tuple[Optional[int], Optional[int]]:
    if row is None:
        return None, None
    return row.get("peak_replay_mem_bytes"), row.get("graph_pool_bytes")


def records(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One record per workload with GraCE and PT2-CG rows that both measured their memory."""
    index = index_rows(rows)
    out = []
    for workload in workloads_in_order(rows):
        grace, cg, nocg = (index.get((workload, m)) for m in ("grace", "pt2-cg", "pt2-nocg"))
        (g_peak, g_pool), (c_peak, c_pool) = _parts(grace), _parts(cg)
        if None in (g_peak, g_pool, c_peak, c_pool) or not c_peak:
            continue  # a mode that raised before its summary, or a run on the CPU
        g_total, c_total = g_peak + g_pool, c_peak + c_pool
        ratio = g_total / c_total
        out.append({
            "workload": workload,
            "grace_peak_mb": _mb(g_peak), "grace_pool_mb": _mb(g_pool), "grace_total_mb": _mb(g_total),
            "pt2_cg_peak_mb": _mb(c_peak), "pt2_cg_pool_mb": _mb(c_pool), "pt2_cg_total_mb": _mb(c_total),
            "pt2_nocg_peak_mb": _mb(_parts(nocg)[0]),
            "total_over_pt2_cg": round(ratio, 3),
            "graphs_grace": grace.get("cuda_graphs"), "graphs_pt2_cg": cg.get("cuda_graphs"),
            "verdict": _verdict(ratio),
        })
    return out


def _verdict(ratio: float) -> str:
    if ratio <= 1.0:
        return NO_LARGER
    return WITHIN if ratio <= 1.0 + TOLERANCE else f"{(ratio - 1) * 100:.1f}% larger"


def markdown(recs: Sequence[dict], run_id: str) -> str:
    """The table, with the run it came from and how many workloads hold no more than PT2-CG."""
    head = ("| workload | GraCE peak + pool MB | PT2-CG peak + pool MB | PT2-NoCG peak MB | GraCE / PT2-CG "
            "| graphs GraCE / PT2-CG | verdict |")
    lines = [f"Run `{run_id}`: a timed iteration's peak allocated memory plus the CUDA graph pools' segments.", "",
             head, "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        nocg = "" if r["pt2_nocg_peak_mb"] is None else f"{r['pt2_nocg_peak_mb']:,.1f}"
        lines.append(
            f"| {r['workload']} | {r['grace_peak_mb']:,.1f} + {r['grace_pool_mb']:,.1f} = {r['grace_total_mb']:,.1f} "
            f"| {r['pt2_cg_peak_mb']:,.1f} + {r['pt2_cg_pool_mb']:,.1f} = {r['pt2_cg_total_mb']:,.1f} "
            f"| {nocg} | {r['total_over_pt2_cg']:.3f} | {r['graphs_grace']} / {r['graphs_pt2_cg']} | {r['verdict']} |")
    held = sum(1 for r in recs if r["verdict"] == NO_LARGER)
    near = sum(1 for r in recs if r["verdict"] == WITHIN)
    lines += ["", f"{held} of {len(recs)} workloads hold no more than under PT2-CG, {near} more within "
                  f"{TOLERANCE:.1%} (the same mode's memory moves that much between runs)."]
    return "\n".join(lines) + "\n"
