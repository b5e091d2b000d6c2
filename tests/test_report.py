"""Figures 10 and 11 from a fixed run: the speedup math, failed rows, files, and missing runs.

The fixture ``fixtures/bench_rows.jsonl`` is one run of 3 workloads x 6 modes, 20 samples each,
generated deterministically: mode ``m`` (index in eager, pt2-nocg, pt2-cg, grace-cgct,
grace-cgct-pi, grace) of a workload with base time ``B`` has
``samples[r] = B * (1 + 0.002 * ((7 * r + 3 * m) % 20))``, a permutation of ``B * (1 + 0.002 k)``,
so every median is ``B * 1.019`` and every speedup is exactly a ratio of bases:

===================  ======  ========  ======  ==========  =============  =====
workload             eager   pt2-nocg  pt2-cg  grace-cgct  grace-cgct-pi  grace
===================  ======  ========  ======  ==========  =============  =====
micro-eos            900     400       250     200         160            100
micro-attn-numpy     300     120       error   60          40             40
micro-item           200     80        64      100         50 mismatch    40
===================  ======  ========  ======  ==========  =============  =====
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grace.paths import REPO_ROOT
from grace.report import __main__ as cli
from grace.report.figures import (FIG11_MODES, MEASURED_APART, ReportError, common_workloads, draw_figure10, draw_figure11,
                                  figure10, figure10_cells, figure11, figure11_cells, load_run,
                                  figure11_rows, paired_ratios, pt2_cg_speedups, speedup_cells, speedup_table)

FIXTURE = Path(__file__).parent / "fixtures" / "bench_rows.jsonl"
RUN_ID = "20261122-101500-abcd"


@pytest.fixture
def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    """A results/ tree holding the fixture as the latest single_gpu run."""
    run = tmp_path / "results" / "raw" / "single_gpu" / RUN_ID
    run.mkdir(parents=True)
    shutil.copy(FIXTURE, run / "rows.jsonl")
    (run.parent / "latest.txt").write_text(RUN_ID + "\n")
    return tmp_path / "results"


def by_key(cells) -> dict:
    return {(c.workload, c.mode): c for c in cells}


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="") as f:
        records = list(csv.DictReader(f))
    key = "mode" if "mode" in records[0] else "variant"
    return {(r["workload"], r[key]): r for r in records}


def fixture_samples(rows: list[dict], workload: str, mode: str) -> np.ndarray:
    (row,) = [r for r in rows if r["workload"] == workload and r["mode"] == mode]
    return np.asarray(row["samples_us"])


# --- the math ---------------------------------------------------------------------------------


def test_speedup_is_ratio_of_medians(rows):
    cells = by_key(figure10_cells(rows))
    assert cells["micro-eos", "pt2-cg"].speedup == pytest.approx(400 / 250)
    assert cells["micro-eos", "grace"].speedup == pytest.approx(400 / 100)
    assert cells["micro-attn-numpy", "grace"].speedup == pytest.approx(120 / 40)
    assert cells["micro-item", "pt2-cg"].speedup == pytest.approx(80 / 64)
    assert cells["micro-item", "grace"].speedup == pytest.approx(80 / 40)
    assert cells["micro-eos", "grace"].median_us == pytest.approx(100 * 1.019)
    assert cells["micro-eos", "grace"].nocg_median_us == pytest.approx(400 * 1.019)


def test_spread_is_p10_p90_of_paired_ratios(rows):
    cell = by_key(figure10_cells(rows))["micro-eos", "pt2-cg"]
    ratios = fixture_samples(rows, "micro-eos", "pt2-nocg") / fixture_samples(rows, "micro-eos", "pt2-cg")
    assert cell.p10 == pytest.approx(np.percentile(ratios, 10))
    assert cell.p90 == pytest.approx(np.percentile(ratios, 90))
    assert cell.p10 < cell.speedup < cell.p90


def test_unequal_sample_counts_pair_the_common_prefix(rows):
    assert paired_ratios([10.0, 20.0, 30.0], [5.0, 10.0]) == [2.0, 2.0]
    for row in rows:
        if row["workload"] == "micro-eos" and row["mode"] == "grace":
            row["samples_us"] = row["samples_us"][:12]
    cell = by_key(figure10_cells(rows))["micro-eos", "grace"]
    nocg, grace = fixture_samples(rows, "micro-eos", "pt2-nocg"), fixture_samples(rows, "micro-eos", "grace")
    assert len(cell.ratios) == 12
    assert cell.p90 == pytest.approx(np.percentile(nocg[:12] / grace, 90))
    assert cell.speedup == pytest.approx(np.median(nocg) / np.median(grace))


def test_a_mode_timed_in_another_process_than_its_baseline_is_no_bar_and_no_geomean_term(rows):
    """A mode rerun in a later call (perhaps on another GPU) has no rounds to pair with the
    baseline's: its cell says so instead of dividing numbers from two machines."""
    for row in rows:
        row["invocation"] = "host:1:0"
        if (row["workload"], row["mode"]) == ("micro-eos", "grace"):
            row["invocation"] = "host:2:0"
    fig10 = by_key(figure10_cells(rows))
    assert fig10["micro-eos", "grace"].status == MEASURED_APART and fig10["micro-eos", "grace"].speedup is None
    assert fig10["micro-eos", "pt2-cg"].speedup == pytest.approx(400 / 250)
    assert fig10["geomean", "grace"].speedup == pytest.approx((3.0 * 2.0) ** (1 / 2))


