"""The pointer table's slot values and writes, and the mapping of launch arguments to slots (CPU)."""

from __future__ import annotations

import ctypes
import struct

import pytest
import torch

from grace.pi.launch_args import runtime_arg_names, slot_requests
from grace.pi.plan import Slot
from grace.pi.table import BatchMemOpWriter, PointerTable, StagedCopyWriter


def test_slot_values_are_input_pointers_plus_offsets() -> None:
    table = PointerTable([Slot(1, 0, "k0"), Slot(0, 64, "k1"), Slot(1, 8, "k2")], "cpu")
    table.fill([1000, 2000])
    assert table.table.tolist() == [2000, 1064, 2008]
    table.fill([3000, 4000])
    assert table.table.tolist() == [4000, 3064, 4008]
    table.fill([5000, 6000])
    assert table.table.tolist() == [6000, 5064, 6008]
    assert table.slot_address(2) == table.table.data_ptr() + 16


def test_the_same_values_again_on_the_same_stream_are_not_copied_again() -> None:
    table = PointerTable([Slot(0, 0, "k0")], "cpu")
    table.fill([1000])
    table.table.fill_(-1)  # stands for "the device already holds what was copied"
    table.fill([1000])
    assert table.table.tolist() == [-1], "no second write"
    table.fill([2000])
    assert table.table.tolist() == [2000]
    table._current_stream = lambda: 7  # another stream: its replay is not ordered after the last copy
    table.table.fill_(-1)
    table.fill([2000])
    assert table.table.tolist() == [2000]


class _Driver:
    """Stands for cuMemcpyHtoDAsync: reads the bytes the call is handed, at the time of the call
    (the real driver stages them before it returns)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, list[int]]] = []

    def __call__(self, dst: int, src: object, nbytes: int, stream: int) -> int:
        raw = ctypes.string_at(ctypes.addressof(src), nbytes)
        self.calls.append((stream, dst, list(struct.unpack(f"<{nbytes // 8}Q", raw))))
        return 0


def test_each_write_is_one_copy_of_the_whole_table_on_the_replay_stream() -> None:
    driver = _Driver()
    writer = StagedCopyWriter(0x1000, 3, driver)
    writer.write([11, 22, 33], stream=5)
    writer.write([44, 55, 66], stream=6)
    assert driver.calls == [(5, 0x1000, [11, 22, 33]), (6, 0x1000, [44, 55, 66])]


@pytest.mark.parametrize("writer, call", [(StagedCopyWriter, "cuMemcpyHtoDAsync"),
                                          (BatchMemOpWriter, "cuStreamBatchMemOp")])
def test_a_failed_write_raises(writer: type, call: str) -> None:
    with pytest.raises(RuntimeError, match=call):
        writer(0x1000, 1, lambda *args: 1).write([7], stream=0)


class _MemOpDriver:
    """Stands for cuStreamBatchMemOp: decodes each call's write operations from memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[tuple[int, int, int]]]] = []

    def __call__(self, stream: int, count: int, address: int, flags: int) -> int:
        raw = ctypes.string_at(address, BatchMemOpWriter.OP_BYTES * count)
        ops = [struct.unpack_from("<I4xQQ", raw, BatchMemOpWriter.OP_BYTES * k) for k in range(count)]
        self.calls.append((stream, ops))
        return 0


def test_batched_writes_carry_each_slot_address_and_value() -> None:
    driver = _MemOpDriver()
    writer = BatchMemOpWriter(0x1000, 3, driver)
    writer.write([11, 22, 33], stream=5)
    writer.write([44, 55, 66], stream=5)
    op = BatchMemOpWriter.WRITE_VALUE_64
    assert driver.calls == [
        (5, [(op, 0x1000, 11), (op, 0x1008, 22), (op, 0x1010, 33)]),
        (5, [(op, 0x1000, 44), (op, 0x1008, 55), (op, 0x1010, 66)]),
    ]


def test_a_table_of_more_than_255_slots_takes_one_call_per_255() -> None:
    driver = _MemOpDriver()
    writer = BatchMemOpWriter(0x2000, 600, driver)
    writer.write(list(range(600)), stream=0)
    assert [len(ops) for _, ops in driver.calls] == [255, 255, 90]
    written = [(address, value) for _, ops in driver.calls for _, address, value in ops]
    assert written == [(0x2000 + 8 * k, k) for k in range(600)]


