"""``python -m grace.bench``: run workloads in modes, interleaved; see ``--help``."""

from __future__ import annotations

import argparse
import os
import sys

from grace.bench import options, results, runner
from grace.bench.configs import ConfigError, resolve
from grace.bench.modes import DEFAULT_MODES, parse_modes, parse_tree
from grace.bench.runner import Interrupted, Settings, run
from grace.bench.targets import first_first, pending, shard
from grace.bench.timing_core import CoreClaim, allowed_cores, claim, hold
from grace.bench.workloads import all_workloads

# statuses of a row that --retry may run again
RETRYABLE = ("error", "timeout", "mismatch")


def parse_shard(spec: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes i/n, e.g. 2/4; got {spec!r}") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard {spec}: need 1 <= i <= n")
    return i, n


def parse_pin(spec: str) -> CoreClaim | None:
    """The timing core ``--pin-cpu`` names: ``auto`` claims one no other benchmark on this host
    holds (:mod:`grace.bench.timing_core`), ``N`` takes core N as given, ``none`` pins nothing."""
    allowed = allowed_cores()
    if spec == "none" or not allowed:
        return None
    if spec == "auto":
        return claim(allowed)
    # A core outside this process's set is fine: shards started under `taskset` leave their
    # timing cores to the timing threads, which move there when timing starts.
    online = range(os.cpu_count() or 1)
    if not spec.isdigit() or int(spec) not in online:
        raise ValueError(f"--pin-cpu {spec}: not a core of this machine (0-{online[-1]})")
    return hold(int(spec))


