"""Host cost of ``grace.grad_copies.AdoptedGrads`` per training step, on the CPU.

A backward node that feeds N leaves (an autograd Function over N parameters, standing for a
compiled backward graph) is run once a step; its backward calls ``noted`` with its outputs as
the tree manager does, and the next step's forward calls ``before_call``. Two patterns:
``zero_grad()``'s default (``.grad`` set to None, nothing copied) and ``.grad`` kept (copied
once, then accumulated into). Prints the median microseconds a step spends in the two calls.

    python scripts/probes/grad_copies_cost.py [--leaves 10 100 400] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from grace.grad_copies import AdoptedGrads


def step_costs(leaves: int, steps: int, keep: bool) -> list[float]:
    params = [torch.zeros(4, requires_grad=True) for _ in range(leaves)]
    memory = [torch.empty(4) for _ in range(leaves)]  # the graph's outputs, the same every step
    notes = AdoptedGrads()
    spent: list[float] = []

    class Graph(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *ps: Any) -> Any:
            t0 = time.perf_counter()
            notes.before_call()
            spent.append(time.perf_counter() - t0)
            return sum(p.sum() for p in ps)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            outs = []
            for m in memory:
                m.fill_(1.0)
                outs.append(m.view(m.shape))
            t0 = time.perf_counter()
            notes.noted(outs)
            spent[-1] += time.perf_counter() - t0
            return tuple(outs)

    for _ in range(steps):
        Graph.apply(*params).backward()
        if not keep:
            for p in params:
                p.grad = None
    return [s * 1e6 for s in spent[10:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, nargs="+", default=[10, 100, 400])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    print("leaves  grad set to None (us/step)  grad kept (us/step)")
    for n in args.leaves:
        none, kept = step_costs(n, args.steps, keep=False), step_costs(n, args.steps, keep=True)
        print(f"{n:6d}  {statistics.median(none):26.1f}  {statistics.median(kept):19.1f}")


if __name__ == "__main__":
    main()
