"""Speech-transformer-style attention whose temperature is a CPU scalar (paper Fig. 2).

``np.power(d_k, 0.5)`` is a numpy float64 on the CPU; dividing a CUDA tensor by it splits the
compiled graph on torch 2.11 (two partitions, baseline.md). The 0-d CPU tensor variant does
the same; the python-float variant is the graph CGCT should reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grace.bench.workloads import Size, Workload, generator, register


def _dims(size: Size) -> tuple[int, int, int]:
    """(layers, sequence length, model width)."""
    return (12, 32, 64) if size == "full" else (2, 8, 16)


def _build(temperature_kind: str, device: str, size: Size) -> Any:
    import torch
    from torch import nn

    layers, _, d = _dims(size)

    class ScaledDotProductAttention(nn.Module):
        def __init__(self, temperature: Any):
            super().__init__()
            self.temperature = temperature

        def forward(self, q, k, v):
            attn = torch.bmm(q, k.transpose(1, 2))
            attn = attn / self.temperature
            attn = torch.softmax(attn, dim=-1)
            return torch.bmm(attn, v)

    def temperature() -> Any:
        if temperature_kind == "numpy":
            return np.power(d, 0.5)
        if temperature_kind == "cpu-tensor":
            return torch.tensor(float(np.power(d, 0.5)))  # a plain attribute: stays on the CPU
        return float(np.power(d, 0.5))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.ModuleList([ScaledDotProductAttention(temperature()) for _ in range(layers)])
            self.proj = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])

        def forward(self, x):
            for attn, proj in zip(self.attn, self.proj):
                x = proj(attn(x, x, x)) + x
            return x

    return Encoder().to(device).eval()


@dataclass(frozen=True)
class Attention(Workload):
    temperature_kind: str = "numpy"

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return _build(self.temperature_kind, device, size)

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        _, seq, d = _dims(size)
        return (torch.randn(batch_size, seq, d, device=device, generator=generator(device, sample)),)


register(Attention("micro-attn-numpy", "attention_numpy_temperature", "micro", "inference", 4,
                   idiom="numpy scalar operand (np.power temperature)", temperature_kind="numpy"))
register(Attention("micro-attn-cputensor", "attention_0d_cpu_tensor_temperature", "micro", "inference", 4,
                   idiom="0-d CPU tensor operand", temperature_kind="cpu-tensor"))
register(Attention("micro-attn-float", "attention_python_float_temperature", "micro", "inference", 4,
                   idiom="none: the python-float reference for CGCT", temperature_kind="float"))
