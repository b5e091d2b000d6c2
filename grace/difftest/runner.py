"""Run random programs under several GraCE configurations side by side and judge them by stock.

Every (seed, configuration) runs in its own child process (``python -m grace.difftest run-one``)
with the configuration's environment from :data:`grace.report.upstream.CONFIGURATIONS`, which
GraCE reads at interpreter start. A child prints one JSON line; the parent adds ``crash`` (the
child died by a signal, or without its line, or failed after reporting ok) and ``timeout``,
placed at the step the child had begun (:mod:`grace.difftest.step_file`). A run writes, under its output folder:

- ``results.jsonl``: one line per (seed, configuration), appended as each child ends;
- ``summary.csv``: ``configuration,programs,calls,ok,mismatch,error,crash,timeout,worse_than_stock``;
- ``worse_than_stock.md``: every program a configuration did worse on than stock, with the
  command that replays it, then stock's own failures;
- ``settings.json``: the run's settings (the replay commands need its kinds and max steps);
- ``logs/<configuration>/seed-<S>.log``: a child's output, kept for the results that are not ok
  and for those that read a held output stale; with ``probe``, the tree's probes
  (:mod:`grace.difftest.probe`) write into it, so that a rare failure that only comes under the
  run's load arrives with its trace.

Children share Inductor's kernel cache (binaries keyed by their source) but not its FX graph or
AOT autograd caches: those keys do not know GraCE's switches, so one configuration could
otherwise be served a graph another compiled. Each child gets its own empty SCG decision cache.
This module imports no torch.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from grace.difftest import step_file
from grace.difftest.programs import DEFAULT_MAX_STEPS, default_kinds
from grace.difftest.step_file import read_step
from grace.paths import REPO_ROOT
from grace.report import upstream

STOCK = upstream.STOCK
# Stock run a second time on every program: CUDA graph trees' own outcome on a program that
# holds outputs across replays varies from run to run (which held output a later replay
# overwrites, and whether the tree notices, depends on when garbage is collected), so a
# configuration is judged worse only where it is worse than both stock runs, and this
# configuration's own judgment against stock is the floor of that noise.
STOCK_AGAIN = "stock-again"
CONFIGURATIONS: dict[str, dict[str, str]] = {**upstream.CONFIGURATIONS, STOCK_AGAIN: upstream.CONFIGURATIONS[STOCK]}
# What a run covers unless told otherwise: the upstream tests' default configurations, and stock again.
RUN_BY_DEFAULT: tuple[str, ...] = (*upstream.RUN_BY_DEFAULT, STOCK_AGAIN)

STATUSES = ("ok", "mismatch", "error", "crash", "timeout")
SUMMARY_COLUMNS = ("configuration", "programs", "calls", *STATUSES, "stale_reads", "amplified", "worse_than_stock",
                   "failed_past_stock")
# How bad a status is, for judging a configuration against stock on the same program.
_SEVERITY = {"ok": 0, "error": 1, "mismatch": 2, "crash": 3, "timeout": 3}
PROGRESS_EVERY_S = 15.0


@dataclass(frozen=True)
class Settings:
    configs: list[str]
    out: Path
    seconds: float = 300.0  # no new seed starts after this
    start_seed: int = 0
    jobs: int = 2
    device: str = "cuda"
    max_steps: int = DEFAULT_MAX_STEPS
    kinds: list[str] | None = None  # None: every kind
    timeout: float = 300.0  # per (seed, configuration)
    programs: int | None = None  # stop after this many seeds, whatever the time
    backend: str = "inductor"
    hard_seconds: float | None = None  # kill what still runs then; its results are dropped
    resume: bool = False  # add to the run in ``out``: its records kept, new seeds after its last
    probe: str | None = None  # ``run-one --probe`` for every child: its lines go to the child's log


# What must match for a resumed run to add to an earlier one: the same programs, judged alike.
RESUME_KEYS = ("configs", "device", "max_steps", "kinds", "backend")


# The child's command line and environment.

def child_args(seed: int, settings: Settings) -> list[str]:
    args = ["run-one", "--seed", str(seed), "--device", settings.device]
    if settings.max_steps != DEFAULT_MAX_STEPS:
        args += ["--max-steps", str(settings.max_steps)]
    if settings.kinds is not None and list(settings.kinds) != default_kinds():
        args += ["--kinds", ",".join(settings.kinds)]
    if settings.backend != "inductor":
        args += ["--backend", settings.backend]
    return args


def replay_command(seed: int, config: str, settings: Settings) -> str:
    """The shell command that reruns one program under one configuration."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in CONFIGURATIONS[config].items())
    return f"{env} python -m grace.difftest {' '.join(shlex.quote(a) for a in child_args(seed, settings))}"


