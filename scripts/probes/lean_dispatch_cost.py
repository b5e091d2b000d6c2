"""Host cost of the tree manager's dispatch of a steady-state call, with and without lean replay,
on the CPU: the real, patched ``CUDAGraphTreeManager.run``/``_run`` over the fake nodes of
``tests/test_lean.py`` (no CUDA; check_invariants and the node's run are trivial there, so this
times the manager's own bookkeeping only). Diagnostic: read, not reported as a speedup.

    python scripts/probes/lean_dispatch_cost.py [--calls N]
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import time

from grace.paths import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("test_lean", REPO_ROOT / "tests" / "test_lean.py")
    fakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fakes)
    import torch._inductor.cudagraph_trees as ct

    import grace.config

    print(f"python {platform.python_version()}, {platform.processor() or platform.machine()}; "
          f"median of {args.repeats} repeats of {args.calls} calls")
    with grace.config.patch(scg=False, pi=False, cgct=False):
        for partitions in (1, 4):
            for lean in (False, True):
                manager = fakes.FakeManager(lean)
                fids = fakes._chain(manager, partitions)
                per_call = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    for _ in range(args.calls):
                        ct.GenerationTracker.generation += 1
                        for f in fids:
                            manager.run([], f)
                    per_call.append((time.perf_counter() - start) / args.calls * 1e6)
                served = manager.grace_lean.served if lean else 0
                print(f"{partitions} graph(s), lean {'on ' if lean else 'off'}: {statistics.median(per_call):6.2f} us "
                      f"per call (min {min(per_call):.2f}, max {max(per_call):.2f}); lean served {served} calls")


if __name__ == "__main__":
    main()
