"""Capture-time planning and the per-replay guard of parameter indirection (pure logic, CPU tensors)."""

from __future__ import annotations

import pytest
import torch

from grace.pi.guard import InputLayout, ReplayGuard, span_bytes
from grace.pi.plan import Placeholder, Reference, Slot, plan_graph

P0 = Placeholder(input_index=0, data_ptr=0x1000, storage_bytes=4096, copy_bytes=4096)
P2 = Placeholder(input_index=2, data_ptr=0x9000, storage_bytes=256, copy_bytes=256)


def test_an_input_read_only_through_slots_is_indirected() -> None:
    slots = [Slot(0, 0, "k0"), Slot(2, 0, "k0"), Slot(0, 512, "k1")]
    plan = plan_graph([P0, P2], slots, references=[])
    assert plan.indirected == (0, 2) and plan.copied == ()
    assert plan.decisions[0].slots == (0, 2)
    assert (plan.copy_bytes_before, plan.copy_bytes_after, plan.table_bytes) == (4352, 0, 24)


@pytest.mark.parametrize("address", [0x1000, 0x1000 + 4095, 0x1000 + 100])
def test_any_other_pointer_into_a_placeholder_keeps_its_copy(address: int) -> None:
    slots = [Slot(0, 0, "k0"), Slot(2, 0, "k0")]
    plan = plan_graph([P0, P2], slots, [Reference(address, "vendor-kernel", "sm90_xmma_gemm")])
    assert plan.indirected == (2,) and plan.copied == (0,)
    assert "vendor-kernel (sm90_xmma_gemm)" in plan.decisions[0].reason
    assert plan.copy_bytes_after == 4096
    assert plan.decisions[0].slots == (0,), "its slots stay, pointing at the placeholder"


def test_pointers_outside_every_placeholder_block_nothing() -> None:
    refs = [Reference(0x1000 + 4096, "memcpy", "memcpy node 1"), Reference(0x8FFF, "other", "x")]
    plan = plan_graph([P0, P2], [Slot(0, 0, "k"), Slot(2, 0, "k")], refs)
    assert plan.indirected == (0, 2)


def test_an_input_without_slots_is_copied() -> None:
    plan = plan_graph([P0, P2], [Slot(0, 0, "k")], [])
    assert plan.copied == (2,) and "no Triton kernel" in plan.decisions[1].reason


# --- the replay guard --------------------------------------------------------------------------

def _layouts(*tensors: torch.Tensor, alignment: int = 16) -> list[InputLayout]:
    return [InputLayout.of(i, t, alignment) for i, t in enumerate(tensors)]


def test_inputs_laid_out_as_recorded_pass() -> None:
    a, b = torch.zeros(64), torch.zeros(8, 8)
    guard = ReplayGuard(_layouts(a, b))
    new = [torch.ones(64), torch.ones(8, 8)]
    ptrs = [0, 0]
    assert guard.must_copy(new, ptrs) == []
    assert ptrs == [t.data_ptr() for t in new], "the replay's table values, read once"


def test_a_misaligned_input_is_copied() -> None:
    a, b = torch.zeros(64), torch.zeros(64)
    guard = ReplayGuard([InputLayout(0, (1,), 0, 256, 16), InputLayout(1, (1,), 1, 256, 16)])
    base = torch.zeros(80)
    misaligned = base[1:65]  # 4 bytes past a 16-byte boundary, storage offset 1
    assert misaligned.data_ptr() % 16 != 0
    assert guard.must_copy([a, misaligned], [0] * 8) == [1], "storage offset 1 is what was recorded, alignment is not"
    assert guard.must_copy([misaligned, b], [0] * 8) == [0, 1]


def test_other_strides_or_storage_offset_are_copied() -> None:
    guard = ReplayGuard(_layouts(torch.zeros(8, 8), torch.zeros(16)))
    transposed = torch.zeros(8, 8).t()
    offset = torch.zeros(32)[16:]
    assert guard.must_copy([transposed, torch.zeros(16)], [0] * 8) == [0]
    assert guard.must_copy([torch.zeros(8, 8), offset], [0] * 8) == [1]


