"""Whether a compiled function's Triton kernels were armed to autotune again since they were
tuned, so that the tree warms it up again rather than recording it.

CUDA graph trees record a function only after a warm-up run, in which each of Inductor's
Triton kernels (a ``CachingAutotuner``) benchmarks its configurations once and keeps the
fastest. A kernel can be armed again after that: with compilation in the process
(``compile_threads=1``), graphs whose kernel source is identical share one autotuner from
Inductor's module cache, and a later compile's ``precompile`` rebuilds a launcher for every
configuration (``_make_launchers``). If no eager launch tunes it again before the tree records
a function that was warmed up earlier, the autotuner benchmarks inside the capture, where its
``synchronize`` is not allowed: the capture fails ("operation not permitted when stream is
capturing"), under stock and GraCE alike.

:func:`warm_up_first` is asked once per recording. Where a kernel the function names was
armed again, the tree runs the function as a warm-up instead, the transition stock makes for
every function on a path that is warming up, and records it at a later call. A function is
warmed up again for this once; if the same kernels are still armed at its next recording (its
warm-up did not launch them), it is recorded as stock records it, and the log says so. Tuning
by coordinate descent (off by default) leaves no such mark and is not covered.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# Set on a generated function that was warmed up again for its armed kernels: their names.
_REWARMED_ATTR = "_grace_rewarmed_for"


def kernels_to_tune(fn: Callable[..., Any]) -> list[str]:
    """The global names, in ``fn``'s code and the code nested in it, of Inductor autotuners
    armed again: tuned once (``autotune_time_taken_ns``) and holding several launchers, so that
    their next launch benchmarks. ``fn`` is looked at under its wrappers
    (:func:`grace.generated.innermost`). Sorted; empty for a callable that is not a Python
    function.

    A kernel never tuned is not named: one the last warm-up did not launch (a branch not taken)
    would tune at its first launch under stock too, and warming up again would not tune it."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    from grace.generated import innermost

    fn = innermost(fn)
    fn = getattr(fn, "__func__", fn)  # a bound method
    code = getattr(fn, "__code__", None)
    namespace = getattr(fn, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
        return []
    return sorted(name for name in _global_names(code)
                  if isinstance(kernel := namespace.get(name), CachingAutotuner)
                  and kernel.autotune_time_taken_ns > 0 and len(kernel.launchers) != 1)


def warm_up_first(fn: Callable[..., Any], label: str) -> bool:
    """Whether the tree should run ``fn`` (named ``label`` in the log) as a warm-up instead of
    recording it now. Capture time only: once per recording, never per replay."""
    armed = kernels_to_tune(fn)
    if not armed:
        _forget(fn)
        return False
    if getattr(fn, _REWARMED_ATTR, None) == armed:
        log.warning("GraCE: %s is recorded with kernels %s still armed after a warm-up; their "
                    "autotuning may fail inside the capture, as under stock", label, ", ".join(armed))
        return False
    try:
        setattr(fn, _REWARMED_ATTR, armed)
    except (AttributeError, TypeError):
        return False  # nowhere to note it, so nothing bounds the warm-ups: record as stock
    log.info("GraCE: %s warmed up again before its recording: kernels %s were armed to autotune "
             "again, which cannot run inside the capture", label, ", ".join(armed))
    return True


def _forget(fn: Callable[..., Any]) -> None:
    if getattr(fn, _REWARMED_ATTR, None) is not None:
        delattr(fn, _REWARMED_ATTR)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
