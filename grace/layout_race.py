"""Inductor's autotuner kept from racy kernel configurations (grace.config.race_free_kernels).

Design note
-----------
Triton 3.6 compiles some of Inductor's in-place kernels so that a thread can load what another
has already stored (:mod:`grace.ttgir_race` says how, and finds it in a kernel's TTGIR): a
training step's bias gradient then comes out wrong in some runs, depending on the configuration
autotuning picks.

With ``grace.config.race_free_kernels`` Inductor's autotuner acts on it (``patches/pi/0003``):
:func:`note_compiled` runs as each configuration of a kernel compiles (in a compile worker or
not) and notes a racy one on the autotuner, which carries the note back from a worker;
:func:`keep_race_free` then leaves the noted configurations out of the compiled set, where one
without the race remains, before anything is benchmarked or launched.

Where every configuration has it, the same configurations are compiled again with the race
ordered away (:func:`grace.ttgir_race.order_racy_loads`, under the kernel's name with
:data:`grace.ttgir_race.ORDER_MARK`), and kept where their TTGIR reads race-free. Failing that,
:func:`race_free_variant` derives configurations that Triton compiles without it. Triton
rematerializes a load in a second layout only where the load is cheap: its tensor of pointers
has fewer elements than the CTA has threads (``num_warps`` x 32), so that some threads would
hold copies anyway. A configuration whose tile has at least as many elements as threads keeps
one load: the variant halves ``num_warps`` until the tile covers the threads, and at one warp
doubles the reduction block (or ``XBLOCK``) until it does. Inductor's kernels mask every block
size and compute their grid from the configuration, so any such variant computes the same
values, up to the order of a reduction's additions. A variant is compiled only where it puts no
more elements on a thread than the kernel's own configurations do, or one (a tile that just
covers its threads): Triton's compile time grows with a thread's elements. A persistent
reduction's source fixes its reduction block (``R0_BLOCK: tl.constexpr = 1024``), and its
configurations name ``XBLOCK`` alone: grown to 32 at one warp, that is 32 rows of 1,024 on one
warp, which Triton takes minutes to compile. The variant is compiled and read like the others
and kept only if found race-free; otherwise every configuration stays, as in stock, and a
warning says so.

What :func:`keep_race_free` chose is noted on the autotuner too, and :func:`log_choices` logs it
in the process that launches the kernel: Inductor discards its compile workers' output, where
most kernels are compiled, so a record logged there would be lost.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grace.log import get_logger
from grace.triton_hooks import renamed_source
from grace.ttgir_race import ORDER_MARK, find_layout_races, install_ordering

log = get_logger("grace.layout_race")

def note_compiled(autotuner: Any, config: Any, binary: Any) -> None:
    """After ``triton.compile`` of one configuration: notes it on the autotuner if its TTGIR has
    the race (``autotuner.grace_layout_races``: the configuration's hashable form -> findings)."""
    from torch._inductor.runtime.triton_heuristics import triton_config_to_hashable

    ttgir = binary.asm.get("ttgir") if hasattr(binary, "asm") else None
    if not isinstance(ttgir, str):
        return  # nothing to read: the configuration stays, as in stock
    races = find_layout_races(ttgir)
    if races:
        noted = autotuner.__dict__.setdefault("grace_layout_races", {})
        noted[triton_config_to_hashable(config)] = tuple(race.describe() for race in races)


_THREADS_PER_WARP = 32
# the block to grow at one warp, in order of preference: a reduction block first (a larger one
# only adds masked iterations), then the pointwise ones
_GROWABLE_BLOCKS = ("R0_BLOCK", "R1_BLOCK", "RBLOCK", "XBLOCK", "YBLOCK")


def _blocks(config: Any) -> dict[str, int]:
    """A Triton ``Config``'s block sizes (``XBLOCK``, ``R0_BLOCK``, ...)."""
    return {k: v for k, v in config.kwargs.items() if k.endswith("BLOCK") and isinstance(v, int)}


def race_free_variant(config: Any) -> Any | None:
    """A copy of a Triton ``Config`` whose tile has at least as many elements as its CTA has
    threads (see the design note), or None where it has already or has no block sizes."""
    blocks = _blocks(config)
    if not blocks:
        return None
    elements, warps = math.prod(blocks.values()), config.num_warps
    if elements >= warps * _THREADS_PER_WARP:
        return None
    while warps > 1 and elements < warps * _THREADS_PER_WARP:
        warps //= 2
    kwargs = dict(config.kwargs)
    grow = next((k for k in _GROWABLE_BLOCKS if k in blocks), next(iter(blocks)))
    while elements < warps * _THREADS_PER_WARP:
        kwargs[grow] *= 2
        elements *= 2
    variant = copy.copy(config)
    variant.kwargs, variant.num_warps = kwargs, warps
    return variant


def fixed_blocks(size_hints: Any, configs: Sequence[Any]) -> dict[str, int] | None:
    """The reduction blocks a kernel's source fixes rather than its configurations (a persistent
    reduction's, the power of two its size hint is), or None where the hints are not known."""
    if not isinstance(size_hints, Mapping):
        return None
    fixed = {}
    for prefix, numel in size_hints.items():
        name = f"{prefix.upper()}BLOCK"
        if prefix.startswith("r") and not any(name in config.kwargs for config in configs):
            fixed[name] = int(numel)
    return fixed


def elements_per_thread(config: Any, fixed: Mapping[str, int]) -> float:
    """How many elements of its tile a configuration puts on each of its CTA's threads."""
    return math.prod(_blocks(config).values()) * math.prod(fixed.values()) / (config.num_warps * _THREADS_PER_WARP)


def keep_race_free(autotuner: Any, results: Sequence[Any]) -> list[Any]:
    """The compiled configurations to autotune among: those not noted racy, where any remain;
    else the same configurations compiled with the race ordered away (:func:`_compiled_ordered`);
    else race-free variants of them (:func:`race_free_variant`), compiled here; else all."""
    noted = getattr(autotuner, "grace_layout_races", None)
    if not noted:
        return list(results)
    from torch._inductor.runtime.triton_heuristics import triton_config_to_hashable

    name = autotuner.inductor_meta.get("kernel_name", "a Triton kernel")
    free, left_out = [], []
    for result in results:
        if triton_config_to_hashable(result.config) in noted:
            left_out.append(result.config)
        else:
            free.append(result)
    if not free:
        free, how = _compiled_ordered(autotuner, left_out), "the same configurations ordered by a barrier"
        if not free:
            free, how = _compiled_variants(autotuner, left_out), "variants that do not"
        if not free:
            _note_choice(autotuner, logging.WARNING,
                         f"{name}: every configuration loads a pointer it stores in another layout, and neither "
                         f"an ordered copy nor a variant without it compiled; all kept, as stock "
                         f"({next(iter(noted.values()))[0]})")
            return list(results)
        _note_choice(autotuner, logging.INFO,
                     f"{name}: every configuration loads a pointer it stores in another layout; autotuning "
                     f"among {how} instead: {'; '.join(str(r.config) for r in free)}")
        return free
    if left_out:
        _note_choice(autotuner, logging.INFO,
                     f"{name}: {len(left_out)} of {len(results)} configurations left out of autotuning, each "
                     f"loading a pointer it stores in another layout: {'; '.join(str(c) for c in left_out)}")
    return free


def _note_choice(autotuner: Any, level: int, message: str) -> None:
    """Keep a record for :func:`log_choices` on the autotuner, which a compile worker pickles back."""
    autotuner.__dict__.setdefault("grace_layout_choices", []).append((level, message))


def log_choices(autotuner: Any) -> None:
    """Log, once, what :func:`keep_race_free` chose for this kernel, wherever it was compiled;
    called where Inductor readies a compiled kernel to launch (``patches/pi/0003``)."""
    for level, message in autotuner.__dict__.pop("grace_layout_choices", ()):
        log.log(level, "%s", message)


def _compiled_ordered(autotuner: Any, racy: Sequence[Any]) -> list[Any]:
    """``racy`` compiled again as the kernel under :data:`ORDER_MARK` (:func:`install_ordering`),
    by a copy of the autotuner with that kernel, each kept where its TTGIR is read race-free."""
    name = autotuner.inductor_meta.get("kernel_name")
    try:
        ordered = object.__new__(type(autotuner))  # not copy.copy: the autotuner's pickling state drops its lock
        ordered.__dict__.update(autotuner.__dict__)
        ordered.fn = _ordered_kernel(autotuner.fn)
    except Exception as e:  # an optional rewrite that cannot be built must not fail the kernel
        _note_choice(autotuner, logging.INFO, f"{name}: no ordered copy ({type(e).__name__}: {e})")
        return []
    ordered.grace_layout_races = {}  # its own notes, from its own binaries
    install_ordering()
    from torch._inductor.runtime.triton_heuristics import triton_config_to_hashable

    compiled = []
    for config in racy:
        try:
            result = ordered._precompile_config(config)
        except Exception as e:
            _note_choice(autotuner, logging.INFO, f"{name}: {config} ordered did not compile ({type(e).__name__}: {e})")
            continue
        if triton_config_to_hashable(config) not in ordered.grace_layout_races:
            compiled.append(result)
    return compiled


def _ordered_kernel(kernel: Any) -> Any:
    """The Triton ``JITFunction`` ``kernel`` renamed under :data:`ORDER_MARK`, from a copy of the
    module that defines it, written beside it (Triton reads a kernel's source from its file)."""
    import importlib.util
    import os

    base = kernel.__name__
    path = Path(kernel.fn.__code__.co_filename)
    marked = base + ORDER_MARK
    target = path.with_name(f"{path.stem}{ORDER_MARK}.py")
    if not target.exists():
        source = renamed_source(path.read_text(), base, marked)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source)
        os.replace(partial, target)  # whole, for another compile worker reading it at once
    spec = importlib.util.spec_from_file_location(target.stem, target)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from triton.runtime.jit import JITFunction

    found = getattr(module, marked)
    return found if isinstance(found, JITFunction) else found.fn  # Inductor's modules make it an autotuner


