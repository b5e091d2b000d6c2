"""SCG's tables and Figure 13 from a run's rows (no torch needed).

- ``tables/table4_scg.csv``: the paper's Table 4 per workload (candidate graphs, enabled,
  disabled, with PI), with how each decision was made and the seconds spent making them.
- ``tables/scg_decisions.csv``: every candidate graph: kernels, bytes PT2-CG copies per
  replay, median time of each choice, the choice and its source.
- ``results/processed/scg_never_slower.csv``: GraCE's median per-iteration time against the
  better of PT2-NoCG and PT2-CG in the same run (the "never slower" check, 2% tolerance).
- ``figures/figure13.{pdf,png}`` and ``results/processed/figure13.csv``: compile time (the
  warm-up: compilation, graph capture and SCG's profiling) of GraCE normalized to PT2-CG's, for
  the first run (decision cache empty) and, if given, a second run (cache filled by the first).
  Where the run also has GraCE-CGCT and GraCE-CGCT-PI (the Figure 11 sweep), the first run's bar
  is stacked by optimization: what CGCT, then PI, then SCG add to PT2-CG's compile time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from grace.bench.results import measured_together
from grace.report.figures import index_rows, workloads_in_order
from grace.report.judge import NOCG_REFERENCE, OK, judged_status
from grace.stats import percentile

log = logging.getLogger("grace.report")

GRACE = "grace"
NEVER_SLOWER_TOLERANCE = 0.02


def _grace_rows(rows: Sequence[dict]) -> list[dict]:
    """GraCE's row of each workload that has SCG's report, the last where a workload was rerun."""
    by = index_rows(r for r in rows if r["mode"] == GRACE)
    return [row for w in workloads_in_order(rows) if (row := by.get((w, GRACE))) and row.get("scg")]


def table4(rows: Sequence[dict]) -> list[dict[str, Any]]:
    out = []
    for row in _grace_rows(rows):
        s = row["scg"]["summary"]
        out.append({"workload": row["workload"], "status": row["status"], "total": s["total"],
                    "enabled": s["enabled"], "disabled": s["disabled"], "with_pi": s["with_pi"],
                    "profiled": s["profiled"], "from_cache": s["from_cache"], "by_rule": s.get("by_rule", 0),
                    "fallbacks": s["fallbacks"],
                    "profile_s": round(s["profile_s"], 4)})
    return out


def decisions(rows: Sequence[dict]) -> list[dict[str, Any]]:
    out = []
    for row in _grace_rows(rows):
        for g in row["scg"]["graphs"]:
            m = g["medians_us"]
            out.append({"workload": row["workload"], "graph": g["name"], "mode": g["mode"],
                        "kernels": len(g["kernels"]), "copied_inputs": g["copied_inputs"],
                        "copied_bytes": g["copied_bytes"], "no_graph_us": _r(m.get("no-graph")),
                        "graph_us": _r(m.get("graph")), "graph_pi_us": _r(m.get("graph-pi")),
                        "graph_pi_prelude_us": _r(m.get("graph-pi-prelude")),
                        "graph_pi_exec_update_us": _r(m.get("graph-pi-exec-update")),
                        "choice": g["choice"], "source": g["source"], "profile_s": round(g["profile_s"], 4)})
    return out


def never_slower(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """GraCE against the better stock mode, per workload, as ratios of medians from one run. A
    mismatch counts as right where PT2-NoCG mismatches eager too and the row is no further from
    eager than PT2-NoCG (:func:`grace.report.judge.judged_status`, as the headline judges it)."""
    by = index_rows(rows)
    out = []
    for w in workloads_in_order(rows):
        g, n, c = by.get((w, GRACE)), by.get((w, "pt2-nocg")), by.get((w, "pt2-cg"))
        record: dict[str, Any] = {"workload": w, "grace_us": None, "pt2_nocg_us": None, "pt2_cg_us": None,
                                  "best_stock": None, "grace_over_best": None, "within_2pct": None}
        judged = {m: judged_status(r, n) if r is not None else "missing"
                  for m, r in ((GRACE, g), ("pt2-nocg", n), ("pt2-cg", c))}
        if any(j not in (OK, NOCG_REFERENCE) for j in judged.values()):
            record["status"] = "incomplete: " + ", ".join(
                f"{m} {j}" for m, j in judged.items() if j not in (OK, NOCG_REFERENCE))
            out.append(record)
            continue
        if not (measured_together(g, n) and measured_together(g, c)):
            record["status"] = "measured apart: GraCE's row and a stock mode's come from different processes"
            out.append(record)
            continue
        gm, nm, cm = (percentile(r["samples_us"], 50) for r in (g, n, c))
        best_name, best = ("pt2-nocg", nm) if nm <= cm else ("pt2-cg", cm)
        ratio = gm / best
        record.update(status=NOCG_REFERENCE if NOCG_REFERENCE in judged.values() else OK, grace_us=_r(gm), pt2_nocg_us=_r(nm), pt2_cg_us=_r(cm), best_stock=best_name,
                      grace_over_best=round(ratio, 4), within_2pct=ratio <= 1.0 + NEVER_SLOWER_TOLERANCE)
        out.append(record)
    return out


def compile_overhead(first: Sequence[dict], second: Sequence[dict] | None = None) -> list[dict[str, Any]]:
    """Compile seconds of PT2-CG and GraCE (first and second run), GraCE's normalized to PT2-CG's."""
    a = index_rows(first)
    b = index_rows(second) if second else {}
    out = []
    for w in workloads_in_order(first):
        cg, g1, g2 = a.get((w, "pt2-cg")), a.get((w, GRACE)), b.get((w, GRACE))
        cg2 = b.get((w, "pt2-cg"))
        if not cg or not g1 or cg.get("compile_s") is None or g1.get("compile_s") is None:
            continue
        rec: dict[str, Any] = {
            "workload": w, "pt2_cg_s": _r(cg["compile_s"]), "grace_first_s": _r(g1["compile_s"]),
            "grace_first_norm": _r(g1["compile_s"] / cg["compile_s"]),
            "scg_profile_first_s": _r((g1.get("scg") or {}).get("summary", {}).get("profile_s", 0.0)),
            "pt2_cg_second_s": None, "grace_second_s": None, "grace_second_norm": None, "scg_profile_second_s": None,
            **_by_optimization(cg, a.get((w, "grace-cgct")), a.get((w, "grace-cgct-pi"))),
        }
        if g2 and g2.get("compile_s") is not None:
            base = cg2["compile_s"] if cg2 and cg2.get("compile_s") else cg["compile_s"]
            rec.update(pt2_cg_second_s=_r(cg2["compile_s"]) if cg2 else None, grace_second_s=_r(g2["compile_s"]),
                       grace_second_norm=_r(g2["compile_s"] / base),
                       scg_profile_second_s=_r((g2.get("scg") or {}).get("summary", {}).get("profile_s", 0.0)))
        out.append(rec)
    return out


STACK = (("cgct_norm", "CGCT", "#9ecae1"), ("cgct_pi_norm", "+PI", "#4292c6"), ("grace_first_norm", "+SCG", "#08519c"))


def _by_optimization(cg: dict, cgct: dict | None, cgct_pi: dict | None) -> dict[str, float | None]:
    """Compile seconds of GraCE-CGCT and GraCE-CGCT-PI over PT2-CG's, where the run has them."""
    def norm(row: dict | None) -> float | None:
        return None if not row or row.get("compile_s") is None else _r(row["compile_s"] / cg["compile_s"])

    return {"cgct_norm": norm(cgct), "cgct_pi_norm": norm(cgct_pi)}


