"""A steady call through the emulated tree (probes/20261127-s23-cpu/dnet_tree/emulate.py: the real
patched manager and node over CPU tensors, the replay stubbed), GraCE with lean replay on, with
the tree's settings read through grace.lean.config_reads against read as stock reads them
(ConfigModule.__getattr__): the same process, the two ways alternating round by round.
Microseconds a call, median over rounds, and the paired difference's median."""
import os
import statistics
import sys
import time
import weakref

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "20261127-s23-cpu", "dnet_tree"))
import emulate as emu  # noqa: E402
import torch  # noqa: E402
import torch._dynamo.config as dynamo_config  # noqa: E402
import torch._inductor.cudagraph_trees as ct  # noqa: E402
from torch._inductor import config  # noqa: E402

from grace.lean.config_reads import NodeRunSettings  # noqa: E402
from grace.tree_liveness import CachedOutputLiveness  # noqa: E402

assert emu.PATCHED, "GraCE's overlay (GRACE_DISABLE unset)"
torch.set_num_threads(1)
inputs, call, mgr = emu.build(17)
node = mgr.current_node
mgr.grace_eager = None
node.grace_copy_back = None
for i, ref in enumerate(node.outputs_weakrefs):
    ref.extra_ref_check = CachedOutputLiveness(lambda: True, weakref.ref(node), i,
                                               node.cached_tensor_outputs[i]._use_count())
lean = mgr.grace_lean
direct = (lean._force_warmup, lean._skip_warmup, lean._inline_modules, NodeRunSettings())


class StockReads:  # the node's settings read as stock reads them
    fast_path_asserts = staticmethod(lambda: config.triton.fast_path_cudagraph_asserts)
    force_sync = staticmethod(lambda: config.triton.force_cudagraph_sync)


stock = (lambda: config.triton.force_cudagraphs_warmup, lambda: config.triton.skip_cudagraph_warmup,
         lambda: dynamo_config.inline_inbuilt_nn_modules, StockReads())


def use(reads) -> None:
    lean._force_warmup, lean._skip_warmup, lean._inline_modules, node.grace_settings = reads


def per_call_us(reads, calls: int) -> float:
    use(reads)
    start = time.perf_counter()
    for _ in range(calls):
        ct.GenerationTracker.generation += 1
        call(list(inputs))
    return (time.perf_counter() - start) / calls * 1e6


for reads in (direct, stock):
    per_call_us(reads, 300)
rows = {"direct": [], "stock": []}
for _ in range(15):
    rows["direct"].append(per_call_us(direct, 2000))
    rows["stock"].append(per_call_us(stock, 2000))
diff = [s - d for d, s in zip(rows["direct"], rows["stock"])]
print(f"torch {torch.__version__}; 15 rounds of 2,000 calls each way, alternating; one thread")
for name, xs in rows.items():
    print(f"settings read {name:7s} {statistics.median(xs):6.2f} us a call (p10 {sorted(xs)[1]:.2f}, p90 {sorted(xs)[-2]:.2f})")
print(f"stock reads minus direct reads, paired: median {statistics.median(diff):.2f} us a call "
      f"(min {min(diff):.2f}, max {max(diff):.2f})")
