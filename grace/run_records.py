"""A process's records of one kind, in the order they were made: PI's plans (Table 3) and SCG's
decisions (Table 4), which the benchmark worker reads in-process into its result rows.

One instance per kind lives for the process, as PyTorch's own ``counters`` do; a caller that
makes records which are not the program's (SCG's private profiling trees) drops them with
:meth:`RunRecords.discarded`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class RunRecords(Generic[T]):
    """The records of one kind made so far in this process."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[T] = []

    def add(self, record: T) -> None:
        self._items.append(record)

    def all(self) -> list[T]:
        """A copy: later records do not change what a caller holds."""
        return list(self._items)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    @contextlib.contextmanager
    def discarded(self) -> Iterator[None]:
        """Drop the records added inside, whatever happens there."""
        kept = len(self._items)
        try:
            yield
        finally:
            del self._items[kept:]
