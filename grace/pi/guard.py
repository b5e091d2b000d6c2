"""The per-replay guard of parameter indirection: which new inputs must be copied this time.

A graph with indirected inputs was recorded for inputs of a given layout. On replay, a new input
is passed by pointer only if the recorded kernels may read it as they read the recorded one:

* its data pointer has the alignment the kernels were specialized on (Triton assumes 16-byte
  divisibility of pointer arguments and vectorizes on it);
* its strides and storage offset are the recorded ones (the kernels index with the recorded
  strides; the copy path would have re-laid it out);
* its bytes overlap no other indirected input's (the copy path gives each input its own buffer).

An input that fails goes through the copy path into its placeholder, as PT2-CG does, and its
slots point at the placeholder for this replay. The checks are integer comparisons prepared at
capture time; nothing here allocates or synchronizes.
"""

from __future__ import annotations

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

    __slots__ = ("_checks", "_spans")

    def __init__(self, layouts: Sequence[InputLayout]) -> None:
        self._checks = tuple((l.input_index, l.alignment - 1, l.stride, l.storage_offset) for l in layouts)
        self._spans = tuple((l.input_index, l.span) for l in layouts) if len(layouts) > 1 else ()

    def must_copy(self, inputs: Sequence[Any]) -> list[int]:
        """Indices of indirected inputs that take the copy path this replay (usually none)."""
        out: list[int] = []
        ptrs: dict[int, int] = {}
        for i, mask, stride, offset in self._checks:
            t = inputs[i]
            ptrs[i] = ptr = t.data_ptr()
            if ptr & mask or t.stride() != stride or t.storage_offset() != offset:
                out.append(i)
        if self._spans:
            out.extend(i for i in _overlapping(ptrs, self._spans) if i not in out)
        return out


def _overlapping(ptrs: dict[int, int], spans: Sequence[tuple[int, int]]) -> list[int]:
    """Inputs whose byte ranges overlap another's (both are reported)."""
    ranges = sorted((ptrs[i], span, i) for i, span in spans if span)
    hit: list[int] = []
    end, last = -1, None
    for start, span, i in ranges:
        if start < end:
            hit.extend(j for j in (last, i) if j is not None and j not in hit)
        if start + span > end:
            end, last = start + span, i
    return hit
