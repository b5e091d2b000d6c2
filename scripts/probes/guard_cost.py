"""Host cost of the stale-output guard where a path ends, on the CPU: ``StaleOutputGuard.path_ends``
and ``call_ends`` over a node of N cached outputs made as the tree makes them
(``tests/tree_fakes.FakeNode``), judged by stock's liveness test or the hardened one, with the first
output held (``out = f(x)`` in a loop: the last ``out`` is alive during the call) or none.
Diagnostic: read, not reported as a speedup; the GPU's replay path is measured by
``scripts/run_same_run_comparison.sh``.

    python scripts/probes/guard_cost.py [--calls N] [--outputs 1,20] [--guard-from CHECKOUT]

``--guard-from`` times the guard module of another checkout (``grace/stale_outputs.py`` there,
the fake node and the tree from here): run it and a plain run one after the other to compare
two versions on one CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from grace.paths import REPO_ROOT


def time_path_ends(outputs: int, held: bool, hardened: bool, calls: int) -> float:
    """Microseconds per path end (``path_ends`` then ``call_ends``)."""
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    from grace.stale_outputs import StaleOutputGuard

    from tree_fakes import FakeNode

    guard = StaleOutputGuard(CUDAGraphTreeManager.format_dealloc_msg)
    node = FakeNode(outputs, hardened)
    out = node.cached_tensor_outputs[0] if held else None
    start = time.perf_counter()
    for _ in range(calls):
        guard.path_ends(node)
        guard.call_ends()
        if held:
            out = node.cached_tensor_outputs[0]  # what the next replay hands out
    elapsed = time.perf_counter() - start
    del out
    return elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--outputs", default="1,20", help="comma-separated numbers of cached outputs")
    parser.add_argument("--guard-from", type=Path, help="a checkout whose grace/stale_outputs.py to time")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT / "tests"))  # tree_fakes
    import torch

    checkout = args.guard_from or REPO_ROOT
    if args.guard_from is not None:
        source = args.guard_from / "grace" / "stale_outputs.py"
        if not source.is_file():
            parser.error(f"--guard-from: no {source}")
        spec = importlib.util.spec_from_file_location("grace.stale_outputs", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["grace.stale_outputs"] = module
        spec.loader.exec_module(module)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    print(f"# code {commit}, {platform.processor() or platform.machine()}, torch {torch.__version__}; "
          f"median and least of {args.repeats} x {args.calls} path ends (the least is the steadier on a "
          f"shared CPU)")
    print(f"{'outputs':>7} {'held':>5} {'liveness':>9} {'us per path end':>16} {'least':>8}")
    for outputs in (int(n) for n in args.outputs.split(",")):
        for held in (False, True):
            for hardened in (False, True):
                runs = [time_path_ends(outputs, held, hardened, args.calls) for _ in range(args.repeats)]
                print(f"{outputs:>7} {held!s:>5} {'hardened' if hardened else 'stock':>9} "
                      f"{statistics.median(runs):>16.2f} {min(runs):>8.2f}")


if __name__ == "__main__":
    main()
