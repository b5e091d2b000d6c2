"""PyTorch's CUDA graph trees tests under each GraCE configuration: which pass, and which differ
from stock.

``scripts/run_upstream_cudagraph_tests.sh`` runs upstream's ``test_cudagraph_trees.py`` once per
configuration below, each into ``results/raw/upstream_cudagraph_trees/<run>/<configuration>/``
(``junit-K.xml``, ``pytest-K.log`` per shard K; ``recheck-K.jsonl`` from
:mod:`grace.report.upstream_recheck` for the tests that differ from stock, rerun on both sides). This module names the configurations (the script asks it for
each one's environment) and reads a run back into
``results/processed/upstream_cudagraph_trees.csv`` (``configuration,passed,failed,errors,skipped``)
and ``upstream_cudagraph_trees_differ.md``: every test whose outcome under a configuration is not
its outcome under stock, with the first line of its failure and both reruns, after the ones
that need a look (:func:`needs_a_look`).

    python -m grace.report.upstream --list            # the configurations a run covers by default
    python -m grace.report.upstream --list-all        # every configuration
    python -m grace.report.upstream --env pi-ptx      # its environment, KEY=VALUE ...
    python -m grace.report.upstream [--run-id RUN]    # the table and the differences
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from grace.paths import RESULTS_DIR
from grace.report import archive

EXPERIMENT = "upstream_cudagraph_trees"
STOCK = "stock"

# Each configuration's environment. SCG's decisions are forced to "graph" wherever SCG is on,
# except in the "-free" configurations, so that every test records what it expects recorded and
# still goes through SCG's profiling on private trees; the "-free" ones show what SCG's own
# keep-out changes. Every GraCE configuration sets lean replay (grace.config.lean_replay),
# gradient copies (grace.config.copy_grads) and mutated inputs (grace.config.mutated_inputs)
# itself: lean replay on in its "-lean" twin, gradient copies in the "-copy" ones, mutated inputs
# in the "-mut-" ones ("all-free-mut-lean-copy" is GraCE's defaults), each off otherwise, so that
# a change of a switch's default changes no configuration.
_GRACE_ON = {"GRACE_DISABLE": "0", "GRACE_COPY_GRADS": "0", "GRACE_MUTATED_INPUTS": "0"}
_BASE: dict[str, dict[str, str]] = {
    "cgct": {**_GRACE_ON, "GRACE_CGCT": "1", "GRACE_PI": "0", "GRACE_SCG": "0"},
    "pi-ptx": {**_GRACE_ON, "GRACE_CGCT": "0", "GRACE_PI": "1", "GRACE_SCG": "0", "GRACE_PI_STRATEGY": "ptx"},
    "pi-prelude": {**_GRACE_ON, "GRACE_CGCT": "0", "GRACE_PI": "1", "GRACE_SCG": "0", "GRACE_PI_STRATEGY": "prelude"},
    "pi-exec-update": {**_GRACE_ON, "GRACE_CGCT": "0", "GRACE_PI": "1", "GRACE_SCG": "0",
                       "GRACE_PI_STRATEGY": "exec-update"},
    "scg": {**_GRACE_ON, "GRACE_CGCT": "0", "GRACE_PI": "0", "GRACE_SCG": "1", "GRACE_SCG_FORCE": "graph"},
    "all": {**_GRACE_ON, "GRACE_CGCT": "1", "GRACE_PI": "1", "GRACE_SCG": "1", "GRACE_SCG_FORCE": "graph"},
    "all-free": {**_GRACE_ON, "GRACE_CGCT": "1", "GRACE_PI": "1", "GRACE_SCG": "1", "GRACE_SCG_FORCE": ""},
}
CONFIGURATIONS: dict[str, dict[str, str]] = {
    STOCK: {"GRACE_DISABLE": "1"},
    **{name: {**env, "GRACE_LEAN_REPLAY": "0"} for name, env in _BASE.items()},
    # lean replay alone, and with each configuration above
    "lean": {**_GRACE_ON, "GRACE_CGCT": "0", "GRACE_PI": "0", "GRACE_SCG": "0", "GRACE_LEAN_REPLAY": "1"},
    **{f"{name}-lean": {**env, "GRACE_LEAN_REPLAY": "1"} for name, env in _BASE.items()},
    # PI alone, every graph's check reported failed once it has run (grace.config.pi_force_untrusted):
    # each strategy's fallbacks taken wherever PI records (ptx: a second, stock capture, or a retired
    # graph; prelude: a second capture; exec-update: the rewrite dropped, the graph as captured)
    **{f"{name}-untrusted": {**_BASE[name], "GRACE_LEAN_REPLAY": "0", "GRACE_PI_FORCE_UNTRUSTED": "1"}
       for name in ("pi-ptx", "pi-prelude", "pi-exec-update")},
    # every switch, with adopted gradients copied before the next call (grace.grad_copies)
    "all-copy": {**_BASE["all"], "GRACE_LEAN_REPLAY": "0", "GRACE_COPY_GRADS": "1"},
    # GraCE's defaults but mutated inputs, with SCG forced to record, and deciding
    "all-lean-copy": {**_BASE["all"], "GRACE_LEAN_REPLAY": "1", "GRACE_COPY_GRADS": "1"},
    "all-free-lean-copy": {**_BASE["all-free"], "GRACE_LEAN_REPLAY": "1", "GRACE_COPY_GRADS": "1"},
    # GraCE's defaults, functions that mutate copied inputs recorded (grace.config.mutated_inputs),
    # with SCG forced to record, and exactly as a user gets them (SCG deciding): upstream's tests
    # that expect such functions skipped fail here by design
    "all-mut-lean-copy": {**_BASE["all"], "GRACE_LEAN_REPLAY": "1", "GRACE_COPY_GRADS": "1",
                          "GRACE_MUTATED_INPUTS": "1"},
    "all-free-mut-lean-copy": {**_BASE["all-free"], "GRACE_LEAN_REPLAY": "1", "GRACE_COPY_GRADS": "1",
                               "GRACE_MUTATED_INPUTS": "1"},
    # the last with every PI check failed: the differential test's long training programs take
    # PI's fallbacks where "pi-ptx-untrusted" stops with stock at the first overwritten output
    "untrusted-all-mut-lean-copy": {**_BASE["all"], "GRACE_LEAN_REPLAY": "1", "GRACE_COPY_GRADS": "1",
                                    "GRACE_MUTATED_INPUTS": "1", "GRACE_PI_FORCE_UNTRUSTED": "1"},
}

# What a run covers unless told otherwise: stock, each optimization alone, all of them (SCG forced,
# and deciding freely), lean replay alone and with all of them, and GraCE's defaults with SCG
# forced, with mutated inputs and without. A run's CONFIGS picks any configuration above (the
# other "-lean" twins, "all-copy", "all-free-mut-lean-copy", the "-untrusted" ones).
RUN_BY_DEFAULT: tuple[str, ...] = (STOCK, *_BASE, "lean", "all-lean", "all-lean-copy", "all-mut-lean-copy")

OUTCOMES = ("passed", "failed", "errors", "skipped")
_LOG_LINE = re.compile(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b.*?(\S+\.py::\S+)|(\S+\.py::\S+)\s.*?\b(PASSED|FAILED|ERROR|SKIPPED)\b")


@dataclass(frozen=True)
class Result:
    outcome: str  # one of OUTCOMES, or "not run" (the configuration's pytest ended first)
    message: str = ""


def env_line(name: str) -> str:
    if name not in CONFIGURATIONS:
        raise KeyError(f"no configuration {name!r}; choose from {', '.join(CONFIGURATIONS)}")
    return " ".join(f"{k}={v}" for k, v in CONFIGURATIONS[name].items())


def read_junit(path: Path) -> dict[str, Result]:
    """Test id (``Class::test``) -> outcome, from pytest's junit XML."""
    out: dict[str, Result] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:  # a failure or error outranks a skip (an error in teardown of a skip)
            tag = {"failure": "failed", "error": "errors", "skipped": "skipped"}.get(child.tag)
            if tag is not None and (outcome in ("passed", "skipped")):
                outcome, message = tag, (child.get("message") or child.text or "").strip()
        out[test] = Result(outcome, _first_line(message))
    return out


