"""ATen operators that read random-number state a captured forward saved for its backward.

Flash, memory-efficient and cuDNN attention with dropout save the philox seed and offset (flash's
``rng_state``) their forward drew from, and their backward regenerates the dropout mask from them.
Inside a CUDA graph capture the forward saves them as device tensors (the generator's graph-safe
state); a backward run outside a capture takes them for host values and reads device memory from
the host, which crashes the process. Such a backward may only run inside its capture, as CUDA
graph trees record it, never eagerly beside a captured forward. An operator's schema says
whether it reads such state: an argument named for the philox seed or offset, or the rng state.
"""

from __future__ import annotations

import functools
from typing import Any


def random_state_returns(schema: Any) -> tuple[int, ...]:
    """The indices of the returns of an operator with ``schema`` that are random-number state
    it saves for a backward (attention's ``philox_seed``, ``philox_offset``, ``rng_state``)."""
    return tuple(k for k, r in enumerate(schema.returns) if "philox" in r.name or "rng_state" in r.name)


def schema_reads_random_state(schema: Any) -> bool:
    """Whether an operator with ``schema`` (a ``torch._C.FunctionSchema``) takes saved
    random-number state as an argument."""
    return any("philox" in a.name or "rng_state" in a.name for a in schema.arguments)


@functools.cache
def operator_reads_random_state(qualified_name: str) -> bool:
    """Whether ATen-style operator ``namespace.name`` (as generated code calls it:
    ``aten._scaled_dot_product_efficient_attention_backward``) reads saved random-number state
    in any overload; False for a name that resolves to no operator, or names none (a Triton
    kernel's, ``triton_poi_fused_add_0``)."""
    import torch

    namespace, _, name = qualified_name.partition(".")
    if not name:  # a Triton kernel or an extern kernel: not an operator
        return False
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        overloads = [getattr(packet, o) for o in packet.overloads()]
    except (AttributeError, RuntimeError):
        return False
    return any(schema_reads_random_state(o._schema) for o in overloads)
