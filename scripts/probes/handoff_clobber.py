"""Whether a function's input, an output of the path its own call ends, is overwritten by that call.

``y = f(x)`` then ``g(y)``: each compiled call begins a new generation, so ``g``'s call ends
``f``'s path. Where ``f`` replayed, the tree drops the path without invalidating its cached
outputs, and a ``g`` recorded then as a new root may place its output over ``y``: ``g``'s own
result is right (its input was copied into its placeholder first), but ``y`` read after the call
holds ``g``'s output, silently, where the tree's contract says the read should raise
("accessing tensor output of CUDAGraphs that has been overwritten"), as it does when ``f`` was
warming up or recording. Per step: ``f``'s output before ``g`` against eager, ``y`` after ``g``
against ``y`` before and against ``g``'s output, the addresses, the tree's roots and state.

    GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 GRACE_SCG_FORCE=graph python scripts/probes/handoff_clobber.py
    GRACE_DISABLE=1 python scripts/probes/handoff_clobber.py --stock   # f warmed alone first
"""
import sys, torch
from torch._inductor import cudagraph_trees as ct
torch.manual_seed(0)
def eager_f(x): return torch.sin(x) * 2 + x
f = torch.compile(eager_f, mode="reduce-overhead")
g = torch.compile(lambda x: (x @ x.T).relu(), mode="reduce-overhead")
x = torch.randn(16, 16, device="cuda")
if "--stock" in sys.argv:            # stock reaches the same state without the early checks
    for _ in range(3): f(x)          # warm-up, record, replay f alone
for step in range(6):
    exp = eager_f(x); y = f(x)
    before = y.clone()               # f's value before g runs
    m = ct.get_manager(0, create_if_none_exists=False)
    try: z = g(y); zc, zp = z.clone(), z.data_ptr()
    except RuntimeError as e: zc, zp = None, str(e)[:30]
    try: after = y.clone()
    except RuntimeError: after = None
    r = lambda a, b: None if a is None or b is None else (a - b).abs().max().item()
    try: yp = hex(y.data_ptr())
    except RuntimeError: yp = "raises"   # the tree marked y overwritten
    print(step, "f-before-g vs eager", r(before, exp), "| y after g vs before", r(after, before),
          "| y after g vs g out", r(after, zc), "| y ptr", yp, "g out", zp,
          "| roots", {fid.id: len(ns) for fid, ns in m.roots.items()},
          "| state", m.path_state.name, flush=True)
    x = before.clone()
