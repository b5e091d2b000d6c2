"""Which arguments of a Triton launch, seen while a graph records, read a placeholder.

Inductor launches a Triton kernel with its runtime arguments in the order of the kernel's
``def`` (compile-time constants of the chosen config left out). A pointer argument reads a
placeholder if its data pointer falls inside one: either the placeholder itself or a view of
it (``reinterpret_tensor`` with an offset), which becomes a slot at that byte offset. Anything
else (buffers the graph allocates, parameters, static inputs) is passed as it is.

Pure: it takes the arguments and the placeholders, so its rules are tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grace.pi.plan import Placeholder, owner


@dataclass(frozen=True)
class SlotRequest:
    """Argument ``position`` (named ``name``) reads input ``input_index`` at byte ``offset``."""

    position: int
    name: str
    input_index: int
    offset: int


def runtime_arg_names(arg_names: Sequence[str], config_kwargs: Mapping[str, Any]) -> list[str]:
    """The kernel's arguments as a launch passes them: its ``def`` less the config's constants."""
    return [name for name in arg_names if name not in config_kwargs]


def slot_requests(args: Sequence[Any], names: Sequence[str], signature: Mapping[str, str],
                  placeholders: Sequence[Placeholder]) -> list[SlotRequest]:
    """The pointer arguments of one launch that point into a placeholder."""
    if len(args) != len(names):
        raise ValueError(f"launch has {len(args)} arguments, the kernel takes {len(names)}: {list(names)}")
    out = []
    for position, (name, arg) in enumerate(zip(names, args)):
        if not signature.get(name, "").startswith("*") or not hasattr(arg, "data_ptr"):
            continue
        ptr = arg.data_ptr()
        p = owner(placeholders, ptr)
        if p is not None:
            out.append(SlotRequest(position, name, p.input_index, ptr - p.data_ptr))
    return out
