"""grace.report.paired: each interleaved mode against a baseline mode, from a run's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grace.report.paired import main, paired


def _row(workload: str, mode: str, samples: list[float]) -> dict:
    return {"workload": workload, "mode": mode, "samples_us": samples}


def test_samples_of_one_round_pair_up_so_drift_cancels() -> None:
    # the machine is twice as slow in the second half, for both modes alike
    base = [100.0] * 5 + [200.0] * 5
    slower = [103.0] * 5 + [206.0] * 5
    (p,) = paired([_row("w", "before", base), _row("w", "grace", slower)], "before")
    assert (p.workload, p.mode, p.samples) == ("w", "grace", 10)
    assert p.ratio == pytest.approx(1.03)
    assert p.p10 == pytest.approx(1.03) and p.p50 == pytest.approx(1.03) and p.p90 == pytest.approx(1.03), \
        "paired ratios have no spread where unpaired percentiles would span 2x"


def test_a_mode_timed_in_another_process_than_the_baseline_is_left_out() -> None:
    base, other = _row("w", "before", [10.0] * 4), _row("w", "grace", [11.0] * 4)
    base["invocation"], other["invocation"] = "host:1:0", "host:2:0"
    assert paired([base, other], "before") == []
    other["invocation"] = "host:1:0"
    assert [p.mode for p in paired([base, other], "before")] == ["grace"]


def test_cli_prints_every_mode_against_the_baseline_and_refuses_a_missing_one(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        _row("w", "before", [10.0] * 10), _row("w", "grace", [11.0] * 10), _row("w", "pt2-cg", [9.0] * 10)]))
    assert main([str(rows), "--baseline", "before"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:4] == ["w", "grace", "10", "1.100"] and out[2].split()[:4] == ["w", "pt2-cg", "10", "0.900"]
    assert main([str(rows), "--baseline", "nope"]) == 2
    assert main([str(tmp_path / "none.jsonl"), "--baseline", "before"]) == 2


def test_the_interval_of_a_ratio_of_medians_is_narrow_where_rounds_agree_and_holds_the_ratio() -> None:
    """A paired bootstrap over rounds: a constant ratio has no width whatever the drift; noisy
    samples give an interval around the ratio of medians, the same one on every call."""
    import random

    from grace.stats import median_ratio_interval, percentile

    base = [100.0 * (1 + r % 7) for r in range(200)]  # drift across rounds
    assert median_ratio_interval([1.02 * b for b in base], base) == (pytest.approx(1.02), pytest.approx(1.02))
    rng = random.Random(5)
    noisy_base = [100.0 * rng.uniform(0.8, 1.25) for _ in range(300)]
    noisy = [1.03 * 100.0 * rng.uniform(0.8, 1.25) for _ in range(300)]
    lo, hi = median_ratio_interval(noisy, noisy_base)
    assert lo < percentile(noisy, 50) / percentile(noisy_base, 50) < hi and hi - lo < 0.1
    assert median_ratio_interval(noisy, noisy_base) == (lo, hi)
    with pytest.raises(ValueError):
        median_ratio_interval([], [])
