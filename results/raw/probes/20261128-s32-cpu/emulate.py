"""CPU emulation of a steady-state replay through the REAL CUDAGraphTreeManager.run/_run,
CUDAGraphNode.check_invariants/run/reconstruct_outputs and Inductor's align wrapper, with N
CPU tensors as graph inputs (N-1 static params/buffers + 1 non-static input), timed with
GraCE's own layer clock (grace.bench.layers). Only CUDA pieces are stubbed: the graph replay,
and the node is made without recording. Hot cache vs. caches evicted before the call (then
re-warmed for the PyObject/TensorImpl fields Dynamo's TENSOR_MATCH guards read).
"""
import os, sys, statistics, time, functools, weakref, gc
from collections import defaultdict
import torch
import torch._inductor.cudagraph_trees as ct
from torch._inductor import utils as iu
from torch.utils._ordered_set import OrderedSet
from grace.bench import layers

PATCHED = os.environ.get("GRACE_DISABLE") != "1"

class StubGraph:
    def replay(self):
        pass

class WF:  # WrappedFunction-alike
    def __init__(self, n, static_idxs):
        self.static_input_idxs = static_idxs
        self.placeholders = [None] * n
        self.mutated_input_idxs = []
        self.model = lambda inputs: None
        self.id = ct.FunctionID(0)
        self.constants = ()

def make_node(inputs, out):
    n = len(inputs)
    node = object.__new__(ct.CUDAGraphNode)
    static = list(range(n - 1))
    node.id = ct.GraphID(0); node._parent = None; node.children = defaultdict(list)
    node.wrapped_function = WF(n, static); node.rerecord_if_static_inputs_change = True
    node.cudagraph_managed_idxs = []; node.static_input_idxs = static
    node.non_static_input_idx = [n - 1]; node.non_managed_static_input_idxs = static
    node.static_input_data_ptrs = [t.data_ptr() if i < n - 1 else None for i, t in enumerate(inputs)]
    node.expanded_dims = [[] for _ in range(n)]
    node.preserved_aliased_inputs = [False] * n
    node.expected_dead_indices_before_graph = []; node.expected_dead_indices_after_graph = []
    node.reconstructed_inputs = [None] * (n - 1) + [torch.empty_like(inputs[-1])]
    node.graph = StubGraph(); node.stack_traces = [None]
    node.cached_tensor_outputs = [out]; node.static_output_tensors = [None]
    node.output_storage_alias = [ct.UnaliasedStorage]
    node.outputs_metadata = [{"size": out.shape}]
    node.outputs_weakrefs = [ct.StorageWeakRefWrapper(out)]
    node.path_weakrefs = [node.outputs_weakrefs]
    node.live_indices_after_graph = [(0, 0)]
    node.unaliased_in_all_paths = [True]; node.tensor_weakrefs = [None]
    node.static_inputs_stable = False
    node.grace_pi = None
    node.grace_copy_back = None
    return node

class Manager(ct.CUDAGraphTreeManager):
    def __init__(self, node):
        f = ct.FunctionID(0)
        self.roots = defaultdict(list); self.roots[f].append(node)
        self.ids_to_funcs = {f: node.wrapped_function}
        self.warmed_up_functions = OrderedSet([f])
        self.non_cudagraph_managed_mutation_hint = defaultdict(dict)
        self.non_cudagraph_managed_mutation_hint[None][f] = False
        self.non_cudagraph_managed_mutation_hint[node.id][f] = False
        self.num_rerecord = defaultdict(lambda: defaultdict(lambda: 0))
        self.path_state = ct.ExecutionState.EXECUTION; self._current_node = node
        self.current_gen = -1; self.id_to_mode = {f: ct.CompilationMode.INFERENCE}
        self.id_to_compile_id = {f: None}; self.running_forwards_with_pending_backwards = False
        self.mode = None; self.compile_id = None; self.graph = object()
        self.warned_functions = OrderedSet(); self.warned_mutation = OrderedSet(); self.debug_fail_counter = 0
        self.device_index = 0
        if PATCHED:  # GraCE's manager attributes, as its patched __init__ sets them with every switch on
            from grace.trees import replay_input_check
            from grace.stale_outputs import stale_output_guard
            from grace.lean.dispatch import LeanDispatch
            self.grace_replay_input_check = replay_input_check()
            self.grace_stale_outputs = stale_output_guard(self.format_dealloc_msg)
            self.grace_adopted_grads = None
            self.grace_no_graph_functions = OrderedSet()
            self.grace_eager = None
            self.grace_lean = LeanDispatch() if os.environ.get("LEAN", "1") == "1" else None
        self.fid = f

