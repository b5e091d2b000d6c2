"""Launch-bound MLPs at batch 1: the case CUDA graphs exist for, in inference and as a training
step (forward and backward: the host path of a backward graph beside its forward's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


def _width(size: Size) -> int:
    return 256 if size == "full" else 16


@dataclass(frozen=True)
class Mlp(Workload):
    layers: int = 2

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        from torch import nn

        d = _width(size)
        blocks = [nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(self.layers)]
        return nn.Sequential(*blocks).to(device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        return (torch.randn(batch_size, _width(size), device=device, generator=generator(device, sample)),)


@dataclass(frozen=True)
class MlpTraining(Mlp):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return super().build(device, batch_size, size).train()

    def loss(self, output: Any) -> Any:
        return output.square().mean()


register(Mlp("micro-mlp2", "mlp_2_layers", "micro", "inference", 1, idiom="none: launch-bound", layers=2))
register(Mlp("micro-mlp16", "mlp_16_layers", "micro", "inference", 1, idiom="none: launch-bound", layers=16))
register(MlpTraining("micro-mlp16-T", "mlp_16_layers", "micro", "training", 1, idiom="none: launch-bound",
                     layers=16))
