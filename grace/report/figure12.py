"""Figure 12: speedup of PT2-CG and GraCE over PT2-NoCG at each tensor-parallel degree.

From a run of ``scripts/run_tp_experiments.sh`` (rows of ``python -m grace.tp``: one per
workload, degree, mode and round). The modes of a round run one after another on the same
machine, so each round gives a ratio of medians, PT2-NoCG's over the mode's; the speedup is the
median of a workload's ratios over rounds, with their smallest and largest. A (workload, degree,
mode) whose rows are not all ``ok`` keeps the first failure's status and no speedup.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Sequence

from grace.report.figures import save_figure

BASELINE = "pt2-nocg"
MODES = {"pt2-cg": "PT2-CG", "grace": "GraCE"}
COLUMNS = ("workload", "tp", "mode", "status", "median_us", "speedup_over_nocg")


def records(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One record per (workload, tp, mode), PT2-NoCG's included, in the CSV's columns plus the
    ratios' spread (``speedup_min``, ``speedup_max``) and the number of rounds."""
    by_key: dict[tuple[str, int, str], list[dict]] = {}
    for r in rows:
        by_key.setdefault((r["workload"], int(r["tp"]), r["mode"]), []).append(r)
    out = []
    for (workload, tp, mode) in sorted(by_key, key=lambda k: (k[0], k[1], _mode_order(k[2]))):
        runs = sorted(by_key[(workload, tp, mode)], key=lambda r: r.get("round", 0))
        failed = next((r for r in runs if r.get("status") != "ok"), None)
        record: dict[str, Any] = {"workload": workload, "tp": tp, "mode": mode,
                                  "status": failed["status"] if failed else "ok",
                                  "median_us": None, "speedup_over_nocg": None,
                                  "speedup_min": None, "speedup_max": None, "rounds": len(runs)}
        if failed is None:
            record["median_us"] = round(statistics.median(r["median_us"] for r in runs), 1)
            base = {r.get("round", 0): r for r in by_key.get((workload, tp, BASELINE), []) if r.get("status") == "ok"}
            ratios = [base[r.get("round", 0)]["median_us"] / r["median_us"] for r in runs if r.get("round", 0) in base]
            if ratios:
                record.update(speedup_over_nocg=round(statistics.median(ratios), 3),
                              speedup_min=round(min(ratios), 3), speedup_max=round(max(ratios), 3))
        out.append(record)
    return out


def _mode_order(mode: str) -> int:
    order = [BASELINE, *MODES]
    return order.index(mode) if mode in order else len(order)


def bar_gap_reason(rec: dict | None, baseline: dict | None) -> str:
    """Why a mode has no bar: it did not run, it failed (its status), or PT2-NoCG, its
    denominator, did not run or failed."""
    if rec is None:
        return "not run"
    if rec["status"] != "ok":
        return rec["status"]
    if baseline is None or baseline["status"] != "ok":
        return "PT2-NoCG " + ("not run" if baseline is None else baseline["status"])
    return "no round shared with PT2-NoCG"


def draw(recs: Sequence[dict], figures_dir: Path) -> list[Path]:
    """``figure12.{pdf,png}``: per workload and degree, a bar per mode with its rounds' spread."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = sorted({(r["workload"], r["tp"]) for r in recs})
    fig = Figure(figsize=(max(6.0, 1.2 * len(groups) + 2.0), 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / len(MODES)
    by_key = {(r["workload"], r["tp"], r["mode"]): r for r in recs}
    for i, (mode, label) in enumerate(MODES.items()):
        offset = (i - (len(MODES) - 1) / 2) * width
        for g, (workload, tp) in enumerate(groups):
            r = by_key.get((workload, tp, mode))
            if r is None or r["speedup_over_nocg"] is None:
                ax.text(g + offset, 0.05, f"{label}: {bar_gap_reason(r, by_key.get((workload, tp, BASELINE)))}",
                        rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            err = [[r["speedup_over_nocg"] - r["speedup_min"]], [r["speedup_max"] - r["speedup_over_nocg"]]]
            ax.bar(g + offset, r["speedup_over_nocg"], width, label=label, color=f"C{i}", edgecolor="black",
                   linewidth=0.5, yerr=err, capsize=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), [f"{w}\nTP={tp}" for w, tp in groups])
    ax.set_ylabel("speedup over PT2-NoCG")
    ax.set_title("Figure 12: tensor parallelism")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys())
    fig.tight_layout()
    return save_figure(fig, figures_dir, "figure12")
