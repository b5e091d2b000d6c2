"""Two compiled functions interleaved, ``g(f(x))``, then ``x = f(x)``: each call of ``f`` against eager.

The scenario of ``tests/test_lean_cuda.py::test_two_functions_interleaved_and_fed_back``, printing
the largest difference from eager per step and the input and output addresses. Stock 2.11
raises at step 0 (``g`` reads ``f``'s output after a new generation began) and aborts at step 1
with a tree assertion (``dealloc_current_path_weakrefs``). With any GraCE switch on and both
functions in graphs (``GRACE_SCG_FORCE=graph``) the assertion is gone and, from step 3 on, ``f``
returns values unlike eager's.

    GRACE_DISABLE=1 python scripts/probes/interleaved_fed_back.py
    GRACE_SCG_FORCE=graph python scripts/probes/interleaved_fed_back.py
"""
import torch
torch.manual_seed(0)
def eager_f(x): return torch.sin(x) * 2 + x
f = torch.compile(eager_f, mode="reduce-overhead")
g = torch.compile(lambda x: (x @ x.T).relu(), mode="reduce-overhead")
x = torch.randn(16, 16, device="cuda")
for step in range(8):
    expected = eager_f(x).cpu()
    xin = x.clone()
    y = f(x)
    try:
        g(y); note = "g ok"
    except RuntimeError as e:
        note = "g raised " + str(e)[:40]
    try:
        c = y.clone().cpu()
        d = (c - expected).abs().max().item()
        print(f"step {step}: f max diff {d:.3g}; x ptr {xin.data_ptr():#x} y ptr {y.data_ptr():#x}; {note}", flush=True)
        x = c.cuda()
    except RuntimeError as e:
        print(f"step {step}: clone raised {str(e)[:60]}; {note}", flush=True)
        x = torch.randn(16, 16, device="cuda")
for step in range(5):
    expected = eager_f(x).cpu()
    torch.compiler.cudagraph_mark_step_begin()
    x = f(x)
    print(f"fed back {step}: max diff {(x.cpu() - expected).abs().max().item():.3g}", flush=True)