def test_rows_that_name_no_process_compare_by_command_and_gpu(rows):
    """Rows written before rows named their process: one runner's command line and GPU, which a
    resumed call's --attempts-before changes."""
    for row in rows:
        row.pop("invocation", None)
        row["command"], row["machine"] = "python3 -m grace.bench --attempts-before 1", {"gpu": "NVIDIA H100"}
    assert by_key(figure10_cells(rows))["micro-eos", "grace"].status == "ok"
    for row in rows:
        if (row["workload"], row["mode"]) == ("micro-eos", "grace"):
            row["machine"] = {"gpu": "NVIDIA H200"}
        if (row["workload"], row["mode"]) == ("micro-item", "grace"):
            row["command"] = "python3 -m grace.bench --attempts-before 2"
    cells = by_key(figure10_cells(rows))
    assert cells["micro-eos", "grace"].status == cells["micro-item", "grace"].status == MEASURED_APART


def test_geomean_uses_only_workloads_where_both_rows_are_ok(rows):
    fig10 = by_key(figure10_cells(rows))
    assert fig10["geomean", "pt2-cg"].speedup == pytest.approx((1.6 * 1.25) ** 0.5)  # attn errored
    assert fig10["geomean", "grace"].speedup == pytest.approx((4.0 * 3.0 * 2.0) ** (1 / 3))
    assert pt2_cg_speedups(rows)["geomean"] == pytest.approx(2 ** 0.5)


def test_figure_11_bars_are_geomeans_over_the_workloads_every_bar_ran_correctly(rows):
    """micro-item's "+PI" row is a mismatch: every bar's geomean leaves micro-item out, CGCT's
    too, so that the bars compare one set (micro-eos, micro-attn-numpy); PT2-CG's bottom
    segment is over those of them it ran (micro-eos: it raised on micro-attn-numpy)."""
    fig11 = by_key(figure11_cells(rows))
    assert fig11["micro-item", "grace-cgct"].ok
    assert fig11["geomean", "grace-cgct"].speedup == pytest.approx((2.0 * 2.0) ** 0.5)
    assert fig11["geomean", "grace-cgct-pi"].speedup == pytest.approx((2.5 * 3.0) ** 0.5)
    assert fig11["geomean", "grace-no-lean"].speedup == pytest.approx((4.0 * 3.0) ** 0.5)
    assert common_workloads(figure11_cells(rows), FIG11_MODES) == {"micro-eos", "micro-attn-numpy"}
    assert pt2_cg_speedups(rows, {"micro-eos", "micro-attn-numpy"})["geomean"] == pytest.approx(1.6)
    table = speedup_table(figure11_rows(rows), {"pt2-cg": "PT2-CG", **FIG11_MODES}, common_over=FIG11_MODES)
    assert table.splitlines()[-1].split()[1:4] == ["1.60x", "2.00x", f"{(2.5 * 3.0) ** 0.5:.2f}x"], \
        "the printed table's geomeans are the figure's"


