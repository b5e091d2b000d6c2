"""Figures 10 and 11 (speedup over PT2-NoCG, and the CGCT/+PI/+SCG ablation) from a run's rows.

Why this shape: the runner interleaves the modes of a workload round by round, so round ``r``
of PT2-NoCG and round ``r`` of a mode saw the same clock and thermal state. A speedup is
therefore the ratio of the two medians, and its spread is taken from the *paired* per-round
ratios ``nocg[r] / mode[r]`` (p10..p90), which cancels drift that unpaired percentiles would
show as noise.

Only rows whose outputs are right become bars: they matched eager, or, on a workload where
PT2-NoCG itself differs from eager, were no further from it than PT2-NoCG
(:mod:`grace.report.judge`; such bars are hatched and their CSV rows say ``pt2-nocg`` as the
reference). ``mismatch``, ``error`` and ``timeout`` rows, workloads without a usable PT2-NoCG
baseline, and rows timed in another process than their baseline (a mode rerun in a later call,
perhaps on another GPU: nothing pairs their rounds) are written to the CSV with an empty speedup
and drawn as a short text annotation, never as a bar. Geomeans use only workloads where both
the mode and the baseline have bars.

This module imports no torch: figures can be redrawn anywhere from ``rows.jsonl``.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

from grace.bench.results import measured_together
from grace.report import archive
from grace.report.judge import NOCG_REFERENCE, judged_status
from grace.stats import paired_ratios, percentile
from grace.paths import FIGURES_DIR, RESULTS_DIR

log = logging.getLogger("grace.report")

DEFAULT_EXPERIMENT = "single_gpu"
BASELINE = "pt2-nocg"
PT2_CG = "pt2-cg"
GEOMEAN = "geomean"
OK = "ok"
NO_BASELINE = "no baseline"
NO_SAMPLES = "no samples"
MEASURED_APART = "measured apart"  # the mode's row and the baseline's come from different processes

FIG10_MODES: dict[str, str] = {"pt2-cg": "PT2-CG", "grace": "GraCE"}
FIG11_MODES: dict[str, str] = {"grace-cgct": "CGCT", "grace-cgct-pi": "+PI", "grace-no-lean": "+SCG",
                               "grace": "+lean replay"}
COLORS: dict[str, str] = {"pt2-cg": "#9e9e9e", "grace": "#08519c", "grace-cgct": "#9ecae1",
                          "grace-cgct-pi": "#4292c6", "grace-no-lean": "#2171b5"}
PT2_CG_SEGMENT = "#d9d9d9"
FOOTNOTE = "median of {n} interleaved iterations; bars p10–p90 of paired ratios"


class ReportError(Exception):
    """No usable run: the message says what is missing and how to get it."""


@dataclass(frozen=True)
class Cell:
    """One (workload, mode) speedup over PT2-NoCG; numbers are None unless status is ok."""

    workload: str
    mode: str
    status: str
    median_us: float | None = None
    nocg_median_us: float | None = None
    speedup: float | None = None
    p10: float | None = None
    p90: float | None = None
    ratios: tuple[float, ...] = ()  # paired per-round ratios, for the geomean's spread
    reference: str = "eager"  # what its outputs were judged against: eager, or pt2-nocg (judge)

    @property
    def ok(self) -> bool:
        return self.status == OK


# ---------------------------------------------------------------------------------------------
# Loading


def load_run(experiment: str = DEFAULT_EXPERIMENT, run_id: str | None = None,
             results_dir: Path = RESULTS_DIR) -> list[dict]:
    """The rows of one run: ``run_id``, or the one ``latest.txt`` names when it is None; a run
    packed into its archive (:mod:`grace.report.archive`) reads as its folder."""
    exp_dir = Path(results_dir) / "raw" / experiment
    run_id = run_id or _latest_run_id(exp_dir, experiment)
    path = (archive.resolve(exp_dir, run_id) or exp_dir / run_id) / "rows.jsonl"
    if not path.is_file():
        raise ReportError(f"no rows for run {run_id!r} of experiment {experiment!r}: {path} is missing")
    rows = _read_rows(path)
    if not rows:
        raise ReportError(f"run {run_id!r} of experiment {experiment!r} has no rows yet: {path} is empty")
    log.info("loaded %d rows from %s", len(rows), path)
    return rows


def _latest_run_id(exp_dir: Path, experiment: str) -> str:
    latest = exp_dir / "latest.txt"
    if not latest.is_file():
        raise ReportError(f"no run of experiment {experiment!r}: {latest} is missing "
                          f"(run `make experiments`, or pass --run-id)")
    run_id = latest.read_text().strip()
    if not run_id:
        raise ReportError(f"no run of experiment {experiment!r}: {latest} is empty")
    return run_id


def _read_rows(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}:{n}: not a JSON row ({e.msg})") from None
    return rows


# ---------------------------------------------------------------------------------------------
# Speedups


def median(samples: Sequence[float]) -> float:
    return percentile(list(samples), 50)


def workloads_in_order(rows: Iterable[dict]) -> list[str]:
    """Workloads in the order they first appear in the rows."""
    return list(dict.fromkeys(r["workload"] for r in rows))


def index_rows(rows: Iterable[dict]) -> dict[tuple[str, str], dict]:
    """(workload, mode) -> row; a repeated pair (a re-run shard) keeps the last row."""
    index: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (row["workload"], row["mode"])
        if key in index:
            log.warning("%s/%s appears more than once; using the last row", *key)
        index[key] = row
    return index


def speedup_cell(workload: str, mode: str, row: dict, baseline: dict | None) -> Cell:
    """Speedup of ``row`` over the PT2-NoCG ``baseline`` row of the same workload."""
    status = judged_status(row, baseline)
    if status not in (OK, NOCG_REFERENCE):
        return Cell(workload, mode, status)
    if baseline is None or judged_status(baseline, baseline) not in (OK, NOCG_REFERENCE):
        return Cell(workload, mode, NO_BASELINE)
    if not measured_together(row, baseline):
        return Cell(workload, mode, MEASURED_APART)
    reference = "pt2-nocg" if NOCG_REFERENCE in (status, judged_status(baseline, baseline)) else "eager"
    samples, base = row.get("samples_us") or [], baseline.get("samples_us") or []
    if not samples or not base:
        return Cell(workload, mode, NO_SAMPLES)
    ratios = paired_ratios(base, samples)
    m, b = median(samples), median(base)
    return Cell(workload, mode, OK, m, b, b / m, percentile(ratios, 10), percentile(ratios, 90),
                tuple(ratios), reference)


def speedup_cells(rows: Sequence[dict], modes: Iterable[str]) -> list[Cell]:
    """A cell per workload (in row order) and mode; a mode a workload did not run is absent."""
    index, modes = index_rows(rows), list(modes)
    cells = []
    for workload in workloads_in_order(rows):
        baseline = index.get((workload, BASELINE))
        for mode in modes:
            if (workload, mode) in index:
                cells.append(speedup_cell(workload, mode, index[(workload, mode)], baseline))
    return cells


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_cell(cells: Iterable[Cell], mode: str) -> Cell:
    """Geomean of ``mode``'s ok speedups; spread: p10..p90 over rounds of the per-round geomean."""
    ok = [c for c in cells if c.mode == mode and c.ok]
    if not ok:
        return Cell(GEOMEAN, mode, "no data")
    rounds = min(len(c.ratios) for c in ok)
    per_round = [geometric_mean([c.ratios[r] for c in ok]) for r in range(rounds)]
    return Cell(GEOMEAN, mode, OK, speedup=geometric_mean([c.speedup for c in ok]),
                p10=percentile(per_round, 10), p90=percentile(per_round, 90), ratios=tuple(per_round))


