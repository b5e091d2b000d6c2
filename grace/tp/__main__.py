"""``python -m grace.tp``: one tensor-parallel workload in one or more modes, one process per device.

    torchrun --nproc-per-node T -m grace.tp --workload ST --mode pt2-nocg,pt2-cg --out rows.jsonl
    python -m grace.tp --env MODE          # the environment a mode's processes start with
    python -m grace.tp --groups "MODES"    # MODES grouped by environment, a group per line
    python -m grace.tp --lost-launch STATUS --workload ST --mode M --tp T --round R --out rows.jsonl --log L
                                           # rows for a launch that ended without writing its own

Every rank builds the workload from the same seed, keeps an unsharded eager copy, shards the
model with its plan (:mod:`grace.tp.plans`), compiles it in each mode, and runs ``--warmup``
iterations per mode, then ``--repeat`` rounds on fresh inputs in which every mode runs once,
in rotating order; each iteration is timed between a barrier and the device's synchronisation
on every rank, the slowest rank's time being the iteration's. Before it, ``--rewarm`` untimed
iterations of the same mode on an input of their own: the eager reference and the other modes
ran since the mode's last call, and the first call after them runs cold (up to three times a
warm call's time in the single-GPU benchmark's rounds, ``grace.bench.worker.Case.rewarm``).
Every timed output is compared with the unsharded eager model's on the same input. Rank 0
appends one JSON row per mode to ``--out``: workload, tp, mode, status, the median and p10/p90
in microseconds, the samples.

A mode's switches are read at interpreter start, so only modes that start with the same
environment share a ``torchrun`` (PT2-NoCG and PT2-CG do; GraCE does not): ``--groups`` says
which, ``--env`` prints what to start a group with, and a process whose environment does not
match its modes refuses to run.
"""
from __future__ import annotations

import argparse
import copy
import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from grace.bench.modes import MODES
from grace.bench.workloads import SIZES
from grace.switches import running_switches
from grace.tp.lost_launch import record_lost_launch
from grace.tp.stack_watchdog import StackWatchdog


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grace.tp", description=__doc__.splitlines()[0])
    p.add_argument("--env", metavar="MODE", help="print MODE's environment and exit")
    p.add_argument("--groups", metavar="MODES", help="print the space-separated MODES grouped by environment and exit")
    p.add_argument("--workload")
    p.add_argument("--mode", help="a mode, or comma-separated modes that start with the same environment")
    p.add_argument("--out", type=Path, help="JSON lines file rank 0 appends its row to")
    p.add_argument("--batch-size", type=int, default=None, help="default: the workload's")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--rewarm", type=int, default=1, metavar="N",
                   help="untimed iterations of a mode, on an input no timed one uses, before each of its timed ones")
    p.add_argument("--device", default="cuda", help="cuda (NCCL) or cpu (gloo, for tests)")
    p.add_argument("--size", default="full", choices=SIZES)
    p.add_argument("--round", type=int, default=1, help="which round of an interleaved sweep (in the row)")
    p.add_argument("--hang-dump", type=float, default=0, metavar="SECONDS",
                   help="print every thread's Python stack each SECONDS while the run lasts (0: never), so that "
                        "a rank stuck in a collective shows where (grace.tp.stack_watchdog)")
    p.add_argument("--lost-launch", type=int, metavar="EXIT_STATUS",
                   help="append a row for each of --mode that has none in --round, for a launch (at --tp) that "
                        "ended with EXIT_STATUS without writing them (grace.tp.lost_launch), and exit")
    p.add_argument("--tp", type=int, help="the launch's degree (with --lost-launch)")
    p.add_argument("--log", type=Path, help="the launch's log (with --lost-launch)")
    args = p.parse_args(argv)
    if args.rewarm < 0:
        p.error(f"--rewarm must be at least 0, not {args.rewarm}")
    if args.lost_launch is not None and args.tp is None:
        p.error("--lost-launch needs --tp")
    if args.env is None and args.groups is None:
        if args.workload is None or args.mode is None or args.out is None:
            p.error("--workload, --mode and --out are required (or --env MODE, or --groups MODES)")
        args.modes = args.mode.split(",")
        unknown = [m for m in args.modes if m not in MODES]
        if unknown:
            p.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(sorted(MODES))}")
        if len({_switches(m) for m in args.modes}) > 1:
            p.error(f"modes {args.mode} start with different switches: one torchrun each (--groups)")
    return args


def groups(modes: Sequence[str]) -> list[list[str]]:
    """``modes`` grouped by the environment they start with, in order of first appearance."""
    by_env: dict[tuple, list[str]] = {}
    for m in modes:
        by_env.setdefault(_switches(m), []).append(m)
    return list(by_env.values())


def _switches(mode: str) -> tuple[tuple[str, str], ...]:
    """The environment ``mode`` starts with, comparable."""
    return tuple(sorted(MODES[mode].env.items()))


def mode_env(name: str) -> str:
    return " ".join(f"{k}={v}" for k, v in MODES[name].env.items())


