"""Which allocations keep an SCG profile's private pool reserved after the profile.

Diagnostic: compiles micro-eos under SCG (``grace`` mode's switches, a fresh decision cache)
with the allocator's history on, then prints each live block in a pool other than the real
tree's, with the Python frames that allocated it.

    GRACE_SCG_CACHE_DIR=$(mktemp -d) python scripts/probes/profile_pool_leftovers.py
"""

from __future__ import annotations

import gc


def main() -> None:
    import torch
    from torch._inductor import cudagraph_trees

    from grace.bench.precision import exact_float32
    from grace.bench.workloads import get

    exact_float32()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    wl = get("micro-eos")
    model = wl.build("cuda", 1 << 16, "full")
    fn = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for s in range(3):
            fn(*wl.inputs(model, s, "cuda", 1 << 16, "full"))
    gc.collect()
    torch.cuda.synchronize()
    tree = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    own = {tuple(tree.cuda_graphs_thread_pool)} if tree is not None else set()
    snapshot = torch.cuda.memory._snapshot()
    for seg in snapshot["segments"]:
        pool = tuple(seg.get("segment_pool_id", (0, 0)))
        if pool in own | {(0, 0)}:
            continue
        print(f"segment of pool {pool}: {seg['total_size']} B")
        for block in seg["blocks"]:
            if block["state"] != "active_allocated":
                continue
            frames = [f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}"
                      for f in block.get("frames", []) if f["filename"].endswith(".py")]
            print(f"  live block {block['size']} B, allocated at:")
            for f in frames[:14]:
                print(f"    {f}")


if __name__ == "__main__":
    main()