def with_geomeans(cells: list[Cell], modes: Iterable[str]) -> list[Cell]:
    return cells + [geomean_cell(cells, mode) for mode in modes]


def common_workloads(cells: Iterable[Cell], modes: Iterable[str]) -> set[str]:
    """The workloads ok in every one of ``modes`` that is ok anywhere (a mode with no row, such
    as lean replay's bar in a run from before it, does not empty the set)."""
    cells = [c for c in cells if c.workload != GEOMEAN]
    ok = {(c.workload, c.mode) for c in cells if c.ok}
    present = [m for m in modes if any(mode == m for _, mode in ok)]
    return {c.workload for c in cells if all((c.workload, m) in ok for m in present)}


def with_common_geomeans(cells: list[Cell], modes: Iterable[str], over: Iterable[str] | None = None) -> list[Cell]:
    """``cells`` and a geomean per mode over the same workloads: those every one of ``over``
    (default ``modes``) ran correctly (:func:`common_workloads`), so that an ablation's bars
    compare one set of workloads, not each bar its own. A mode outside ``over`` (PT2-CG beneath
    Figure 11's bars) has its geomean over those of them it ran correctly."""
    modes = list(modes)
    common = common_workloads(cells, modes if over is None else over)
    return cells + [geomean_cell([c for c in cells if c.workload in common], mode) for mode in modes]


