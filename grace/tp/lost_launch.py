"""Rows for a tensor-parallel launch that ended without writing its own.

Rank 0 of ``python -m grace.tp`` appends a row per mode when its run ends, error or not. A
launch killed by its deadline, or whose ranks died on a signal, writes nothing, and Figure 12
would then show a gap where it should show a crash. The sweep calls :func:`record_lost_launch`
after a failed launch: each of its modes that has no row for that round gets one whose status
says how the launch ended (``timeout`` for the deadline's exit status 124, ``crash`` for a
rank that died), with the last line of the launch's log that names an error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

TIMEOUT_EXIT = 124  # timeout(1)'s exit status when the deadline ended the launch
_ERROR_WORDS = ("Error", "error", "SIGSEGV", "SIGABRT", "Signal", "Timeout", "Killed")


def _has_row(rows_path: Path, workload: str, tp: int, mode: str, round_: int) -> bool:
    if not rows_path.exists():
        return False
    for line in rows_path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (r.get("workload"), int(r.get("tp", -1)), r.get("mode"), r.get("round", 1)) == (workload, tp, mode, round_):
            return True
    return False


def last_error_line(log: Path | None) -> str:
    """The log's last line naming an error or a signal; empty if none does, or without a log."""
    if log is None or not log.exists():
        return ""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    named = [line for line in lines if any(w in line for w in _ERROR_WORDS)]
    return named[-1][:300] if named else ""


def record_lost_launch(rows_path: Path, workload: str, tp: int, modes: Sequence[str], round_: int,
                       exit_code: int, log: Path | None = None) -> list[dict[str, Any]]:
    """Appends a row to ``rows_path`` for each of ``modes`` without one in ``round_``; returns them."""
    if exit_code == 0:
        return []
    status = "timeout" if exit_code == TIMEOUT_EXIT else "crash"
    detail = last_error_line(log)
    lost = [{"workload": workload, "tp": tp, "mode": mode, "round": round_, "status": status,
             "error": f"launch exit status {exit_code}" + (f": {detail}" if detail else ""), "lost_launch": True}
            for mode in modes if not _has_row(rows_path, workload, tp, mode, round_)]
    if lost:
        rows_path.parent.mkdir(parents=True, exist_ok=True)
        with rows_path.open("a") as f:
            for row in lost:
                f.write(json.dumps(row) + "\n")
    return lost
