"""A stochastic workload's float64 run draws eager's random numbers (grace.bench.draws)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from grace.bench.draws import Float32Draws


class Stochastic(nn.Module):
    """Dropout, a timm-style drop-path (``new_empty(...).bernoulli_``), and noise drawn by dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.drop = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.lin(x)))
        keep = h.new_empty((h.shape[0], 1)).bernoulli_(0.8)
        h = h * keep / 0.8
        return h + 0.01 * torch.randn(h.shape, dtype=h.dtype) + 0.01 * torch.rand_like(h)


def _run(model: nn.Module, x: torch.Tensor, seed: int = 7) -> torch.Tensor:
    torch.manual_seed(seed)
    return model(x)


def test_a_float64_run_in_the_mode_draws_the_float32_masks_and_noise() -> None:
    torch.manual_seed(0)
    model = Stochastic().train()
    x = torch.randn(16, 32)
    eager = _run(model, x)
    model64, x64 = copy.deepcopy(model).double(), x.double()
    plain = _run(model64, x64)
    with Float32Draws():
        drawn = _run(model64, x64)
    error = lambda out: (torch.linalg.vector_norm(out - eager.double()) / torch.linalg.vector_norm(eager.double())).item()
    # On the CPU the masks happen to agree across dtypes and the noise does not; on the GPU the
    # dropout and bernoulli kernels differ too (TEFD: eager 0.138 from its float64 run).
    assert error(plain) > 1e-3, "without the mode the float64 run draws other numbers (the premise)"
    assert error(drawn) < 1e-6, "with it, eager's masks and noise: only rounding is left"
    assert drawn.dtype == torch.float64


def test_the_mode_leaves_float32_and_integer_draws_alone() -> None:
    torch.manual_seed(3)
    a = torch.empty(64).bernoulli_(0.5), torch.randint(0, 10, (8,)), torch.rand(4)
    torch.manual_seed(3)
    with Float32Draws():
        b = torch.empty(64).bernoulli_(0.5), torch.randint(0, 10, (8,)), torch.rand(4)
    for x, y in zip(a, b):
        assert torch.equal(x, y) and x.dtype == y.dtype


def test_dropout_in_eval_is_untouched() -> None:
    x = torch.randn(8, 8, dtype=torch.float64)
    with Float32Draws():
        out, mask = torch.ops.aten.native_dropout.default(x, 0.5, False)
    assert torch.equal(out, x) and out.dtype == torch.float64


def test_fused_dropout_in_float64_takes_the_float32_mask() -> None:
    x = torch.randn(64, 64)
    torch.manual_seed(5)
    out32, mask32 = torch.ops.aten.native_dropout.default(x, 0.25, True)
    torch.manual_seed(5)
    with Float32Draws():
        out64, mask64 = torch.ops.aten.native_dropout.default(x.double(), 0.25, True)
    assert torch.equal(mask64, mask32) and out64.dtype == torch.float64
    torch.testing.assert_close(out64, out32.double(), rtol=1e-6, atol=1e-7)
