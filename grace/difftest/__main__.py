"""``python -m grace.difftest run|run-one|show|summarize``: the randomized differential tester.

    run        programs from --start-seed on, each under every --configs configuration in its own
               process, --jobs at a time, for --seconds; writes results.jsonl, summary.csv and
               worse_than_stock.md under --out and prints the summary
    run-one    one program in this process; prints its program on stderr and one JSON line,
               {"seed", "status", "calls", "step", "detail", ...}, on stdout
    show       print a seed's program
    summarize  rewrite and print a run folder's summary from its results.jsonl

The configurations are :data:`grace.report.upstream.CONFIGURATIONS` and ``stock-again``, stock
run a second time (:data:`grace.difftest.runner.STOCK_AGAIN`); a run covers
:data:`grace.difftest.runner.RUN_BY_DEFAULT` unless told otherwise. A configuration's environment
(``python -m grace.report.upstream --env NAME``; stock's for ``stock-again``) is read at
interpreter start, so ``run-one`` takes it from its own environment: the replay command that
``worse_than_stock.md`` gives for a program sets it.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grace.difftest import step_file
from grace.difftest.programs import DEFAULT_MAX_STEPS, OPT_IN_KINDS, generate, parse_kinds
from grace.difftest.runner import CONFIGURATIONS, RUN_BY_DEFAULT


def _program_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                   help="calls per program at most (default: %(default)s)")
    p.add_argument("--kinds", default=None, help="comma-separated function kinds (default: all but the opt-in "
                                                 f"{', '.join(OPT_IN_KINDS)})")


def _device_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    p.add_argument("--backend", default="inductor",
                   help="torch.compile backend; inductor uses mode=reduce-overhead, inductor-nocg Inductor's "
                        "default mode, without CUDA graphs (default: %(default)s)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grace.difftest", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    one = sub.add_parser("run-one", help="run one program in this process")
    one.add_argument("--seed", type=int, required=True)
    from grace.difftest.probe import PROBES

    one.add_argument("--probe", default=None,
                     help=f"diagnose a failure: comma-separated tree probes ({', '.join(PROBES)}) or all; "
                          "they print to stderr (grace.difftest.probe)")
    one.add_argument("--gc-threshold", type=int, default=None,
                     help="run Python's cyclic collector after this many allocations (gc.set_threshold; 0 turns "
                          "it off): held outputs it frees end their tree paths, so when it runs can change the "
                          "path a program takes (default: Python's)")
    _program_options(one)
    _device_options(one)

    many = sub.add_parser("run", help="run programs under several configurations")
    many.add_argument("--configs", default=",".join(RUN_BY_DEFAULT),
                      help=f"comma-separated, from {', '.join(CONFIGURATIONS)} (default: {', '.join(RUN_BY_DEFAULT)})")
    many.add_argument("--seconds", type=float, default=300.0, help="start no seed after this (default: %(default)s)")
    many.add_argument("--start-seed", type=int, default=0)
    many.add_argument("--out", type=Path, required=True, help="the run's folder")
    many.add_argument("--jobs", type=int, default=2, help="children at a time (default: %(default)s)")
    many.add_argument("--timeout", type=float, default=300.0,
                      help="seconds per (seed, configuration) (default: %(default)s)")
    many.add_argument("--programs", type=int, default=None, help="stop after this many seeds")
    many.add_argument("--resume", action="store_true",
                      help="add to the run in --out: keep its results, start after its last seed "
                           "(its configurations, device, steps, kinds and backend must be these)")
    many.add_argument("--hard-seconds", type=float, default=None,
                      help="kill what still runs after this; those runs are dropped")
    many.add_argument("--probe", default=None,
                      help="run-one --probe for every child (comma-separated probes or all): they write into "
                           "the child's log, kept where a run failed or read a held output stale")
    _program_options(many)
    _device_options(many)

    show = sub.add_parser("show", help="print a seed's program")
    show.add_argument("--seed", type=int, required=True)
    show.add_argument("--json", action="store_true")
    _program_options(show)

    stale = sub.add_parser("explain-stale", help="what a probed child's log says about its stale reads")
    stale.add_argument("log", help="a child's log (logs/<configuration>/seed-<S>.log of a run made with --probe "
                                   "trace,guard)")
    stale.add_argument("--held", type=int, default=None, help="the held step (default: each stale read the log's "
                                                                "result records)")
    stale.add_argument("--at", type=int, default=None, help="the step it was read stale at")

    summary = sub.add_parser("summarize", help="summary of a run folder")
    summary.add_argument("out", type=Path)
    return p.parse_args(argv)


def set_collector(threshold: int | None) -> None:
    """Python's cyclic collector as ``--gc-threshold`` asks: left as it is (None), off (0), or run
    after ``threshold`` allocations in its youngest generation."""
    if threshold is None:
        return
    if threshold < 0:
        raise SystemExit(f"--gc-threshold {threshold}: expected 0 (off) or a positive count")
    if threshold == 0:
        gc.disable()
    else:
        gc.enable()
        gc.set_threshold(threshold)


def each_of(markers: list[Callable[[int, Any], None]]) -> Callable[[int, Any], None] | None:
    """One ``on_step`` that calls each of ``markers`` in order; None for none."""
    if len(markers) <= 1:
        return markers[0] if markers else None

    def on_step(index: int, step: Any) -> None:
        for marker in markers:
            marker(index, step)
    return on_step


def run_one(args: argparse.Namespace) -> int:
    from grace.difftest.execute import run_program  # imports torch

    program = generate(args.seed, parse_kinds(args.kinds), args.max_steps)
    print(program.describe(), file=sys.stderr, flush=True)
    # a crash (SIGSEGV, SIGABRT) prints every thread's Python stack into the child's log, where
    # the parent finds the step it died in
    faulthandler.enable(file=sys.stderr, all_threads=True)
    set_collector(args.gc_threshold)
    markers: list[Callable[[int, Any], None]] = []
    watch, on_hold = None, None
    if args.probe:
        from grace.difftest.probe import Probes, parse_probes

        probes = Probes(parse_probes(args.probe)).install()
        markers.append(probes.step_marker)  # each probe line follows the step it belongs to
        watch, on_hold = probes.watch, probes.hold_marker
    if os.environ.get(step_file.ENV):  # the parent's record of where this child is
        markers.append(step_file.StepWriter(os.environ[step_file.ENV]))
    result = run_program(program, args.device, args.backend, each_of(markers), watch, on_hold)
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


def run_many(args: argparse.Namespace) -> int:
    from grace.difftest.runner import Settings, run

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    kinds = parse_kinds(args.kinds) if args.kinds else None
    if args.probe:
        from grace.difftest.probe import parse_probes

        parse_probes(args.probe)  # an unknown name is refused here, not in every child
    settings = Settings(configs=configs, out=args.out, seconds=args.seconds, start_seed=args.start_seed,
                        jobs=args.jobs, device=args.device, max_steps=args.max_steps, kinds=kinds,
                        timeout=args.timeout, programs=args.programs, backend=args.backend,
                        hard_seconds=args.hard_seconds, resume=args.resume, probe=args.probe or None)
    run(settings)
    return 0


def summarize(args: argparse.Namespace) -> int:
    from grace.difftest.runner import Settings, format_table, read_results, read_settings, write_reports

    records = read_results(args.out / "results.jsonl")
    configs = [c for c in CONFIGURATIONS if any(r["configuration"] == c for r in records)]
    saved = args.out / "settings.json"
    settings = read_settings(saved) if saved.is_file() else Settings(configs=configs, out=args.out)
    rows = write_reports(args.out, records, settings)
    print(format_table(rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "run-one":
            return run_one(args)
        if args.command == "run":
            return run_many(args)
        if args.command == "show":
            program = generate(args.seed, parse_kinds(args.kinds), args.max_steps)
            print(program.to_json() if args.json else program.describe())
            return 0
        if args.command == "explain-stale":
            from grace.difftest.stale_trace import explain_log

            print(explain_log(args.log, args.held, args.at))
            return 0
        return summarize(args)
    except ValueError as e:
        print(f"grace.difftest: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
