"""CGCT's input staging on the GPU, in real CUDA graph trees (needs a GPU and the overlay).

Behaviour only: a numpy temperature, a Python float that changes, and a module CPU table copied
in forward each leave one CUDA graph, and every call equals eager while the scalar changes
between calls and the table is written in place or replaced.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def cgct() -> Iterator[None]:
    from torch._inductor import compile_fx, cudagraph_trees

    if "grace.cgct.staging" not in inspect.getsource(compile_fx):
        pytest.skip("GraCE's overlay with the CGCT patch is not active here (run `make setup`)")
    import grace.config

    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()
    with grace.config.patch(cgct=True, pi=False, scg=False):
        yield
    torch._dynamo.reset()
    cudagraph_trees.reset_cudagraph_trees()


def _graphs() -> int:
    from grace.bench.worker import count_cuda_graphs

    return count_cuda_graphs()


class Attention(torch.nn.Module):
    def __init__(self, temperature: Any) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, q: Any) -> Any:
        return torch.bmm(torch.softmax(torch.bmm(q, q.transpose(1, 2)) / self.temperature, -1), q)


def test_numpy_temperature_changing_between_calls_is_read_fresh(cgct) -> None:
    m = Attention(np.power(64, 0.5)).cuda()
    compiled = torch.compile(m, mode="reduce-overhead")
    for step, t in enumerate([8.0, 8.0, 3.0, 5.0, 5.0, 0.5, 8.0]):
        m.temperature = np.float64(t)
        q = torch.randn(4, 32, 64, device="cuda")
        torch.testing.assert_close(compiled(q), m(q), msg=f"call {step}, temperature {t}")
    assert _graphs() == 2, "the constant's graph, then one whose staged temperature changes freely"


def test_constant_numpy_temperature_is_one_graph(cgct) -> None:
    m = Attention(np.power(64, 0.5)).cuda()
    compiled = torch.compile(m, mode="reduce-overhead")
    for _ in range(5):
        q = torch.randn(4, 32, 64, device="cuda")
        torch.testing.assert_close(compiled(q), m(q))
    assert _graphs() == 1


def test_python_float_that_changes_is_read_fresh(cgct) -> None:
    m = Attention(8.0).cuda()
    compiled = torch.compile(m, mode="reduce-overhead")
    for step, t in enumerate([8.0, 2.0, 4.0, 6.0, 6.0]):
        m.temperature = t
        q = torch.randn(4, 32, 64, device="cuda")
        torch.testing.assert_close(compiled(q), m(q), msg=f"call {step}, temperature {t}")


class Table(torch.nn.Module):
    """A module CPU table copied to the GPU in forward: as is, converted to the input's dtype,
    or copied and then written in place (which CGCT must leave to stock)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)
        self.table = torch.randn(64, 64)
        self.how = how

    def forward(self, x: Any) -> Any:
        if self.how == "converted":
            t = self.table.to(dtype=x.dtype, device=x.device)
        else:
            t = self.table.to(x.device)
        if self.how == "written":
            t.mul_(2.0)  # eager doubles a fresh copy each call; a mirror would double every call
        return torch.relu(torch.relu(self.lin(x)) @ t)


@pytest.mark.parametrize("how, dtype", [("as-is", torch.float32), ("converted", torch.float16),
                                        ("written", torch.float32)])
def test_cpu_table_mirror_follows_in_place_writes_and_replacement(cgct, how: str, dtype: Any) -> None:
    m = Table(how).cuda().to(dtype)
    m.table = torch.randn(64, 64)  # .cuda() moved parameters, not this plain float32 attribute
    compiled = torch.compile(m, mode="reduce-overhead")
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {}
    for step in range(8):
        if step == 3:
            m.table.mul_(2.0)
        if step == 5:
            m.table = torch.randn(64, 64)
        x = torch.randn(16, 64, device="cuda", dtype=dtype)
        torch.testing.assert_close(compiled(x), m(x), msg=f"call {step}", **tolerance)


class KeptMask(torch.nn.Module):
    """DALLE2's CLIP block: the CPU mask copied to the GPU in forward is kept on the module."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)
        self.attn_mask = torch.empty(32, 32).fill_(float("-inf")).triu_(1)

    def forward(self, x: Any) -> Any:
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device)
        h = self.lin(x)
        return torch.softmax(h @ h.transpose(-1, -2) + self.attn_mask, -1)


def _run_kept_mask(dtype: Any, calls: int = 6) -> None:
    torch.manual_seed(0)
    m = KeptMask().cuda().to(dtype)
    reference = KeptMask().cuda().to(dtype)
    reference.load_state_dict(m.state_dict())
    compiled = torch.compile(m, mode="reduce-overhead")
    for step in range(calls):
        x = torch.randn(4, 32, 64, device="cuda", dtype=dtype)
        tolerance = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {}  # fused softmax in fp32
        torch.testing.assert_close(compiled(x), reference(x), msg=f"call {step}", **tolerance)
        assert m.attn_mask.device.type == "cuda" and m.attn_mask.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_a_mask_copied_in_forward_and_kept_on_the_module_stays_valid_under_cgct(cgct, dtype) -> None:
    """CGCT's mirror is no pool memory, so the copy the module keeps stays valid across replays.

    In fp16 (DALLE2 runs CLIP so) the copy also converts the float32 mask; the mirror then holds
    it converted, so the kept copy is still the mirror. The one-block model does not reproduce
    DALLE2's stock failure in fp32 (stock PT2-CG ran it without error on the H100,
    results/raw/gpu_checks/20261125-pi-cgct/cgct_tests.log), so this is a behaviour test of
    the mirror; DALLE2 itself is measured by the benchmark."""
    _run_kept_mask(dtype)


class _Interaction(torch.nn.Module):
    """DLRM's dot interaction: lower-triangle indices built with ``torch.tensor`` on the CPU."""

    def forward(self, x: Any) -> Any:
        z = torch.bmm(x, x.transpose(1, 2))
        n = z.shape[1]
        li = torch.tensor([i for i in range(n) for j in range(i)])
        lj = torch.tensor([j for i in range(n) for j in range(i)])
        return torch.relu(z[:, li, lj])


def test_cpu_built_indices_of_a_gpu_tensor_leave_one_graph(cgct) -> None:
    """Stock PT2-CG fails this (the CPU indices become CPU inputs of the CUDA graph, and the
    tree's pool check raises); with CGCT they are built on the GPU and the function is one
    graph, equal to eager on every call."""
    model = _Interaction()
    compiled = torch.compile(model, mode="reduce-overhead")
    for step in range(4):
        x = torch.randn(8, 9, 16, device="cuda")
        torch.testing.assert_close(compiled(x), model(x), msg=f"call {step}")
    assert _graphs() == 1
