"""The per-replay guard of parameter indirection: which new inputs must be copied this time.

A graph with indirected inputs was recorded for inputs of a given layout. On replay, a new input
is passed by pointer only if the recorded kernels may read it as they read the recorded one:

* its data pointer has the alignment the kernels were specialized on (Triton assumes 16-byte
  divisibility of pointer arguments and vectorizes on it);
* its strides and storage offset are the recorded ones (the kernels index with the recorded
  strides; the copy path would have re-laid it out);
* its bytes lie outside every range the replay itself writes: the graph's memory pool, where
  its outputs and intermediates live, and the static inputs it mutates. The copy path reads an
  input before the replay starts; an indirected kernel reads it during the replay, after earlier
  kernels of the same graph may have overwritten it. (``x = f(x)``: the last call's output is
  in the pool, where this call writes.)

Indirected inputs are never written by the graph (the plan gives a mutated input its copy), so
two of them may overlap: reading the same bytes twice is what the copies would have read.

An input that fails goes through the copy path into its placeholder, as PT2-CG does, and its
slots point at the placeholder for this replay. The checks are integer comparisons prepared at
capture time; nothing here allocates or synchronizes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InputLayout:
    """What the recorded kernels assume about an indirected input."""

    input_index: int
    stride: tuple[int, ...]
    storage_offset: int
    span: int  # bytes reached from the data pointer by the recorded shape and strides
    alignment: int  # required divisibility of the data pointer, a power of two

    @staticmethod
    def of(input_index: int, tensor: Any, alignment: int) -> InputLayout:
        if alignment & (alignment - 1):
            raise ValueError(f"alignment {alignment} is not a power of two")
        return InputLayout(input_index, tuple(tensor.stride()), tensor.storage_offset(),
                           span_bytes(tuple(tensor.shape), tuple(tensor.stride()), tensor.element_size()),
                           alignment)


def span_bytes(shape: Sequence[int], stride: Sequence[int], itemsize: int) -> int:
    """Bytes from the first element to one past the last that ``shape``/``stride`` can reach."""
    if any(s == 0 for s in shape):
        return 0
    return (sum((s - 1) * abs(st) for s, st in zip(shape, stride)) + 1) * itemsize


class ReplayGuard:
    """Built once per graph; :meth:`must_copy` runs before every replay."""

    __slots__ = ("_checks", "_starts", "_ends")

    def __init__(self, layouts: Sequence[InputLayout], written: Sequence[tuple[int, int]] = ()) -> None:
        """``written``: the device ranges (address, bytes) that a replay of the graph may write."""
        self._checks = tuple((l.input_index, l.alignment - 1, l.stride, l.storage_offset, l.span) for l in layouts)
        ranges = merged_ranges(written)
        self._starts = tuple(a for a, _ in ranges)
        self._ends = tuple(a + n for a, n in ranges)

    @property
    def inputs(self) -> tuple[int, ...]:
        """The input indices it checks (and whose pointers :meth:`must_copy` reads)."""
        return tuple(c[0] for c in self._checks)

    def must_copy(self, inputs: Sequence[Any], ptrs: list[int]) -> list[int]:
        """Indices of indirected inputs that take the copy path this replay (usually none).

        ``ptrs``, indexed by input index, receives each checked input's data pointer (the
        replay's table values), so that the replay does not read them a second time."""
        out: list[int] = []
        starts, ends = self._starts, self._ends
        single = len(starts) == 1  # the usual case, one pool: two comparisons instead of a search
        lo, hi = (starts[0], ends[0]) if single else (0, 0)
        for i, mask, stride, offset, span in self._checks:
            t = inputs[i]
            ptrs[i] = ptr = t.data_ptr()
            if ptr & mask or t.stride() != stride or t.storage_offset() != offset:
                out.append(i)
            elif single:
                if ptr < hi and lo < ptr + max(span, 1):
                    out.append(i)
            elif starts:
                j = bisect_left(starts, ptr + max(span, 1)) - 1  # the last range starting before its end
                if j >= 0 and ends[j] > ptr:
                    out.append(i)
        return out


def merged_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(address, bytes)`` ranges sorted, with overlapping and touching ones merged."""
    out: list[tuple[int, int]] = []
    for start, size in sorted(r for r in ranges if r[1] > 0):
        if out and start <= out[-1][0] + out[-1][1]:
            last_start, last_size = out[-1]
            out[-1] = (last_start, max(last_size, start + size - last_start))
        else:
            out.append((start, size))
    return out
