"""Figure 9: per-iteration time against the number of indirected parameters.

From a run of ``configs/workloads_figure9.txt`` (``micro-ptr-K``: one kernel reading K external
inputs): per K and mode, the median per-iteration time with p10/p90, and each mode's time
relative to PT2-CG's in the same run (the ratio of medians). With PI's pointer table (strategy
(1)), a replay writes K pointers; with its prelude (2), it writes them too and a kernel at the
graph's root rewrites the kernel node's arguments on the device; with its exec update (3), the
host rewrites them in the instantiated graph; with PT2-CG it copies K tensors. Rows that are not ``ok`` are left out and listed.

Where the run was made with ``--gpu-time``, each record also has the device time of an
iteration alone (``gpu_*``): the latency of each way of dereferencing on the GPU, which is what
the paper's Figure 9 plots (the table write and pointer loads, the prelude kernel, or nothing on
the device for the host's update, against PT2-CG's copy kernels). The figure then has two
panels, the per-iteration time and the device time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from grace.report.figures import index_rows, save_figure

MODES = {"pt2-nocg": "PT2-NoCG", "pt2-cg": "PT2-CG (copies)", "grace-cgct-pi": "PI (1) pointer table",
         "grace-cgct-pi-prelude": "PI (2) prelude kernel", "grace-cgct-pi-exec": "PI (3) host exec update"}
_NAME = re.compile(r"micro-ptr-(\d+)$")


def records(rows: Sequence[dict]) -> list[dict[str, Any]]:
    index = index_rows(rows)
    counts = sorted({int(m.group(1)) for w, _ in index if (m := _NAME.match(w))})
    out = []
    for k in counts:
        cg = index.get((f"micro-ptr-{k}", "pt2-cg"))
        for mode in MODES:
            row = index.get((f"micro-ptr-{k}", mode))
            if row is None:
                continue
            ok = row["status"] == "ok" and row.get("iter_us")
            rec = {"inputs": k, "mode": mode, "status": row["status"],
                   "median_us": round(row["iter_us"]["median"], 2) if ok else None,
                   "p10_us": round(row["iter_us"]["p10"], 2) if ok else None,
                   "p90_us": round(row["iter_us"]["p90"], 2) if ok else None,
                   "over_pt2_cg": None}
            if ok and cg and cg["status"] == "ok" and cg.get("iter_us"):
                rec["over_pt2_cg"] = round(row["iter_us"]["median"] / cg["iter_us"]["median"], 4)
            gpu = row.get("gpu_us") if ok else None
            rec.update({f"gpu_{q}_us": round(gpu[q], 2) if gpu else None for q in ("median", "p10", "p90")})
            rec["gpu_over_pt2_cg"] = (round(gpu["median"] / cg["gpu_us"]["median"], 4)
                                      if gpu and cg and cg["status"] == "ok" and cg.get("gpu_us") else None)
            out.append(rec)
    return out


def draw(recs: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("", "per-iteration time (us, median, p10-p90)")]
    if any(r["gpu_median_us"] is not None for r in recs):
        panels.append(("gpu_", "device time (us, median, p10-p90)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 3.5), squeeze=False)
    for ax, (prefix, ylabel) in zip(axes[0], panels):
        for mode, label in MODES.items():
            pts = [(r["inputs"], r[f"{prefix}median_us"], r[f"{prefix}p10_us"], r[f"{prefix}p90_us"]) for r in recs
                   if r["mode"] == mode and r[f"{prefix}median_us"] is not None]
            if not pts:
                continue
            ks, med, lo, hi = zip(*pts)
            ax.errorbar(ks, med, yerr=[[m - a for m, a in zip(med, lo)], [b - m for m, b in zip(med, hi)]],
                        marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("external inputs read by the graph's kernel (indirected parameters)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    return save_figure(fig, out_dir, "figure9")