# ---------------------------------------------------------------------------------------------
# Figures


def figure10(rows: Sequence[dict], out_dir_figures: Path = FIGURES_DIR,
             out_dir_processed: Path = RESULTS_DIR / "processed") -> list[Path]:
    """PT2-CG and GraCE speedup over PT2-NoCG per workload; returns the pdf, png and csv written."""
    cells = figure10_cells(rows)
    csv_path = _write_csv(Path(out_dir_processed) / "figure10.csv", _fig10_header(),
                          [_fig10_record(c) for c in cells])
    return _save(draw_figure10(rows, cells), Path(out_dir_figures), "figure10") + [csv_path]


def figure11(rows: Sequence[dict], out_dir_figures: Path = FIGURES_DIR,
             out_dir_processed: Path = RESULTS_DIR / "processed") -> list[Path]:
    """The ablation: CGCT, +PI, +SCG over PT2-NoCG, each stacked on PT2-CG's speedup."""
    cells = figure11_cells(rows)
    cg = pt2_cg_speedups(rows, common_workloads(cells, FIG11_MODES))
    records = [_fig11_record(c, cg.get(c.workload)) for c in cells]
    csv_path = _write_csv(Path(out_dir_processed) / "figure11.csv", _fig11_header(), records)
    return _save(draw_figure11(rows, cells, cg), Path(out_dir_figures), "figure11") + [csv_path]


def figure10_cells(rows: Sequence[dict]) -> list[Cell]:
    return with_geomeans(speedup_cells(rows, FIG10_MODES), FIG10_MODES)


def figure11_cells(rows: Sequence[dict]) -> list[Cell]:
    """Figure 11's cells; each bar's geomean is over the workloads every bar ran correctly."""
    return with_common_geomeans(speedup_cells(figure11_rows(rows), FIG11_MODES), FIG11_MODES)


def figure11_rows(rows: Sequence[dict]) -> list[dict]:
    """The run's rows, each ``grace`` row under the bar it ran as (:func:`fig11_row`)."""
    split = any(r.get("mode") == "grace-no-lean" for r in rows)
    return [fig11_row(r, split) for r in rows]


def fig11_row(row: dict, split: bool = False) -> dict:
    """``row`` as Figure 11 places it: a ``grace`` row that ran without lean replay is the "+SCG"
    bar (``grace-no-lean``), not the fourth. A row records the switches its worker ran with. One
    without them is a worker that failed before it said, in a run (``split``) that also ran
    ``grace-no-lean`` and so lean replay in ``grace``; or a row from before lean replay was on by
    default, when every benchmark mode ran with it off."""
    if row.get("mode") != "grace":
        return row
    switches = row.get("switches")
    lean = switches.get("GRACE_LEAN_REPLAY") == "1" if switches else split
    return row if lean else {**row, "mode": "grace-no-lean"}


def pt2_cg_speedups(rows: Sequence[dict], geomean_over: set[str] | None = None) -> dict[str, float]:
    """Workload (and "geomean") -> PT2-CG's ok speedup: the bottom segments of Figure 11; the
    geomean over ``geomean_over`` (the bars' workloads) where given, else over every ok one."""
    cells = speedup_cells(rows, [PT2_CG])
    chosen = cells if geomean_over is None else [c for c in cells if c.workload in geomean_over]
    return {c.workload: c.speedup for c in [*cells, geomean_cell(chosen, PT2_CG)] if c.ok}


def draw_figure10(rows: Sequence[dict], cells: Sequence[Cell]) -> Figure:
    return draw_speedup_bars(rows, cells, FIG10_MODES, "Figure 10: speedup over PT2-NoCG")