def _stacked_segments(record: dict[str, Any]) -> list[tuple[str, str, float, float]] | None:
    """(label, colour, bottom, height) of GraCE's first-run bar by optimization, each segment what
    that optimization adds over the previous mode (none drawn where it compiled faster); None
    without the CGCT and CGCT-PI modes."""
    levels = [record.get(key) for key, _, _ in STACK]
    if any(v is None for v in levels):
        return None
    segments, bottom = [], 1.0
    for (_, label, colour), level in zip(STACK, levels):
        top = max(bottom, level)
        segments.append((label, colour, bottom, top - bottom))
        bottom = top
    return segments


def draw_figure13(records: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 0.9 * len(records) + 2), 3.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = range(len(records))
    width = 0.27
    ax.bar([x - width for x in xs], [1.0] * len(records), width, color="#9e9e9e", label="PyTorch2-CG")
    first = [r["grace_first_norm"] for r in records]
    for x, r in zip(xs, records):
        segments = _stacked_segments(r)
        if segments is None:
            ax.bar(x, r["grace_first_norm"], width, color="#08519c", label="GraCE, first run")
            continue
        ax.bar(x, 1.0, width, color="#d9d9d9", label="GraCE: PT2-CG's compile")
        for label, colour, bottom, height in segments:
            ax.bar(x, height, width, bottom=bottom, color=colour, label=f"GraCE: {label} adds")
    second = [r["grace_second_norm"] for r in records]
    if any(v is not None for v in second):
        ax.bar([x + width for x in xs], [v or 0.0 for v in second], width, color="#6baed6",
               label="GraCE, second run (decisions cached)")
    for x, r in zip(xs, records):
        ax.text(x - width, 1.02, f"{r['pt2_cg_s']:.0f}s", ha="center", va="bottom", fontsize=6)
        ax.text(x, r["grace_first_norm"] + 0.02, f"{r['grace_first_s']:.0f}s", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["workload"] for r in records], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("compile time / PyTorch2-CG\n(of the same run)")
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_ylim(0, max([1.0] + [v for v in first + second if v is not None]) * 1.45)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", ncol=3)
    ax.set_title("Figure 13: compilation time (warm-up incl. graph capture and SCG profiling)", fontsize=9)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "figure13.pdf", out_dir / "figure13.png"]
    for p in paths:
        fig.savefig(p, dpi=150)
    return paths


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 3)
