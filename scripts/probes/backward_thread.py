"""Where a training step's backward runs, and what that costs GraCE's per-step parts.

GraCE's training steps pay more host time than PT2-CG's (the replay map on an H200:
micro-mlp16-T 2,218 against 1,889 us; the guards' layer 194 us), and its per-step parts in the
backward (``grace.grad_copies.AdoptedGrads.noted``, the stale-output guard, the hardened liveness
check) take about five times on the GPU machine what they take in a hot loop on the development
CPU. The cause it found: autograd runs a CUDA backward on its device thread; left unpinned while
the timing thread is pinned, each step's backward Python runs once, on another core, cold (the
benchmark now pins both: ``--pin-backward``). This probe times the benchmark's own training step (:class:`grace.bench.worker.Case`,
timing thread pinned as the worker pins it, one untimed iteration before each sample) with the
backward, variant by variant and rotated round by round:

- ``device-thread``: autograd's default, the backward on its CUDA device thread;
- ``device-thread-pinned``: that thread pinned to the timing thread's core;
- ``calling-thread``: ``torch.autograd.set_multithreading_enabled(False)``, the backward on the
  thread that calls it;

and prints each variant's median step and, under GraCE, the microseconds per step inside
``AdoptedGrads.noted``, ``AdoptedGrads.before_call`` and ``StaleOutputGuard.path_ends`` (timed in
place; the wrappers' own cost is in every variant alike).

    python scripts/probes/backward_thread.py --mode grace --workload micro-mlp16-T
    python scripts/probes/backward_thread.py --mode pt2-cg --device cpu --size tiny    # a dry run
"""

from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.probes._in_mode import mode_parser, run_in_mode  # noqa: E402

VARIANTS = ("device-thread", "device-thread-pinned", "calling-thread")
SAMPLES_PER_ROUND = 5


def timers(ns: collections.Counter[str]) -> list[tuple[Any, str, Any]]:
    """Wrap GraCE's per-step parts with clocks into ``ns``; the originals, to restore."""
    import grace.grad_copies as grad_copies
    import grace.stale_outputs as stale

    installed = []
    for owner, name in ((grad_copies.AdoptedGrads, "noted"), (grad_copies.AdoptedGrads, "before_call"),
                        (stale.StaleOutputGuard, "path_ends")):
        original = getattr(owner, name)
        label = f"{owner.__name__}.{name}"

        def wrapper(*args: Any, _original: Callable[..., Any] = original, _label: str = label, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return _original(*args, **kwargs)
            finally:
                ns[_label] += time.perf_counter_ns() - start

        setattr(owner, name, wrapper)
        installed.append((owner, name, original))
    return installed


def child(args) -> None:
    import torch

    from grace.bench.modes import MODES
    from grace.bench.precision import exact_float32
    from grace.bench.pinning import autograd_device_thread, pin_timing_thread
    from grace.bench.worker import Case
    from grace.bench.workloads import get

    exact_float32()
    workload = get(args.workload)
    if workload.kind != "training":
        raise SystemExit(f"{args.workload} is an inference workload; this probe steps training workloads")
    core = max(os.sched_getaffinity(0))
    case = Case(workload, MODES[args.mode], args.device, workload.batch_size, args.size, check_after=True,
                lead_in_below_us=10_000)
    case.warm_up(5)
    backward_tid = autograd_device_thread(args.device)
    others = os.sched_getaffinity(0)
    if args.device.startswith("cuda"):
        pin_timing_thread(core)
    grace_on = os.environ.get("GRACE_DISABLE") != "1" and MODES[args.mode].name.startswith("grace")
    ns: collections.Counter[str] = collections.Counter()
    installed = timers(ns) if grace_on else []
    steps: dict[str, list[float]] = {v: [] for v in VARIANTS}
    parts: dict[str, collections.Counter[str]] = {v: collections.Counter() for v in VARIANTS}
    counted: collections.Counter[str] = collections.Counter()  # steps run (the lead-ins' included) per variant
    variant = [VARIANTS[0]]
    step = case.step

    def counted_step(*a: Any) -> Any:
        counted[variant[0]] += 1
        return step(*a)

    case.step = counted_step  # type: ignore[method-assign]
    sample = 0
    try:
        for r in range(args.rounds):
            for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:
                torch.autograd.set_multithreading_enabled(v != "calling-thread")
                if backward_tid is not None:
                    os.sched_setaffinity(backward_tid, {core} if v == "device-thread-pinned" else others)
                variant[0] = "rewarm"
                case.rewarm(20)
                variant[0] = v
                before = collections.Counter(ns)
                for _ in range(SAMPLES_PER_ROUND):
                    steps[v].append(case.timed(sample))
                    sample += 1
                parts[v].update(ns - before)
                variant[0] = "check"  # the eager reference's steps
                case.check_kept()
    finally:
        torch.autograd.set_multithreading_enabled(True)
        if backward_tid is not None:
            os.sched_setaffinity(backward_tid, others)
        for owner, name, original in installed:
            setattr(owner, name, original)
    print(f"{args.mode} {args.workload} on {args.device}, {args.rounds} rounds of {SAMPLES_PER_ROUND}; "
          f"backward's device thread {backward_tid}, timing core {core}")
    for v in VARIANTS:
        per_step = {k: round(n / 1e3 / counted[v], 2) for k, n in sorted(parts[v].items())}
        print(f"{v:<22} step median {median(steps[v]):8.1f} us   GraCE's parts, us a step: {per_step or '-'}")
    if case.reference is not None:
        checked = case.reference.summary(fallback_random=workload.stochastic)
        print(f"outputs checked against eager: {checked['checked']}, all equal: {checked['ok']}")


def main() -> int:
    ap = mode_parser(__doc__, "micro-mlp16-T", dry_run="the GPU's timings and its device thread")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args))


if __name__ == "__main__":
    sys.exit(main())
