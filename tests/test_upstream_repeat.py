"""The repeat probe's summary (``scripts/probes/upstream_repeat.py --summarize``), on rows as its
runs write them: counts per outcome, and a failing run's tree set against a passing run's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from grace.paths import REPO_ROOT

PROBE = REPO_ROOT / "scripts" / "probes" / "upstream_repeat.py"


def _probe() -> Any:
    spec = importlib.util.spec_from_file_location("upstream_repeat", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _node(unaliased: list[bool], depth: int = 0) -> dict[str, Any]:
    return {"id": depth, "depth": depth, "kind": "CUDAGraphNode", "function": depth,
            "aliases": ["UnaliasedStorage"] * len(unaliased), "unaliased": unaliased,
            "cached": unaliased}


def _row(run: int, passed: bool, first: list[bool], mm: dict[str, int]) -> dict[str, Any]:
    row = {"run": run, "passed": passed, "mm": mm, "scg": [{"name": "graph 0", "choice": "graph"}],
           "tree": {"nodes": [_node(first), _node([True], depth=1)], "current": 1, "generation": 3}}
    if not passed:
        row["error"] = "AssertionError: True is not false"
    return row


def test_a_failing_run_is_set_against_a_passing_runs_tree(tmp_path: Path) -> None:
    rows = [_row(0, True, [True, False], {"aten.mm_10_10_10": 3}),
            _row(1, False, [True, True], {"aten.mm_12_12_12": 2, "aten.mm_10_10_10": 1}),
            _row(2, True, [True, False], {"aten.mm_10_10_10": 3})]
    path = tmp_path / "repeat.test_aliasing_static_ref.all-lean-copy.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    text = _probe().summarize([path])
    assert f"{path.name}: 3 runs, 2 passed, 1 failed" in text
    assert "passed 2x; aten_mm_info {\"aten.mm_10_10_10\": 3}; SCG graph 0: graph" in text
    assert "failed 1x; aten_mm_info {\"aten.mm_10_10_10\": 1, \"aten.mm_12_12_12\": 2}" in text
    assert "run 1: AssertionError: True is not false" in text
    assert "node 0 unaliased: [True, True] (a passing run: [True, False])" in text
    assert "node 1" not in text, "only what differs"


def test_the_summary_from_the_command_line_and_its_usage() -> None:
    proc = subprocess.run([sys.executable, str(PROBE), "--summarize"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr
