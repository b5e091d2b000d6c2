"""Whether a function CUDA graph trees is given is Inductor's generated code.

SCG's profile and PI's capture-time check run a function more times than stock PyTorch does.
That is invisible for Inductor's generated code (its only effects are on the tensors it is
handed, which both run on copies or put back), but not for an arbitrary callable handed to
``cudagraphify`` directly: it may count its calls, print, or touch Python state. GraCE runs a
function more often than stock only where this says it is generated code; any other function
records exactly as stock.
"""

from __future__ import annotations

from typing import Any, Callable


def innermost(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function under wrappers that name it (``__wrapped__``, ``functools.partial``)."""
    for _ in range(8):
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if inner is None or not callable(inner):
            break
        fn = inner
    return fn


def is_inductor_generated(fn: Callable[..., Any]) -> bool:
    """True if ``fn`` (under its wrappers) is defined in a module Inductor generated and loaded:
    a graph's ``call``, a partition's ``partition_N``, or a runner's method of such a module."""
    import sys

    fn = innermost(fn)
    fn = getattr(fn, "__func__", fn)  # a bound method
    module_globals = getattr(fn, "__globals__", None)
    if module_globals is None:
        return False
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return False
    cache = codecache.PyCodeCache
    modules = list(cache.modules) + list(getattr(cache, "modules_no_attr", {}).values())
    return any(getattr(m, "__dict__", None) is module_globals for m in modules)
