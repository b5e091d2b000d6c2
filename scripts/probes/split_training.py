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
        if diag == "no-recording":  # PI records nothing: every graph as stock
            from grace.pi import tree_hook

            tree_hook.start_recording = lambda *a, **k: None
        elif diag == "no-putback":  # the check leaves the inputs it mutated as it found them
            from grace.pi import check

            check.StorageSnapshot.put_back = lambda self: None
        else:
            raise SystemExit(f"DIAG={diag!r}: choose no-recording or no-putback")
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


if __name__ == "__main__":
    sys.exit(main())