def test_figure_11_places_a_grace_row_by_the_lean_replay_it_ran_with(rows):
    """A GraCE row without recorded switches (the fixture's, from before lean replay was on by
    default) or with lean replay off is the "+SCG" bar; one that ran with it is the fourth."""
    fig11 = by_key(figure11_cells(rows))
    assert fig11["micro-item", "grace-no-lean"].speedup == pytest.approx(2.0)
    assert not fig11["geomean", "grace"].ok, "no row ran with lean replay"
    lean = [{**r, "switches": {"GRACE_LEAN_REPLAY": "1"}} if r["mode"] == "grace" else r for r in rows]
    fig11 = by_key(figure11_cells(lean))
    assert fig11["micro-item", "grace"].speedup == pytest.approx(2.0)
    assert fig11["geomean", "grace"].speedup == pytest.approx((4.0 * 3.0) ** 0.5)
    assert not fig11["geomean", "grace-no-lean"].ok
    off = [{**r, "switches": {"GRACE_LEAN_REPLAY": "0"}} for r in rows]
    assert by_key(figure11_cells(off))["geomean", "grace-no-lean"].ok


def test_figure_11_keeps_a_failed_grace_row_at_lean_replay_in_a_run_that_also_ran_grace_no_lean(rows):
    """A worker that fails before it reports its switches leaves a row without them; where the
    run has ``grace-no-lean`` rows of its own, that row is the fourth bar's failure and must not
    take the place of the "+SCG" row."""
    no_lean = [{**r, "mode": "grace-no-lean", "switches": {"GRACE_LEAN_REPLAY": "0"}} for r in rows
               if r["mode"] == "grace"]
    failed = [{**r, "status": "error", "switches": None} if r["mode"] == "grace" and r["workload"] == "micro-eos"
              else {**r, "switches": {"GRACE_LEAN_REPLAY": "1"}} if r["mode"] == "grace" else r for r in rows]
    fig11 = by_key(figure11_cells(failed + no_lean))
    assert fig11["micro-eos", "grace-no-lean"].ok
    assert fig11["micro-eos", "grace"].status == "error"


def test_geomean_spread_is_over_per_round_geomeans(rows):
    cell = by_key(figure10_cells(rows))["geomean", "grace"]
    ratios = np.array([fixture_samples(rows, w, "pt2-nocg") / fixture_samples(rows, w, "grace")
                       for w in ("micro-eos", "micro-attn-numpy", "micro-item")])
    per_round = np.exp(np.log(ratios).mean(axis=0))
    assert cell.p10 == pytest.approx(np.percentile(per_round, 10))
    assert cell.p90 == pytest.approx(np.percentile(per_round, 90))


def test_missing_mode_is_absent_and_missing_baseline_is_named(rows):
    rows = [r for r in rows if (r["workload"], r["mode"]) not in
            {("micro-eos", "grace"), ("micro-item", "pt2-nocg")}]
    cells = by_key(speedup_cells(rows, ["pt2-cg", "grace"]))
    assert ("micro-eos", "grace") not in cells
    assert cells["micro-item", "grace"].status == "no baseline"
    assert cells["micro-item", "grace"].speedup is None
    fig10 = by_key(figure10_cells(rows))
    assert fig10["geomean", "grace"].speedup == pytest.approx(3.0)  # attn-numpy only


# --- failed rows are never valid bars ---------------------------------------------------------