def test_the_configured_writer_is_used_and_a_wrong_name_is_refused(monkeypatch) -> None:
    import grace.config
    from grace.pi import table

    monkeypatch.setattr(table, "memcpy_htod_async", lambda index: "copy call")
    monkeypatch.setattr(table, "batch_mem_op", lambda index: "memop call")
    assert isinstance(table.gpu_writer(0x1000, 2, 0), StagedCopyWriter)  # the default
    with grace.config.patch(pi_table_write="copy"):
        assert isinstance(table.gpu_writer(0x1000, 2, 0), StagedCopyWriter)
    with grace.config.patch(pi_table_write="memop"):
        assert isinstance(table.gpu_writer(0x1000, 2, 0), BatchMemOpWriter)
    with grace.config.patch(pi_table_write="pinned"), pytest.raises(ValueError, match="'copy', 'memop'"):
        table.gpu_writer(0x1000, 2, 0)


def test_an_empty_table_is_refused() -> None:
    with pytest.raises(ValueError):
        PointerTable([], "cpu")


def _owner(*placeholders: torch.Tensor):
    """Placeholders by storage identity, as the tree hook matches them."""
    by_storage = {t.untyped_storage()._cdata: (i, t.data_ptr()) for i, t in enumerate(placeholders)}
    return lambda arg: by_storage.get(arg.untyped_storage()._cdata) if isinstance(arg, torch.Tensor) else None


SIGNATURE = {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}


def test_pointer_args_reading_placeholders_become_slot_requests() -> None:
    x, y, buf = torch.zeros(64), torch.zeros(16, 4), torch.zeros(64)
    names = runtime_arg_names(["in_ptr0", "in_ptr1", "out_ptr0", "xnumel", "XBLOCK"], {"XBLOCK"}, 4)
    view = torch.as_strided(y, (8, 4), (4, 1), storage_offset=32)  # reinterpret_tensor(arg1_1, ..., 32)
    requests = slot_requests([x, view, buf, 64], names, SIGNATURE, _owner(x, y))
    assert [(r.position, r.name, r.input_index, r.offset) for r in requests] == [
        (0, "in_ptr0", 0, 0), (1, "in_ptr1", 1, 128)]


def test_a_buffer_at_a_placeholder_address_is_not_the_placeholder() -> None:
    x = torch.zeros(64)
    same_bytes = torch.from_numpy(x.numpy())  # another storage object at x's address
    assert same_bytes.data_ptr() == x.data_ptr()
    requests = slot_requests([same_bytes, x, torch.zeros(64), 64], ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"],
                             SIGNATURE, _owner(x))
    assert [(r.position, r.input_index) for r in requests] == [(1, 0)]


def test_non_pointer_args_are_never_slots_and_writes_are_refused() -> None:
    x = torch.zeros(4, dtype=torch.int64)
    signature = {"in_ptr0": "*i64", "ks0": "i64"}
    assert [r.name for r in slot_requests([x, x.data_ptr()], ["in_ptr0", "ks0"], signature, _owner(x))] == ["in_ptr0"]
    with pytest.raises(ValueError, match="writes in_ptr0"):
        slot_requests([x], ["in_ptr0"], signature, _owner(x), mutated={"in_ptr0"})
    with pytest.raises(ValueError, match="takes 2"):
        runtime_arg_names(["in_ptr0", "ks0", "XBLOCK"], {"XBLOCK"}, 1)


def test_a_value_specialized_in_the_signature_only_is_still_passed() -> None:
    """XLNET-I's persistent reduction: ``xnumel`` of 1 is ``constexpr`` in the signature and in
    the constants, but not in the ``def``, so Inductor's launcher still passes it (7 arguments)."""
    arg_names = ["in_out_ptr0", "in_ptr0", "in_ptr1", "in_ptr2", "in_ptr3", "xnumel", "r0_numel", "XBLOCK"]
    names = runtime_arg_names(arg_names, {"XBLOCK"}, 7)
    assert names == arg_names[:7]
    assert runtime_arg_names(arg_names, {"XBLOCK"}, 8, extra=["ws_ptr"])[-1] == "ws_ptr"


def test_driver_entry_points_are_looked_up_by_name_and_a_missing_one_is_named(monkeypatch) -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    from grace.pi import table

    asked: list[bytes] = []

    def lookup(name: bytes, version: int, flags: object) -> tuple:
        asked.append(name)
        return driver.CUresult.CUDA_SUCCESS, 0x1234, None

    monkeypatch.setattr(driver, "cuGetProcAddress", lookup)
    fn = table.memcpy_htod_async(0)
    assert asked == [b"cuMemcpyHtoDAsync"] and ctypes.cast(fn, ctypes.c_void_p).value == 0x1234
    monkeypatch.setattr(driver, "cuGetProcAddress", lambda *a: (driver.CUresult.CUDA_ERROR_NOT_FOUND, 0, None))
    with pytest.raises(RuntimeError, match="cuMemcpyHtoDAsync not found"):
        table.memcpy_htod_async(0)
