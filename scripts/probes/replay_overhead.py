"""Where a replay's host time goes, per mode: why a graph that copies nothing may still lose to
no graph at all (issue 5: micro-eos under GraCE-CGCT-PI against PT2-NoCG).

Diagnostic only: its numbers are read, not reported. One mode per process (the modes need
different environments, as in the benchmark):

    python scripts/probes/replay_overhead.py --mode pt2-nocg|pt2-cg|grace-cgct-pi|grace-cgct-pi-prelude|grace-cgct-pi-exec

For the mode's environment it compiles the workload, then prints, in microseconds per call:
synchronised calls (the benchmark's measure), back-to-back calls synchronised once (host-bound
throughput), the GPU time of a call between CUDA events, and a cProfile of as many calls sorted
by own time, which names the Python frames of CUDA graph trees and of GraCE's replay. Run the
modes one after another in one device call:

    for m in pt2-nocg pt2-cg grace-cgct-pi grace-cgct-pi-prelude grace-cgct-pi-exec; do
      python scripts/probes/replay_overhead.py --mode $m > $OUT/replay.$m.log 2>&1; done
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time


def child(mode: str, workload: str, calls: int) -> None:
    import torch

    from grace.bench.modes import MODES
    from grace.bench.workloads import get
    from grace.stats import summary

    wl = get(workload)
    torch.manual_seed(0)
    model = wl.build("cuda", wl.batch_size, "full")
    samples = [wl.inputs(model, i, "cuda", wl.batch_size, "full") for i in range(8)]
    fn = torch.compile(model, mode=MODES[mode].compile_mode)
    sync = torch.cuda.synchronize
    with torch.no_grad():
        for s in samples * 2:
            fn(*s)
        sync()
        synced = []
        for i in range(calls):
            sync()
            t = time.perf_counter()
            fn(*samples[i % 8])
            sync()
            synced.append((time.perf_counter() - t) * 1e6)
        t = time.perf_counter()
        for i in range(calls):
            fn(*samples[i % 8])
        sync()
        back_to_back = (time.perf_counter() - t) * 1e6 / calls
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpu = []
        for i in range(min(calls, 100)):
            start.record()
            fn(*samples[i % 8])
            end.record()
            end.synchronize()
            gpu.append(start.elapsed_time(end) * 1e3)
        prof = cProfile.Profile()
        prof.enable()
        for i in range(calls):
            fn(*samples[i % 8])
        sync()
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    print(f"==== {mode} {workload} ({calls} calls)")
    print(f"synchronised call us: {summary(synced)}")
    print(f"back-to-back us per call: {back_to_back:.1f}")
    print(f"between CUDA events us: {summary(gpu)}")
    print(out.getvalue())


def main() -> int:
    from grace.bench.modes import MODES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", required=True, choices=sorted(m for m in MODES if m != "eager"))
    ap.add_argument("--workload", default="micro-eos")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.mode, args.workload, args.calls)
        return 0
    env = {**os.environ, **MODES[args.mode].env}
    cmd = [sys.executable, __file__, "--child", "--mode", args.mode, "--workload", args.workload,
           "--calls", str(args.calls)]
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