def test_failed_rows_have_empty_speedups_in_the_csvs(rows, tmp_path):
    figure10(rows, tmp_path / "figures", tmp_path / "processed")
    figure11(rows, tmp_path / "figures", tmp_path / "processed")
    fig10 = read_csv(tmp_path / "processed" / "figure10.csv")
    error = fig10["micro-attn-numpy", "pt2-cg"]
    assert error["status"] == "error"
    assert error["speedup"] == error["speedup_p10"] == error["median_us"] == ""
    assert float(fig10["micro-eos", "grace"]["speedup"]) == pytest.approx(4.0)
    assert float(fig10["geomean", "pt2-cg"]["speedup"]) == pytest.approx(2 ** 0.5)
    fig11 = read_csv(tmp_path / "processed" / "figure11.csv")
    mismatch = fig11["micro-item", "+PI"]
    assert mismatch["status"] == "mismatch"
    assert mismatch["speedup"] == mismatch["p10"] == mismatch["p90"] == ""
    assert fig11["micro-attn-numpy", "CGCT"]["pt2_cg_speedup"] == ""  # PT2-CG errored there
    assert float(fig11["micro-item", "CGCT"]["pt2_cg_speedup"]) == pytest.approx(1.25)
    assert {k[0] for k in fig11} == {"micro-eos", "micro-attn-numpy", "micro-item", "geomean"}


def bar_counts(fig) -> dict[str, int]:
    counts: dict[str, int] = {}
    for container in fig.axes[0].containers:
        if container.get_label() and hasattr(container, "patches"):
            counts[container.get_label()] = counts.get(container.get_label(), 0) + len(container.patches)
    return counts


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_figure10_draws_no_bar_for_a_failed_row(rows):
    fig = draw_figure10(rows, figure10_cells(rows))
    assert bar_counts(fig) == {"PT2-CG": 3, "GraCE": 4}  # 3 workloads + geomean, PT2-CG errored once
    assert "error" in texts(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "micro-eos", "micro-attn-numpy", "micro-item", "geomean"]
    assert RUN_ID in fig.axes[0].get_title() and "single_gpu" in fig.axes[0].get_title()
    assert any("20 interleaved iterations" in t.get_text() for t in fig.texts)


def test_figure11_stacks_on_pt2_cg_and_marks_slower_variants(rows):
    fig = draw_figure11(rows, figure11_cells(rows), pt2_cg_speedups(rows))
    counts = bar_counts(fig)
    assert counts["+PI"] == 3  # micro-eos, micro-attn-numpy, geomean: the mismatch is no bar
    assert "mismatch" in texts(fig)
    # PT2-CG bottoms: every ok variant whose workload has an ok PT2-CG row and that beats it
    assert counts["PT2-CG"] == 3 + 1 + 3  # eos x3, item +SCG, geomean x3
    hatched = [p for p in fig.axes[0].patches if p.get_hatch() and p.get_height() > 0]
    assert len(hatched) == 1 and hatched[0].get_height() == pytest.approx(0.8)  # micro-item CGCT


# --- files, loading, CLI ----------------------------------------------------------------------


def test_figures_write_pdf_png_csv(rows, tmp_path):
    for draw, name in ((figure10, "figure10"), (figure11, "figure11")):
        paths = draw(rows, tmp_path / "figures", tmp_path / "processed")
        assert paths == [tmp_path / "figures" / f"{name}.pdf", tmp_path / "figures" / f"{name}.png",
                         tmp_path / "processed" / f"{name}.csv"]
        assert paths[0].read_bytes().startswith(b"%PDF")
        assert paths[1].read_bytes().startswith(b"\x89PNG")
        assert paths[2].read_text().count("\ngeomean,") >= 2


def test_load_run_reads_latest_or_named_run(results_dir):
    assert len(load_run(results_dir=results_dir)) == 18
    assert load_run("single_gpu", RUN_ID, results_dir)[0]["run_id"] == RUN_ID


def test_load_run_reads_a_packed_run(results_dir, tmp_path, monkeypatch):
    from grace.report import archive

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path / "cache"))
    archive.pack(results_dir / "raw" / "single_gpu" / RUN_ID)
    assert len(load_run(results_dir=results_dir)) == 18


