"""Gradient accumulation through a compiled training step, each micro-step's ``.grad`` against
eager's.

An MLP's loss is compiled with ``mode="reduce-overhead"`` and trained in windows of
``--accumulate`` micro-steps: ``zero_grad(set_to_none=True)`` at the start of a window, one
backward per micro-step, the gradients summed in ``.grad`` across the window, an SGD update at
its end. Each micro-step prints whether every ``.grad`` equals eager's, differs (and by how
much), or raised (the window then ends on both sides), and how many parameters' ``.grad`` lie
in a CUDA graph pool. The first windows warm up and record the graphs; the later ones replay
them.

Where autograd adopts a replayed backward's output as ``.grad``, the next replay writes over it
(``grace.grad_copies``): stock differs from the second micro-step of a replayed window on; with
``GRACE_COPY_GRADS=1`` an adopted ``.grad`` (in a graph pool after its backward) is copied
before the next compiled call, and every micro-step equals eager.

    GRACE_DISABLE=1 python scripts/probes/grad_accumulation.py      # stock
    GRACE_COPY_GRADS=1 python scripts/probes/grad_accumulation.py   # GraCE, gradients copied
"""

from __future__ import annotations

import argparse
import copy

import torch


class MLPLoss(torch.nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(width, hidden)
        self.fc2 = torch.nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))).square().mean()


def in_graph_pool(t: torch.Tensor) -> bool:
    """Whether ``t``'s memory lies in a segment of a CUDA graph private pool."""
    address = t.untyped_storage().data_ptr()
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0):
            if seg["address"] <= address < seg["address"] + seg["total_size"]:
                return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--accumulate", type=int, default=3, help="micro-steps per window")
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("grad_accumulation: needs a CUDA GPU (CUDA graphs)")
    torch.manual_seed(0)
    model = MLPLoss(16, 32).cuda()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, mode="reduce-overhead")
    for window in range(args.windows):
        for m in (model, eager):
            m.zero_grad(set_to_none=True)
        raised = False
        for micro in range(args.accumulate):
            x = torch.randn(8, 16, device="cuda", generator=torch.Generator("cuda").manual_seed(100 * window + micro))
            eager(x).backward()
            try:
                compiled(x).backward()
            except RuntimeError as e:
                # the window ends here on both sides; the compiled side takes eager's parameters
                # in place (their addresses, static inputs of the graphs, stay)
                print(f"window {window} step {micro}: raised {str(e).splitlines()[0][:120]}")
                raised = True
                break
            torch.cuda.synchronize()
            diffs = [(p.grad - q.grad).abs().max().item() for p, q in zip(model.parameters(), eager.parameters())]
            pooled = [name for name, p in model.named_parameters() if in_graph_pool(p.grad)]
            verdict = "(equal)" if max(diffs) <= 1e-5 else f"(differs, max diff {max(diffs):.3g})"
            names = f" [{', '.join(pooled)}]" if pooled else ""
            print(f"window {window} step {micro}: .grad in a graph pool for {len(pooled)} of "
                  f"{len(diffs)} parameters{names} {verdict}")
        with torch.no_grad():
            for p, q in zip(model.parameters(), eager.parameters()):
                q -= args.lr * q.grad
                if raised:  # the compiled side's .grad may be the one that raised
                    p.copy_(q)
                else:
                    p -= args.lr * p.grad


if __name__ == "__main__":
    main()
