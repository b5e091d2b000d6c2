"""``grace.report.scg_agreement``: two SCG reports compared by generated code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grace.report import scg_agreement


def _graph(sha: str, choice: str, source: str = "cache", **medians: float) -> dict:
    return {"code_sha256": sha, "kernels": ["k"] * 2, "choice": choice, "source": source,
            "medians_us": {k.replace("_", "-"): v for k, v in medians.items()}}


def _report(tmp_path: Path, name: str, graphs: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"summary": {}, "graphs": graphs}))
    return path


def test_codes_are_compared_by_their_most_frequent_choice_and_first_profiled_medians(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _report(tmp_path, "a.json", [
        _graph("aaaa", "no-graph", "profiled", graph=138.0, no_graph=132.0),
        *[_graph("aaaa", "no-graph") for _ in range(3)],
        _graph("bbbb", "graph", "profiled", graph=40.0, no_graph=90.0),
        _graph("cccc", "graph"),
    ])
    second = _report(tmp_path, "b.json", [
        _graph("aaaa", "graph", "profiled", graph=46.0, no_graph=74.0),
        *[_graph("aaaa", "graph") for _ in range(3)],
        _graph("bbbb", "graph", "profiled", graph=41.0, no_graph=88.0),
        _graph(None, "graph"),  # unreadable code: left out
    ])
    records = {r["code"]: r for r in scg_agreement.compare(scg_agreement.load(first), scg_agreement.load(second))}
    assert records["aaaa"]["agree"] == "NO" and records["aaaa"]["functions"] == "4/4"
    assert records["aaaa"]["first_medians_us"] == "graph 138 no-graph 132"
    assert records["bbbb"]["agree"] == "yes" and records["cccc"]["agree"] == "-"
    assert scg_agreement.main([str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 codes in both reports decided alike" in out
    assert "a.json: 1 of 3 codes kept out of graphs, 4 of 6 functions" in out
    assert "b.json: 0 of 2 codes kept out of graphs, 0 of 5 functions" in out


def test_a_file_that_is_no_scg_report_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"workload": "VM"}\n')
    with pytest.raises(SystemExit, match="rows.jsonl is no SCG report"):
        scg_agreement.load(bad)


def test_a_code_one_report_read_from_the_shared_cache_is_told_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Modes of one run share the decision cache: a code one mode profiled, the other read, and
    their agreement on it says nothing about the profiles."""
    first = _report(tmp_path, "a.json", [_graph("aaaa", "graph"), _graph("bbbb", "graph", "profiled", graph=1.0),
                                         _graph("cccc", "graph", "rule")])
    second = _report(tmp_path, "b.json", [_graph("aaaa", "graph", "profiled", graph=2.0),
                                          _graph("bbbb", "no-graph", "profiled", graph=3.0),
                                          _graph("cccc", "graph", "rule")])
    records = {r["code"]: r for r in scg_agreement.compare(scg_agreement.load(first), scg_agreement.load(second))}
    assert [records[c]["profiled_in"] for c in ("aaaa", "bbbb", "cccc")] == ["second", "both", "neither"]
    assert scg_agreement.main([str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 codes in both reports decided alike" in out
    assert "0 of the 1 that each report profiled itself; the other 2 were profiled by one report or neither" in out
