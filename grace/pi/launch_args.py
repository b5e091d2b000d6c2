"""Which arguments of a Triton launch, seen while a graph records, read a placeholder.

Inductor launches a Triton kernel with its arguments in the order of the kernel's ``def``,
those declared ``tl.constexpr`` left out (:func:`runtime_arg_names`). A pointer argument reads a
placeholder if its storage is the placeholder's: the placeholder itself or a view of it
(``reinterpret_tensor`` with an offset), which becomes a slot at that byte offset. Storage
identity, not address: the warm-up run does not hold its inputs, so a later buffer may sit at
a freed input's address (a PI capture does hold the recording inputs throughout,
:mod:`grace.pi.tree_hook`). Anything else (buffers the graph allocates, parameters, static
inputs) is passed as it is.

Pure: the caller says which storage is whose (``owner``), so the rules are tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A launch argument -> (input index, the placeholder's data pointer), or None if it is no placeholder's.
Owner = Callable[[Any], "tuple[int, int] | None"]


@dataclass(frozen=True)
class SlotRequest:
    """Argument ``position`` (named ``name``) reads input ``input_index`` at byte ``offset``."""

    position: int
    name: str
    input_index: int
    offset: int


def runtime_arg_names(arg_names: Sequence[str], declared_constexprs: Collection[str], count: int,
                      extra: Sequence[str] = ()) -> list[str]:
    """The names of a launch's ``count`` positional arguments.

    As Inductor's launcher builds them (``_get_arg_lists``, Triton 3.2 and later): every name of
    the kernel's ``def`` except those declared ``tl.constexpr`` there (and ``num_warps``,
    ``num_stages``), then ``extra`` (``extra_launcher_args``). A value Inductor specialized,
    marked ``constexpr`` in the signature but not in the ``def`` (``xnumel`` of 1 in a persistent
    reduction), is still passed.
    """
    names = [n for n in arg_names if n not in declared_constexprs and n not in _IMPLICIT] + list(extra)
    if len(names) != count:
        raise ValueError(f"launch has {count} arguments, the kernel takes {len(names)}: {names}")
    return names


_IMPLICIT = ("num_warps", "num_stages")


def slot_requests(args: Sequence[Any], names: Sequence[str], signature: Mapping[str, str], owner: Owner,
                  mutated: Collection[str] = ()) -> list[SlotRequest]:
    """The pointer arguments of one launch that read a placeholder.

    Raises ValueError if the kernel writes one (a redirected write would land in the caller's
    tensor, where the copy path writes into the placeholder).
    """
    out = []
    for position, (name, arg) in enumerate(zip(names, args)):
        if not signature.get(name, "").startswith("*"):
            continue
        found = owner(arg)
        if found is None:
            continue
        if name in mutated:
            raise ValueError(f"the kernel writes {name}")
        input_index, base = found
        out.append(SlotRequest(position, name, input_index, arg.data_ptr() - base))
    return out
