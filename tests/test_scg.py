"""SCG's decision rule and decision cache (the parts that need no GPU)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from grace.scg import cache
from grace.scg.choose import Choice, decide, schedule

G, N, P = Choice.GRAPH, Choice.NO_GRAPH, Choice.GRAPH_PI


def test_fastest_choice_wins_by_median() -> None:
    decision = decide({N: [39, 40, 41, 500], G: [78, 79, 80, 81], P: [60, 61, 59, 62]})
    assert decision.choice is N  # one outlier does not move a median
    assert decision.medians_us[N] == pytest.approx(40.5)
    assert "no-graph" in decision.reason


def test_ties_within_margin_keep_the_simpler_choice() -> None:
    assert decide({N: [100.0], G: [98.0]}, margin=0.03).choice is N
    assert decide({N: [100.0], G: [96.0]}, margin=0.03).choice is G
    assert decide({G: [100.0], P: [98.5]}, margin=0.03).choice is G
    assert decide({N: [100.0], G: [50.0], P: [49.0]}, margin=0.03).choice is G
    assert decide({N: [100.0], G: [50.0], P: [40.0]}, margin=0.03).choice is P


def test_decide_rejects_empty_input() -> None:
    with pytest.raises(ValueError):
        decide({})
    with pytest.raises(ValueError):
        decide({N: []})
    with pytest.raises(ValueError):
        decide({N: [1.0]}, margin=1.5)


def test_schedule_interleaves_and_rotates() -> None:
    order = schedule([P, G, N], trials=3)
    assert order == [N, G, P, G, P, N, P, N, G]
    assert schedule([G], trials=2) == [G, G]


def _key(**changes: object) -> cache.DecisionKey:
    fields = dict(code_sha256="ab" * 32, inputs=(((1024,), "torch.float64", (1,)),), gpu="NVIDIA H100 80GB HBM3",
                  driver="580.159.04", torch="2.11.0+cu130", triton="3.6.0", grace="0.1.0")
    fields.update(changes)
    return cache.DecisionKey(**fields)  # type: ignore[arg-type]


def test_store_then_load_round_trips(tmp_path: Path) -> None:
    decision = decide({N: [40.0], G: [78.0]})
    path = cache.store(_key(), decision, tmp_path)
    assert path is not None and path.parent == tmp_path
    loaded = cache.load(_key(), tmp_path)
    assert loaded is not None and loaded.choice is N and loaded.medians_us == decision.medians_us
    assert loaded.reason.endswith("[cached]")


@pytest.mark.parametrize("change", [
    {"code_sha256": "cd" * 32}, {"inputs": (((2048,), "torch.float64", (1,)),)},
    {"inputs": (((1024,), "torch.float32", (1,)),)}, {"inputs": (((1024,), "torch.float64", (2,)),)},
    {"gpu": "NVIDIA H200"}, {"driver": "575.57.08"}, {"torch": "2.10.0"}, {"triton": "3.5.0"}, {"grace": "0.2.0"},
])
def test_every_key_field_matters(tmp_path: Path, change: dict) -> None:
    cache.store(_key(), decide({N: [40.0], G: [78.0]}), tmp_path)
    assert cache.load(_key(**change), tmp_path) is None


def test_corrupt_and_foreign_files_are_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = _key()
    path = cache.store(key, decide({N: [40.0], G: [78.0]}), tmp_path)
    logger = logging.getLogger("grace.scg")  # the grace logger does not propagate to root
    logger.addHandler(caplog.handler)
    try:
        path.write_text(path.read_text()[:20])
        assert cache.load(key, tmp_path) is None
        assert "unreadable" in caplog.text
        foreign = {"format": 1, "key": _key(gpu="other").as_json(), "choice": "graph",
                   "medians_us": {"graph": 1.0}, "reason": "x"}
        path.write_text(json.dumps(foreign))
        caplog.clear()
        assert cache.load(key, tmp_path) is None
        assert "another graph, machine or version" in caplog.text
        path.write_text(json.dumps({"format": 1, "key": key.as_json(), "choice": "sometimes"}))
        assert cache.load(key, tmp_path) is None
    finally:
        logger.removeHandler(caplog.handler)


def test_cache_can_be_turned_off_and_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.store(_key(), decide({N: [40.0]}), tmp_path)
    monkeypatch.setenv("GRACE_SCG_CACHE", "0")
    assert cache.load(_key(), tmp_path) is None
    assert cache.store(_key(), decide({N: [40.0]}), tmp_path) is None
    monkeypatch.delenv("GRACE_SCG_CACHE")
    assert len(cache.entries(tmp_path)) == 1
    assert cache.clear(tmp_path) == 1 and cache.entries(tmp_path) == []


def test_cli_cache_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from grace.cli import main

    monkeypatch.setenv("GRACE_CACHE_DIR", str(tmp_path))
    cache.store(_key(), decide({N: [40.0]}))
    assert main(["cache", "list"]) == 0 and "1 SCG decision(s)" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0 and "removed 1" in capsys.readouterr().out
    assert cache.entries() == []
