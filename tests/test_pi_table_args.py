"""The pointer table's slot values and ring, and the mapping of launch arguments to slots (CPU)."""

from __future__ import annotations

import pytest
import torch

from grace.pi.launch_args import runtime_arg_names, slot_requests
from grace.pi.plan import Placeholder, Slot
from grace.pi.table import PointerTable


def test_slot_values_are_input_pointers_plus_offsets() -> None:
    table = PointerTable([Slot(1, 0, "k0"), Slot(0, 64, "k1"), Slot(1, 8, "k2")], "cpu", depth=2)
    table.fill([1000, 2000])
    assert table.table.tolist() == [2000, 1064, 2008]
    table.fill([3000, 4000])
    assert table.table.tolist() == [4000, 3064, 4008], "the next ring buffer carries the next values"
    table.fill([5000, 6000])
    assert table.table.tolist() == [6000, 5064, 6008]
    assert table.slot_address(2) == table.table.data_ptr() + 16


def test_an_empty_table_is_refused() -> None:
    with pytest.raises(ValueError):
        PointerTable([], "cpu")


def _placeholders(*tensors: torch.Tensor) -> list[Placeholder]:
    return [Placeholder(i, t.data_ptr(), t.numel() * t.element_size(), t.numel() * t.element_size())
            for i, t in enumerate(tensors)]


def test_pointer_args_into_placeholders_become_slot_requests() -> None:
    x, y, buf = torch.zeros(64), torch.zeros(16, 4), torch.zeros(64)
    placeholders = _placeholders(x, y)
    names = runtime_arg_names(["in_ptr0", "in_ptr1", "out_ptr0", "xnumel", "XBLOCK"], {"XBLOCK": 128})
    signature = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
    view = torch.as_strided(y, (8, 4), (4, 1), storage_offset=32)  # reinterpret_tensor(arg1_1, ..., 32)
    requests = slot_requests([x, view, buf, 64], names, signature, placeholders)
    assert [(r.position, r.name, r.input_index, r.offset) for r in requests] == [
        (0, "in_ptr0", 0, 0), (1, "in_ptr1", 1, 128)]


def test_non_pointer_args_are_never_slots() -> None:
    x = torch.zeros(4, dtype=torch.int64)
    placeholders = _placeholders(x)
    signature = {"in_ptr0": "*i64", "ks0": "i64"}
    assert slot_requests([x, x.data_ptr()], ["in_ptr0", "ks0"], signature, placeholders)[0].name == "in_ptr0"
    assert len(slot_requests([x, x.data_ptr()], ["in_ptr0", "ks0"], signature, placeholders)) == 1
    with pytest.raises(ValueError, match="takes 2"):
        slot_requests([x], ["in_ptr0", "ks0"], signature, placeholders)
