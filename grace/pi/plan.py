"""Which inputs of a recorded graph may be indirected: decided once, at capture time.

During recording, every Triton launch that read a placeholder through an indirected parameter
asked for a slot of the graph's pointer table (:class:`Slot`: which input, at which byte offset
from the placeholder's data pointer). Every other use the capture saw (:class:`Reference`: an
ATen operator such as a cuBLAS matmul or a copy, a Triton launch that could not be redirected,
an output aliasing the placeholder, a mutation) is reported against the placeholder's address.
An input is indirected only if no such reference exists: its placeholder is then read by nothing but table slots, so replays may skip
its copy. Otherwise the copy stays for that input, its slots point at the placeholder (which the
copy fills) and the reason is logged. Either way every slot has a valid value, so a kernel
indirected for an input that keeps its copy still reads the right bytes.

This module is pure: it takes what capture observed and returns the plan, so its rules are
tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ReferenceKind = Literal["vendor-kernel", "triton-kernel", "memcpy", "memset", "other"]


@dataclass(frozen=True)
class Placeholder:
    """A non-static input's recording buffer: the bytes PT2-CG copies into before each replay.
    Capture reads it (which launches and operators touch these bytes); the replay checks the
    caller's tensor against the same input's :class:`grace.pi.guard.InputLayout` instead."""

    input_index: int
    data_ptr: int
    storage_bytes: int  # bytes of the placeholder's storage from data_ptr (the tree allocates it alone, at offset 0)
    copy_bytes: int  # bytes PT2-CG's copy moves per replay (numel * itemsize)


@dataclass(frozen=True)
class Slot:
    """One pointer-table entry: the kernel reads input ``input_index``'s data pointer plus ``offset``."""

    input_index: int
    offset: int
    kernel: str


@dataclass(frozen=True)
class Reference:
    """A pointer into a placeholder found in the recorded graph, outside the pointer table."""

    address: int
    kind: ReferenceKind
    node: str  # what holds it, for the log: a kernel name, "memcpy node 3", ...


@dataclass(frozen=True)
class InputDecision:
    input_index: int
    indirect: bool
    reason: str
    slots: tuple[int, ...]  # table entries that read this input


@dataclass(frozen=True)
class GraphPlan:
    """The outcome for one graph: per input, indirect or copy, and the table layout."""

    slots: tuple[Slot, ...]
    decisions: tuple[InputDecision, ...]
    copy_bytes_before: int  # what PT2-CG copies per replay
    copy_bytes_after: int  # what remains to copy with this plan (the pointer table excluded)

    @property
    def table_bytes(self) -> int:
        """Bytes of pointers copied per replay."""
        return 8 * len(self.slots)

    @property
    def indirected(self) -> tuple[int, ...]:
        return tuple(d.input_index for d in self.decisions if d.indirect)

    @property
    def copied(self) -> tuple[int, ...]:
        return tuple(d.input_index for d in self.decisions if not d.indirect)


def owner(placeholders: Sequence[Placeholder], address: int) -> Placeholder | None:
    """The placeholder whose recorded bytes contain ``address``."""
    for p in placeholders:
        if p.data_ptr <= address < p.data_ptr + max(p.storage_bytes, 1):
            return p
    return None


def plan_graph(placeholders: Sequence[Placeholder], slots: Sequence[Slot],
               references: Sequence[Reference]) -> GraphPlan:
    """Indirect each input whose placeholder nothing but table slots reaches, and that has a slot."""
    blocked: dict[int, list[Reference]] = {}
    for ref in references:
        p = owner(placeholders, ref.address)
        if p is not None:
            blocked.setdefault(p.input_index, []).append(ref)
    decisions = []
    for p in placeholders:
        mine = tuple(k for k, s in enumerate(slots) if s.input_index == p.input_index)
        if p.input_index in blocked:
            refs = blocked[p.input_index]
            decisions.append(InputDecision(p.input_index, False, _describe(refs), mine))
        elif not mine:
            decisions.append(InputDecision(p.input_index, False, "no Triton kernel read it through a slot", mine))
        else:
            decisions.append(InputDecision(p.input_index, True, f"read only through {len(mine)} slot(s)", mine))
    copied = {d.input_index for d in decisions if not d.indirect}
    before = sum(p.copy_bytes for p in placeholders)
    after = sum(p.copy_bytes for p in placeholders if p.input_index in copied)
    return GraphPlan(tuple(slots), tuple(decisions), before, after)


def _describe(refs: Sequence[Reference]) -> str:
    kinds = sorted({f"{r.kind} ({r.node})" for r in refs})
    shown = ", ".join(kinds[:3]) + (f" and {len(kinds) - 3} more" if len(kinds) > 3 else "")
    return f"also reached by {shown}: keeps its copy"
