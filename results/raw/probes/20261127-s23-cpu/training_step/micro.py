import time, statistics as S, sys, weakref, functools, torch
from grace.grad_copies import AdoptedGrads
from grace.stale_outputs import StaleOutputGuard
from grace.tree_liveness import CachedOutputLiveness
from torch._inductor.cudagraph_trees import StorageWeakRefWrapper, is_live
torch.set_num_threads(1)
def med(fn, n=2000):
    t=[]
    for _ in range(n):
        a=time.perf_counter_ns(); fn(); t.append(time.perf_counter_ns()-a)
    return S.median(t)/1e3
NP=int(sys.argv[1]); NS=int(sys.argv[2])  # params, saved activations
# (a)(b) noted / before_call inside a real backward
params=[torch.zeros(4,requires_grad=True) for _ in range(NP)]
mem=[torch.empty(4) for _ in range(NP)]
notes=AdoptedGrads(); rec={'noted':[], 'before':[]}
class G(torch.autograd.Function):
    @staticmethod
    def forward(ctx,x,*ps):
        a=time.perf_counter_ns(); notes.before_call(); rec['before'].append(time.perf_counter_ns()-a)
        return sum(p.sum() for p in ps)+x.sum()
    @staticmethod
    def backward(ctx,g):
        outs=[m.view(m.shape) for m in mem]
        a=time.perf_counter_ns(); notes.noted(outs); rec['noted'].append(time.perf_counter_ns()-a)
        return (None,*outs)
x=torch.zeros(4)
for _ in range(400):
    for p in params: p.grad=None
    G.apply(x,*params).backward()
print("noted us", S.median(rec['noted'][50:])/1e3, "before_call us", S.median(rec['before'][50:])/1e3)
# (c) stale-output guard path_ends over a 2-node path (F: NS+1 cached outputs, B: NP cached outputs)
class Node:
    def __init__(s,n):
        s.cached_tensor_outputs=[]; s.outputs_weakrefs=[]; s.stack_traces=None; s.tensor_weakrefs=[None]*n
        sr=weakref.ref(s)
        for i in range(n):
            t=torch.empty(4); s.cached_tensor_outputs.append(t)
            def check_refcount(i):
                sl=sr(); rc=sys.getrefcount(sl.cached_tensor_outputs[i])
                if sl.cached_tensor_outputs[i]._use_count()>1: return rc==3
                return rc==2
            stock=functools.partial(check_refcount,i=i)
            s.outputs_weakrefs.append(StorageWeakRefWrapper(t, extra_ref_check=CachedOutputLiveness(stock,sr,i,t._use_count())))
        s.stock=[functools.partial(check_refcount,i=i) for i in range(n)]
        s.stockrefs=[StorageWeakRefWrapper(s.cached_tensor_outputs[i], extra_ref_check=s.stock[i]) for i in range(n)]
F=Node(NS+1); B=Node(NP); F.children={}; B.children={}
path=[F,B]
class PathEnd:
    _path_from_root=property(lambda s: iter(path))
g=StaleOutputGuard(lambda tr: "msg")
pe=PathEnd()
print("path_ends us", med(lambda: g.path_ends(pe)), "call_ends us (nothing)", med(g.call_ends))
# (d) liveness query per output: hardened vs stock
refsH=F.outputs_weakrefs; refsS=F.stockrefs
print("liveness of %d outputs: hardened us"%len(refsH), med(lambda: [w() for w in refsH]), "stock us", med(lambda: [w() for w in refsS]))
