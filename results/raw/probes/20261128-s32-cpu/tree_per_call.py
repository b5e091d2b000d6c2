"""One steady call through the emulated tree (emulate.py: the real patched or stock manager
and node over CPU tensors, the replay stubbed), back to back: microseconds per call.
GRACE_DISABLE=1: stock; otherwise GraCE's overlay, its node's cached outputs under the hardened
liveness test as GraCE's patched node makes them, lean replay on unless LEAN=0."""
import os
import statistics
import sys
import time
import weakref

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "20261127-s23-cpu", "dnet_tree"))
import emulate as emu  # noqa: E402
import torch  # noqa: E402
import torch._inductor.cudagraph_trees as ct  # noqa: E402

torch.set_num_threads(1)
inputs, call, mgr = emu.build(17)
if emu.PATCHED:  # what the patches added to the manager and the node since emulate.py was written
    mgr.grace_eager = None
    mgr.current_node.grace_copy_back = None
    from grace.tree_liveness import CachedOutputLiveness

    node = mgr.current_node
    for i, ref in enumerate(node.outputs_weakrefs):
        ref.extra_ref_check = CachedOutputLiveness(lambda: True, weakref.ref(node), i,
                                                   node.cached_tensor_outputs[i]._use_count())


def loop(k: int) -> None:
    for _ in range(k):
        ct.GenerationTracker.generation += 1
        call(list(inputs))


loop(300)
samples = []
for _ in range(7):
    start = time.perf_counter()
    loop(3000)
    samples.append((time.perf_counter() - start) / 3000 * 1e6)
tag = "stock" if not emu.PATCHED else f"GraCE, lean replay {'on' if os.environ.get('LEAN', '1') == '1' else 'off'}"
print(f"{tag:28s} {statistics.median(samples):6.2f} us a call (17 inputs, one output)")
