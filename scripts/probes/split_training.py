"""Training through a graph split by a cudagraph-unsafe op, compared with eager, step by step.

Diagnostic for the SCG training test (``tests/test_scg_cuda.py``): runs its model under the
environment it is given (``GRACE_DISABLE=1`` for stock, ``GRACE_PI=0``, ...), so the switch
that makes a difference can be found. Prints the largest gradient difference per step.

    GRACE_DISABLE=1 python scripts/probes/split_training.py
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path


def main() -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from test_scg_cuda import Split  # the test's model and its cudagraph-unsafe op

    diag = os.environ.get("DIAG", "")
    if diag:  # switch one piece of PI's capture off, to find the one that matters
        from grace.pi import tree_hook

        if diag == "no-validate":
            tree_hook.Recording._validate = lambda *a, **k: None
        elif diag == "no-recording":
            tree_hook.start_recording = lambda *a, **k: None
        elif diag == "no-putback":
            from grace.pi import check

            check.StorageSnapshot.put_back = lambda self: None
        elif diag.startswith("validate-only-"):  # validate-only-3: only graph 3 is checked
            checked, validate = int(diag.rsplit("-", 1)[1]), tree_hook.Recording._validate

            def only(self, captured, *a, **k):
                return validate(self, captured, *a, **k) if captured.node.id.id == checked else None

            tree_hook.Recording._validate = only
        elif diag.startswith("trace-"):  # trace-4: what graph 4's check changes, and its first outputs
            _trace(int(diag.rsplit("-", 1)[1]))
        print(f"DIAG={diag}")
    torch.manual_seed(0)
    model = Split().cuda()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model.train(), mode="reduce-overhead")
    worst = 0.0
    for step in range(6):
        x = torch.randn(16, 64, device="cuda") + step
        for m in (model, reference):
            m.zero_grad(set_to_none=True)
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
        diffs = {name: (p.grad - q.grad).abs().max().item()
                 for (name, p), q in zip(model.named_parameters(), reference.parameters())}
        name, diff = max(diffs.items(), key=lambda kv: kv[1])
        worst = max(worst, diff)
        wrong = sorted(n for n, d in diffs.items() if d > 1e-4)
        print(f"step {step}: largest gradient difference {diff:.3g} ({name}); wrong: {wrong}")
    print("OK" if worst < 1e-4 else "MISMATCH")
    return 0 if worst < 1e-4 else 1


def _trace(graph: int) -> None:
    """Around graph ``graph``'s check: which input and output storages it leaves changed, and
    whether the node's first outputs (the replay after the check) equal the function's."""
    import torch
    from torch._inductor import cudagraph_trees

    from grace.pi import tree_hook

    def digest(t: object) -> object:
        if not isinstance(t, torch.Tensor):
            return None
        s = t.untyped_storage()
        b = torch.empty(0, dtype=torch.uint8, device=t.device).set_(s, 0, (s.nbytes(),), (1,))
        return (s.data_ptr(), s.nbytes(), int(b.to(torch.int64).mul(torch.arange(1, b.numel() + 1, device=b.device) % 251).sum()))

    validate, reference = tree_hook.Recording._validate, {}

    def traced(self, captured, plan, pointers, placeholder_ptrs):
        node, outputs, model, inputs = captured.node, captured.outputs, captured.model, captured.inputs
        if node.id.id != graph:
            return validate(self, captured, plan, pointers, placeholder_ptrs)
        torch.cuda.synchronize()
        args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        reference["out"] = [o.clone() if isinstance(o, torch.Tensor) else o for o in model(args)]
        ins, outs = [digest(x) for x in inputs], [digest(o) for o in outputs]
        why = validate(self, captured, plan, pointers, placeholder_ptrs)
        torch.cuda.synchronize()
        ins2, outs2 = [digest(x) for x in inputs], [digest(o) for o in outputs]
        print(f"graph {graph}: check says {why!r}; plan indirects {plan.indirected}; "
              f"inputs {[(i, x.shape, x.stride()) if isinstance(x, torch.Tensor) else x for i, x in enumerate(inputs)]}")
        print(f"  input storages changed by the check: {[i for i, (a, b) in enumerate(zip(ins, ins2)) if a != b]}")
        print(f"  output storages changed by the check: {[i for i, (a, b) in enumerate(zip(outs, outs2)) if a != b]}")
        print(f"  output storages: {[d[:2] if d else None for d in outs]}; input storages: {[d[:2] if d else None for d in ins]}")
        return why

    tree_hook.Recording._validate = traced
    first = cudagraph_trees.CUDAGraphNode.run_first_inputs

    def first_outputs(self, new_inputs):
        out = first(self, new_inputs)
        if self.id.id == graph:
            torch.cuda.synchronize()
            diffs = [None if not isinstance(o, torch.Tensor) else float((o - r).abs().max())
                     for o, r in zip(out, reference["out"])]
            print(f"  graph {graph}'s first outputs against the function run before the check: {diffs}")
        return out

    cudagraph_trees.CUDAGraphNode.run_first_inputs = first_outputs


if __name__ == "__main__":
    sys.exit(main())
