"""The PT2 baseline: what stock torch.compile does on every workload, one row per workload.

``results/processed/baseline_pt2.csv`` is built from a run of the modes ``eager``,
``pt2-nocg`` and ``pt2-cg``, sharded or not. Per workload it holds each mode's median
per-iteration time and status, PT2-CG's speedup over PT2-NoCG (ratio of medians, with the p10
and p90 of the paired per-round ratios, as Figure 10), both compile times, the number of CUDA
graphs PT2-CG recorded, and why PyTorch skipped or split graphs: the ``cudagraphs`` log's skip
messages and partition reasons, as the worker collected them during warm-up. A workload whose
mode failed keeps its row, with the error. Given the run's workload list (``--workloads``, as the runner takes it), a listed
workload the run never reached keeps a row too, every status ``not run``, in the list's order.

``figures/baseline_pt2.{pdf,png}`` draws PT2-CG's speedup per workload, failures annotated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grace.report.figures import (BASELINE, PT2_CG, Cell, index_rows, median, speedup_cells,
                                  with_geomeans, workloads_in_order)

EAGER = "eager"
MODES = (EAGER, BASELINE, PT2_CG)
FIGURE_MODES = {PT2_CG: "PT2-CG"}
MAX_REASON_CHARS = 300  # a skip message can quote a whole stack; the raw rows keep all of it


def planned(targets: Sequence[Any]) -> list[dict[str, Any]]:
    """The run's workload list (``grace.bench.configs.resolve``'s targets) as report records."""
    return [{"workload": t.workload.name, "model": t.workload.model, "suite": t.workload.suite,
             "kind": t.workload.kind, "batch_size": t.batch_size} for t in targets]


def baseline_records(rows: Sequence[dict], planned: Sequence[dict] = ()) -> list[dict[str, Any]]:
    """One record per workload: the planned ones in their order, then any other in run order.

    Every mode's columns are present; a mode with no row has status ``not run``.
    """
    index = index_rows(rows)
    speedups = {c.workload: c for c in speedup_cells(rows, [PT2_CG])}
    described = {p["workload"]: p for p in planned}
    records = []
    for workload in dict.fromkeys([*described, *workloads_in_order(rows)]):
        by_mode = {mode: index.get((workload, mode)) for mode in MODES}
        first = next((r for r in by_mode.values() if r is not None), None) or described[workload]
        rec: dict[str, Any] = {
            "workload": workload, "model": first.get("model"), "suite": first.get("suite"),
            "kind": first.get("kind"), "batch_size": first.get("batch_size"),
        }
        for mode in MODES:
            row = by_mode[mode]
            key = mode.replace("-", "_")
            rec[f"{key}_status"] = (row.get("status") or "error") if row else "not run"
            rec[f"{key}_median_us"] = _median_us(row)
        cell = speedups.get(workload)
        rec.update(_speedup_columns(cell))
        for mode in (BASELINE, PT2_CG):
            row = by_mode[mode]
            rec[f"{mode.replace('-', '_')}_compile_s"] = _round(row.get("compile_s")) if row else None
        cg = by_mode[PT2_CG] or {}
        rec["cuda_graphs"] = cg.get("cuda_graphs")
        rec["cudagraph_skips"] = " | ".join(_short(s) for s in cg.get("cudagraph_skips") or [])
        rec["partition_reasons"] = " | ".join(
            f"{_short(reason)} (x{count})" for reason, count in (cg.get("partition_reasons") or {}).items()
            if "cudagraphs is disabled" not in reason)
        rec["pt2_cg_max_rel_err"] = (cg.get("check") or {}).get("max_rel_err")
        rec["errors"] = " | ".join(
            f"{mode}: {_short(row.get('error') or (row.get('check') or {}).get('detail') or '')}"
            for mode, row in by_mode.items() if row and row.get("status") not in (None, "ok"))
        records.append(rec)
    return records


def geomean_record(rows: Sequence[dict]) -> dict[str, Any]:
    """PT2-CG's geomean speedup over PT2-NoCG across workloads where both are ok."""
    cells = with_geomeans(speedup_cells(rows, [PT2_CG]), [PT2_CG])
    geo = cells[-1]
    return {"workloads": sum(1 for c in cells[:-1] if c.ok), **_speedup_columns(geo)}


def draw(rows: Sequence[dict], out_dir: Path) -> list[Path]:
    from grace.report.figures import draw_speedup_bars, save_figure

    cells = with_geomeans(speedup_cells(rows, FIGURE_MODES), FIGURE_MODES)
    fig = draw_speedup_bars(rows, cells, FIGURE_MODES, "Stock torch.compile: PT2-CG over PT2-NoCG")
    return save_figure(fig, out_dir, "baseline_pt2")


def _speedup_columns(cell: Cell | None) -> dict[str, Any]:
    ok = cell is not None and cell.ok
    return {
        "cg_over_nocg": _round(cell.speedup) if ok else None,
        "cg_over_nocg_p10": _round(cell.p10) if ok else None,
        "cg_over_nocg_p90": _round(cell.p90) if ok else None,
    }


def _median_us(row: dict | None) -> float | None:
    if not row or row.get("status") not in ("ok", "mismatch") or not row.get("samples_us"):
        return None
    return _round(median(row["samples_us"]))


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
