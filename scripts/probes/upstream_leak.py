"""Which objects keep a CUDA graph pool alive after one of PyTorch's CUDA graph trees tests.

Upstream's tearDown resets Dynamo, collects garbage, empties the cache and asserts that no
graph pool segment is left. This runs one test of ``test_cudagraph_trees.py`` (its folder on
``sys.path``) under the switches of the environment, does the same, and for every object that
can hold a pool (a tree manager, a node, a CUDA graph) still alive prints the referrers that
keep it (see :func:`pool_leak.chain`), then every block of a graph pool still allocated, with the
Python frames that allocated it (the allocator's memory history, recorded from the test's start).

    GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 python scripts/probes/upstream_leak.py \
        .upstream CudaGraphTreeTests.test_graph_partition_cpu_scalar1
"""

from __future__ import annotations

import gc
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pool_leak import chain, pool_segments  # noqa: E402


def main() -> int:
    folder, test = sys.argv[1], sys.argv[2]
    sys.path.insert(0, folder)
    import torch
    import test_cudagraph_trees as suite
    from torch._inductor import cudagraph_trees as trees

    cls_name, method = test.split(".")
    cls = getattr(suite, cls_name)
    left: list[int] = []

    def teardown(self: unittest.TestCase) -> None:
        self.graph_stack.close()
        torch._dynamo.reset()
        gc.collect()
        torch.cuda.empty_cache()
        left.append(pool_segments())

    cls.tearDown = teardown
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite([cls(method)]))
    print(f"{test}: {'passed' if result.wasSuccessful() else 'FAILED'}; "
          f"{left[0] if left else '?'} graph pool segment(s) left after reset")
    kinds = (trees.CUDAGraphTreeManager, trees.CUDAGraphNode, torch.cuda.CUDAGraph)
    for o in [o for o in gc.get_objects() if isinstance(o, kinds)][:4]:
        print(f"alive: {type(o).__name__}")
        chain(o, depth=8)
    live_blocks(torch.cuda.memory._snapshot())
    return 0


def live_blocks(snapshot: dict) -> None:
    """Each allocated block of a graph pool's segments (pool id not (0, 0)), with its frames."""
    for segment in snapshot["segments"]:
        if tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0):
            continue
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                print(f"live block at {address:#x}, {block['size']} B, pool {tuple(segment['segment_pool_id'])}")
                for frame in block.get("frames", [])[:25]:
                    if frame.get("filename", "").endswith(".py"):
                        print(f"    {frame['filename']}:{frame['line']} {frame['name']}")
            address += block["size"]


if __name__ == "__main__":
    raise SystemExit(main())
