"""Where a call spends its CPU time when SCG keeps its graph out, against plain torch.compile.

Diagnostic only (no result is derived from it). One mode per process:

    python scripts/probes/scg_no_graph_overhead.py --mode nocg|cg|grace [--workload micro-eos]

compiles the workload (nocg: default mode; cg: reduce-overhead with SCG off; grace:
reduce-overhead with SCG on), times synchronized calls, then prints a cProfile of as many.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

import grace.config
from grace.bench.precision import exact_float32
from grace.bench.workloads import get
from grace.stats import summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["nocg", "cg", "grace"], required=True)
    ap.add_argument("--workload", default="micro-eos")
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    exact_float32()
    wl = get(args.workload)
    torch.manual_seed(0)
    model = wl.build("cuda", wl.batch_size, "full")
    samples = [wl.inputs(model, i, "cuda", wl.batch_size, "full") for i in range(4)]
    grace.config.scg = args.mode == "grace"
    fn = torch.compile(model, mode=None if args.mode == "nocg" else "reduce-overhead")
    with torch.no_grad():
        for s in samples * 3:
            fn(*s)
        times = []
        for i in range(args.calls):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fn(*samples[i % 4])
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e6)
        prof = cProfile.Profile()
        prof.enable()
        for i in range(args.calls):
            fn(*samples[i % 4])
            torch.cuda.synchronize()
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(f"==== {args.mode} {args.workload}: synchronized call us {summary(times)}")
    print(out.getvalue())
    from grace.scg import report

    if report.records():
        print(report.format_table(report.records()))


if __name__ == "__main__":
    main()
