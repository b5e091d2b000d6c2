"""Where a training workload's first step spends its compile time, per mode: why BERT's and
MTCG-T's backward compile for minutes under GraCE with race-free kernels on (the default) and
in seconds with them off or under PT2-CG.

Diagnostic only: its numbers are read, not reported. One mode per process, as in the benchmark:

    python scripts/probes/compile_profile.py --workload BERT --mode grace-cgct [--threads 1]

With ``--threads 1`` Inductor compiles every Triton kernel in this process, so that the profile
sees all of it (its compile workers otherwise, whose output Inductor discards). It prints:

- the first step's wall time (forward, loss, backward: every compile), and the second's;
- the kernels Inductor compiled, and the calls and seconds of each of ``grace.layout_race``'s
  parts (reading a configuration's TTGIR, choosing the configurations, compiling variants) and
  of Triton's compile of one configuration, with the variants compiled;
- a cProfile of the first step, by cumulative and by own time.

A SIGTERM during the first step (a deadline's ``timeout``) prints the same for what it has done.
"""

from __future__ import annotations

import collections
import cProfile
import io
import os
import pstats
import signal
import sys
import time
from typing import Any

from _in_mode import mode_parser, run_in_mode


class Timers:
    """Wrappers put on chosen functions while installed: calls and seconds, per label."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.seconds: collections.Counter[str] = collections.Counter()
        self._installed: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        calls, seconds = self.calls, self.seconds

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                calls[label] += 1
                seconds[label] += time.perf_counter() - start

        setattr(owner, name, wrapper)
        self._installed.append((owner, name, original))

    def report(self) -> str:
        return "\n".join(f"  {label:<44} {self.calls[label]:>6} calls {self.seconds[label]:>9.2f} s"
                         for label in sorted(self.calls))


def child(workload: str, device: str, size: str, threads: int | None) -> None:
    import torch
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters
    from torch._inductor.runtime import triton_heuristics

    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get

    if threads is not None:
        inductor_config.compile_threads = threads
    timers = Timers()
    timers.wrap(triton_heuristics.CachingAutotuner, "_precompile_config", "triton compile of a configuration")
    if os.environ.get("GRACE_DISABLE") != "1":
        import grace.layout_race as layout_race
        import grace.ttgir_race as ttgir_race

        timers.wrap(ttgir_race, "find_layout_races", "layout_race: read a TTGIR")
        timers.wrap(layout_race, "keep_race_free", "layout_race: choose configurations")
        timers.wrap(layout_race, "_compiled_variants", "layout_race: compile variants")
        timers.wrap(layout_race, "race_free_variant", "layout_race: derive a variant")

    exact_float32()
    wl = get(workload)
    if wl.kind != "training":
        raise SystemExit(f"{workload} is an inference workload; this probe steps training workloads")
    torch.manual_seed(0)
    model = wl.build(device, wl.batch_size, size)
    fn = torch.compile(model, mode="reduce-overhead")
    args = wl.inputs(model, 0, device, wl.batch_size, size)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step() -> None:
        for p in model.parameters():
            p.grad = None
        wl.loss(fn(*args)).backward()

    # the backward on the calling thread: its lazy compile otherwise runs on autograd's device
    # thread, which cProfile does not see
    torch.autograd.set_multithreading_enabled(False)
    profile = cProfile.Profile()
    start = time.perf_counter()

    def report(steps: str) -> None:
        print(f"{steps}; compile threads {inductor_config.compile_threads}; race-free kernels "
              f"{os.environ.get('GRACE_RACE_FREE_KERNELS', 'default')}")
        print(f"kernels Inductor compiled: {counters['inductor']['async_compile_cache_miss']}")
        print(timers.report())
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(key).print_stats(30)
            print(f"---- cProfile of the first step by {key}")
            print(out.getvalue(), flush=True)

    def cut(signum: int, frame: Any) -> None:  # a deadline's SIGTERM: what the first step did so far
        profile.disable()
        report(f"first step cut by signal {signum} after {time.perf_counter() - start:.1f} s")
        os._exit(124)

    signal.signal(signal.SIGTERM, cut)
    profile.enable()
    step()
    sync()
    profile.disable()
    first = time.perf_counter() - start
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    start = time.perf_counter()
    step()
    sync()
    report(f"first step {first:.1f} s, second {time.perf_counter() - start:.2f} s")


def main() -> int:
    ap = mode_parser(__doc__, "BERT", dry_run="no Triton")
    ap.add_argument("--threads", type=int, default=None, help="Inductor's compile threads (default: its own)")
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args.workload, args.device, args.size, args.threads))


if __name__ == "__main__":
    sys.exit(main())