def gpu_problem(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return "no NVIDIA GPU visible (torch.cuda.is_available() is False): the benchmark needs one"
    return None


def print_table(rows: list[dict], baseline: str) -> None:
    base = {r["workload"]: r for r in rows if r["mode"] == baseline and r["status"] == "ok"}
    print(f"{'workload':<22} {'mode':<14} {'status':<9} {'median us':>10} {'p10':>9} {'p90':>9} "
          f"{'speedup':>8} {'graphs':>6} {'compile s':>9}   (speedup: {baseline} median / mode median)")
    for r in rows:
        t = r["iter_us"] or {}
        b = base.get(r["workload"])
        speedup = f"{b['iter_us']['median'] / t['median']:.2f}x" if b and t and r["status"] == "ok" else "-"
        fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
        print(f"{r['workload']:<22} {r['mode']:<14} {r['status']:<9} {fmt(t.get('median'), '10.1f')} "
              f"{fmt(t.get('p10'), '9.1f')} {fmt(t.get('p90'), '9.1f')} {speedup:>8} "
              f"{fmt(r['cuda_graphs'], '6d')} {fmt(r['compile_s'], '9.1f')}")
        if r["status"] != "ok":
            print(f"    !! {r['status'].upper()}: {r['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grace.bench", description=__doc__)
    parser.add_argument("--workloads", default="micro",
                        help="config file, config name in configs/ (micro, smoke), or comma-separated names")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help="comma-separated modes")
    parser.add_argument("--shard", type=parse_shard, default=(1, 1), help="run shard i of n, e.g. 1/3")
    parser.add_argument("--run-id", default=None, help="share one run id across shards")
    parser.add_argument("--pin-cpu", default="auto",
                        help="core for every worker's timing thread: auto (the last allowed core that no other "
                             "benchmark on this host has claimed), none, or N")
    parser.add_argument("--resume", action="store_true",
                        help="skip workloads that already have rows for every mode in this --run-id")
    parser.add_argument("--retry", default="", metavar="STATUSES",
                        help="with --resume, run again (in every mode) the workloads whose latest row for "
                             f"a mode has one of these comma-separated statuses: {', '.join(RETRYABLE)}")
    parser.add_argument("--redo", default="", metavar="WORKLOADS",
                        help="with --resume, run again (in every mode) these comma-separated workloads where "
                             "their latest rows ran other code than this checkout's (versions.grace_code)")
    parser.add_argument("--attempts-before", type=float, default=None, metavar="EPOCH",
                        help="with --resume, take only workloads started before this time (seconds since "
                             "the epoch) and never finished for cut ones: runners started together pass "
                             "their common start, so that none reads another's fresh start as a cut")
    runner.add_arguments(parser)  # one flag per flagged grace.bench.runner.Settings field
    options.add_arguments(parser)  # one flag per grace.bench.options.WorkerOptions field
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="another checkout of GraCE; mode MODE@NAME runs MODE with its code and patch "
                             "series (repeatable), for same-run comparisons of two versions")
    parser.add_argument("--baseline", default="pt2-nocg", help="mode the speedup column divides by")
    parser.add_argument("--list", action="store_true", help="list registered workloads and exit")
    args = parser.parse_args(argv)

    try:
        worker_options = options.WorkerOptions.from_args(args)
    except ValueError as e:
        print(f"grace.bench: {e}", file=sys.stderr)
        return 2
    if args.list:
        for w in all_workloads():
            print(f"{w.name:<24} {w.suite:<12} {w.kind:<10} batch {w.batch_size:<8} {w.idiom}")
        return 0
    try:
        results.check_name("--experiment", args.experiment)
        if args.run_id is not None:
            results.check_name("--run-id", args.run_id)
        modes = parse_modes(args.modes, dict(parse_tree(t) for t in args.tree))
        targets = resolve(args.workloads)
        if args.resume:
            if not args.run_id:
                raise ValueError("--resume needs the --run-id of the run to finish")
            retry = frozenset(x.strip() for x in args.retry.split(",") if x.strip())
            unknown = retry - set(RETRYABLE)
            if unknown:
                raise ValueError(f"--retry: unknown status {', '.join(sorted(unknown))} "
                                 f"(choose from {', '.join(RETRYABLE)})")
            redo = frozenset(x.strip() for x in args.redo.split(",") if x.strip())
            unknown = redo - {t.workload.name for t in targets}
            if unknown:
                raise ValueError(f"--redo: {', '.join(sorted(unknown))} not among the workloads run")
            targets = pending(targets, modes, results.run_dir(args.experiment, args.run_id), retry,
                              args.attempts_before, redo, results.versions()["grace_code"] if redo else None)
        elif args.retry or args.redo:
            raise ValueError("--retry and --redo go with --resume and the --run-id of the run to finish")
        targets = shard(first_first(targets), *args.shard)
    except (ConfigError, ValueError) as e:
        print(f"grace.bench: {e}", file=sys.stderr)
        return 2
    if not targets:
        print("grace.bench: nothing to run (every workload of this shard already has its rows)")
        return 0
    problem = gpu_problem(args.device)
    if problem:
        print(f"grace.bench: {problem}", file=sys.stderr)
        return 2
    try:
        pinned = parse_pin(args.pin_cpu)
    except ValueError as e:
        print(f"grace.bench: {e}", file=sys.stderr)
        return 2
    settings = Settings.from_args(args, run_id=args.run_id or results.new_run_id(),
                                  pin_cpu=pinned.core if pinned else -1, worker=worker_options)
    try:
        out_dir = run(settings, targets, modes)
    except Interrupted as e:
        print(f"grace.bench: stopped ({e}); its workers are killed, the rows written so far kept "
              f"(rerun with --resume --run-id {settings.run_id})", file=sys.stderr)
        return 143
    finally:
        if pinned:
            pinned.release()
    import json

    names = {t.workload.name for t in targets}
    rows = [json.loads(line) for line in (out_dir / "rows.jsonl").read_text().splitlines()]
    print_table([r for r in rows if r["workload"] in names], args.baseline)
    print(f"rows: {out_dir / 'rows.jsonl'}")
    return 1 if any(r["status"] != "ok" for r in rows if r["workload"] in names) else 0


if __name__ == "__main__":
    sys.exit(main())