def read_log(path: Path) -> dict[str, Result]:
    """Test id -> outcome from a verbose pytest log: for a configuration whose pytest was stopped
    before writing its junit XML."""
    kinds = {"PASSED": "passed", "FAILED": "failed", "ERROR": "errors", "SKIPPED": "skipped",
             "XFAIL": "skipped", "XPASS": "passed"}
    out: dict[str, Result] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = _LOG_LINE.search(line)
        if m is None:
            continue
        word, node = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        test = node.split(".py::", 1)[1]
        out.setdefault(test, Result(kinds[word]))
    return out


def read_configuration(folder: Path) -> dict[str, Result]:
    """Every test's outcome in one configuration's folder: the union of its shards (``junit-K.xml``,
    or ``pytest-K.log`` where a shard was stopped before writing its XML; ``junit.xml`` and
    ``pytest.log`` for an unsharded run)."""
    out: dict[str, Result] = {}
    shards = sorted({p.name[len("pytest"):-len(".log")] for p in folder.glob("pytest*.log")}
                    | {p.name[len("junit"):-len(".xml")] for p in folder.glob("junit*.xml")})
    for shard in shards:
        log, junit = folder / f"pytest{shard}.log", folder / f"junit{shard}.xml"
        part: dict[str, Result] | None = None
        if junit.is_file() and junit.stat().st_size:
            try:
                part = read_junit(junit)
            except ET.ParseError:
                part = None
        if part is None:
            part = read_log(log) if log.is_file() else {}
        out.update(part)
    return out