def test_load_run_without_a_run_says_so(tmp_path):
    with pytest.raises(ReportError, match="no run of experiment 'single_gpu'.*latest.txt is missing"):
        load_run(results_dir=tmp_path)
    with pytest.raises(ReportError, match="no rows for run 'nope'"):
        load_run("single_gpu", "nope", tmp_path)


def test_load_run_names_a_bad_line(results_dir):
    rows = results_dir / "raw" / "single_gpu" / RUN_ID / "rows.jsonl"
    rows.write_text(rows.read_text() + "{truncated\n")
    with pytest.raises(ReportError, match=r"rows.jsonl:19: not a JSON row"):
        load_run(results_dir=results_dir)


def test_cli_prints_paths_and_table(results_dir, tmp_path, capsys):
    assert cli.main(["figure10", "--results-dir", str(results_dir),
                     "--figures-dir", str(tmp_path / "figs")]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'figs' / 'figure10.png'}" in out
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines()[5:]}
    assert table["micro-eos"] == ["1.60x", "4.00x"]
    assert table["micro-attn-numpy"] == ["error", "3.00x"]
    assert table["geomean"] == ["1.41x", "2.88x"]


def test_cli_without_a_run_exits_2_with_one_line(tmp_path, capsys):
    assert cli.main(["figure11", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run of experiment 'single_gpu'" in err


@pytest.mark.parametrize("figure", ["figure10", "figure11"])
def test_script_runs_the_report(figure, results_dir, tmp_path):
    script = REPO_ROOT / "scripts" / f"generate_{figure}.sh"
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script), "--results-dir", str(results_dir),
                           "--figures-dir", str(tmp_path / "figs")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "figs" / f"{figure}.png").is_file()
    assert (results_dir / "processed" / f"{figure}.csv").is_file()


