"""Which workloads a run runs, in which modes and in what order, and which it still owes.

A :class:`Target` is a workload at a batch size with what its config line asks of the runner
for it alone (:mod:`grace.bench.configs`); :func:`first_first` and :func:`shard` order and split
a run's targets among runners started together; :func:`pending` is what a resumed run has left.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from grace.bench.modes import Mode
from grace.bench.workloads import Workload
from grace.log import get_logger

log = get_logger("grace.bench")


@dataclass(frozen=True)
class Target:
    """A workload at a batch size, with what its config line asks of the runner for it alone.

    ``release_memory`` has its workers return cached GPU memory after the warm-up and after each
    chunk, check each sample's output at once (``check_after`` off), and start ``together`` at a
    time (one, if not given) even under ``compile_together``: for workloads whose modes do not
    fit on the GPU together, nor their warm-ups all at once. ``first`` puts it at the head of
    the list before sharding, so that a call with a deadline starts it first. ``repeat`` and
    ``timeout_s`` replace the run's for this workload. ``inputs`` has its timed samples cycle
    over that many inputs, which the warm-up runs first (:class:`grace.bench.options.WorkerOptions`
    ``distinct_inputs``). ``modes``, where given, are the only modes of the run it runs in: for
    workloads whose CUDA graph pools in every mode would not fit the GPU side by side.
    """

    workload: Workload
    batch_size: int
    modes: tuple[str, ...] | None = None
    release_memory: bool = False
    together: int | None = None
    first: bool = False
    repeat: int | None = None
    timeout_s: float | None = None
    inputs: int | None = None


def modes_for(target: Target, modes: list[Mode]) -> list[Mode]:
    """The run's modes that ``target`` runs in, in the run's order."""
    return modes if target.modes is None else [m for m in modes if m.name in target.modes]


def first_first(targets: list[Target]) -> list[Target]:
    """``targets`` with those marked ``first`` ahead of the rest, each group in its order."""
    return [t for t in targets if t.first] + [t for t in targets if not t.first]


def shard(targets: list[Target], index: int, count: int) -> list[Target]:
    """Targets of shard ``index`` (1-based) of ``count``: every count-th, for balance."""
    if not 1 <= index <= count:
        raise ValueError(f"--shard {index}/{count}: need 1 <= i <= n")
    return targets[index - 1::count]


def pending(targets: list[Target], modes: list[Mode], out_dir: Path,
            retry: frozenset[str] = frozenset(), attempts_before: float | None = None,
            redo: frozenset[str] = frozenset(), code: str | None = None) -> list[Target]:
    """The targets that still lack a row for one of ``modes`` in the run, or whose latest row
    for one of them has a status in ``retry`` (``error``, say, after an out-of-memory kill), or,
    for the workloads named in ``redo``, ran other code than ``code`` (its ``versions.grace_code``:
    a change that alters what they measure, rerun in a run that goes on).

    A retried target runs in every mode again, so that its modes stay measured side by side;
    its new rows follow the old ones, and readers keep the last row of each (workload, mode).
    Resuming filters before sharding, so that runners started together split what is left.
    Targets that an earlier runner started and never finished (:func:`cut_attempts`: a call's
    deadline killed it) come after those not yet tried, fewest cuts first, and lose ``first``:
    a workload too long for a call must not take every call's start from the rest. Runners
    started together pass the time they were started as ``attempts_before``, so that none takes
    a workload another has just started for a cut one.
    """
    latest = latest_rows(out_dir)

    def done(name: str, mode: Mode) -> bool:
        row = latest.get((name, mode.name))
        if row is None or row["status"] in retry:
            return False
        return name not in redo or (row.get("versions") or {}).get("grace_code") == code

    todo = [t for t in targets if not all(done(t.workload.name, m) for m in modes_for(t, modes))]
    if len(todo) < len(targets):
        log.info("resuming run %s: %d of %d workloads already have rows", out_dir.name,
                 len(targets) - len(todo), len(targets))
    cuts = cut_attempts(out_dir, attempts_before)
    cut = sorted((t for t in todo if cuts[t.workload.name]), key=lambda t: cuts[t.workload.name])
    if cut:
        log.warning("run %s: cut before their rows in an earlier call, run after the others: %s", out_dir.name,
                    ", ".join(f"{t.workload.name} ({cuts[t.workload.name]}x)" for t in cut))
    return [t for t in todo if not cuts[t.workload.name]] + [dataclasses.replace(t, first=False) for t in cut]


def latest_rows(out_dir: Path) -> dict[tuple[str, str], dict]:
    """The run's last row of each (workload, mode): a retried case's new row replaces its old one."""
    latest: dict[tuple[str, str], dict] = {}
    path = out_dir / "rows.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                latest[(row["workload"], row["mode"])] = row
    return latest


def cut_attempts(out_dir: Path, before: float | None = None) -> Counter[str]:
    """How many times each workload of the run was started and not finished
    (:func:`grace.bench.results.note_attempt`), counting only what was noted before ``before``
    (seconds since the epoch; None: everything)."""
    count: Counter[str] = Counter()
    path = out_dir / "attempts.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                if before is None or entry.get("t", 0.0) < before:
                    count[entry["workload"]] += 1 if entry["event"] == "started" else -1
    return count
