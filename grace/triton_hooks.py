"""GraCE's passes inside Triton's compiler, chained on Triton 3.6's one stage hook.

Triton 3.6 hands each compile's table of stages (``ttir``, ``ttgir``, ``llir``, ``ptx``,
``cubin``: name -> function) to ``knobs.runtime.add_stages_inspection_hook``, one function, which
may replace any stage with a wrapper. GraCE has more than one pass to put there (PI's PTX pass,
the race ordering's TTGIR pass), and a user or another library may have a hook of their own. So
each pass is added here under a name, as a link of a chain: a link calls the hook it found
first, then edits the stages. :func:`add` finds a name anywhere in the chain and adds it once;
:func:`remove` takes a name out wherever it sits and leaves the rest of the chain as it was.

A pass picks its kernels by a mark in their name (:func:`renamed_source` makes a marked copy of
a kernel's module): Triton's cache key hashes a kernel's source and name but not the hook, so
the mark keeps a rewritten binary from ever being served for the plain kernel, or the reverse.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# a pass: it gets the stage table (and the rest of the hook's arguments) and may replace stages
StagePass = Callable[[Any, dict, Any, Any, Any], None]


def _link(name: str, body: StagePass, previous: Any) -> Any:
    def hook(backend: Any, stages: dict, options: Any, language: Any, capability: Any) -> None:
        if previous is not None:
            previous(backend, stages, options, language, capability)
        body(backend, stages, options, language, capability)

    hook._grace_name = name  # type: ignore[attr-defined]
    hook._grace_body = body  # type: ignore[attr-defined]
    hook._grace_previous = previous  # type: ignore[attr-defined]
    return hook


def _chain() -> tuple[list[tuple[str, StagePass]], Any]:
    """GraCE's links from the first added to the last, and the hook below them (None or not ours)."""
    from triton import knobs

    links, hook = [], knobs.runtime.add_stages_inspection_hook
    while hook is not None and hasattr(hook, "_grace_name"):
        links.append((hook._grace_name, hook._grace_body))
        hook = hook._grace_previous
    return links[::-1], hook


def installed(name: str) -> bool:
    return any(n == name for n, _ in _chain()[0])


def add(name: str, body: StagePass) -> None:
    """Put pass ``body`` on Triton's stage hook under ``name``, once (idempotent)."""
    from triton import knobs

    if not installed(name):
        knobs.runtime.add_stages_inspection_hook = _link(name, body, knobs.runtime.add_stages_inspection_hook)


def wrap_stage(name: str, stage: str, wrapper: Callable[[Callable[[Any, dict], Any]], Callable[[Any, dict], Any]]) -> None:
    """:func:`add` a pass that replaces ``stage``'s function ``f(src, metadata)`` by ``wrapper(f)``."""

    def body(backend: Any, stages: dict, options: Any, language: Any, capability: Any) -> None:
        if stage in stages:
            stages[stage] = wrapper(stages[stage])

    add(name, body)


def remove(name: str) -> None:
    """Take the pass ``name`` out of the chain; the other links and the hook below them stay."""
    from triton import knobs

    links, hook = _chain()
    if all(other != name for other, _ in links):
        return
    for other, body in links:
        if other != name:
            hook = _link(other, body, hook)
    knobs.runtime.add_stages_inspection_hook = hook


def renamed_source(source: str, base: str, name: str) -> str:
    """A kernel module's source with kernel ``base`` renamed ``name`` everywhere: in its ``def``
    and in the metadata Inductor writes (``kernel_name``), so that it is another kernel to every
    cache and profiler."""
    if len(re.findall(rf"^def {re.escape(base)}\(", source, re.M)) != 1:
        raise ValueError(f"expected one 'def {base}(' in the kernel source")
    return re.sub(rf"(?<![\w]){re.escape(base)}(?![\w])", name, source)
