"""The headline of a single-GPU run: per workload, PT2-NoCG, PT2-CG and GraCE side by side.

For each workload of the run (``scripts/run_single_gpu_experiments.sh``), in row order: the
per-iteration medians of the three modes, GraCE over PT2-CG and over the better of the two
stock modes (ratios of medians, above 1 faster), GraCE's iteration over its device time where
the run measured it (``--gpu-time``: between events where the host got ahead of the device, else
the busy time of a profile, :mod:`grace.bench.device_busy`, marked), and the paper's value where
its text gives one. A row
that is not right (a mismatch, an error, a timeout) shows its status instead of numbers; one
judged against PT2-NoCG because eager is no reference (:mod:`grace.report.judge`) says so.
The last row is the geometric mean over the workloads whose three modes are all right.

Written by ``python -m grace.report headline`` as ``results/processed/headline.csv`` and
``headline.md`` (the table the README shows). No torch here.
"""

from __future__ import annotations

import statistics
from typing import Any, Optional, Sequence

from grace.report.figures import BASELINE, geometric_mean, index_rows, speedup_cell, workloads_in_order
from grace.report.judge import NOCG_REFERENCE, OK

MODES = ("pt2-nocg", "pt2-cg", "grace")
COLUMNS = ("workload", "pt2_nocg_us", "pt2_cg_us", "grace_us", "grace_over_pt2_cg", "grace_over_best_stock",
           "iter_over_device", "device_from", "reference", "status", "paper")
PROFILED = "profile"  # device_from where the device time is a profile's busy time
PROFILED_MARK = "\u2020"  # after such a ratio in the table, with a note under it

# What the paper's text states per workload (its Figure 10 is a chart): section 5.1.
PAPER: dict[str, str] = {
    "XLNET-I": "GraCE 3.36x over PT2-CG",
    "DALLE2": "PT2-CG 1.9x, GraCE 2.72x over PT2-NoCG",
    "EOS": "PT2-CG 0.71x of PT2-NoCG",
    "DR-I": "PT2-CG 0.85x of PT2-NoCG",
}
PAPER_GEOMEAN = "GraCE 1.29x over PT2-CG (geomean of 25)"


def _median(row: Optional[dict]) -> Optional[float]:
    return None if row is None or not row.get("iter_us") else row["iter_us"]["median"]


def device_us(row: dict) -> tuple[Optional[float], Optional[str]]:
    """The row's device time per iteration and where it comes from: the median of ``gpu_us``
    (``"events"``), else of ``gpu_busy_us`` (:data:`PROFILED`), else nothing."""
    events = (row.get("gpu_us") or {}).get("median")
    if events:
        return events, "events"
    busy = row.get("gpu_busy_us")
    if busy:
        return statistics.median(busy), PROFILED
    return None, None


def _device_cells(row: dict, grace_us: float) -> dict[str, Any]:
    """GraCE's iteration over its device time, and where that device time comes from."""
    device, source = device_us(row)
    return {"iter_over_device": round(grace_us / device, 2) if device else None, "device_from": source}


