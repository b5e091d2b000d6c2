"""Lists of dicts as CSV files and as aligned text tables (the report's tables)."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger("grace.report")


def write_csv(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        if records:
            writer = csv.DictWriter(f, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    log.info("wrote %s", path)
    return path


def format_rows(records: Sequence[dict[str, Any]]) -> str:
    if not records:
        return "(none)"
    keys = list(records[0])
    widths = {k: max(len(k), *(len(_s(r[k])) for r in records)) for k in keys}
    lines = ["  ".join(f"{k:>{widths[k]}}" for k in keys)]
    lines += ["  ".join(f"{_s(r[k]):>{widths[k]}}" for k in keys) for r in records]
    return "\n".join(lines)


def _s(v: Any) -> str:
    return "-" if v is None else str(v)