def _compiled_variants(autotuner: Any, racy: Sequence[Any]) -> list[Any]:
    """Each distinct race-free variant of ``racy``, compiled by the autotuner (which notes it, as
    any configuration, if it still races) and kept where it compiled and was not noted."""
    from torch._inductor.runtime.triton_heuristics import triton_config_to_hashable

    name = autotuner.inductor_meta.get("kernel_name")
    fixed = fixed_blocks(getattr(autotuner, "size_hints", None), racy)
    if fixed is None:
        _note_choice(autotuner, logging.INFO, f"{name}: no size hints to bound a variant's cost by; none compiled")
        return []
    bound = max(1.0, max(elements_per_thread(config, fixed) for config in racy))
    noted = autotuner.grace_layout_races
    seen: set[Any] = set()
    compiled = []
    for config in racy:
        variant = race_free_variant(config)
        if variant is None or triton_config_to_hashable(variant) in seen:
            continue
        seen.add(triton_config_to_hashable(variant))
        cost = elements_per_thread(variant, fixed)
        if cost > bound:
            _note_choice(autotuner, logging.INFO, f"{name}: variant {variant} not compiled: {cost:g} elements a "
                                                  f"thread, more than the kernel's configurations put on one ({bound:g})")
            continue
        try:
            result = autotuner._precompile_config(variant)
        except Exception as e:  # an optional variant that fails to compile must not fail the kernel
            _note_choice(autotuner, logging.INFO, f"{name}: variant {variant} did not compile "
                                                  f"({type(e).__name__}: {e})")
            continue
        if triton_config_to_hashable(variant) not in noted:
            compiled.append(result)
    return compiled


