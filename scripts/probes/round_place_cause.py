"""Why a round's first timed sample is its fastest once the round starts with a rewarm.

With the rewarm (untimed iterations before each round's samples), the benchmark's rounds on the
GPU turned over: the first sample of a five-sample round became the fastest (micro-eos under
PT2-CG: 161 us against 217 to 238 us at places 2 to 5; ``python -m grace.report.round_position``).
Only the first sample follows the rewarm's back-to-back iterations; each later one follows the
previous sample's kept output copy (``check_after``) and the next input's generation. This probe
times rounds of the benchmark's own :class:`grace.bench.worker.Case` under variants of what runs
between two samples, rotated round by round, and prints each variant's median per place:

- ``harness``: as the benchmark (the output copied and kept, checked after the round);
- ``no-copy``: no output kept (the reference held aside), nothing else changed;
- ``copy-sync``: as ``harness`` with a synchronisation after the copy;
- ``gap``: no copy, the host idle for ``--gap-us`` between samples;
- ``step``: no copy, an untimed iteration between samples (the rewarm's state before each).

    python scripts/probes/round_place_cause.py --mode pt2-cg --workload micro-eos
    python scripts/probes/round_place_cause.py --mode pt2-cg --device cpu --size tiny   # a dry run
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.probes._in_mode import mode_parser, run_in_mode  # noqa: E402

PLACES = 5
VARIANTS = ("harness", "no-copy", "copy-sync", "gap", "step")


def _between(case, variant: str, gap_s: float) -> Callable[[], None]:
    """What runs after each timed sample under ``variant`` (the copy itself is ``timed``'s)."""
    if variant == "copy-sync":
        return case.sync
    if variant == "gap":
        return lambda: time.sleep(gap_s)
    if variant == "step":
        return case.untimed_step
    return lambda: None


def child(args) -> None:
    from grace.bench.modes import MODES
    from grace.bench.precision import exact_float32
    from grace.bench.pinning import pin_backward_thread, pin_timing_thread
    from grace.bench.worker import Case
    from grace.bench.workloads import get

    exact_float32()
    core = max(os.sched_getaffinity(0))
    if args.device.startswith("cuda"):
        pin_timing_thread(core)  # as the benchmark's worker times
    workload = get(args.workload)
    case = Case(workload, MODES[args.mode], args.device, workload.batch_size, args.size, check_after=True)
    case.warm_up(5)
    if args.device.startswith("cuda") and workload.kind == "training":
        pin_backward_thread(core, args.device)  # and its backward, as the worker's --pin-backward does
    reference = case.reference
    places: dict[str, list[list[float]]] = {v: [[] for _ in range(PLACES)] for v in VARIANTS}
    sample = 0
    for r in range(args.rounds):
        for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:
            case.reference = None if v in ("no-copy", "gap", "step") else reference
            after = _between(case, v, args.gap_us / 1e6)
            case.rewarm(20)
            for place in range(PLACES):
                places[v][place].append(case.timed(sample))
                sample += 1
                after()
            case.reference = reference
            case.check_kept()
    print(f"{'variant':<10}" + "".join(f"{'place ' + str(p + 1):>10}" for p in range(PLACES)) + "  first/last"
          f"   (medians in us over {args.rounds} rounds; {args.mode} {args.workload} on {args.device})")
    for v in VARIANTS:
        med = [median(xs) for xs in places[v]]
        print(f"{v:<10}" + "".join(f"{m:>10.1f}" for m in med) + f"{med[0] / med[-1]:>12.2f}")
    if reference is not None:
        checked = reference.summary(fallback_random=workload.stochastic)
        print(f"outputs checked against eager: {checked['checked']}, all equal: {checked['ok']}")


def main() -> int:
    ap = mode_parser(__doc__, "micro-eos", dry_run="the GPU's timings")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--gap-us", type=float, default=200.0)
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args))


if __name__ == "__main__":
    sys.exit(main())
