"""A parallel CPU op after the calling thread is pinned to one core, with torch's intra-op pool
made before the pin or after it.

OpenMP threads inherit the affinity of the thread that makes them: a pool made after the pin
shares the pinned core. Prints the milliseconds of 200 small parallel ops in each case, each in
its own process (the pool is made once per process):

    python scripts/probes/pinned_pool.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def run_case(pool_first: bool) -> None:
    import torch

    from grace.bench.pinning import pin_timing_thread

    core = max(os.sched_getaffinity(0))
    if pool_first:
        pin_timing_thread(core)
    else:
        os.sched_setaffinity(0, {core})
    x = torch.randn(1 << 20)

    def ops() -> None:
        for _ in range(200):
            (x * 1.5 + 2.0).sum()

    ops()
    start = time.perf_counter()
    ops()
    print(f"pool made {'before' if pool_first else 'after'} the pin: {torch.get_num_threads()} threads, "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms")


def main() -> int:
    if len(sys.argv) > 1:
        run_case(sys.argv[1] == "before")
        return 0
    for case in ("after", "before"):
        subprocess.run([sys.executable, __file__, case], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