# How a test that reads the tree's manager fails where no function was recorded
NO_TREE = "AttributeError: 'NoneType' object has no attribute"


@dataclass(frozen=True)
class Rerun:
    """A test's rerun under :mod:`grace.report.upstream_recheck`: each phase's outcome and
    message, and the FileChecks it recorded instead of raising."""

    phases: dict[str, tuple[str, str]]  # "setup", "call", "teardown" -> (outcome, message)
    filechecks: tuple[str, ...] = ()

    def words(self) -> str:
        """What the rerun showed, in words (the report's rerun columns)."""
        words = [f"FileCheck differs ({self.filechecks[0]})"] if self.filechecks else []
        for when in ("setup", "call", "teardown"):
            outcome, message = self.phases.get(when, ("not run", ""))
            if outcome != "passed" or when != "setup":
                words.append(f"{when} {outcome}" + (f": {message}" if message else ""))
        return "; ".join(words)

    def unexplained(self, scg_deciding: bool = False) -> str | None:
        """Why this rerun needs a look, or None: a teardown that still fails (the rerun released
        the failure's frames, so that is a real leak), or a phase that raised anything but a
        test's own assertion (an error from the code under test, GraCE's internal errors
        among them). A test's assertion, and a FileCheck the rerun recorded, are what a
        configuration's designed differences look like; each is listed, not flagged. Where SCG
        decides (``scg_deciding``), a test that reads the tree's manager finds none when SCG kept
        every function out of graphs, and fails reading an attribute of None: that is listed too."""
        teardown, message = self.phases.get("teardown", ("not run", ""))
        if teardown != "passed":
            return f"teardown {teardown}" + (f": {message}" if message else "")
        for when in ("setup", "call"):
            outcome, message = self.phases.get(when, ("not run", ""))
            if outcome == "passed" or message.startswith("AssertionError"):
                continue
            if scg_deciding and message.startswith(NO_TREE):
                continue
            return f"{when} {outcome}" + (f": {message}" if message else "")
        return None


def read_recheck(path: Path) -> dict[str, Rerun]:
    """Test id -> its rerun under :mod:`grace.report.upstream_recheck`."""
    phases: dict[str, dict[str, tuple[str, str]]] = {}
    filechecks: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        test = record.get("test") or "?"
        if record.get("event") == "filecheck":
            filechecks.setdefault(test, []).append(record.get("message", ""))
        elif record.get("event") == "phase":
            phases.setdefault(test, {})[record["when"]] = (record["outcome"], record.get("message", ""))
    return {test: Rerun(phases.get(test, {}), tuple(filechecks.get(test, ())))
            for test in sorted(set(phases) | set(filechecks))}


def read_rechecks(folder: Path) -> dict[str, Rerun]:
    """:func:`read_recheck` over a configuration's pieces (``recheck-K.jsonl``)."""
    out: dict[str, Rerun] = {}
    for path in sorted(folder.glob("recheck*.jsonl")):
        out.update(read_recheck(path))
    return out


def to_recheck(stock: dict[str, Result], other: dict[str, Result]) -> list[str]:
    """Tests whose outcome differs from stock's where one side failed or errored."""
    return [t for t, s, o in differences(stock, other)
            if "failed" in (s.outcome, o.outcome) or "errors" in (s.outcome, o.outcome)]


