"""The lean replay path's targets judged from rows (grace.report.replay_targets)."""

from __future__ import annotations

from typing import Optional

from grace.report.replay_targets import TARGETS, judge


def _row(workload: str, mode: str, host: Optional[float] = None, iteration: Optional[float] = None,
         device: Optional[float] = None, status: str = "ok") -> dict:
    med = (lambda v: None if v is None else {"median": v})
    return {"workload": workload, "mode": mode, "status": status, "host_us": med(host), "iter_us": med(iteration),
            "gpu_us": med(device)}


def _verdicts(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(v["target"], v["workload"]): v for v in judge(rows)}


def test_every_target_workload_gets_a_verdict_and_missing_rows_are_not_passes() -> None:
    verdicts = judge([])
    assert len(verdicts) == sum(len(t.workloads) for t in TARGETS)
    assert {v["verdict"] for v in verdicts} == {"not measured"}


def test_bounds_are_read_from_the_same_run() -> None:
    rows = [_row("micro-eos", "grace", host=20.0, iteration=40.0, device=24.0),
            _row("micro-eos", "pt2-nocg", iteration=39.0),
            _row("DNET", "grace", host=27.0),
            _row("DR-T", "grace", host=600.0), _row("DR-T", "pt2-cg", host=1000.0),
            _row("ALNET", "grace", iteration=390.0, device=360.0)]
    v = _verdicts(rows)
    assert v[("host at most 25 us", "micro-eos")]["verdict"] == "met"
    dnet = v[("host at most 1.3x micro-eos's", "DNET")]
    assert (dnet["bound_us"], dnet["verdict"]) == (26.0, "missed") and dnet["over"] == round(27 / 26, 3)
    assert v[("iteration at most 1.05x device + 15 us", "micro-eos")]["bound_us"] == round(24 * 1.05 + 15, 1)
    assert v[("iteration at most 1.05x device + 15 us", "micro-eos")]["verdict"] == "met"
    assert v[("iteration below PT2-NoCG's", "micro-eos")]["verdict"] == "missed"
    assert v[("training host at most half PT2-CG's", "DR-T")]["verdict"] == "missed"
    assert v[("iteration at most 1.05x device + 15 us", "ALNET")]["verdict"] == "met"


def test_a_failed_row_is_not_measured() -> None:
    rows = [_row("micro-ptr-1", "grace", host=10.0, status="mismatch")]
    assert _verdicts(rows)[("host at most 25 us", "micro-ptr-1")]["verdict"] == "not measured"


def test_the_readme_host_table_is_the_committed_maps() -> None:
    """Every row of the README's host-path table is the committed ``replay_overhead.md``'s, cell for
    cell (the README leaves out the ratio after each cell and marks training workloads)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## The host path, today"):readme.index("## Trust")]
    committed = (root / "results" / "processed" / "replay_overhead.md").read_text()
    run = re.search(r"Run `([^`]+)`", committed).group(1)
    assert f"replay_map/{run}" in section, "the README names the run the table comes from"

    def rows(text: str) -> dict[str, list[str]]:
        out = {}
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 4 and "/" in cells[1]:
                out[cells[0].replace(" (training)", "")] = [re.sub(r"\s*\(.*\)$", "", c) for c in cells[1:]]
        return out

    shown, written = rows(section), rows(committed)
    assert shown, "the README's table has rows"
    for workload, cells in shown.items():
        assert written.get(workload) == cells, f"{workload}: README {cells}, replay_overhead.md {written.get(workload)}"
