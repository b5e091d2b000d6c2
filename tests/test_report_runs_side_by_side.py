"""Two runs' rows of the same workloads side by side (grace.report.runs_side_by_side)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grace.report.runs_side_by_side import main, pairs


def _row(workload: str, mode: str, median: float | None, status: str = "ok") -> dict:
    iter_us = None if median is None else {"median": median, "p10": median * 0.9, "p90": median * 1.2}
    return {"workload": workload, "mode": mode, "status": status, "iter_us": iter_us,
            "samples_us": [] if median is None else [median] * 5}


def test_only_modes_timed_in_both_runs_pair_up_in_the_first_runs_order() -> None:
    first = [_row("ALNET", "pt2-cg", 704.0), _row("ALNET", "grace", 656.0), _row("MMC", "pt2-cg", 7210.0),
             _row("DALLE2", "pt2-cg", None, status="error")]
    second = [_row("MMC", "pt2-cg", 7069.0), _row("ALNET", "pt2-cg", 600.0), _row("ALNET", "pt2-cg", 570.0),
              _row("DALLE2", "pt2-cg", 40000.0), _row("ALNET", "eager", 559.0)]
    found = pairs(first, second)
    assert [(p.workload, p.mode) for p in found] == [("ALNET", "pt2-cg"), ("MMC", "pt2-cg")]
    assert found[0].ratio == pytest.approx(570.0 / 704.0), "a resumed run's last row of a mode stands"
    assert [(p.workload, p.mode) for p in pairs(first, second, workloads={"MMC"})] == [("MMC", "pt2-cg")]
    assert pairs(first, second, modes={"grace"}) == []


def test_the_command_prints_both_runs_and_says_it_is_no_speedup(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(_row("ALNET", "pt2-cg", 704.0)) + "\n")
    b.write_text(json.dumps(_row("ALNET", "pt2-cg", 570.0)) + "\n")
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "not a speedup" in out and "704.0 (633.6-844.8)" in out and "0.810" in out
    assert main([str(a), str(tmp_path / "missing.jsonl")]) == 2
    assert "no rows at" in capsys.readouterr().err
    b.write_text(json.dumps(_row("EOS", "pt2-cg", 200.0)) + "\n")
    assert main([str(a), str(b)]) == 1, "nothing in common is not a pass"
    assert "no (workload, mode)" in capsys.readouterr().out
