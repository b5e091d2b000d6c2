"""GraCE's device memory against PT2-CG's, peak plus pools (grace.report.memory)."""

from __future__ import annotations

from typing import Optional

from grace.report.memory import NO_LARGER, WITHIN, markdown, records


def _row(workload: str, mode: str, peak: Optional[int], pool: Optional[int], graphs: int = 1) -> dict:
    return {"workload": workload, "mode": mode, "status": "ok", "peak_replay_mem_bytes": peak,
            "graph_pool_bytes": pool, "cuda_graphs": graphs, "run_id": "R"}


def test_a_kept_out_graph_is_judged_on_peak_plus_pool() -> None:
    rows = [_row("KEPT", "pt2-nocg", 300_000_000, 0, 0), _row("KEPT", "pt2-cg", 100_000_000, 200_000_000),
            _row("KEPT", "grace", 290_000_000, 0, 0),
            _row("SAME", "pt2-cg", 100_000_000, 50_000_000), _row("SAME", "grace", 100_000_000, 50_500_000),
            _row("MORE", "pt2-cg", 100_000_000, 0, 0), _row("MORE", "grace", 90_000_000, 40_000_000),
            _row("RAISED", "pt2-cg", None, None), _row("RAISED", "grace", 10, 10)]
    recs = {r["workload"]: r for r in records(rows)}
    assert set(recs) == {"KEPT", "SAME", "MORE"}, "a mode without its memory measured is left out"
    kept = recs["KEPT"]
    assert (kept["grace_total_mb"], kept["pt2_cg_total_mb"], kept["verdict"]) == (290.0, 300.0, NO_LARGER), \
        "a larger peak with no pool is no larger in all"
    assert kept["pt2_nocg_peak_mb"] == 300.0 and (kept["graphs_grace"], kept["graphs_pt2_cg"]) == (0, 1)
    assert recs["SAME"]["verdict"] == WITHIN, "0.33% above: the noise between runs"
    assert (recs["MORE"]["total_over_pt2_cg"], recs["MORE"]["verdict"]) == (1.3, "30.0% larger")
    table = markdown(list(recs.values()), "R")
    assert "| KEPT | 290.0 + 0.0 = 290.0 | 100.0 + 200.0 = 300.0 | 300.0 | 0.967 | 0 / 1 | no larger |" in table
    assert "1 of 3 workloads hold no more than under PT2-CG, 1 more within 0.5%" in table