def test_inputs_sharing_bytes_are_read_in_place() -> None:
    """Indirected inputs are never written by the graph: reading shared bytes twice is safe."""
    guard = ReplayGuard(_layouts(torch.zeros(64), torch.zeros(64), torch.zeros(64)))
    shared = torch.zeros(64)
    assert guard.must_copy([shared, torch.zeros(64), shared], [0] * 8) == []


def test_an_input_in_memory_the_replay_writes_is_copied() -> None:
    """``x = f(x)``: the last call's output lies in the graph's pool, which the replay overwrites."""
    pool = torch.zeros(1024)  # stands for a segment of the graph's memory pool
    outside, other = torch.zeros(64), torch.zeros(64)
    base = pool.data_ptr()
    guard = ReplayGuard(_layouts(outside, other), written=[(base, 1024 * 4)])
    assert guard.must_copy([outside, other], [0] * 8) == []
    assert guard.must_copy([pool[:64], other], [0] * 8) == [0]
    assert guard.must_copy([other, pool[:64]], [0] * 8) == [1]


def test_the_written_ranges_are_tested_at_both_ends_of_an_input() -> None:
    big = torch.zeros(4096)
    base = big.data_ptr()
    layout = [InputLayout(0, (1,), 0, 64 * 4, 16)]
    head = big[:64]
    # head: [base, base+256); a range that starts inside it, one that ends inside it, one past it
    assert ReplayGuard(layout, written=[(base + 128, 4)]).must_copy([head], [0] * 8) == [0]
    assert ReplayGuard(layout, written=[(base - 64, 68)]).must_copy([head], [0] * 8) == [0]
    assert ReplayGuard(layout, written=[(base - 64, 64), (base + 256, 64)]).must_copy([head], [0] * 8) == [], \
        "ranges that only touch the input's ends"
    assert ReplayGuard(layout, written=[(base, 16384)]).must_copy([head], [0] * 8) == [0]
    # the same with more than one range (a search instead of the single range's comparisons)
    assert ReplayGuard(layout, written=[(base - 4096, 64), (base + 128, 4)]).must_copy([head], [0] * 8) == [0]
    assert ReplayGuard(layout, written=[(base - 64, 68), (base + 4096, 64)]).must_copy([head], [0] * 8) == [0]
    assert ReplayGuard(layout, written=[(base - 4096, 64), (base + 256, 64)]).must_copy([head], [0] * 8) == []


def test_merged_ranges() -> None:
    from grace.pi.guard import merged_ranges

    assert merged_ranges([(100, 10), (0, 10), (105, 20), (10, 5), (200, 0)]) == [(0, 15), (100, 25)]


def test_span_bytes() -> None:
    assert span_bytes((4, 8), (8, 1), 4) == 128
    assert span_bytes((4, 8), (1, 4), 4) == 128
    assert span_bytes((3, 1), (0, 1), 8) == 8, "an expanded dim reaches nothing new"
    assert span_bytes((0, 5), (5, 1), 4) == 0
    with pytest.raises(ValueError):
        InputLayout.of(0, torch.zeros(2), 12)


def test_a_node_indirects_only_with_a_plan_that_indirects_and_a_copying_record_copies_all() -> None:
    from types import SimpleNamespace

    from grace.pi.replay import indirects
    from grace.pi.report import GraphRecord, summarize

    assert not indirects(SimpleNamespace()) and not indirects(SimpleNamespace(grace_pi=None))
    assert not indirects(SimpleNamespace(grace_pi=SimpleNamespace(plan=SimpleNamespace(indirected=()))))
    assert indirects(SimpleNamespace(grace_pi=SimpleNamespace(plan=SimpleNamespace(indirected=(0,)))))
    record = GraphRecord.copying_all("graph 0", "none (recorded stock)", 4096, {0: "an ATen operator reads it"})
    assert (record.copy_bytes_before, record.copy_bytes_after, record.pointers, record.indirected) == (4096, 4096, 0, [])
    assert summarize([record])["copy_bytes_grace"] == summarize([record])["copy_bytes_pt2_cg"] == 4096
