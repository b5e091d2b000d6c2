"""EOS-like: twenty pointwise steps over three large float64 inputs.

A handful of fused Triton kernels that run for tens of microseconds: replaying them in a CUDA
graph costs more in input copies (PT2-CG copies all three inputs into static placeholders) than
it saves in launches. baseline.md: 78 us with PT2-CG against 39 us without a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


def eos_like(s, t, p):
    import torch

    r = s * 0.5 + t * 0.25
    for _ in range(20):
        r = r * 1.0001 + torch.sqrt(torch.abs(p) + 1.0) * 1e-3 - s * 1e-4
    return r


@dataclass(frozen=True)
class EosLike(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return eos_like

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        n = batch_size if size == "full" else 1024
        g = generator(device, sample)
        return tuple(torch.randn(n, device=device, dtype=torch.float64, generator=g) for _ in range(3))


register(EosLike("micro-eos", "eos_like", "micro", "inference", 1 << 20,
                 idiom="none: short kernels on large inputs (input copies dominate)"))
