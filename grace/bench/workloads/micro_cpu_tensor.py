"""A module-owned CPU tensor copied to the GPU inside forward (DALLE2, Mask R-CNN, CLIP idiom).

``self.table`` is a plain attribute, so ``model.to(device)`` leaves it on the CPU and every
forward copies it host-to-device, which splits the CUDA graph on torch 2.11.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


def _width(size: Size) -> int:
    return 64 if size == "full" else 16


@dataclass(frozen=True)
class CpuTensorInForward(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        import torch
        from torch import nn

        d = _width(size)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.table = torch.randn(d, d)  # plain attribute: stays on the CPU
                self.lin = nn.ModuleList([nn.Linear(d, d) for _ in range(12)])

            def forward(self, x):
                for lin in self.lin[:6]:
                    x = torch.relu(lin(x))
                x = x @ self.table.to(x.device)
                for lin in self.lin[6:]:
                    x = torch.relu(lin(x))
                return x

        return Model().to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        return (torch.randn(batch_size, _width(size), device=device, generator=generator(device, sample)),)


register(CpuTensorInForward("micro-cpu-tensor", "module_cpu_tensor_h2d", "micro", "inference", 8,
                            idiom="module-owned CPU tensor .to(device) in forward"))
