"""The per-graph pointer table: device slots that indirected kernels dereference at entry.

Each replay writes the slots' new values (an input's data pointer plus the slot's byte offset)
into a pinned host buffer and copies it to the device table on the current stream, the one the
graph is then launched on, so the copy is ordered before every kernel that reads the table.

The host buffer cannot be reused until the copy that reads it has run: the CPU is usually
ahead of the GPU, and overwriting a buffer whose copy is still queued would hand an earlier
replay the next replay's pointers. Hence a ring of ``depth`` host buffers, each with an event
recorded after its copy; a buffer is rewritten only after its event has completed (waiting on
it only when the CPU is ``depth`` replays ahead, where the stream would block it anyway).

On the GPU the copy and the event go straight to the CUDA runtime: through torch, ``copy_`` and
``Event.record`` cost about 25 us a replay between them (dispatch, a ``Stream`` object per
record, the pinned block's registration with the host allocator), more than the input copies
of a small graph that the table replaces (micro-eos, ``scripts/probes/replay_overhead.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from grace.pi.plan import Slot

DEFAULT_DEPTH = 4


class _Copier(Protocol):
    def wait(self, j: int) -> None:
        """Block until ring buffer ``j``'s last copy has run."""

    def copy(self, j: int, stream: int) -> None:
        """Queue the copy of ring buffer ``j`` into the table on ``stream``, then its event."""


class PointerTable:
    """Slots in device memory, refilled from a ring of pinned host buffers."""

    def __init__(self, slots: Sequence[Slot], device: Any, depth: int = DEFAULT_DEPTH,
                 storage: Any = None) -> None:
        """``storage``: a 1-d int64 tensor already on ``device`` whose first entries become the
        table (a graph being recorded bakes slot addresses in before it knows how many it needs)."""
        import torch

        if not slots:
            raise ValueError("a pointer table needs at least one slot")
        self.slots = tuple(slots)
        self._inputs = tuple(s.input_index for s in self.slots)
        self._offsets = tuple(s.offset for s in self.slots)
        self.device = torch.device(device)
        on_gpu = self.device.type == "cuda"
        if storage is None:
            self.table = torch.zeros(len(self.slots), dtype=torch.int64, device=self.device)
        elif storage.dtype != torch.int64 or storage.dim() != 1 or storage.numel() < len(self.slots):
            raise ValueError(f"table storage must be int64 with at least {len(self.slots)} entries")
        else:
            self.table = storage[: len(self.slots)]
        self._host = [torch.zeros(len(self.slots), dtype=torch.int64, pin_memory=on_gpu) for _ in range(depth)]
        self._views = [h.numpy() for h in self._host]
        self._next = 0
        self._copier: _Copier
        if on_gpu:
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            raw = torch._C._cuda_getCurrentRawStream  # an int, without making a Stream object
            self._current_stream = lambda: raw(index)
            self._copier = _RuntimeCopier(index, self.table, self._host)
        else:
            self._current_stream = lambda: 0
            self._copier = _TensorCopier(self.table, self._host)
        self._last_values: list[int] | None = None
        self._last_stream: int | None = None

    def slot_address(self, k: int) -> int:
        """The device address a kernel is launched with to read slot ``k``."""
        return self.table.data_ptr() + 8 * k

    def values(self, base_ptrs: Sequence[int]) -> list[int]:
        """Slot values for the inputs' data pointers ``base_ptrs`` (indexed by input index)."""
        return [base_ptrs[i] + off for i, off in zip(self._inputs, self._offsets)]

    def fill(self, base_ptrs: Sequence[int]) -> None:
        """Queue the copy of the new slot values on the current stream.

        Values equal to the last fill's, queued on the same stream, are not copied again: that
        copy is ordered before anything this stream runs next. (On another stream it would not
        be, so a change of stream copies.)
        """
        values = self.values(base_ptrs)
        stream = self._current_stream()
        if values == self._last_values and stream == self._last_stream:
            return
        j = self._next
        self._next = (j + 1) % len(self._host)
        self._copier.wait(j)  # at once unless the CPU is a whole ring ahead
        self._views[j][:] = values
        self._copier.copy(j, stream)
        self._last_values, self._last_stream = values, stream


class _TensorCopier:
    """Host tables (CPU tests): a plain copy, nothing to wait for."""

    def __init__(self, table: Any, host: Sequence[Any]) -> None:
        self._table, self._host = table, host

    def wait(self, j: int) -> None:
        pass

    def copy(self, j: int, stream: int) -> None:
        self._table.copy_(self._host[j])


class _RuntimeCopier:
    """``cudaMemcpyAsync`` from the pinned buffers and ``cudaEventRecord`` after each copy,
    through ``cuda.bindings`` with the buffers' addresses worked out once."""

    def __init__(self, device_index: int, table: Any, host: Sequence[Any]) -> None:
        import torch
        from cuda.bindings import runtime

        self._rt = runtime
        self._host = host  # the pinned buffers live as long as the copies that read them
        self._dst = table.data_ptr()
        self._src = [h.data_ptr() for h in host]
        self._nbytes = table.numel() * table.element_size()
        self._kind = runtime.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._memcpy, self._record, self._sync = (
            runtime.cudaMemcpyAsync, runtime.cudaEventRecord, runtime.cudaEventSynchronize)
        with torch.cuda.device(device_index):
            self._events = [_ok(runtime.cudaEventCreateWithFlags(runtime.cudaEventDisableTiming), "cudaEventCreate")
                            for _ in host]

    def wait(self, j: int) -> None:
        (err,) = self._sync(self._events[j])  # an event never recorded counts as complete
        if err:
            _fail(err, "cudaEventSynchronize")

    def copy(self, j: int, stream: int) -> None:
        (err,) = self._memcpy(self._dst, self._src[j], self._nbytes, self._kind, stream)
        if err:
            _fail(err, "cudaMemcpyAsync")
        (err,) = self._record(self._events[j], stream)
        if err:
            _fail(err, "cudaEventRecord")

    def __del__(self) -> None:
        destroy = getattr(self._rt, "cudaEventDestroy", None)
        for event in getattr(self, "_events", ()):
            try:
                destroy(event)
            except Exception:  # interpreter shutdown: the context may be gone already
                pass


def _ok(result: tuple, what: str) -> Any:
    err, value = result
    if err:
        _fail(err, what)
    return value


def _fail(err: Any, what: str) -> None:
    raise RuntimeError(f"GraCE pointer table: {what} failed: {getattr(err, 'name', err)}")
