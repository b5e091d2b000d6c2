"""grace.report.round_position: a run's samples grouped by their place in a round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grace.report.round_position import main, round_places


def _row(samples: list[float], rounds: int | None) -> dict:
    return {"workload": "w", "mode": "m", "samples_us": samples, "rounds": {"planned": rounds, "timed": rounds}}


def test_samples_group_by_their_place_in_a_round() -> None:
    # three rounds of four, the first of each cold, the last round cut to two samples
    places = round_places(_row([30, 12, 10, 10, 36, 14, 10, 11, 27, 11], rounds=3))
    assert places is not None and places.chunk == 4
    assert places.medians == (30, 12, 10, 10.5)
    assert places.first_over_last == pytest.approx(30 / 10.5)


def test_rows_that_cannot_say_their_rounds_are_left_out() -> None:
    assert round_places(_row([1.0, 2.0], rounds=None)) is None
    assert round_places(_row([], rounds=2)) is None
    assert round_places(_row([1.0, 2.0, 3.0], rounds=3)) is None, "one sample a round has no places"


def test_the_command_prints_each_rows_places_and_refuses_what_it_cannot_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(_row([20, 10, 10, 22, 11, 10], rounds=2)) + "\n")
    assert main([str(rows)]) == 0
    out = capsys.readouterr().out
    assert "place 3" in out and "2.10" in out
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    assert "no rows at" in capsys.readouterr().err
    rows.write_text(json.dumps(_row([20, 10], rounds=None)) + "\n")
    assert main([str(rows)]) == 1
    assert "says how many rounds" in capsys.readouterr().err
    rows.write_text(json.dumps(_row([20, 10], rounds=1)) + "\n{cut off\n")
    assert main([str(rows)]) == 2
    assert f"{rows}:2: not a JSON row" in capsys.readouterr().err
    rows.write_text("[1, 2]\n")
    assert main([str(rows)]) == 2
    assert f"{rows}:1: not a JSON object" in capsys.readouterr().err
