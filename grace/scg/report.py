"""The per-run record of SCG's decisions (the paper's Table 4) and what they cost to make.

Every candidate graph gets one :class:`GraphRecord`: its kernels, what PT2-CG would copy per
replay, the time measured for each choice, the decision and where it came from (profiled now,
read from the decision cache, or a fallback to PT2-CG's behaviour with the reason). Records are
logged as they are made (``GRACE_LOGS=info``) and the whole report is rewritten, atomically,
after each one to ``$GRACE_SCG_REPORT`` if set, else to
``$GRACE_CACHE_DIR/reports/scg-<time>-<pid>.json``. The benchmark worker also reads them
in-process (:func:`records`) into its result rows.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grace.log import get_logger
from grace.scg.choose import PI_STRATEGY, SIMPLICITY
from grace.paths import cache_dir, write_atomic
from grace.run_records import RunRecords

log = get_logger("grace.scg")
_WITH_PI = frozenset(c.value for c in PI_STRATEGY)  # the choices that record with PI

# profiled now; read from the decision cache; decided by a rule without timing (see
# grace.scg.tree_hook.TRAINING_FORWARD_RULE); or PT2-CG's behaviour after a failure
SOURCES = ("profiled", "cache", "rule", "fallback")


@dataclass
class GraphRecord:
    name: str
    mode: str
    kernels: list[str]
    copied_inputs: int
    copied_bytes: int
    choice: str  # a grace.scg.choose.Choice value
    source: str  # one of SOURCES
    reason: str
    medians_us: dict[str, float] = field(default_factory=dict)
    p10_us: dict[str, float] = field(default_factory=dict)
    p90_us: dict[str, float] = field(default_factory=dict)
    profile_s: float = 0.0  # wall time SCG spent deciding this graph (profiling, cache lookup)
    code_sha256: str | None = None

    def line(self) -> str:
        times = ", ".join(f"{c} {t:.1f} us" for c, t in self.medians_us.items()) or "not timed"
        return (f"{self.name} [{self.mode}, {len(self.kernels)} kernels, {self.copied_bytes} B copied per replay]: "
                f"{times} -> {self.choice} ({self.source}; {self.profile_s:.2f} s)")


_RECORDS: RunRecords[GraphRecord] = RunRecords()
_started = time.strftime("%Y%m%d-%H%M%S")
records = _RECORDS.all
reset = _RECORDS.clear


def path() -> Path:
    env = os.environ.get("GRACE_SCG_REPORT")
    if env:
        return Path(env)
    return cache_dir() / "reports" / f"scg-{_started}-{os.getpid()}.json"


def summarize(recs: list[GraphRecord]) -> dict[str, Any]:
    """Table 4's columns: candidate graphs, enabled, disabled, with PI; plus time spent deciding."""
    return {
        "total": len(recs),
        "enabled": sum(1 for r in recs if r.choice != "no-graph"),
        "disabled": sum(1 for r in recs if r.choice == "no-graph"),
        "with_pi": sum(1 for r in recs if r.choice in _WITH_PI),
        "profiled": sum(1 for r in recs if r.source == "profiled"),
        "from_cache": sum(1 for r in recs if r.source == "cache"),
        "by_rule": sum(1 for r in recs if r.source == "rule"),
        "fallbacks": sum(1 for r in recs if r.source == "fallback"),
        "profile_s": sum(r.profile_s for r in recs),
    }


def add(record: GraphRecord) -> None:
    """Keep, log and write out one decision."""
    if record.source not in SOURCES:
        raise ValueError(f"unknown decision source {record.source!r}")
    _RECORDS.add(record)
    if record.source == "fallback":
        log.warning("SCG %s", record.line() + f": {record.reason}")
    else:
        log.info("SCG %s", record.line())
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        made = _RECORDS.all()
        payload = {"summary": summarize(made), "graphs": [asdict(r) for r in made]}
        write_atomic(target, json.dumps(payload, indent=1))
    except OSError as e:
        log.warning("could not write the SCG report to %s (%s)", target, e)
        return
    if len(_RECORDS) == 1:
        log.info("SCG report: %s", target)


def load(report_path: Path) -> list[GraphRecord]:
    data = json.loads(Path(report_path).read_text())
    return [GraphRecord(**g) for g in data["graphs"]]


def format_table(recs: list[GraphRecord]) -> str:
    """A human-readable table of every decision, then the Table-4 summary line."""
    lines = [f"{'graph':<16} {'mode':<9} {'kernels':>7} {'copied B':>10} {'no-graph us':>11} "
             f"{'graph us':>9} {'PI: ptx us':>10} {'prelude us':>10} {'exec-upd us':>11}  decision   source"]
    for r in recs:
        cols = [r.medians_us.get(c.value) for c in SIMPLICITY]
        times = " ".join(f"{'-' if t is None else f'{t:.1f}':>{w}}" for t, w in zip(cols, (11, 9, 10, 10, 11)))
        lines.append(f"{r.name:<16} {r.mode:<9} {len(r.kernels):>7} {r.copied_bytes:>10} {times}  "
                     f"{r.choice:<10} {r.source}")
    s = summarize(recs)
    lines.append(f"total {s['total']}, enabled {s['enabled']}, disabled {s['disabled']}, with PI {s['with_pi']}; "
                 f"profiled {s['profiled']}, from cache {s['from_cache']}, by rule {s['by_rule']}, "
                 f"fallbacks {s['fallbacks']}; "
                 f"{s['profile_s']:.2f} s deciding")
    return "\n".join(lines)