def test_report_imports_without_torch():
    code = ("import sys, grace.report.figures, grace.report.__main__; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr or "grace.report imported torch"


# --- SCG tables and Figure 13 ---------------------------------------------------------------

def _scg_row(workload: str, mode: str, median: float, compile_s: float, graphs: list[tuple[str, str, str]] | None = None,
             status: str = "ok") -> dict:
    scg = None
    if graphs is not None:
        recs = [{"name": n, "mode": "inference", "kernels": ["k"], "copied_inputs": 1, "copied_bytes": 64,
                 "choice": c, "source": src, "reason": "", "medians_us": {"no-graph": 1.0, "graph": 2.0},
                 "p10_us": {}, "p90_us": {}, "profile_s": 0.25, "code_sha256": None} for n, c, src in graphs]
        scg = {"summary": {"total": len(recs), "enabled": sum(r["choice"] != "no-graph" for r in recs),
                           "disabled": sum(r["choice"] == "no-graph" for r in recs), "with_pi": 0,
                           "profiled": sum(r["source"] == "profiled" for r in recs),
                           "from_cache": sum(r["source"] == "cache" for r in recs), "fallbacks": 0,
                           "profile_s": 0.25 * len(recs)}, "graphs": recs}
    return {"workload": workload, "mode": mode, "status": status, "samples_us": [median] * 5,
            "compile_s": compile_s, "scg": scg}


def test_scg_tables_never_slower_and_compile_overhead(tmp_path: Path) -> None:
    from grace.report import records, scg

    first = [_scg_row("eos", "pt2-nocg", 40.0, 3.0), _scg_row("eos", "pt2-cg", 78.0, 3.0),
             _scg_row("eos", "grace", 40.5, 3.3, [("partition_0", "no-graph", "profiled")]),
             _scg_row("mlp", "pt2-nocg", 900.0, 4.0), _scg_row("mlp", "pt2-cg", 300.0, 4.0),
             _scg_row("mlp", "grace", 330.0, 5.0, [("partition_0", "graph", "profiled"), ("partition_1", "no-graph", "profiled")]),
             _scg_row("bad", "pt2-nocg", 1.0, 1.0), _scg_row("bad", "pt2-cg", 1.0, 1.0, status="error"),
             _scg_row("bad", "grace", 1.0, 1.0, [])]
    t4 = {r["workload"]: r for r in scg.table4(first)}
    assert (t4["mlp"]["total"], t4["mlp"]["enabled"], t4["mlp"]["disabled"]) == (2, 1, 1)
    assert [d["choice"] for d in scg.decisions(first)] == ["no-graph", "graph", "no-graph"]
    ns = {r["workload"]: r for r in scg.never_slower(first)}
    assert ns["eos"]["best_stock"] == "pt2-nocg" and ns["eos"]["within_2pct"] is True
    assert ns["mlp"]["best_stock"] == "pt2-cg" and ns["mlp"]["within_2pct"] is False  # 10% slower
    assert ns["bad"]["status"].startswith("incomplete") and "pt2-cg error" in ns["bad"]["status"]
    # eager no reference (PT2-NoCG mismatches it too): judged against PT2-NoCG, as the headline does
    vm = [dict(_scg_row("vm", m, t, 1.0), check={"errors_by_sample": {"0": e}})
          for m, t, e in (("pt2-nocg", 90.0, 0.2), ("pt2-cg", 80.0, 0.2), ("grace", 79.0, 0.21))]
    for r in vm:
        r["status"] = "mismatch"
    (judged,) = scg.never_slower(vm)
    assert judged["status"] == "ok against PT2-NoCG" and judged["best_stock"] == "pt2-cg"
    vm[2]["check"] = {"errors_by_sample": {"0": 0.9}}  # far further from eager than PT2-NoCG: wrong
    (wrong,) = scg.never_slower(vm)
    assert wrong["status"] == "incomplete: grace mismatch" and wrong["grace_over_best"] is None
    second = [_scg_row("eos", "pt2-cg", 78.0, 2.0),
              _scg_row("eos", "grace", 40.0, 2.2, [("partition_0", "no-graph", "cache")])]
    co = {r["workload"]: r for r in scg.compile_overhead(first, second)}
    assert co["eos"]["grace_first_norm"] == 1.1 and co["eos"]["grace_second_norm"] == 1.1
    assert co["mlp"]["grace_second_s"] is None
    paths = scg.draw_figure13(list(co.values()), tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)
    csv_path = records.write_csv(tmp_path / "t4.csv", scg.table4(first))
    assert csv_path.read_text().splitlines()[0].startswith("workload,status,total,enabled,disabled,with_pi")


def test_scg_tables_take_a_rerun_workloads_last_row_and_never_compare_rows_measured_apart() -> None:
    from grace.report import scg

    rows = [_scg_row("mlp", "pt2-nocg", 900.0, 4.0), _scg_row("mlp", "pt2-cg", 300.0, 4.0),
            _scg_row("mlp", "grace", 330.0, 5.0, [("partition_0", "graph", "profiled")])]
    for row in rows:
        row["invocation"] = "call 1"
    rerun = [dict(r, invocation="call 2") for r in rows[:2]]
    rerun.append(dict(_scg_row("mlp", "grace", 290.0, 5.0, [("partition_0", "graph", "cache"),
                                                           ("partition_1", "no-graph", "profiled")]),
                      invocation="call 2"))
    assert [r["total"] for r in scg.table4(rows + rerun)] == [2]
    assert [d["source"] for d in scg.decisions(rows + rerun)] == ["cache", "profiled"]
    (ns,) = scg.never_slower(rows + rerun)
    assert ns["status"] == "ok" and ns["grace_us"] == 290.0
    (apart,) = scg.never_slower(rows[:2] + rerun[2:])
    assert apart["status"].startswith("measured apart") and apart["grace_over_best"] is None


# --- The PT2 baseline table -------------------------------------------------------------------

def _baseline_row(workload: str, mode: str, samples: list[float], **extra) -> dict:
    row = {"workload": workload, "mode": mode, "model": workload.lower(), "suite": "s", "kind": "inference",
           "batch_size": 2, "status": "ok", "samples_us": samples, "compile_s": 10.0, "error": None,
           "cuda_graphs": 0, "cudagraph_skips": [], "partition_reasons": {}, "check": {"max_rel_err": 0.0}}
    row.update(extra)
    return row


def test_baseline_table_has_a_row_per_workload_with_failures_kept(tmp_path: Path) -> None:
    from grace.report import baseline

    rows = [
        _baseline_row("A", "eager", [300.0] * 4, compile_s=None),
        _baseline_row("A", "pt2-nocg", [200.0, 210.0, 190.0, 200.0]),
        _baseline_row("A", "pt2-cg", [100.0, 100.0, 95.0, 100.0], cuda_graphs=2, compile_s=12.5,
                      cudagraph_skips=["skipping cudagraphs due to cpu device (arg1_1)"],
                      partition_reasons={"DeviceCopy ops": 1, "partition includes all ops when cudagraphs is disabled": 3}),
        _baseline_row("B", "pt2-nocg", [50.0] * 4),
        _baseline_row("B", "pt2-cg", [], status="error", error="RuntimeError: " + "x" * 1000, samples_us=None),
    ]
    by_name = {r["workload"]: r for r in baseline.baseline_records(rows)}
    a, b = by_name["A"], by_name["B"]
    assert (a["eager_median_us"], a["pt2_nocg_median_us"], a["pt2_cg_median_us"]) == (300.0, 200.0, 100.0)
    assert a["cg_over_nocg"] == 2.0 and a["cg_over_nocg_p10"] <= 2.0 <= a["cg_over_nocg_p90"]
    assert a["cuda_graphs"] == 2 and a["pt2_cg_compile_s"] == 12.5
    assert "cpu device" in a["cudagraph_skips"]
    assert a["partition_reasons"] == "DeviceCopy ops (x1)", "the no-cudagraphs marker is not a reason"
    assert a["errors"] == ""
    assert b["eager_status"] == "not run" and b["pt2_cg_status"] == "error"
    assert b["cg_over_nocg"] is None and b["pt2_cg_median_us"] is None
    assert b["errors"].startswith("pt2-cg: RuntimeError") and len(b["errors"]) < 320
    geo = baseline.geomean_record(rows)
    assert geo["workloads"] == 1 and geo["cg_over_nocg"] == 2.0
    paths = baseline.draw(rows, tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)


def test_baseline_table_keeps_listed_workloads_the_run_never_reached(tmp_path: Path) -> None:
    from grace.bench.configs import parse_config
    from grace.report import baseline

    config = tmp_path / "workloads_x.txt"
    config.write_text("# short model suite mode batch\nDR-T  nvidia_deeprecommender  torchbench  T  8\n"
                      "micro-eos  eos_like  micro  I  2\n")
    rows = [_baseline_row("micro-eos", mode, [100.0] * 4) for mode in ("eager", "pt2-nocg", "pt2-cg")]
    records = baseline.baseline_records(rows, baseline.planned(parse_config(config)))
    assert [r["workload"] for r in records] == ["DR-T", "micro-eos"], "the list's order"
    dr = records[0]
    assert (dr["model"], dr["kind"], dr["batch_size"]) == ("nvidia_deeprecommender", "training", 8)
    assert dr["eager_status"] == dr["pt2_nocg_status"] == dr["pt2_cg_status"] == "not run"
    assert dr["cg_over_nocg"] is None and dr["errors"] == ""
    assert records[1]["pt2_cg_status"] == "ok"


# --- judging against PT2-NoCG where eager is no reference ------------------------------------


def _judged_row(mode: str, status: str, errors: dict[str, float] | None, base_us: float,
                tolerance: float = 1e-4) -> dict:
    return {"workload": "VM", "mode": mode, "status": status, "samples_us": [base_us] * 5,
            "check": {"errors_by_sample": errors, "tolerance": tolerance} if errors is not None else {}}


def test_where_pt2_nocg_differs_from_eager_a_mode_no_further_from_it_is_judged_right():
    from grace.report.judge import NOCG_REFERENCE, judged_status

    nocg = _judged_row("pt2-nocg", "mismatch", {"0": 0.2, "1": 0.3}, 400.0)
    close = _judged_row("grace", "mismatch", {"0": 0.25, "1": 0.3}, 100.0)
    far = _judged_row("pt2-cg", "mismatch", {"0": 0.2, "1": 3.0}, 200.0)
    assert judged_status(close, nocg) == NOCG_REFERENCE
    assert judged_status(far, nocg) == "mismatch", "one sample ten times further than PT2-NoCG's"
    assert judged_status(nocg, nocg) == NOCG_REFERENCE, "PT2-NoCG is the reference itself"
    assert judged_status(_judged_row("grace", "mismatch", None, 1.0), nocg) == "mismatch", "no errors: no judging"
    assert judged_status(_judged_row("grace", "mismatch", {"0": float("nan")}, 1.0),
                         _judged_row("pt2-nocg", "mismatch", {"0": 1.0}, 1.0)) == "mismatch"
    eager_ok = _judged_row("pt2-nocg", "ok", {"0": 0.0}, 400.0)
    assert judged_status(close, eager_ok) == "mismatch", "PT2-NoCG matched eager: eager stays the reference"
    assert judged_status(_judged_row("grace", "error", None, 1.0), nocg) == "error"
    # DCGAN: PT2-NoCG equal to eager on a sample where the mode rounds within the check's tolerance
    nocg_exact = _judged_row("pt2-nocg", "mismatch", {"0": 0.0, "25": 5.9e-3}, 400.0, tolerance=5e-3)
    rounding = _judged_row("grace", "mismatch", {"0": 2.6e-4, "25": 5.9e-3}, 100.0, tolerance=5e-3)
    assert judged_status(rounding, nocg_exact) == NOCG_REFERENCE
    beyond = _judged_row("grace", "mismatch", {"0": 6e-3, "25": 5.9e-3}, 100.0, tolerance=5e-3)
    assert judged_status(beyond, nocg_exact) == "mismatch", "past the tolerance where PT2-NoCG is exact"
    # rows that name their failed samples: a sample an arbiter passed is right whatever its error
    beyond["check"]["failed_samples"] = ["25"]
    assert judged_status(beyond, nocg_exact) == NOCG_REFERENCE
    beyond["check"]["failed_samples"] = ["0", "25"]
    assert judged_status(beyond, nocg_exact) == "mismatch"

    cells = by_key(speedup_cells([nocg, close, far], ["pt2-cg", "grace"]))
    assert cells[("VM", "grace")].ok and cells[("VM", "grace")].speedup == pytest.approx(4.0)
    assert cells[("VM", "grace")].reference == "pt2-nocg"
    assert cells[("VM", "pt2-cg")].status == "mismatch" and not cells[("VM", "pt2-cg")].ok


def test_figure13_stacks_gracess_compile_time_by_optimization_where_the_run_has_each_mode(tmp_path: Path) -> None:
    from grace.report import scg

    rows = [_scg_row("mlp", "pt2-cg", 300.0, 4.0), _scg_row("mlp", "grace-cgct", 300.0, 4.4),
            _scg_row("mlp", "grace-cgct-pi", 300.0, 4.2), _scg_row("mlp", "grace", 300.0, 6.0, []),
            _scg_row("eos", "pt2-cg", 78.0, 3.0), _scg_row("eos", "grace", 40.0, 3.3, [])]
    co = {r["workload"]: r for r in scg.compile_overhead(rows)}
    assert (co["mlp"]["cgct_norm"], co["mlp"]["cgct_pi_norm"], co["mlp"]["grace_first_norm"]) == (1.1, 1.05, 1.5)
    segments = scg._stacked_segments(co["mlp"])
    assert [(label, round(bottom, 3), round(height, 3)) for label, _, bottom, height in segments] == [
        ("CGCT", 1.0, 0.1), ("+PI", 1.1, 0.0), ("+SCG", 1.1, 0.4)], "PI compiled faster than CGCT: nothing drawn for it"
    assert co["eos"]["cgct_norm"] is None and scg._stacked_segments(co["eos"]) is None, "the SCG sweep has no CGCT modes"
    assert all(p.stat().st_size > 0 for p in scg.draw_figure13(list(co.values()), tmp_path))