def switch_mismatch(name: str, running: dict[str, str]) -> list[str]:
    """The variables of mode ``name`` whose switch ``running``
    (:func:`grace.switches.running_switches`) does not have as the mode needs."""
    return [f"{k}={v}" for k, v in MODES[name].env.items() if running.get(k) != v]


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from grace.bench.check import compare
    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get
    from grace.stats import summary
    from grace.tp.plans import shard

    cuda = args.device == "cuda"
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    mesh = init_device_mesh(args.device, (world,))
    exact_float32()
    wl = get(args.workload)
    batch = args.batch_size or wl.batch_size
    torch.manual_seed(0)
    model = wl.build(device, batch, args.size)
    reference = copy.deepcopy(model)
    shard(args.workload, model, mesh)
    fns = {m: torch.compile(model, mode=MODES[m].compile_mode) if MODES[m].compiled else model for m in args.modes}

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()

    rows = {m: {"workload": args.workload, "tp": world, "mode": m, "round": args.round, "device": args.device,
                "batch_size": batch, "size": args.size, "rewarm": args.rewarm, "status": "error", "error": None}
            for m in args.modes}
    samples: dict[str, list[float]] = {m: [] for m in args.modes}
    worst = dict.fromkeys(args.modes, 0.0)
    with torch.no_grad():
        for m in args.modes:
            for i in range(args.warmup):
                fns[m](*wl.inputs(model, 10_000 + i, device, batch, args.size))
        rewarm_inputs = wl.inputs(model, 20_000, device, batch, args.size)
        for s in range(args.repeat):
            inputs = wl.inputs(model, s, device, batch, args.size)
            expected = reference(*inputs)
            for k in range(len(args.modes)):  # every mode once, in rotating order
                m = args.modes[(s + k) % len(args.modes)]
                for _ in range(args.rewarm):
                    fns[m](*rewarm_inputs)
                sync()
                t = time.perf_counter()
                out = fns[m](*inputs)
                sync()
                elapsed = torch.tensor([(time.perf_counter() - t) * 1e6], device=device)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the iteration ends with its slowest rank
                samples[m].append(float(elapsed.item()))
                # checked before another mode runs: a CUDA graph's next replay overwrites it
                err, mismatches = compare(out, expected)  # the float32 tolerances of every benchmark row
                worst[m] = max(worst[m], err)
                if mismatches and rows[m]["error"] is None:
                    rows[m].update(status="mismatch", error=f"sample {s} on rank {rank}: {mismatches[0]}")
                del out
    for m, row in rows.items():
        if row["error"] is None:
            row["status"] = "ok"
        stats = summary(samples[m])
        row.update(median_us=stats["median"], p10_us=stats["p10"], p90_us=stats["p90"], samples_us=samples[m],
                   worst_error=worst[m])
    return list(rows.values())


def teardown(exit_code: int, wait_s: float = 60.0) -> None:
    """Release the compiled graphs, then the process group.

    A CUDA graph that captured NCCL collectives keeps its communicator in use, and
    ``destroy_process_group`` then waits in ``ncclCommDestroy`` for ever (pytorch/pytorch#115388;
    seen here at TP 2 in PT2-CG), so the graphs go first. Should it still not return within
    ``wait_s``, the process leaves without it: its row is already written.
    """
    import gc

    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    torch.compiler.reset()  # Dynamo's caches and the CUDA graph trees, with their graphs
    gc.collect()

    def leave() -> None:
        print(f"grace.tp: destroy_process_group did not return in {wait_s:.0f} s; leaving without it",
              file=sys.stderr, flush=True)
        os._exit(exit_code)

    timer = threading.Timer(wait_s, leave)
    timer.daemon = True
    timer.start()
    dist.destroy_process_group()
    timer.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.groups is not None:
        names = args.groups.split()
        unknown = [m for m in names if m not in MODES]
        if unknown:
            print(f"grace.tp: unknown mode(s) {', '.join(unknown)}; known: {', '.join(sorted(MODES))}", file=sys.stderr)
            return 2
        for group in groups(names):
            print(",".join(group))
        return 0
    if args.lost_launch is not None:
        for row in record_lost_launch(args.out, args.workload, args.tp, args.modes, args.round, args.lost_launch, args.log):
            print(f"grace.tp: {row['workload']} tp={row['tp']} {row['mode']}: {row['status']} ({row['error']})")
        return 0
    if args.env is not None:
        if args.env not in MODES:
            print(f"grace.tp: unknown mode {args.env}; known: {', '.join(MODES)}", file=sys.stderr)
            return 2
        print(mode_env(args.env))
        return 0
    wrong = switch_mismatch(args.modes[0], running_switches())
    if wrong:
        print(f"grace.tp: mode {args.mode} needs {' '.join(wrong)} from the start "
              f"(`env $(python -m grace.tp --env {args.modes[0]}) torchrun ...`)", file=sys.stderr)
        return 2
    rank = int(os.environ.get("RANK", "0"))
    faulthandler.enable(all_threads=True)  # a rank that dies on a signal (SIGSEGV) prints where
    watchdog = StackWatchdog(args.hang_dump).start() if args.hang_dump > 0 else None
    try:
        rows = run(args)
    except Exception as e:  # noqa: BLE001 - a failed configuration is a row, the sweep goes on
        traceback.print_exc()
        rows = [{"workload": args.workload, "tp": int(os.environ.get("WORLD_SIZE", "1")), "mode": m,
                 "round": args.round, "status": "error", "error": f"{type(e).__name__}: {e}"} for m in args.modes]
    finally:
        if watchdog is not None:
            watchdog.cancel()
    if rank == 0:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        for row in rows:
            print(f"grace.tp: {row['workload']} tp={row['tp']} {row['mode']}: {row['status']}"
                  + (f", median {row['median_us']:.1f} us" if row.get("median_us") is not None else f" ({row['error']})"),
                  flush=True)
    code = 0 if all(row["status"] == "ok" for row in rows) else 1
    teardown(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