def draw_speedup_bars(rows: Sequence[dict], cells: Sequence[Cell], modes: dict[str, str],
                      title: str) -> Figure:
    """A bar per (workload, mode) cell, grouped by workload, geomean last."""
    groups = workloads_in_order(rows) + [GEOMEAN]
    fig, ax = _new_axes(len(groups), len(modes))
    width = 0.8 / len(modes)
    for i, (mode, label) in enumerate(modes.items()):
        offset = (i - (len(modes) - 1) / 2) * width
        for cell in (c for c in cells if c.mode == mode):
            _draw_cell(ax, groups.index(cell.workload) + offset, width, cell, COLORS[mode], label)
    _finish(fig, ax, groups, rows, title)
    return fig


def save_figure(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """``<out_dir>/<name>.pdf`` and ``.png``."""
    return _save(fig, Path(out_dir), name)


def draw_figure11(rows: Sequence[dict], cells: Sequence[Cell], cg: dict[str, float]) -> Figure:
    groups = workloads_in_order(rows) + [GEOMEAN]
    fig, ax = _new_axes(len(groups), len(FIG11_MODES))
    width = 0.8 / len(FIG11_MODES)
    for i, (mode, label) in enumerate(FIG11_MODES.items()):
        offset = (i - (len(FIG11_MODES) - 1) / 2) * width
        for cell in (c for c in cells if c.mode == mode):
            x = groups.index(cell.workload) + offset
            _draw_stacked_cell(ax, x, width, cell, cg.get(cell.workload), mode, label)
    common = len(common_workloads(cells, FIG11_MODES))
    _finish(fig, ax, groups, rows, "Figure 11: ablation, speedup over PT2-NoCG")
    ax.set_xticks(range(len(groups)), groups[:-1] + [f"geomean of the {common}\nevery bar ran"],
                  rotation=30, ha="right")
    return fig


def _new_axes(n_groups: int, bars_per_group: int) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(max(6.0, 0.55 * bars_per_group * n_groups + 3.0), 4.8))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _draw_cell(ax: Axes, x: float, width: float, cell: Cell, color: str, label: str) -> None:
    """A bar with its p10..p90 error bar, or the failure's name where a bar would be."""
    if not cell.ok:
        _annotate_failure(ax, x, cell.status)
        return
    ax.bar(x, cell.speedup, width, color=color, edgecolor="black", linewidth=0.5,
           label=label, yerr=_yerr(cell), capsize=2, error_kw={"linewidth": 0.8})
    _mark_reference(ax, x, width, cell)
    if cell.workload == GEOMEAN:
        _label_value(ax, x, cell)


def _draw_stacked_cell(ax: Axes, x: float, width: float, cell: Cell, cg: float | None,
                       mode: str, label: str) -> None:
    """Bottom segment PT2-CG's speedup, top segment the variant's gain over it.

    A variant slower than PT2-CG is drawn at its own height, hatched, with PT2-CG's level
    marked; without an ok PT2-CG row the bar is the variant's alone.
    """
    if not cell.ok:
        _annotate_failure(ax, x, cell.status)
        return
    style = {"edgecolor": "black", "linewidth": 0.5}
    if cg is not None and cell.speedup >= cg:
        ax.bar(x, cg, width, color=PT2_CG_SEGMENT, label="PT2-CG", **style)
        ax.bar(x, cell.speedup - cg, width, bottom=cg, color=COLORS[mode], label=label, **style)
    else:
        hatch = "////" if cg is not None else None
        ax.bar(x, cell.speedup, width, color=COLORS[mode], hatch=hatch, label=label, **style)
        if cg is not None:
            ax.add_patch(Rectangle((x, 0), 0, 0, facecolor="white", hatch=hatch,
                                   label="slower than PT2-CG", **style))
            ax.hlines(cg, x - width / 2, x + width / 2, colors="black", linestyles=":",
                      linewidth=1.2, label="PT2-CG (above the variant)")
    ax.errorbar(x, cell.speedup, yerr=_yerr(cell), fmt="none", ecolor="black", capsize=2,
                linewidth=0.8)
    _mark_reference(ax, x, width, cell)
    if cell.workload == GEOMEAN:
        _label_value(ax, x, cell)


def _mark_reference(ax: Axes, x: float, width: float, cell: Cell) -> None:
    """Cross-hatch a bar whose outputs were judged against PT2-NoCG, not eager."""
    if cell.reference == "pt2-nocg":
        ax.bar(x, cell.speedup, width, fill=False, hatch="xx", edgecolor="#b2182b", linewidth=0,
               label="judged against PT2-NoCG (eager differs for it too)")


