"""The README's headline table from synthetic single-GPU rows (grace.report.headline)."""

from __future__ import annotations

from typing import Optional

from grace.report.headline import markdown, records


def _row(workload: str, mode: str, median: float, status: str = "ok", gpu: Optional[float] = None,
         errors: Optional[dict[str, float]] = None) -> dict:
    return {"workload": workload, "mode": mode, "status": status, "iter_us": {"median": median},
            "samples_us": [median] * 5, "gpu_us": None if gpu is None else {"median": gpu},
            "check": {"errors_by_sample": errors or {}}, "run_id": "R"}


def test_ratios_geomean_and_rows_that_are_not_right() -> None:
    rows = [_row("A", "pt2-nocg", 300.0), _row("A", "pt2-cg", 200.0), _row("A", "grace", 100.0, gpu=80.0),
            _row("EOS", "pt2-nocg", 100.0), _row("EOS", "pt2-cg", 140.0), _row("EOS", "grace", 125.0),
            _row("B", "pt2-nocg", 100.0), _row("B", "pt2-cg", 90.0), _row("B", "grace", 50.0, status="mismatch"),
            _row("C", "pt2-nocg", 100.0), _row("C", "pt2-cg", 90.0)]
    recs = {r["workload"]: r for r in records(rows)}
    a, eos = recs["A"], recs["EOS"]
    assert (a["grace_over_pt2_cg"], a["grace_over_best_stock"], a["iter_over_device"]) == (2.0, 2.0, 1.25)
    assert (eos["grace_over_pt2_cg"], eos["grace_over_best_stock"]) == (1.12, 0.8)
    assert eos["paper"] == "PT2-CG 0.71x of PT2-NoCG"
    assert recs["B"]["grace_over_pt2_cg"] is None and recs["B"]["status"] == "grace: mismatch"
    assert recs["C"]["status"] == "grace: not run"
    geo = records(rows)[-1]
    assert geo["workload"] == "geomean (2 of 4)"
    assert geo["grace_over_pt2_cg"] == round((2.0 * 1.12) ** 0.5, 3)
    table = markdown(records(rows), "R")
    assert "| B | grace: mismatch |" in table and "| A | 300.0 | 200.0 | 100.0 | 2.000 | 2.000 | 1.25 |" in table


def test_a_mismatch_no_further_from_eager_than_pt2_nocg_is_marked_not_dropped() -> None:
    rows = [_row("VM", "pt2-nocg", 100.0, status="mismatch", errors={"0": 0.2}),
            _row("VM", "pt2-cg", 80.0, status="mismatch", errors={"0": 0.2}),
            _row("VM", "grace", 60.0, status="mismatch", errors={"0": 0.21})]
    (vm, _) = records(rows)
    assert vm["status"] == "ok against PT2-NoCG" and vm["grace_over_pt2_cg"] == round(80 / 60, 3)
    assert "VM (judged against PT2-NoCG)" in markdown([vm], "R")


def test_the_runs_gpu_hours_sum_each_workloads_latest_wall_time() -> None:
    from grace.report.headline import one_gpu_hours

    rows = [{**_row("A", m, 1.0), "workload_wall_s": 1800.0} for m in ("pt2-cg", "grace")]
    rows += [{**_row("A", "pt2-nocg", 1.0), "workload_wall_s": 3600.0},  # a retried workload: its last rows count
             {**_row("B", "grace", 1.0), "workload_wall_s": 1800.0}, _row("C", "grace", 1.0)]
    assert one_gpu_hours(rows) == (1.5, 2, 1)
    table = markdown(records(rows), "R", one_gpu_hours(rows))
    assert "Its 2 workloads took 1.50 h of GPU time" in table and "1 more ran before" in table


def test_a_device_time_the_events_could_not_isolate_comes_from_the_profile_and_is_marked() -> None:
    from grace.report.headline import PROFILED_MARK

    rows = [_row("ST", "pt2-nocg", 300.0), _row("ST", "pt2-cg", 200.0),
            {**_row("ST", "grace", 100.0), "gpu_busy_us": [60.0, 40.0, 50.0]},
            _row("A", "pt2-nocg", 300.0), _row("A", "pt2-cg", 200.0),
            {**_row("A", "grace", 100.0, gpu=80.0), "gpu_busy_us": [10.0]}]
    recs = {r["workload"]: r for r in records(rows)}
    assert (recs["ST"]["iter_over_device"], recs["ST"]["device_from"]) == (2.0, "profile")
    assert (recs["A"]["iter_over_device"], recs["A"]["device_from"]) == (1.25, "events"), "the events' come first"
    table = markdown(records(rows), "R")
    assert f"| 2.00{PROFILED_MARK} |" in table and f"| 1.25{PROFILED_MARK}" not in table
    assert f"{PROFILED_MARK} the device time is a profile's" in table


def test_where_pt2_cg_raises_grace_is_compared_with_pt2_nocg_and_left_out_of_the_geomeans() -> None:
    rows = [_row("DALLE2", "pt2-nocg", 300.0), {**_row("DALLE2", "pt2-cg", 0.0, status="error"), "iter_us": None},
            _row("DALLE2", "grace", 100.0, gpu=50.0),
            _row("A", "pt2-nocg", 300.0), _row("A", "pt2-cg", 200.0), _row("A", "grace", 100.0)]
    recs = records(rows)
    dalle2, geo = recs[0], recs[-1]
    assert (dalle2["pt2_nocg_us"], dalle2["pt2_cg_us"], dalle2["grace_us"]) == (300.0, None, 100.0)
    assert (dalle2["grace_over_pt2_cg"], dalle2["grace_over_best_stock"], dalle2["iter_over_device"]) == (None, 3.0, 2.0)
    assert dalle2["status"] == "pt2-cg: error"
    assert geo["workload"] == "geomean (1 of 2)" and geo["grace_over_best_stock"] == 2.0
    assert "| DALLE2 | 300.0 | pt2-cg: error | 100.0 |  | 3.000 | 2.00 |" in markdown(recs, "R")
    rows[2]["status"] = "mismatch"  # GraCE wrong too: nothing to compare
    assert records(rows)[0]["grace_over_best_stock"] is None