def to_recheck_in_run(run: Path, config: str) -> list[str]:
    """What ``config`` reruns in ``run``: its differences from stock; for stock, every test
    that any configuration of the run differs on, so that each difference is rerun on both sides."""
    stock = read_configuration(run / STOCK)
    if config != STOCK:
        return to_recheck(stock, read_configuration(run / config))
    tests: set[str] = set()
    for folder in run.iterdir():
        if folder.is_dir() and folder.name != STOCK and any(folder.glob("pytest*.log")):
            tests.update(to_recheck(stock, read_configuration(folder)))
    return sorted(tests)


def _first_line(message: str) -> str:
    for line in message.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def counts(results: dict[str, Result]) -> dict[str, int]:
    return {o: sum(r.outcome == o for r in results.values()) for o in OUTCOMES}


def differences(stock: dict[str, Result], other: dict[str, Result]) -> list[tuple[str, Result, Result]]:
    """Tests whose outcome differs from stock's (a test stock ran that the other did not, too)."""
    out = []
    for test in sorted(set(stock) | set(other)):
        s, o = stock.get(test, Result("not run")), other.get(test, Result("not run"))
        if s.outcome != o.outcome:
            out.append((test, s, o))
    return out


def write_report(run_dir: Path, processed: Path, also: Sequence[Path] = ()) -> tuple[Path, Path, list[str]]:
    """The table and the differences for ``run_dir``'s configurations, and for those of the runs
    in ``also`` that ``run_dir`` lacks (the first run in ``also`` that has one); and the lines of
    the differences' first section, what needs a look (:func:`needs_a_look`)."""
    source: dict[str, Path] = {}
    for run in (run_dir, *also):
        for folder in sorted(p for p in run.iterdir() if p.is_dir()):
            if any(folder.glob("pytest*.log")) or any(folder.glob("junit*.xml")):
                source.setdefault(folder.name, run)
    configs = [c for c in CONFIGURATIONS if c in source] + sorted(c for c in source if c not in CONFIGURATIONS)
    if not configs:
        raise FileNotFoundError(f"no configuration folders in {run_dir}")
    results = {c: read_configuration(source[c] / c) for c in configs}
    processed.mkdir(parents=True, exist_ok=True)
    table = processed / f"{EXPERIMENT}.csv"
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["configuration", *OUTCOMES])
        for c in configs:
            n = counts(results[c])
            w.writerow([c, *(n[o] for o in OUTCOMES)])
    lines = ["# Upstream CUDA graph trees tests: outcomes that differ from stock", "",
             f"The table is `{table.name}`. Each configuration's run:", ""]
    lines += [f"- {c}: `{source[c].name}`" for c in configs] + [""]
    lines += ["The two last columns are the test run again, under stock and under the configuration, with",
              "`grace.report.upstream_recheck`: the frames of a failure are released before tearDown's",
              "pool checks (pytest otherwise keeps them, and the graph outputs their locals hold, alive",
              "through tearDown), and a FileCheck of generated code is recorded instead of raised, so the",
              "rest of the test still runs. A teardown that still fails there is a real leak.", ""]
    stock = results.get(STOCK, {})
    # xdist hands tests to workers in no fixed order, and a few upstream tests depend on what ran
    # before them in their process: a test stock failed in any of these runs is marked as such
    stock_failed: dict[str, str] = {}
    for run in (run_dir, *also):
        if (run / STOCK).is_dir():
            for test, r in read_configuration(run / STOCK).items():
                if r.outcome in ("failed", "errors"):
                    stock_failed.setdefault(test, run.name)
    sections: list[str] = []
    look: list[str] = []
    for c in configs:
        if c == STOCK:
            continue
        diff = differences(stock, results[c]) if stock else []
        sections.append(f"## {c} ({env_line(c) if c in CONFIGURATIONS else 'unknown configuration'})")
        sections.append("")
        if not stock:
            sections.append("No stock results in this run to compare with.")
        elif not diff:
            sections.append("Every test has stock's outcome.")
        else:
            recheck = read_rechecks(source[c] / c)
            stock_recheck = read_rechecks(source[c] / STOCK)
            sections += ["| test | stock | this configuration | message | rerun: stock | rerun: this configuration |",
                         "| --- | --- | --- | --- | --- | --- |"]
            for t, s, o in diff:
                mine, theirs = recheck.get(t), stock_recheck.get(t)
                sections.append(f"| `{t}` | {s.outcome}{_flaky(stock_failed, t)} | {o.outcome} | {_cell(o.message)} | "
                                f"{_cell(theirs.words() if theirs else '')} | {_cell(mine.words() if mine else '')} |")
                why = needs_a_look(s, o, mine, theirs, scg_deciding=scg_decides(c))
                if why is not None:
                    look.append(f"- {c}: `{t}`: {_cell(why)}")
        sections.append("")
    lines += ["## Needs a look", ""]
    lines += look or ["None: every difference's rerun under its configuration passed, or failed on a test's own "
                      "assertion or a recorded FileCheck, with a clean teardown."]
    lines += ["", *sections]
    differ = processed / f"{EXPERIMENT}_differ.md"
    differ.write_text("\n".join(lines))
    return table, differ, look


