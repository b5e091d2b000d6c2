import sys, timeit, weakref
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "20261127-s23-cpu", "dnet_tree"))
import emulate as emu, torch
import torch._inductor.cudagraph_trees as ct
from grace import stale_outputs as so
from grace.tree_liveness import CachedOutputLiveness
torch.set_num_threads(1)
inputs, call, mgr = emu.build(17)
mgr.grace_eager = None
mgr.current_node.grace_copy_back = None
node = mgr.current_node
# as the hardened node makes its weak references to cached outputs
for i, ref in enumerate(node.outputs_weakrefs):
    out = node.cached_tensor_outputs[i]
    ref.extra_ref_check = CachedOutputLiveness(lambda: True, weakref.ref(node), i, out._use_count())
for i in range(50):
    ct.GenerationTracker.generation += 1; call(list(inputs))
g = mgr.grace_stale_outputs
print("held", so._held_indices(node), "shared", so._shared_indices(node))
timed = [("path_ends", lambda: g.path_ends(node)), ("note_and_swap", lambda: so._note_and_swap_held(node, []))]
if hasattr(so, "_any_held"):  # the one-pass test, between f786ccf9 and its revert
    timed.insert(1, ("any_held", lambda: so._any_held(node)))
for name, stmt in timed:
    n=20000
    t=min(timeit.repeat(stmt, number=n, repeat=5))/n*1e6
    print(f"{name:16s} {t:6.2f} us")
y = call(list(inputs))
print("held now", so._held_indices(node))