def records(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One record per workload of the run, then the geomean."""
    index = index_rows(rows)
    out = []
    for workload in workloads_in_order(rows):
        mine = {m: index.get((workload, m)) for m in MODES}
        if mine["grace"] is None and mine["pt2-cg"] is None:
            continue  # a workload of another experiment's modes
        baseline = mine[BASELINE]
        cells = {m: speedup_cell(workload, m, r, baseline) for m, r in mine.items() if r is not None}
        wrong = {m: c.status for m, c in cells.items() if c.status != OK}
        missing = [m for m in MODES if mine[m] is None]
        rec: dict[str, Any] = dict.fromkeys(COLUMNS)
        rec["workload"], rec["paper"] = workload, PAPER.get(workload, "")
        judged = NOCG_REFERENCE if any(c.reference == BASELINE for c in cells.values() if c.status == OK) else OK
        rec["reference"] = BASELINE if judged == NOCG_REFERENCE else "eager"  # what the rows' outputs were judged by
        if wrong or missing:
            rec["status"] = "; ".join([f"{m}: {s}" for m, s in wrong.items()] + [f"{m}: not run" for m in missing])
            if set(wrong) | set(missing) == {"pt2-cg"}:
                # PT2-CG raised or computed wrong where PT2-NoCG and GraCE are right (DALLE2, DLRM):
                # GraCE against the one stock mode that runs, out of both geomeans
                nocg, grace = _median(mine["pt2-nocg"]), _median(mine["grace"])
                assert nocg and grace
                rec.update(pt2_nocg_us=round(nocg, 1), grace_us=round(grace, 1),
                           grace_over_best_stock=round(nocg / grace, 3), **_device_cells(mine["grace"], grace))
            out.append(rec)
            continue
        nocg, cg, grace = (_median(mine[m]) for m in MODES)
        assert nocg and cg and grace
        rec.update(pt2_nocg_us=round(nocg, 1), pt2_cg_us=round(cg, 1), grace_us=round(grace, 1),
                   grace_over_pt2_cg=round(cg / grace, 3), grace_over_best_stock=round(min(nocg, cg) / grace, 3),
                   status=judged, **_device_cells(mine["grace"], grace))
        out.append(rec)
    right = [r for r in out if r["grace_over_pt2_cg"] is not None]
    geo: dict[str, Any] = dict.fromkeys(COLUMNS)
    geo.update(workload=f"geomean ({len(right)} of {len(out)})", paper=PAPER_GEOMEAN, status=OK if right else "no data")
    if right:
        geo["grace_over_pt2_cg"] = round(geometric_mean([r["grace_over_pt2_cg"] for r in right]), 3)
        geo["grace_over_best_stock"] = round(geometric_mean([r["grace_over_best_stock"] for r in right]), 3)
    return out + [geo]


def one_gpu_hours(rows: Sequence[dict]) -> tuple[float, int, int]:
    """What the run's workloads took on their GPUs, summed: about what the run takes on one GPU
    (each workload's wall time, every mode's compilation and timing included, from its latest
    rows); with the number of workloads counted and of those whose rows predate the field."""
    latest: dict[str, Optional[float]] = {}
    for row in rows:
        latest[row["workload"]] = row.get("workload_wall_s")
    walls = [w for w in latest.values() if w is not None]
    return sum(walls) / 3600, len(walls), len(latest) - len(walls)


def markdown(recs: Sequence[dict], run_id: str, hours: Optional[tuple[float, int, int]] = None) -> str:
    """The table as the README shows it, with the run it came from and, given ``hours``
    (:func:`one_gpu_hours`), what it took."""
    head = ("| workload | PT2-NoCG us | PT2-CG us | GraCE us | GraCE / PT2-CG | GraCE / better stock "
            "| iteration / device | paper |")
    lines = [f"Run `{run_id}` (per-iteration medians; ratios above 1: GraCE faster).", "", head,
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        if r["grace_over_best_stock"] is None:
            lines.append(f"| {r['workload']} | {r['status']} | | | | | | {r['paper']} |")
            continue
        formats = (("pt2_nocg_us", "{:,.1f}"), ("pt2_cg_us", "{:,.1f}"), ("grace_us", "{:,.1f}"),
                   ("grace_over_pt2_cg", "{:.3f}"), ("grace_over_best_stock", "{:.3f}"), ("iter_over_device", "{:.2f}"))
        shown = ["" if r[k] is None else f.format(r[k]) for k, f in formats]
        if r["grace_over_pt2_cg"] is None:
            shown[1] = r["status"]  # PT2-CG raised or computed wrong: what it did, in its cell
        if r["device_from"] == PROFILED:
            shown[-1] += PROFILED_MARK
        note = " (judged against PT2-NoCG)" if r["reference"] == BASELINE else ""
        lines.append(f"| {r['workload']}{note} | " + " | ".join(shown) + f" | {r['paper']} |")
    if any(r["device_from"] == PROFILED for r in recs):
        lines += ["", f"{PROFILED_MARK} the device time is a profile's: the time the GPU was busy (the iteration "
                      "waits for the device inside, so the events around it cannot isolate its work)."]
    if hours and hours[1]:
        spent, counted, unknown = hours
        lines += ["", f"Its {counted} workloads took {spent:.2f} h of GPU time in all (each workload's wall time, "
                      "every mode's compilation included; about what the run takes on one GPU)"
                      + (f"; {unknown} more ran before their rows recorded it." if unknown else ".")]
    return "\n".join(lines) + "\n"
