"""Where a kept-out function's graph-pool memory comes from.

EOS under GraCE deploys no graph (SCG keeps its function out), yet the benchmark's rows hold
84 MB in CUDA graph pools (``graph_pool_bytes``) where PT2-CG's one graph holds 44 to 86 MB, and
its peak iteration memory is PT2-NoCG's. Two candidates, read in the code: the function's
warm-up ran in the real tree's pool (a warm-up allocates there), whose freed segments
``empty_cache`` cannot return while the tree lives; or SCG's last profile left its private
tree's pool reserved (the tree still bound to a local name of ``grace.scg.tree_hook._profile``
when its memory is released). This probe warms the workload up as the benchmark's worker does
and runs a few more iterations, then prints each CUDA graph pool in the allocator's snapshot:
its segments' bytes, the bytes allocated in them, and whether it is the real tree's pool (the
device's ``CUDAGraphTreeManager.cuda_graphs_thread_pool``); then again after ``gc.collect()``
and ``torch.cuda.empty_cache()``. Nothing is timed.

    python scripts/probes/kept_out_pool.py --mode grace --workload EOS
    python scripts/probes/kept_out_pool.py --mode pt2-cg --workload EOS
"""

from __future__ import annotations

import gc
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.probes._in_mode import mode_parser, run_in_mode  # noqa: E402


def pools(snapshot: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """Per graph pool id in an allocator snapshot: (segments, their bytes, bytes allocated)."""
    found: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for seg in snapshot:
        pool = tuple(seg.get("segment_pool_id", (0, 0)))
        if pool == (0, 0):
            continue
        entry = found[pool]  # type: ignore[index]
        entry[0] += 1
        entry[1] += int(seg["total_size"])
        entry[2] += int(seg.get("allocated_size", 0))
    return {pool: (n, total, allocated) for pool, (n, total, allocated) in found.items()}


def report(label: str, snapshot: list[dict[str, Any]], tree_pool: Any) -> None:
    found = pools(snapshot)
    print(f"{label}: {len(found)} graph pools, {sum(t for _, t, _ in found.values()) / 1e6:.1f} MB in their segments")
    for pool, (n, total, allocated) in sorted(found.items()):
        whose = "the real tree's" if tree_pool is not None and pool == tuple(tree_pool) else "another"
        print(f"  pool {pool} ({whose}): {n} segments, {total / 1e6:.1f} MB, {allocated / 1e6:.1f} MB allocated")


def child(args) -> None:
    import torch
    from torch._inductor.cudagraph_trees import get_manager

    from grace import trees
    from grace.bench.modes import MODES
    from grace.bench.precision import exact_float32
    from grace.bench.worker import Case
    from grace.bench.workloads import get

    exact_float32()
    workload = get(args.workload)
    case = Case(workload, MODES[args.mode], args.device, workload.batch_size, args.size, check_after=True)
    case.warm_up(5)
    for _ in range(args.iterations):
        case.untimed_step()
    if not args.device.startswith("cuda"):
        print("dry run on the CPU: no graph pools to read")
        return
    torch.cuda.synchronize()
    manager = get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    tree_pool = getattr(manager, "cuda_graphs_thread_pool", None)
    graphs = len(trees.nodes(manager)) if manager is not None else 0
    print(f"{args.mode} {args.workload}: tree manager {'present' if manager is not None else 'none'}, "
          f"{graphs} recorded graphs, real tree's pool {tree_pool}")
    report("after warm-up and iterations", torch.cuda.memory_snapshot(), tree_pool)
    gc.collect()
    torch.cuda.empty_cache()
    report("after gc.collect() and empty_cache()", torch.cuda.memory_snapshot(), tree_pool)


def main() -> int:
    ap = mode_parser(__doc__, "EOS", dry_run="the GPU's pools")
    ap.add_argument("--iterations", type=int, default=20, help="untimed iterations after the warm-up")
    args = ap.parse_args()
    return run_in_mode(args, __file__, lambda: child(args))


if __name__ == "__main__":
    sys.exit(main())
