"""Figure 9's probe: one fused pointwise kernel reading K external inputs, K = 1 .. 64.

Every input is non-static, so PT2-CG copies K tensors into their placeholders before each
replay, while parameter indirection writes K pointers into the graph's table instead. The
inputs are small (4096 float32 by default), so what is measured is the per-input cost of each
replay path rather than bandwidth. The sum has a distinct weight per input, so an input read
through the wrong pointer changes the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register

COUNTS = (1, 2, 4, 8, 16, 32, 64)


def weighted_sum(*xs: Any) -> Any:
    out = xs[0] * 1.0
    for k, x in enumerate(xs[1:], start=2):
        out = out + x * float(k)
    return out


@dataclass(frozen=True)
class Pointers(Workload):
    count: int = 1

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return weighted_sum

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        n = batch_size if size == "full" else 64
        g = generator(device, sample)
        return tuple(torch.randn(n, device=device, generator=g) for _ in range(self.count))


for _k in COUNTS:
    register(Pointers(f"micro-ptr-{_k}", f"weighted_sum_{_k}_inputs", "micro", "inference", 4096,
                      idiom=f"none: {_k} external input(s) read by one kernel (Figure 9)", count=_k))
