"""``.item()`` in forward: a device-to-host sync that Dynamo turns into a graph break."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


def _width(size: Size) -> int:
    return 64 if size == "full" else 16


@dataclass(frozen=True)
class ItemInForward(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        import torch
        from torch import nn

        d = _width(size)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.ModuleList([nn.Linear(d, d) for _ in range(8)])

            def forward(self, x):
                scale = x.abs().mean().item()
                for lin in self.lin:
                    x = torch.relu(lin(x)) * scale
                return x

        return Model().to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        return (torch.randn(batch_size, _width(size), device=device, generator=generator(device, sample)),)


register(ItemInForward("micro-item", "item_in_forward", "micro", "inference", 8,
                       idiom=".item() in forward (graph break, host sync)"))