def scg_decides(config: str) -> bool:
    """Whether SCG decides freely under ``config`` (on, its decisions not forced)."""
    env = CONFIGURATIONS.get(config, {})
    return env.get("GRACE_SCG") == "1" and not env.get("GRACE_SCG_FORCE")


def needs_a_look(stock: Result, other: Result, rerun: Rerun | None, stock_rerun: Rerun | None,
                 scg_deciding: bool = False) -> str | None:
    """Why a test whose outcome differs from stock's needs a look, or None: it failed under the
    configuration and was not rerun, or its rerun there shows what no designed difference does
    (:meth:`Rerun.unexplained`) while stock's rerun of it did not. A test stock failed and the
    configuration passed is stock's."""
    if other.outcome not in ("failed", "errors"):
        return None
    if rerun is None:
        return f"{other.outcome}, not rerun: {_first_line(other.message)}"
    why = rerun.unexplained(scg_deciding)
    if why is None or (stock_rerun is not None and stock_rerun.unexplained() == why):
        return None
    return why


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _flaky(stock_failed: dict[str, str], test: str) -> str:
    return f" (stock failed it in run `{stock_failed[test]}`)" if test in stock_failed else ""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grace.report.upstream", description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="print the configurations a run covers by default")
    p.add_argument("--list-all", action="store_true", help="print every configuration's name")
    p.add_argument("--env", metavar="CONFIGURATION", help="print one configuration's environment")
    p.add_argument("--run-id", default=None, help="default: the run latest.txt names")
    p.add_argument("--also", action="append", default=[], metavar="RUN_ID",
                   help="an earlier run whose configurations fill those this run lacks (repeatable)")
    p.add_argument("--to-recheck", metavar="CONFIGURATION",
                   help="print the tests stock passed that this configuration failed in the run, one per line")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    if args.list or args.list_all:
        print(" ".join(RUN_BY_DEFAULT if args.list else CONFIGURATIONS))
        return 0
    if args.env:
        try:
            print(env_line(args.env))
        except KeyError as e:
            print(f"grace.report.upstream: {e.args[0]}", file=sys.stderr)
            return 2
        return 0
    root = args.results_dir / "raw" / EXPERIMENT
    run_id = args.run_id or ((root / "latest.txt").read_text().strip() if (root / "latest.txt").is_file() else None)
    run = archive.resolve(root, run_id) if run_id else None
    if run is None:
        print(f"grace.report.upstream: no run {run_id or '(latest.txt missing)'} under {root} (a folder or "
              f"{run_id}{archive.SUFFIX}); run scripts/run_upstream_cudagraph_tests.sh on a GPU machine", file=sys.stderr)
        return 2
    if args.to_recheck:
        if not (run / STOCK).is_dir() or not (run / args.to_recheck).is_dir():
            print(f"grace.report.upstream: run {run_id} lacks stock or {args.to_recheck}", file=sys.stderr)
            return 2
        for test in to_recheck_in_run(run, args.to_recheck):
            print(test)
        return 0
    also = {r: archive.resolve(root, r) for r in args.also}
    missing = [r for r, folder in also.items() if folder is None]
    if missing:
        print(f"grace.report.upstream: no run {', '.join(missing)} under {root}", file=sys.stderr)
        return 2
    table, differ, look = write_report(run, args.results_dir / "processed",
                                       [folder for folder in also.values() if folder])
    print(table.read_text(), end="")
    print(f"differences from stock: {differ}")
    print(f"needing a look: {len(look)}", *look, sep="\n" if look else " ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
