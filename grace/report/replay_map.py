"""The replay map: where a steady-state call's host time goes, per workload and mode, beside the
iteration's device time and its time end to end.

From a benchmark run made with ``--layers --gpu-time`` (``scripts/run_replay_map.sh``): each row
holds its layers' median host microseconds (:mod:`grace.bench.layers`), the median of its
samples' host totals, the device time of an iteration alone (``gpu_us``) and the per-iteration
time (``iter_us``). An iteration can take no less than the larger of its host and device
times; what it takes beyond that (``gap_us``) is time neither side accounts for: the launch's
latency, synchronisation, the host and device waiting on each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from grace.bench.layers import LAYERS
from grace.report.figures import save_figure

# what each layer's exclusive time is, as the figure's legend says it
LABELS = {
    "caller": "Dynamo frame and guards (training: autograd engine)",
    "aot": "AOTAutograd runtime wrappers",
    "inductor": "Inductor output code and partition wrappers",
    "tree": "CUDA graph tree bookkeeping and checks",
    "guards": "GraCE: stale-output guard, gradient copies",
    "node": "node replay: input copies, outputs",
    "pi": "PI: guard, pointer fill, remaining copies",
    "launch": "launch (graph replay or Triton kernel)",
}
MODE_ORDER = ("pt2-nocg", "pt2-cg", "grace")
OVERHEAD_COLUMNS = ("workload", "mode", "host_us", "device_us", "iter_us")


def records(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One record per (workload, mode) row that has its layers: every layer's microseconds, then
    host, device and iteration medians, the gap, and the iteration over its device time."""
    out = []
    for r in sorted(rows, key=lambda r: (r["workload"], _mode_order(r["mode"]))):
        if r.get("status") != "ok" or not r.get("layers_us"):
            continue
        host = r["host_us"]["median"]
        device = (r.get("gpu_us") or {}).get("median")
        iteration = r["iter_us"]["median"]
        rec: dict[str, Any] = {"workload": r["workload"], "mode": r["mode"]}
        rec.update({f"{layer}_us": round(r["layers_us"].get(layer, 0.0), 1) for layer in LAYERS})
        rec.update(host_us=round(host, 1), device_us=None if device is None else round(device, 1),
                   iter_us=round(iteration, 1),
                   gap_us=None if device is None else round(iteration - max(host, device), 1),
                   iter_over_device=None if not device else round(iteration / device, 3))
        out.append(rec)
    return out


def overhead(recs: Sequence[dict]) -> list[dict[str, Any]]:
    """The rows of ``replay_overhead.csv``: host, device and iteration time per workload and mode."""
    return [{k: r[k] for k in OVERHEAD_COLUMNS} for r in recs]


def markdown(recs: Sequence[dict], run_id: str) -> str:
    """The README's table of the host path: per workload, each mode's host time of one call,
    its iteration and the iteration's device time, and the iteration over its device time;
    the run it came from above it."""
    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    cell = {(r["workload"], r["mode"]): r for r in recs}
    names = {"pt2-nocg": "PT2-NoCG", "pt2-cg": "PT2-CG", "grace": "GraCE"}
    lines = [f"Run `{run_id}`: microseconds, host / iteration / device, and the iteration over its device time.",
             "", "| workload | " + " | ".join(names[m] for m in MODE_ORDER) + " |",
             "| --- |" + " --- |" * len(MODE_ORDER)]
    for w in workloads:
        shown = []
        for m in MODE_ORDER:
            r = cell.get((w, m))
            if r is None:
                shown.append("")
                continue
            device = "-" if r["device_us"] is None else f"{r['device_us']:,.0f}"
            ratio = "" if r["iter_over_device"] is None else f" ({r['iter_over_device']:.2f}x)"
            shown.append(f"{r['host_us']:,.0f} / {r['iter_us']:,.0f} / {device}{ratio}")
        lines.append(f"| {w} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def _mode_order(mode: str) -> int:
    return MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)


def draw(recs: Sequence[dict], figures_dir: Path) -> list[Path]:
    """``replay_overhead.{pdf,png}``: one panel per workload (each on its own linear scale), a bar
    per mode of the host time stacked by layer, with the iteration's device time and its time end
    to end marked on it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    fig = Figure(figsize=(10.0, 1.0 + 1.25 * len(workloads)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(workloads), 1, squeeze=False)[:, 0]
    for ax, workload in zip(axes, workloads):
        mine = [r for r in recs if r["workload"] == workload]
        ys = list(range(len(mine)))[::-1]
        for i, layer in enumerate(LAYERS):
            left = [sum(r[f"{lay}_us"] for lay in LAYERS[:i]) for r in mine]
            ax.barh(ys, [r[f"{layer}_us"] for r in mine], left=left, color=f"C{i}", edgecolor="black",
                    linewidth=0.3, label=LABELS[layer])
        devices = [(y, r["device_us"]) for y, r in zip(ys, mine) if r["device_us"] is not None]
        ax.scatter([d for _, d in devices], [y for y, _ in devices], marker="|", s=250, color="black", zorder=3,
                   label="device time of the iteration")
        ax.scatter([r["iter_us"] for r in mine], ys, marker="D", s=18, color="white", edgecolor="black", zorder=3,
                   label="iteration end to end (median)")
        ax.set_yticks(ys, [r["mode"] for r in mine], fontsize=8)
        ax.set_title(workload, fontsize=9, loc="left")
        ax.set_xlim(left=0)
    axes[-1].set_xlabel("microseconds per call")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / fig.get_figheight()))
    return save_figure(fig, figures_dir, "replay_overhead")
