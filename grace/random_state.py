"""ATen operators that read random-number state a captured forward saved for its backward.

Flash, memory-efficient and cuDNN attention with dropout save the philox seed and offset (flash's
``rng_state``) their forward drew from, and their backward regenerates the dropout mask from them.
Inside a CUDA graph capture the forward saves them as device tensors (the generator's graph-safe
state); outside one it returns them as host tensors. A backward run outside a capture takes
them for host values: handed the device tensors a captured forward saved, it reads device
memory from the host, which crashes the process. Such a backward runs eagerly only through
:func:`host_random_state`, which hands it host copies of the same values, as an eager forward
would have returned them. An operator's schema says whether it reads such state: an argument
named for the philox seed or offset, or the rng state.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def random_state_returns(schema: Any) -> tuple[int, ...]:
    """The indices of the returns of an operator with ``schema`` that are random-number state
    it saves for a backward (attention's ``philox_seed``, ``philox_offset``, ``rng_state``)."""
    return tuple(k for k, r in enumerate(schema.returns) if _is_state_argument(r.name))


def schema_reads_random_state(schema: Any) -> bool:
    """Whether an operator with ``schema`` (a ``torch._C.FunctionSchema``) takes saved
    random-number state as an argument."""
    return any(_is_state_argument(a.name) for a in schema.arguments)


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


def _is_state_argument(name: str) -> bool:
    return "philox" in name or "rng_state" in name


def with_state_on_host(func: Any, args: Sequence[Any], kwargs: dict[str, Any],
                       to_host: Callable[[Any], Any]) -> tuple[list[Any], dict[str, Any]]:
    """``func``'s arguments with each one that carries saved random-number state (by its
    schema's name) replaced by ``to_host`` of it; the others as given."""
    args, kwargs = list(args), dict(kwargs)
    for k, a in enumerate(func._schema.arguments):
        if not _is_state_argument(a.name):
            continue
        if not a.kwarg_only and k < len(args):
            args[k] = to_host(args[k])
        elif a.name in kwargs:
            kwargs[a.name] = to_host(kwargs[a.name])
    return args, kwargs


def _copy_to_host(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.cpu()
    return value


@contextlib.contextmanager
def host_random_state() -> Iterator[None]:
    """Within it, an operator that reads saved random-number state gets that state as host
    tensors, copies of the device tensors it is handed (the values a captured forward wrote),
    so that it can run outside a capture and regenerate the same dropout mask. Every other
    operator runs as it is called, and so does every operator while a stream captures: a
    captured backward reads the state through its device pointers."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def capturing() -> bool:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()

    class HostState(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if schema_reads_random_state(func._schema) and not capturing():
                args, kwargs = with_state_on_host(func, args, kwargs or {}, _copy_to_host)
            return func(*args, **(kwargs or {}))

    with HostState():
        yield
