"""The per-graph pointer table: device slots that indirected kernels dereference at entry.

Each replay writes the slots' new values (an input's data pointer plus the slot's byte offset)
into the device table on the current stream, the one the graph is then launched on, so the
writes are ordered after every kernel of the previous replay and before every kernel of this one.

On the GPU one driver call does it, chosen by ``grace.config.pi_table_write``:
``cuMemcpyHtoDAsync`` of the whole table from pageable host memory ("copy", the default), or
``cuStreamBatchMemOp`` with a 64-bit write per slot ("memop", the values in the call's own
parameters). Neither leaves a host buffer that a queued replay still needs, so a CPU running
replays ahead of the GPU cannot hand a queued replay the next one's pointers, and there is
nothing to wait for: the driver documents ("API synchronization behavior") that a copy from
pageable memory either is synchronous or has staged the bytes in its own memory when it
returns, the property PyTorch's ``non_blocking`` copies from unpinned tensors rely on too.
The ways measured (``scripts/probes/table_write_device_cost.py``, H100, per write):

================  ===============================  =====================
way               device us (K = 1, 4, 16, 64)     host us (K = 1 .. 64)
================  ===============================  =====================
pageable memcpy   0.8, 0.8, 0.8, 0.8               4.6 .. 16 (probe's list building)
batch memop       1.5, 3.4, 10.9, 43               3.9 .. 33
pinned memcpy     2.4, 2.4, 2.5, 2.6               4.5 (its buffer must then be guarded)
writer kernel     1.9, 2.0, 2.1, 2.3               8.9 .. 20
================  ===============================  =====================

``cuStreamBatchMemOp`` costs the GPU about 0.65 us a slot: with 64 slots a replay spent 47 us
on the device against PT2-CG's 8 us of copies (Figure 9 on the H100, ``docs/pi.md``); with the
copy it spent 6.9 us. A pinned buffer is only safe reused behind an event per use, which cost
7.6 us of host time a replay on the H100. A batch holds fewer than 256 operations, so a larger
table takes one memop call per 255 slots.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from grace.pi.plan import Slot

MAX_BATCH = 255  # cuStreamBatchMemOp: "count must be less than 256"


class _Writer(Protocol):
    def write(self, values: Sequence[int], stream: int) -> None:
        """Queue the table's new ``values`` on ``stream``."""


class PointerTable:
    """Slots in device memory, rewritten on the replay's stream before each replay."""

    def __init__(self, slots: Sequence[Slot], device: Any, storage: Any = None) -> None:
        """``storage``: a 1-d int64 tensor already on ``device`` whose first entries become the
        table (a graph being recorded bakes slot addresses in before it knows how many it needs)."""
        import torch

        if not slots:
            raise ValueError("a pointer table needs at least one slot")
        self.slots = tuple(slots)
        self._inputs = tuple(s.input_index for s in self.slots)
        self._offsets = tuple(s.offset for s in self.slots)
        self.device = torch.device(device)
        if storage is None:
            self.table = torch.zeros(len(self.slots), dtype=torch.int64, device=self.device)
        elif storage.dtype != torch.int64 or storage.dim() != 1 or storage.numel() < len(self.slots):
            raise ValueError(f"table storage must be int64 with at least {len(self.slots)} entries")
        else:
            self.table = storage[: len(self.slots)]
        self._writer: _Writer
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            raw = torch._C._cuda_getCurrentRawStream  # an int, without making a Stream object
            self._current_stream = lambda: raw(index)
            self._writer = gpu_writer(self.table.data_ptr(), self.table.numel(), index)
        else:
            self._current_stream = lambda: 0
            self._writer = _TensorWriter(self.table)
        self._last_values: list[int] | None = None
        self._last_stream: int | None = None

    def slot_address(self, k: int) -> int:
        """The device address a kernel is launched with to read slot ``k``."""
        return self.table.data_ptr() + 8 * k

    def values(self, base_ptrs: Sequence[int]) -> list[int]:
        """Slot values for the inputs' data pointers ``base_ptrs`` (indexed by input index)."""
        return [base_ptrs[i] + off for i, off in zip(self._inputs, self._offsets)]

    def fill(self, base_ptrs: Sequence[int]) -> None:
        """Queue the new slot values on the current stream.

        Values equal to the last fill's, queued on the same stream, are not written again: that
        write is ordered before anything this stream runs next. (On another stream it would not
        be, so a change of stream writes.)
        """
        values = self.values(base_ptrs)
        stream = self._current_stream()
        if values == self._last_values and stream == self._last_stream:
            return
        self._writer.write(values, stream)
        self._last_values, self._last_stream = values, stream


