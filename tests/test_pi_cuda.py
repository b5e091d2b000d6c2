"""Parameter indirection on the GPU, below CUDA graph trees: one indirected Inductor kernel in a
hand-captured CUDA graph (needs a GPU; skips otherwise).

This is the mechanism the tree hooks build on, checked where a mistake would show as stale
data: the graph is captured once with slot addresses, then every replay gets inputs it has
never seen (fresh allocations, the capture-time inputs freed and their memory reused, inputs
replaced while replays are still queued), and each result must equal the plain kernel's on the
same inputs. No timing is asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

MODULE = Path(__file__).parent / "fixtures" / "inductor" / "triton_poi_fused_add_mul_0.py"
N = 1 << 20


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """(plain autotuner, variant reading in_ptr0 and in_ptr1 through slots) of the fixture kernel."""
    from torch._inductor.codecache import PyCodeCache

    from grace.pi import triton_stage
    from grace.pi.variant import indirected_variant

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    plain = getattr(PyCodeCache.load(MODULE.read_text()), "triton_poi_fused_add_mul_0")
    # The code cache hands every test the same module; once an autotuner has compiled, its
    # configs live on its launchers only.
    config = plain.configs[0] if plain.configs else plain.launchers[0].config
    variant = indirected_variant(plain, config, ["in_ptr0", "in_ptr1"])
    yield plain, variant
    triton_stage.uninstall()


def _expected(a: Any, b: Any) -> Any:
    return (a + b) * a


def _stream() -> int:
    return torch.cuda.current_stream().cuda_stream


def _captured(variant: Any, table: Any, out: Any) -> Any:
    """A CUDA graph of one variant launch reading its two inputs through ``table``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up launch off the capture, as torch.cuda.graph wants
        variant.run(table.slot_address(0), table.slot_address(1), out, N, stream=_stream())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        variant.run(table.slot_address(0), table.slot_address(1), out, N, stream=_stream())
    return graph


def _table() -> Any:
    from grace.pi.plan import Slot
    from grace.pi.table import PointerTable

    return PointerTable([Slot(0, 0, "k"), Slot(1, 0, "k")], "cuda")


def _pair() -> tuple[Any, Any]:
    return torch.randn(N, dtype=torch.float64, device="cuda"), torch.randn(N, dtype=torch.float64, device="cuda")


def _recorded(variant: Any) -> tuple[Any, Any, Any]:
    """(table, graph, out): the variant captured reading two inputs that are freed right after."""
    table = _table()
    a, b = _pair()
    out = torch.empty_like(a)
    table.fill([a.data_ptr(), b.data_ptr()])
    return table, _captured(variant, table, out), out


def test_replays_read_each_call_s_fresh_inputs_through_the_table(kernels) -> None:
    plain, variant = kernels
    table, graph, out = _recorded(variant)  # the capture-time inputs are freed; their memory is reused
    for step in range(6):
        a, b = _pair()
        table.fill([a.data_ptr(), b.data_ptr()])
        graph.replay()
        torch.testing.assert_close(out, _expected(a, b), rtol=0, atol=0, msg=f"replay {step}")
    reference = torch.empty_like(out)
    plain.run(a, b, reference, N, stream=_stream())
    torch.testing.assert_close(reference, out, rtol=0, atol=0)


def test_queued_replays_each_keep_their_own_pointers(kernels) -> None:
    """The CPU runs ahead of the GPU: a queued replay must not read a later replay's pointers."""
    _, variant = kernels
    table, graph, out = _recorded(variant)
    pairs = [_pair() for _ in range(12)]
    results = []
    torch.cuda._sleep(50_000_000)  # hold the stream so every fill below is queued behind it
    for a, b in pairs:
        table.fill([a.data_ptr(), b.data_ptr()])
        graph.replay()
        results.append(out.clone())
    torch.cuda.synchronize()
    for k, ((a, b), got) in enumerate(zip(pairs, results)):
        torch.testing.assert_close(got, _expected(a, b), rtol=0, atol=0, msg=f"queued replay {k}")


def test_the_plain_kernel_is_untouched_by_the_variant(kernels) -> None:
    """Triton's cache must not hand the indirected binary to the plain call or the reverse."""
    plain, variant = kernels
    a, b = _pair()
    out = torch.empty_like(a)
    plain.run(a, b, out, N, stream=_stream())
    torch.testing.assert_close(out, _expected(a, b), rtol=0, atol=0)
    assert plain.fn.__name__ != variant.fn.__name__
    # And the reverse: the variant, launched with slot addresses, still reads through them.
    table = _table()
    table.fill([a.data_ptr(), b.data_ptr()])
    through_table = torch.empty_like(a)
    variant.run(table.slot_address(0), table.slot_address(1), through_table, N, stream=_stream())
    torch.testing.assert_close(through_table, out, rtol=0, atol=0)
