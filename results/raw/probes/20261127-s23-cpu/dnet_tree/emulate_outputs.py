"""Per-output cost on the replay path (hot): the same emulation with K cached outputs, N=17 inputs."""
import os, sys, statistics, torch
sys.path.insert(0, "/tmp/dnettree")
import emulate as E
import torch._inductor.cudagraph_trees as ct
from grace.bench import layers

def _gen(n, partition):
    names = [f'arg{i}_1' for i in range(n)]
    src = ('def call(args):\n' f"    {', '.join(names)}, = args\n" '    args.clear()\n' f"    p = [{', '.join(names)}]\n" f"    del {', '.join(names)}\n" '    outs = partition(p)\n' '    del p\n' '    return outs\n')
    ns = {'partition': partition}; exec(src, ns); return ns['call']
E.make_generated_call = _gen

def build_k(n, k):
    inputs, call, mgr = E.build(n)
    node = mgr.roots[mgr.fid][0]
    outs = [torch.randn(4, 10) for _ in range(k)]
    node.cached_tensor_outputs = outs; node.static_output_tensors = [None] * k
    node.output_storage_alias = [ct.UnaliasedStorage] * k
    node.outputs_metadata = [{"size": o.shape} for o in outs]
    if E.PATCHED:
        import weakref
        from grace.tree_liveness import CachedOutputLiveness
        nref = weakref.ref(node)
        def mk(i, o):
            stock = lambda: sys.getrefcount(node.cached_tensor_outputs[i]) == 2
            return ct.StorageWeakRefWrapper(o, extra_ref_check=CachedOutputLiveness(stock, nref, i, o._use_count()))
        node.outputs_weakrefs[:] = [mk(i, o) for i, o in enumerate(outs)]
    else:
        node.outputs_weakrefs[:] = [ct.StorageWeakRefWrapper(o) for o in outs]
    node.live_indices_after_graph = [(0, i) for i in range(k)]
    node.unaliased_in_all_paths = [True] * k; node.tensor_weakrefs = [None] * k; node.stack_traces = [None] * k
    return inputs, call, mgr

def measure(k):
    inputs, call, mgr = build_k(17, k)
    rows = []
    with layers.timing() as clock:
        f = clock.timed("inductor", call)
        for i in range(300):
            ct.GenerationTracker.generation += 1
            clock.reset(); clock.call(f, list(inputs))
            if i > 5: rows.append(clock.exclusive_us())
    return {key: statistics.median(r[key] for r in rows) for key in ("tree", "node")}

torch.set_num_threads(1)
a, b = measure(1), measure(201)
print(("GraCE" if E.PATCHED else "stock"), "K=1:", a, "K=201:", b,
      "per output (us):", {key: round((b[key] - a[key]) / 200, 3) for key in a})