def write_mode() -> str:
    """``grace.config.pi_table_write``, checked (before a capture, so that a wrong name stops
    the program where it is set rather than after a graph is recorded)."""
    from grace.option_values import checked

    return checked("pi_table_write")


def gpu_writer(table_address: int, slots: int, device_index: int) -> _Writer:
    """The writer ``grace.config.pi_table_write`` names, for a table on the GPU."""
    if write_mode() == "copy":
        return StagedCopyWriter(table_address, slots, memcpy_htod_async(device_index))
    return BatchMemOpWriter(table_address, slots, batch_mem_op(device_index))


class _TensorWriter:
    """A table in host memory (a device other than CUDA): a plain copy."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def write(self, values: Sequence[int], stream: int) -> None:
        import torch

        self._table.copy_(torch.tensor(values, dtype=torch.int64))


class StagedCopyWriter:
    """``cuMemcpyHtoDAsync`` of the table from one pageable host buffer, which the driver
    stages before returning, so the next replay may refill it at once."""

    def __init__(self, table_address: int, slots: int, call: Any) -> None:
        """``call(dst, src, bytes, stream) -> CUresult``: the driver function
        (:func:`memcpy_htod_async`), or any function of that signature."""
        self._call = call
        self._address = table_address
        self._buffer = (ctypes.c_uint64 * slots)()
        self._bytes = 8 * slots

    def write(self, values: Sequence[int], stream: int) -> None:
        self._buffer[:] = values
        err = self._call(self._address, self._buffer, self._bytes, stream)
        if err:
            raise RuntimeError(f"GraCE pointer table: cuMemcpyHtoDAsync failed with CUresult {err}")


def memcpy_htod_async(device_index: int) -> Any:
    """The driver's ``cuMemcpyHtoDAsync`` as a ctypes function (called with ``device_index``'s
    context current)."""
    return _driver_function(b"cuMemcpyHtoDAsync", ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p))


def _driver_function(name: bytes, prototype: Any) -> Any:
    """The driver entry point ``name``, in the version of CUDA 12's headers, as ``prototype``
    (a ctypes function type)."""
    from cuda.bindings import driver

    flags = driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    err, address, status = driver.cuGetProcAddress(name, 12000, flags)
    if err != driver.CUresult.CUDA_SUCCESS or not int(address):
        raise RuntimeError(f"GraCE pointer table: {name.decode()} not found ({getattr(err, 'name', err)}, {status})")
    return prototype(int(address))


class BatchMemOpWriter:
    """``cuStreamBatchMemOp`` with each slot's operation laid out once: a replay packs the
    values into the operations and makes one call per 255 slots."""

    OP_BYTES = 48  # sizeof(CUstreamBatchMemOpParams), a union padded to six 64-bit words
    VALUE_AT = 16  # the 64-bit value of a CUstreamMemOpWriteValueParams
    WRITE_VALUE_64 = 5  # CU_STREAM_MEM_OP_WRITE_VALUE_64

    def __init__(self, table_address: int, slots: int, call: Any) -> None:
        """``call(stream, count, params_address, flags) -> CUresult``: the driver function
        (:func:`batch_mem_op`), or any function of that signature."""
        self._call = call
        n = slots
        self._ops = ctypes.create_string_buffer(self.OP_BYTES * n)
        for k in range(n):
            struct.pack_into("<I4xQ", self._ops, self.OP_BYTES * k, self.WRITE_VALUE_64, table_address + 8 * k)
        base = ctypes.addressof(self._ops)
        self._batches = tuple((base + self.OP_BYTES * k, min(MAX_BATCH, n - k)) for k in range(0, n, MAX_BATCH))
        self._value_offsets = tuple(self.OP_BYTES * k + self.VALUE_AT for k in range(n))
        self._pack = struct.Struct("<Q").pack_into

    def write(self, values: Sequence[int], stream: int) -> None:
        pack, ops = self._pack, self._ops
        for offset, value in zip(self._value_offsets, values):
            pack(ops, offset, value)
        for address, count in self._batches:
            err = self._call(stream, count, address, 0)
            if err:
                raise RuntimeError(f"GraCE pointer table: cuStreamBatchMemOp failed with CUresult {err}")


def batch_mem_op(device_index: int) -> Any:
    """The driver's ``cuStreamBatchMemOp`` (the version of CUDA 12's headers) as a ctypes
    function, after checking that the device takes 64-bit stream writes."""
    from cuda.bindings import driver

    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
    err, supported = driver.cuDeviceGetAttribute(attr, device_index)
    if err != driver.CUresult.CUDA_SUCCESS or not supported:
        raise RuntimeError(f"GraCE pointer table: device {device_index} does not support 64-bit stream "
                           f"memory operations ({getattr(err, 'name', err)}, supported={supported})")
    return _driver_function(b"cuStreamBatchMemOp", ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint))