def _yerr(cell: Cell) -> list[list[float]]:
    return [[max(cell.speedup - cell.p10, 0.0)], [max(cell.p90 - cell.speedup, 0.0)]]


def _label_value(ax: Axes, x: float, cell: Cell) -> None:
    ax.annotate(f"{cell.speedup:.2f}×", (x, max(cell.speedup, cell.p90)), xytext=(0, 2),
                textcoords="offset points", ha="center", va="bottom", fontsize=7)


def _annotate_failure(ax: Axes, x: float, status: str) -> None:
    transform = blended_transform_factory(ax.transData, ax.transAxes)
    ax.text(x, 0.02, status, transform=transform, rotation=90, ha="center", va="bottom",
            fontsize=7, color="#b2182b")


def _finish(fig: Figure, ax: Axes, groups: list[str], rows: Sequence[dict], title: str) -> None:
    ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.axvline(len(groups) - 1.5, color="grey", linewidth=0.5)
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("speedup over PT2-NoCG (×)")
    ax.set_title(f"{title}\n{_run_name(rows)}", fontsize=10)
    _dedup_legend(ax)
    fig.text(0.01, 0.01, FOOTNOTE.format(n=_iterations(rows)), fontsize=7, color="dimgrey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))


def _run_name(rows: Sequence[dict]) -> str:
    experiments = "+".join(dict.fromkeys(str(r.get("experiment", "?")) for r in rows))
    run_ids = "+".join(dict.fromkeys(str(r.get("run_id", "?")) for r in rows))
    return f"experiment {experiments}, run {run_ids}"


def _iterations(rows: Sequence[dict]) -> str:
    counts = sorted({len(r["samples_us"]) for r in rows if r.get("status") == OK and r.get("samples_us")})
    if not counts:
        return "0"
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def _dedup_legend(ax: Axes) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.pdf", out_dir / f"{name}.png"]
    for path in paths:
        fig.savefig(path, dpi=150)
        log.info("wrote %s", path)
    return paths


# ---------------------------------------------------------------------------------------------
# CSV and text table


def _fig10_header() -> list[str]:
    return ["workload", "mode", "status", "median_us", "nocg_median_us", "speedup",
            "speedup_p10", "speedup_p90", "reference"]


def _fig10_record(c: Cell) -> list[Any]:
    return [c.workload, c.mode, c.status, _num(c.median_us), _num(c.nocg_median_us),
            _num(c.speedup), _num(c.p10), _num(c.p90), c.reference if c.ok else ""]


def _fig11_header() -> list[str]:
    return ["workload", "variant", "status", "speedup", "pt2_cg_speedup", "p10", "p90", "reference"]


def _fig11_record(c: Cell, cg: float | None) -> list[Any]:
    return [c.workload, FIG11_MODES[c.mode], c.status, _num(c.speedup), _num(cg),
            _num(c.p10), _num(c.p90), c.reference if c.ok else ""]


def _num(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 6))


def _write_csv(path: Path, header: list[str], records: list[list[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(records)
    log.info("wrote %s", path)
    return path


def speedup_table(rows: Sequence[dict], modes: dict[str, str], common_over: Iterable[str] | None = None) -> str:
    """A text table: a line per workload (and geomean), a column per mode's speedup; with
    ``common_over``, the geomeans over the workloads those modes all ran correctly
    (:func:`with_common_geomeans`), as the figure draws them."""
    cells = speedup_cells(rows, modes)
    cells = with_geomeans(cells, modes) if common_over is None else with_common_geomeans(cells, modes, common_over)
    by_key = {(c.workload, c.mode): c for c in cells}
    width = max([len("workload")] + [len(c.workload) for c in cells])
    lines = [f"{'workload':<{width}}  " + "  ".join(f"{label:>11}" for label in modes.values())]
    for workload in workloads_in_order(rows) + [GEOMEAN]:
        entries = [_table_entry(by_key.get((workload, mode))) for mode in modes]
        lines.append(f"{workload:<{width}}  " + "  ".join(f"{e:>11}" for e in entries))
    return "\n".join(lines)


def _table_entry(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    return f"{cell.speedup:.2f}x" if cell.ok else cell.status
