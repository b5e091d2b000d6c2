"""Figure 9's records and drawing from synthetic bench rows."""

from __future__ import annotations

from pathlib import Path

from grace.report.figure9 import draw, records


def _row(k: int, mode: str, median: float, status: str = "ok") -> dict:
    return {"workload": f"micro-ptr-{k}", "mode": mode, "status": status,
            "iter_us": {"median": median, "p10": median * 0.9, "p90": median * 1.1} if status == "ok" else None}


def test_records_are_per_input_count_with_ratios_to_pt2_cg(tmp_path: Path) -> None:
    rows = [_row(1, "pt2-cg", 20.0), _row(1, "grace-cgct-pi", 18.0), _row(1, "pt2-nocg", 30.0),
            _row(8, "pt2-cg", 50.0), _row(8, "grace-cgct-pi", 25.0, status="mismatch"),
            {"workload": "micro-eos", "mode": "pt2-cg", "status": "ok", "iter_us": {"median": 1, "p10": 1, "p90": 1}}]
    recs = records(rows)
    assert [(r["inputs"], r["mode"]) for r in recs] == [(1, "pt2-nocg"), (1, "pt2-cg"), (1, "grace-cgct-pi"),
                                                       (8, "pt2-cg"), (8, "grace-cgct-pi")]
    assert recs[2]["over_pt2_cg"] == 0.9
    assert recs[4]["median_us"] is None and recs[4]["status"] == "mismatch", "a failed row keeps its status, no time"
    paths = draw(recs, tmp_path)
    assert {p.suffix for p in paths} == {".pdf", ".png"} and all(p.stat().st_size > 0 for p in paths)


def test_device_times_get_their_own_columns_and_panel(tmp_path: Path) -> None:
    rows = [_row(1, "pt2-cg", 20.0), _row(1, "grace-cgct-pi", 18.0), _row(1, "grace-cgct-pi-exec", 19.0)]
    rows[0]["gpu_us"] = {"median": 10.0, "p10": 9.0, "p90": 11.0}
    rows[1]["gpu_us"] = {"median": 4.0, "p10": 3.5, "p90": 4.5}  # exec-update's row has none
    recs = {r["mode"]: r for r in records(rows)}
    assert recs["grace-cgct-pi"]["gpu_median_us"] == 4.0 and recs["grace-cgct-pi"]["gpu_over_pt2_cg"] == 0.4
    assert recs["grace-cgct-pi-exec"]["gpu_median_us"] is None and recs["grace-cgct-pi-exec"]["gpu_over_pt2_cg"] is None
    import matplotlib.image

    (png,) = [p for p in draw(list(recs.values()), tmp_path) if p.suffix == ".png"]
    (one,) = [p for p in draw(records([_row(1, "pt2-cg", 20.0)]), tmp_path / "one") if p.suffix == ".png"]
    assert matplotlib.image.imread(png).shape[1] > 1.5 * matplotlib.image.imread(one).shape[1], "two panels"
