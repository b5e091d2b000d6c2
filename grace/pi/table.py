"""The per-graph pointer table: device slots that indirected kernels dereference at entry.

Each replay writes the slots' new values (an input's data pointer plus the slot's byte offset)
into a pinned host buffer and copies it to the device table on the current stream, the one the
graph is then launched on, so the copy is ordered before every kernel that reads the table.

The host buffer cannot be reused until the copy that reads it has run: the CPU is usually
ahead of the GPU, and overwriting a buffer whose copy is still queued would hand an earlier
replay the next replay's pointers. Hence a ring of ``depth`` host buffers, each with an event
recorded after its copy; a buffer is rewritten only after its event has completed (waiting on
it only when the CPU is ``depth`` replays ahead, where the stream would block it anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grace.pi.plan import Slot

DEFAULT_DEPTH = 4


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
        self._events = [torch.cuda.Event() if on_gpu else None for _ in range(depth)]
        self._next = 0
        if on_gpu:
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            raw = torch._C._cuda_getCurrentRawStream  # an int, without making a Stream object
            self._current_stream = lambda: raw(index)
        else:
            self._current_stream = lambda: 0
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
        event = self._events[j]
        if event is not None:
            event.synchronize()  # complete unless the CPU is a whole ring ahead
        self._views[j][:] = values
        self.table.copy_(self._host[j], non_blocking=event is not None)
        if event is not None:
            event.record()
        self._last_values, self._last_stream = values, stream