def visible_gpus(device: str) -> list[str]:
    """The GPUs children take in turn, as ``CUDA_VISIBLE_DEVICES`` names them; none off CUDA."""
    if not device.startswith("cuda"):
        return []
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None:
        return [g.strip() for g in named.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def child_env(config: str, scratch: Path, gpu: str | None = None,
              compile_cache: Path | None = None) -> dict[str, str]:
    """A child's environment: the configuration's switches, its own scratch caches, and with
    ``gpu`` that one GPU alone. ``compile_cache`` is the configuration's own Inductor and Triton
    cache, shared by its programs and no other configuration's: neither cache's keys hold
    GraCE's switches, and autotuning's choices, kept there, would otherwise pass from one
    configuration to another in whatever order the children ran. Every path is made absolute:
    Inductor runs its C++ compiler in a build folder of its own, where a relative cache path
    names no file (every program with a CPU kernel then failed to compile)."""
    scratch = scratch.resolve()
    env = dict(os.environ)
    env.update(CONFIGURATIONS[config])
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    # Tiny programs compile a handful of kernels: in the child's own process that is quicker
    # than starting a pool of compile workers per child, J children at a time.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if compile_cache is not None:
        compile_cache = compile_cache.resolve()
        env["TORCHINDUCTOR_CACHE_DIR"] = str(compile_cache / "inductor")
        env["TRITON_CACHE_DIR"] = str(compile_cache / "triton")
    env["GRACE_SCG_CACHE_DIR"] = str(scratch / "scg-cache")
    env["GRACE_SCG_REPORT"] = str(scratch / "scg-report.json")
    return env


# A child's result.

def parse_child(output: str, returncode: int | None, seed: int,
                last_step: tuple[int, str] | None = None) -> dict[str, Any]:
    """The child's JSON line, corrected by how it ended: a missing line or a death by signal is
    a crash; so is a non-zero exit after an ok line (an abort at teardown). A crash without a
    result line is placed at ``last_step``, the step the child had begun (its step file)."""
    reported = None
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("seed") == seed and data.get("status") in STATUSES:
                reported = data
                break
    if reported is not None and (returncode == 0 or reported["status"] != "ok"):
        return reported
    how = _exit_words(returncode)
    detail = f"exited {how} after reporting ok" if reported else f"{how}, no result line: {_tail(output)}"
    calls = reported["calls"] if reported else 0
    step, kind, where = _placed(None if reported else last_step)
    return {"seed": seed, "status": "crash", "calls": calls, "step": step, "kind": kind, "detail": where + detail,
            "error_kind": f"crash: {how}", "expected": 0, "expected_detail": []}


def _placed(last_step: tuple[int, str] | None) -> tuple[int | None, str | None, str]:
    """A result's step, kind and the detail's prefix naming them, from a child's step file."""
    if last_step is None:
        return None, None, ""
    step, kind = last_step
    return step, kind, f"step {step} ({kind}): "


def _exit_words(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f"by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"by signal {-returncode}"
    return f"with status {returncode}"


def _tail(output: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in output.strip().splitlines()[-lines:])[:400]


def timeout_result(seed: int, seconds: float, last_step: tuple[int, str] | None = None) -> dict[str, Any]:
    step, kind, where = _placed(last_step)
    return {"seed": seed, "status": "timeout", "calls": 0, "step": step, "kind": kind,
            "detail": f"{where}still running after {seconds:.0f} s", "error_kind": "timeout",
            "expected": 0, "expected_detail": []}


# Judging.

def is_worse(stock: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether a configuration did worse than one stock run on one program.

    Worse: a stale read of a held output that stock's read caught (see ``_stale_beyond_stock``);
    stock ok and this not; both errors, this one at an earlier step (it failed where stock still
    ran) or at the same step of another kind; or a more severe status than stock's failure (an
    error, for instance one stock raises by design, turned into a mismatch, a crash or a hang).
    An error or a wrong value at a later step than stock's error is not worse
    (:func:`failed_past_stock`). Never worse when stock itself crashed or hung: nothing is known
    then.
    """
    if _stale_beyond_stock(stock, other):
        return True
    s, o = stock["status"], other["status"]
    if s == "ok":
        return o != "ok"
    if failed_past_stock(stock, other):
        return False
    if s == "error" and o == "error":
        if _step(other) != _step(stock):
            return _step(other) < _step(stock)
        return other.get("error_kind") != stock.get("error_kind")
    return _SEVERITY[o] > _SEVERITY[s]


def failed_past_stock(stock: dict[str, Any], other: dict[str, Any]) -> bool:
    """Stock raised, and this configuration raised or gave a wrong value at a later step: it ran
    the step stock failed, and its own failure has no stock run to be judged by (stock may give
    the same value there, or not). Not worse; counted and listed apart, with its replay command,
    so that a failure of GraCE's own past stock's is still seen and can be run again."""
    return (stock["status"] == "error" and other["status"] in ("error", "mismatch")
            and _step(other) > _step(stock))


def _stale_beyond_stock(stock: dict[str, Any], other: dict[str, Any]) -> bool:
    """A stale read of an output whose read stock caught (raised on), while stock still ran.

    Held outputs are read outside CUDA graph trees' contract (an output may be overwritten by
    any later call), so which of them a later replay happens to overwrite depends on the pool's
    layout, which GraCE may change; stock itself reads some of them stale. What a configuration
    must not lose is stock's detection: an output stock raised on must not read silently."""
    stock_end = _step(stock)
    caught = {held for at, held in stock.get("detected") or [] if at < stock_end}
    return any(held in caught for at, held in other.get("stale") or [] if at < stock_end)


def _step(result: dict[str, Any]) -> int:
    step = result.get("step")
    return step if isinstance(step, int) else 1 << 30


def by_seed(records: Iterable[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["seed"], {})[r["configuration"]] = r
    return out


def worse_than_stock(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of non-stock configurations that did worse than every stock run of the same seed."""
    return _judged_against_stock(records, is_worse)


def past_stock(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of non-stock configurations that failed later than every stock run on the same seed."""
    return _judged_against_stock(records, failed_past_stock)


def stock_runs(results: dict[str, dict[str, Any]], config: str) -> list[dict[str, Any]]:
    """The stock records of one seed that ``config``'s record is judged against: both stock runs,
    except for the second stock run itself, judged against the first; none for stock."""
    if config == STOCK:
        return []
    names = (STOCK,) if config == STOCK_AGAIN else (STOCK, STOCK_AGAIN)
    return [results[n] for n in names if n in results]


Judge = Callable[[dict[str, Any], dict[str, Any]], bool]


def against_every_stock_run(results: dict[str, dict[str, Any]], config: str, judge: Judge = is_worse) -> bool:
    """Whether ``judge(stock's record, config's record)`` holds for every stock run ``config`` is
    judged against on this seed (:func:`stock_runs`; never where there is none)."""
    runs = stock_runs(results, config)
    return bool(runs) and all(judge(s, results[config]) for s in runs)


def _judged_against_stock(records: Iterable[dict[str, Any]], judge: Judge) -> list[dict[str, Any]]:
    """The records :func:`against_every_stock_run` holds for with ``judge``, seed by seed."""
    return [r for _, results in sorted(by_seed(records).items()) for config, r in results.items()
            if against_every_stock_run(results, config, judge)]


def summarize(records: list[dict[str, Any]], configs: list[str]) -> list[dict[str, Any]]:
    """One row per configuration; worse_than_stock is blank for stock itself, and for every
    configuration when stock did not run."""
    worse, past = worse_than_stock(records), past_stock(records)
    have_stock = any(r["configuration"] == STOCK for r in records)
    rows = []
    for config in configs:
        mine = [r for r in records if r["configuration"] == config]
        row: dict[str, Any] = {"configuration": config, "programs": len(mine),
                               "calls": sum(int(r.get("calls") or 0) for r in mine)}
        row.update({s: sum(r["status"] == s for r in mine) for s in STATUSES})
        row["stale_reads"] = sum(len(r.get("stale") or []) for r in mine)
        row["amplified"] = sum(len(r.get("amplified") or []) for r in mine)  # drift, not a mismatch
        judged = have_stock and config != STOCK
        row["worse_than_stock"] = sum(r["configuration"] == config for r in worse) if judged else ""
        row["failed_past_stock"] = sum(r["configuration"] == config for r in past) if judged else ""
        rows.append(row)
    return rows


def write_summary(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def write_worse_md(path: Path, records: list[dict[str, Any]], settings: Settings) -> None:
    worse = worse_than_stock(records)
    stock_failures = [r for r in records if r["configuration"] == STOCK and r["status"] != "ok"]
    seeds = by_seed(records)
    lines = ["# Programs a configuration did worse on than stock", ""]
    if not any(r["configuration"] == STOCK for r in records):
        lines += ["Stock did not run: nothing could be judged.", ""]
    elif not worse:
        lines += ["None.", ""]
    for r in worse:
        stocks = stock_runs(seeds[r["seed"]], r["configuration"])
        lines += [f"## seed {r['seed']}, {r['configuration']}: {r['status']} "
                  f"(stock: {', '.join(s['status'] for s in stocks)})", "", f"- detail: {r['detail'] or 'ok'}"]
        lines += [f"- {s['configuration']}: {s['detail'] or 'ok'}; stale reads {s.get('stale') or 'none'}" for s in stocks]
        lines += [f"- stale reads (step, held step): {r.get('stale') or 'none'}",
                  f"- replay: `{replay_command(r['seed'], r['configuration'], settings)}`", ""]
    past = past_stock(records)
    lines += ["# Failed after stock's own failure", "",
              "Programs where stock raised at some step and this configuration ran that step, then "
              "raised later: not worse (no stock run reaches that later step), but a failure to look at.", ""]
    for r in past:
        stock = stock_runs(seeds[r["seed"]], r["configuration"])[0]
        lines += [f"- seed {r['seed']}, {r['configuration']}: {r['detail']} (stock: {stock['detail']}); "
                  f"`{replay_command(r['seed'], r['configuration'], settings)}`"]
    if not past:
        lines += ["None."]
    unjudged = [r for r in records if r["configuration"] not in (STOCK, STOCK_AGAIN) and r.get("stale")
                and not any(w is r for w in worse)]
    lines += ["", "# Stale reads no stock run judges", "",
              "Held outputs this configuration read without error after a later replay had changed them, "
              "where stock caught no overwrite of the same output before its own end (it read it stale "
              "too, or had stopped): not worse, but a wrong value to look at; (step read at, held step):", ""]
    for r in unjudged:
        ends = ", ".join(f"{s['configuration']} " + (f"ended at step {s['step']}" if s.get("step") is not None
                                                      else "ran to its end")
                         for s in stock_runs(seeds[r["seed"]], r["configuration"]))
        lines += [f"- seed {r['seed']}, {r['configuration']}: {r['stale']} ({ends or 'no stock run'}); "
                  f"`{replay_command(r['seed'], r['configuration'], settings)}`"]
    if not unjudged:
        lines += ["None."]
    lines += ["", "# Stock's own failures", "",
              "Failures of stock PyTorch itself (for instance reading an output that a later replay "
              "overwrote, which raises by design); a configuration is judged against them.", ""]
    lines += [f"- seed {r['seed']}: {r['status']}: {r['detail']} (`{replay_command(r['seed'], STOCK, settings)}`)"
              for r in stock_failures] or ["None."]
    stale = [r for r in records if r["configuration"] == STOCK and r.get("stale")]
    lines += ["", "# Stock's stale reads", "",
              "Held outputs that stock read without error but whose values a later replay had changed "
              "(CUDA graph trees do not detect every such overwrite); (step read at, held step):", ""]
    lines += [f"- seed {r['seed']}: {r['stale']}" for r in stale] or ["None."]
    path.write_text("\n".join(lines) + "\n")


def format_table(rows: list[dict[str, Any]]) -> str:
    table = [list(SUMMARY_COLUMNS)] + [[str(row[c]) for c in SUMMARY_COLUMNS] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(SUMMARY_COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table)


def write_settings(path: Path, settings: Settings) -> None:
    data = {**settings.__dict__, "out": str(settings.out)}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def read_settings(path: Path) -> Settings:
    data = json.loads(path.read_text())
    return Settings(**{**data, "out": Path(data["out"])})


def read_results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_reports(out: Path, records: list[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    configs = list(settings.configs) + sorted({r["configuration"] for r in records} - set(settings.configs))
    rows = summarize(records, configs)
    write_summary(out / "summary.csv", rows)
    write_worse_md(out / "worse_than_stock.md", records, settings)
    return rows


# The parent loop.

@dataclass
class Child:
    seed: int
    config: str
    process: subprocess.Popen
    started: float
    log: Path
    log_file: TextIO
    scratch: Path


@dataclass
class Campaign:
    """Starts children J at a time, seed after seed, until the time is up."""

    settings: Settings
    printer: TextIO = sys.stdout
    records: list[dict[str, Any]] = field(default_factory=list)
    running: list[Child] = field(default_factory=list)
    pending: deque = field(default_factory=deque)
    next_seed: int = 0
    seeds_started: int = 0
    cancelled: int = 0

    def __post_init__(self) -> None:
        self.next_seed = self.settings.start_seed
        self.out = self.settings.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.results_path = self.out / "results.jsonl"
        if self.settings.resume and self.results_path.is_file():
            self.records = self._earlier_records()
            self.next_seed = max([self.next_seed, *(r["seed"] + 1 for r in self.records)])
        else:
            self.results_path.write_text("")
            write_settings(self.out / "settings.json", self.settings)
        self.t0 = time.monotonic()
        self.last_progress = self.t0
        self.gpus = visible_gpus(self.settings.device)  # children take them in turn
        self.children_started = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _earlier_records(self) -> list[dict[str, Any]]:
        """The records of the run being resumed, once its settings are known to match."""
        saved = self.out / "settings.json"
        if not saved.is_file():
            raise ValueError(f"--resume: {self.out} has results but no settings.json to check them against")
        earlier = read_settings(saved)
        differ = [k for k in RESUME_KEYS if getattr(earlier, k) != getattr(self.settings, k)]
        if differ:
            raise ValueError(f"--resume: {self.out} was run with other " + ", ".join(
                f"{k} ({getattr(earlier, k)!r}, not {getattr(self.settings, k)!r})" for k in differ))
        return read_results(self.results_path)

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():6.0f} s] {text}", file=self.printer, flush=True)

    def run(self) -> list[dict[str, Any]]:
        s = self.settings
        resumed = f" (resumed: {len(self.records)} earlier results kept)" if self.records else ""
        self.say(f"configs {','.join(s.configs)}; device {s.device}; {s.jobs} at a time; "
                 f"{s.seconds:.0f} s from seed {self.next_seed}{resumed}; replay a program with "
                 f"`python -m grace.difftest {' '.join(child_args(self.next_seed, s))}`")
        try:
            self.loop()
        except KeyboardInterrupt:
            self.cancel_all("interrupted")
        self.progress()
        shutil.rmtree(self.out / "scratch", ignore_errors=True)
        for folder in [*(self.out / "logs").glob("*"), self.out / "logs"]:  # the empty ones
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return self.records

    def loop(self) -> None:
        s = self.settings
        while True:
            if s.hard_seconds is not None and self.elapsed() > s.hard_seconds:
                self.cancel_all("hard limit")
                return
            self.fill()
            if not self.running and not self.pending:
                return
            self.poll()
            if time.monotonic() - self.last_progress > PROGRESS_EVERY_S:
                self.progress()
            time.sleep(0.1)

    def may_start_seed(self) -> bool:
        s = self.settings
        if s.programs is not None and self.seeds_started >= s.programs:
            return False
        return self.elapsed() < s.seconds

    def fill(self) -> None:
        while len(self.running) < self.settings.jobs:
            if not self.pending:
                if not self.may_start_seed():
                    return
                seed = self.next_seed
                self.next_seed += 1
                self.seeds_started += 1
                self.say(f"seed {seed} started")
                self.pending.extend((seed, c) for c in self.settings.configs)
            self.start(*self.pending.popleft())

    def start(self, seed: int, config: str) -> None:
        log = self.out / "logs" / config / f"seed-{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.out / "scratch" / f"{config}-{seed}"
        scratch.mkdir(parents=True, exist_ok=True)
        log_file = log.open("w")
        # the probes observe; the replay command (child_args) leaves them out
        probe = ["--probe", self.settings.probe] if self.settings.probe else []
        cmd = [sys.executable, "-m", "grace.difftest", *child_args(seed, self.settings), *probe]
        gpu = self.gpus[self.children_started % len(self.gpus)] if len(self.gpus) > 1 else None
        self.children_started += 1
        env = child_env(config, scratch, gpu, self.out / "scratch" / "compile" / config)
        env[step_file.ENV] = str((scratch / "step").resolve())
        process = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env,
                                   start_new_session=True)
        self.running.append(Child(seed, config, process, time.monotonic(), log, log_file, scratch))

    def poll(self) -> None:
        for child in list(self.running):
            returncode = child.process.poll()
            if returncode is None and time.monotonic() - child.started > self.settings.timeout:
                self.kill(child)
                self.finish(child, timeout_result(child.seed, self.settings.timeout, read_step(child.scratch / "step")))
            elif returncode is not None:
                child.log_file.close()
                output = child.log.read_text(errors="replace")
                self.finish(child, parse_child(output, returncode, child.seed, read_step(child.scratch / "step")))

    def kill(self, child: Child) -> None:
        """The child's whole session (it and its compile workers): it was started as its own."""
        try:
            os.killpg(child.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.process.wait()
        child.log_file.close()

    def cancel_all(self, why: str) -> None:
        for child in list(self.running):
            self.kill(child)
            self.running.remove(child)
            self.cancelled += 1
        self.cancelled += len(self.pending)
        self.pending.clear()
        self.say(f"{why}: {self.cancelled} (seed, configuration) runs cancelled, not counted")

    def finish(self, child: Child, result: dict[str, Any]) -> None:
        self.running.remove(child)
        shutil.rmtree(child.scratch, ignore_errors=True)
        result = {**result, "configuration": child.config, "env": CONFIGURATIONS[child.config],
                  "wall_s": round(time.monotonic() - child.started, 2)}
        self.records.append(result)
        with self.results_path.open("a") as f:
            f.write(json.dumps(result, sort_keys=True) + "\n")
        if result["status"] != "ok":
            self.say(f"seed {child.seed} {child.config}: {result['status']}: {result['detail']}")
        elif result.get("stale"):  # a wrong value read without error: its log stays, with any probes' lines
            self.say(f"seed {child.seed} {child.config}: ok, stale reads (step, held step) {result['stale']}; "
                     f"log {child.log}")
        else:
            child.log.unlink(missing_ok=True)
        if not any(c.seed == child.seed for c in self.running) and all(p[0] != child.seed for p in self.pending):
            self.seed_done(child.seed)

    def seed_done(self, seed: int) -> None:
        results = by_seed(self.records)[seed]
        for config, r in results.items():
            if against_every_stock_run(results, config):
                stocks = ", ".join(s["status"] for s in stock_runs(results, config))
                self.say(f"seed {seed} {config}: WORSE THAN STOCK ({r['status']} vs stock {stocks})")

    def progress(self) -> None:
        self.last_progress = time.monotonic()
        s = self.settings
        done = sum(1 for seed, rs in by_seed(self.records).items() if len(rs) == len(s.configs))
        calls = {c: sum(int(r.get("calls") or 0) for r in self.records if r["configuration"] == c)
                 for c in s.configs}
        failures = {c: sum(r["status"] != "ok" for r in self.records if r["configuration"] == c)
                    for c in s.configs}
        left = max(0.0, s.seconds - self.elapsed())
        self.say(f"seeds done {done} (running {len(self.running)}, queued {len(self.pending)}); "
                 f"calls {' '.join(f'{c}={n}' for c, n in calls.items())}; "
                 f"failures {' '.join(f'{c}={n}' for c, n in failures.items())}; "
                 f"worse than stock {len(worse_than_stock(self.records))}; {left:.0f} s left")


def run(settings: Settings, printer: TextIO = sys.stdout) -> list[dict[str, Any]]:
    """Run the campaign, write the reports, print the summary; the summary rows."""
    unknown = [c for c in settings.configs if c not in CONFIGURATIONS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {', '.join(unknown)}; choose from {', '.join(CONFIGURATIONS)}")
    records = Campaign(settings, printer).run()
    rows = write_reports(settings.out, records, settings)
    print(format_table(rows), file=printer)
    if STOCK not in settings.configs:
        print("(stock did not run: worse_than_stock is not judged)", file=printer)
    print(f"results: {settings.out / 'results.jsonl'}; worse than stock: {settings.out / 'worse_than_stock.md'}",
          file=printer, flush=True)
    return rows