def make_generated_call(n, partition):
    """Inductor's generated Runner.call for one cudagraph partition (no asserts in call())."""
    names = [f"arg{i}_1" for i in range(n)]
    src = ("def call(args):\n"
           f"    {', '.join(names)}, = args\n"
           "    args.clear()\n"
           f"    partition0_args = [{', '.join(names)}]\n"
           f"    del {', '.join(names)}\n"
           "    (buf0,) = partition(partition0_args)\n"
           "    del partition0_args\n"
           "    return (buf0,)\n")
    ns = {"partition": partition}
    exec(src, ns)
    return ns["call"]

def build(n):
    torch.manual_seed(0)
    ps = [torch.nn.Parameter(torch.randn(8, 4, 3, 3)) for _ in range((n - 1) * 3 // 5)]
    bs = [torch.randn(8) for _ in range(n - 1 - len(ps))]
    x = torch.randn(4, 3, 8, 8)
    inputs = ps + bs + [x]
    out = torch.randn(4, 10)
    node = make_node(inputs, out)
    mgr = Manager(node)
    fid = mgr.fid
    tree_fn = functools.partial(mgr.run, function_id=fid)        # add_function's partial
    aligned = iu.align_inputs_from_check_idxs(tree_fn, [n - 1], OrderedSet())  # stock: only x checked
    fn_cache = {None: aligned}
    def deferred_cudagraphify(inputs):                            # cudagraph_trees.cudagraphify_impl
        int_key = (lambda _: None)(inputs)
        if not ct.is_cudagraph_capture_sizes(int_key):
            return None
        fn = fn_cache.get(int_key)
        return fn(inputs)
    compiled = [deferred_cudagraphify]
    def run(new_inputs):                                          # compile_fx.cudagraphify.run
        return compiled[0](new_inputs)
    call = make_generated_call(n, run)
    return inputs, call, mgr

BIG = torch.empty(256 * 1024 * 1024 // 4)
def evict():
    BIG.fill_(1.0)  # 256 MiB write: L1/L2/L3 hold nothing of ours afterwards

def guard_touch(inputs):
    # what Dynamo's TENSOR_MATCH guards read (type, dispatch keys, dtype, device, sizes, strides, requires_grad)
    for t in inputs:
        t.dtype; t.device; t.shape; t.stride(); t.requires_grad

def measure(n, calls, cold):
    inputs, call, mgr = build(n)
    rows = []
    with layers.timing() as clock:
        inductor_call = clock.timed("inductor", call)
        for i in range(calls):
            ct.GenerationTracker.generation += 1
            args = list(inputs)
            if cold:
                evict(); guard_touch(inputs)
            clock.reset()
            clock.call(inductor_call, args)
            if i >= 5:
                rows.append(clock.exclusive_us())
    assert mgr.current_node is mgr.roots[mgr.fid][0]
    return {k: statistics.median(r[k] for r in rows) for k in ("caller", "inductor", "tree", "node")}

def main():
    torch.set_num_threads(1)
    gc.disable()
    tag = "GraCE overlay (lean=%s)" % os.environ.get("LEAN", "1") if PATCHED else "stock (GRACE_DISABLE=1)"
    print(f"{tag}; python {sys.version.split()[0]}; torch {torch.__version__}; cudagraph_trees from {ct.__file__}")
    for cold in (False, True):
        res = {}
        for n in (17, 607):
            res[n] = measure(n, 400 if not cold else 120, cold)
        print(("COLD (caches evicted, guard fields re-read)" if cold else "HOT (back-to-back calls)"))
        for n in res:
            print(f"  N={n:4d}: " + ", ".join(f"{k} {v:7.1f}" for k, v in res[n].items()) + " us")
        print("  slope per input (us): " + ", ".join(f"{k} {(res[607][k]-res[17][k])/590:.3f}" for k in res[17]))

if __name__ == "__main__":
    main()
