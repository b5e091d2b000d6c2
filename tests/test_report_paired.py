"""grace.report.paired: per-round ratios of interleaved modes, from a run's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grace.report.paired import chunk_of, main, paired


def _row(workload: str, mode: str, samples: list[float], command: str = "python -m grace.bench") -> dict:
    return {"workload": workload, "mode": mode, "samples_us": samples, "command": command}


def test_rounds_pair_samples_taken_together_so_drift_cancels() -> None:
    # the machine is twice as slow in the second round, for both modes alike
    base = [100.0] * 5 + [200.0] * 5
    slower = [103.0] * 5 + [206.0] * 5
    (p,) = paired([_row("w", "before", base), _row("w", "grace", slower)], "before")
    assert (p.workload, p.mode, p.rounds) == ("w", "grace", 2)
    assert p.median == pytest.approx(1.03) and p.p25 == pytest.approx(1.03) and p.p75 == pytest.approx(1.03)
    assert p.p10_ratio == pytest.approx(1.03)


def test_the_chunk_comes_from_the_runs_command_and_a_partial_round_is_left_out() -> None:
    assert chunk_of({"command": "python -m grace.bench --repeat 60 --chunk 3"}) == 3
    assert chunk_of({"command": "python -m grace.bench --repeat 60"}) == 5
    rows = [_row("w", "b", [1.0, 1.0, 1.0, 9.0], "x --chunk 3"), _row("w", "m", [2.0, 2.0, 2.0, 1.0], "x --chunk 3")]
    (p,) = paired(rows, "b")
    assert p.rounds == 1 and p.median == pytest.approx(2.0)


def test_cli_prints_every_mode_against_the_baseline_and_refuses_a_missing_one(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        _row("w", "before", [10.0] * 10), _row("w", "grace", [11.0] * 10), _row("w", "pt2-cg", [9.0] * 10)]))
    assert main([str(rows), "--baseline", "before"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:4] == ["w", "grace", "2", "1.100"] and out[2].split()[:4] == ["w", "pt2-cg", "2", "0.900"]
    assert main([str(rows), "--baseline", "nope"]) == 2
    assert main([str(tmp_path / "none.jsonl"), "--baseline", "before"]) == 2
