"""Kernels whose compiled form loads a pointer argument in one layout and stores it in another.

Design note
-----------
A Triton program's loads and stores run in program order: an in-place kernel (Inductor's
``in_out_ptr``) that loads an element, computes, and stores it back is right however its threads
are laid out, as long as the thread that loads an element is the thread that stores it. Triton's
layout pass may break that: to avoid a layout conversion through shared memory it can load a
tensor again in a second layout (rematerialization). For a pointer the kernel also stores, that
second load is made by other threads than the store, and nothing orders them: a thread may read
the value another thread has already stored. Inductor's in-place reductions then sum values they
have already transformed; the wrong results come and go with thread timing and with the
configuration autotuning picks. Intel's Triton fork forbids such rematerialization
(intel/intel-xpu-backend-for-triton#7962); NVIDIA's backend in Triton 3.6 does not.

:func:`find_layout_races` reads a kernel's TTGIR (the text of the module after Triton's
``make_ttgir`` stage) and reports each pointer argument that is stored through a tensor of
pointers in one layout and loaded through one in another: the shape of that race. It follows a
pointer from the argument through the ops that derive pointers (``tt.splat``, ``tt.addptr``,
``tt.broadcast``, ``tt.expand_dims``, ``tt.reshape``, ``tt.trans``, ``ttg.convert_layout``) and
loop-carried ``scf.for`` arguments. Loads and stores in one layout are not reported (one thread
per element), nor are scalar loads. It reads text only, so it runs on the CPU on a kernel
compiled for any target.

With ``grace.config.race_free_kernels`` Inductor's autotuner acts on it (``patches/pi/0003``):
:func:`note_compiled` runs as each configuration of a kernel compiles (in a compile worker or
not) and notes a racy one on the autotuner, which carries the note back from a worker;
:func:`keep_race_free` then leaves the noted configurations out of the compiled set, where one
without the race remains, before anything is benchmarked or launched.

Where every configuration has it, the same configurations are compiled again with the race
ordered away (below), and kept where their TTGIR reads race-free. Failing that,
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

:func:`order_racy_loads` removes the race without changing the configuration: a CTA barrier
(``gpu.barrier``) before each store of the racy pointer, where each of its loads comes before each
of its stores in the module's text, makes every thread's loads happen before any thread's store.
:func:`install_ordering` applies it inside Triton's compiler (a pass on its stage hook, after
``make_ttgir``) to kernels whose name carries :data:`ORDER_MARK`, so that an ordered binary never
shares a cache entry with a plain one; :func:`find_layout_races` does not report a pointer so
ordered. ``scripts/probes/inplace_reduction_race.py --order`` launches the ordered kernel on the
GPU and counts wrong results per configuration.

What :func:`keep_race_free` chose is noted on the autotuner too, and :func:`log_choices` logs it
in the process that launches the kernel: Inductor discards its compile workers' output, where
most kernels are compiled, so a record logged there would be lost.
"""

from __future__ import annotations

import copy
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grace.log import get_logger

log = get_logger("grace.layout_race")

# ops whose result points into the memory of their first operand
_DERIVING_OPS = frozenset({"tt.splat", "tt.addptr", "tt.broadcast", "tt.expand_dims", "tt.reshape",
                           "tt.trans", "ttg.convert_layout"})
_FUNC = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@(?P<name>[\w$.]+)\((?P<args>.*?)\)\s*(?:->|attributes|\{)")
_POINTER_ARG = re.compile(r"(%[\w$.]+)\s*:\s*!tt\.ptr<")
_DEF = re.compile(r"^\s*(?P<results>%[\w$.#]+(?::\d+)?)\s*=\s*(?P<op>[\w.]+)\s+(?P<rest>.*)$")
_ACCESS = re.compile(r"^\s*(?:(?P<result>%[\w$.#]+)\s*=\s*)?(?P<op>tt\.load|tt\.store)\s+(?P<ptr>%[\w$.#]+)(?P<rest>.*)$")
_ITER_ARG = re.compile(r"(%[\w$.#]+)\s*=\s*(%[\w$.#]+)")
_OPERAND = re.compile(r"%[\w$.#]+")


@dataclass(frozen=True)
class LayoutRace:
    """A pointer argument stored in some layouts and loaded in others."""

    kernel: str
    argument: str  # as the TTGIR names it, without the %
    store_layouts: tuple[str, ...]
    load_layouts: tuple[str, ...]  # the layouts of its loads that no store of it shares

    def describe(self) -> str:
        return (f"{self.kernel}: {self.argument} is stored in {', '.join(self.store_layouts)} and loaded "
                f"in {', '.join(self.load_layouts)}: a thread may load what another has stored")


def find_layout_races(ttgir: str) -> list[LayoutRace]:
    """Every pointer argument of the module's functions with a load in a layout none of its
    stores has, where it is stored through a tensor of pointers at all."""
    return [race for race, _ in _races(ttgir) if race is not None]


def _races(ttgir: str) -> list[tuple[LayoutRace | None, _Accesses]]:
    """Each racy pointer argument's race, with where it is loaded and stored; the race is None
    where a barrier already orders every load of it before every store (:func:`order_racy_loads`)."""
    found: list[tuple[LayoutRace | None, _Accesses]] = []
    module_lines = ttgir.splitlines()
    for kernel, args, body, start in _functions(ttgir):
        root: dict[str, str] = {a: a for a in args}  # SSA value -> the pointer argument it derives from
        loads: dict[str, set[str]] = {}
        stores: dict[str, set[str]] = {}
        where: dict[str, _Accesses] = {}
        for j, line in enumerate(body):
            access = _ACCESS.match(line)
            if access is not None:
                arg = root.get(access["ptr"])
                layout = _pointer_layout(access["rest"])
                if arg is not None and layout is not None:
                    (loads if access["op"] == "tt.load" else stores).setdefault(arg, set()).add(layout)
                    accesses = where.setdefault(arg, _Accesses())
                    (accesses.loads if access["op"] == "tt.load" else accesses.stores).append(start + j)
                continue
            definition = _DEF.match(line)
            if definition is None:
                continue
            op, rest = definition["op"], definition["rest"]
            if op == "scf.for":  # loop-carried values start as their initial values
                carried = re.search(r"iter_args\((.*?)\)\s*->", rest)
                for inner, init in _ITER_ARG.findall(carried[1] if carried else ""):
                    if init in root:
                        root[inner] = root[init]
                continue
            if op in _DERIVING_OPS:
                first = _OPERAND.search(rest)
                if first is not None and first[0] in root:
                    root[definition["results"].split(":")[0]] = root[first[0]]
        for arg in sorted(stores):
            unshared = loads.get(arg, set()) - stores[arg]
            if unshared:
                race = LayoutRace(kernel, arg.lstrip("%"), tuple(sorted(stores[arg])), tuple(sorted(unshared)))
                ordered = where[arg].orderable() and all(
                    module_lines[i - 1].strip().startswith(_BARRIER) for i in where[arg].stores)
                found.append((None if ordered else race, where[arg]))
    return found


@dataclass
class _Accesses:
    """The module's line numbers of one pointer argument's loads and stores."""

    loads: list[int] = field(default_factory=list)
    stores: list[int] = field(default_factory=list)

    def orderable(self) -> bool:
        """Whether each load comes before each store in the module's text: then a barrier just
        before each store makes every thread's loads happen before any thread's store."""
        return not self.loads or max(self.loads) < min(self.stores)


_BARRIER = "gpu.barrier"


def order_racy_loads(ttgir: str) -> str | None:
    """The module with a CTA barrier (``gpu.barrier``, ``bar.sync 0`` in PTX) before each store
    of a pointer that has the race, or None where there is no race or a barrier cannot order it.

    Triton's control flow is the program's, the same for all of a CTA's threads, so a barrier
    in any region is reached by all of them. It orders the race away where each load of the
    pointer comes before each of its stores in the text: in one pass over straight-line code,
    or in one iteration of a loop whose iterations load and store their own elements, as
    Inductor's in-place kernels do. A load after a store of the same pointer (a value read
    back) is left alone, and so is a warp-specialized kernel, whose warps do not all reach a
    barrier."""
    if "ttg.warp_specialize" in ttgir:
        return None
    races = [(race, where) for race, where in _races(ttgir) if race is not None]
    if not races or not all(where.orderable() for _, where in races):
        return None
    lines = ttgir.splitlines(keepends=True)
    before = sorted({i for _, where in races for i in where.stores}, reverse=True)
    for i in before:
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i, f"{indent}{_BARRIER}\n")
    return "".join(lines)


def _functions(ttgir: str) -> list[tuple[str, list[str], list[str], int]]:
    """(name, pointer arguments, body lines, the body's first line in the module) of each
    ``tt.func`` in the module."""
    lines = ttgir.splitlines()
    found = []
    for i, line in enumerate(lines):
        head = _FUNC.search(line)
        if head is None:
            continue
        body, depth = [], line.count("{") - line.count("}")
        for inner in lines[i + 1:]:
            if depth <= 0:
                break
            body.append(inner)
            depth += inner.count("{") - inner.count("}")
        found.append((head["name"], _POINTER_ARG.findall(head["args"]), body, i + 1))
    return found


def _pointer_layout(rest: str) -> str | None:
    """The layout of the tensor of pointers an access goes through (its type after the last
    ``:``), or None for a scalar pointer."""
    typed = rest.rsplit(" : ", 1)
    if len(typed) != 2:
        return None
    kind = re.sub(r"\s+loc\(.*$", "", typed[1]).strip()
    m = re.match(r"tensor<[^!]*!tt\.ptr<[^>]*>\s*,\s*(?P<layout>.+)>$", kind)
    return m["layout"].strip() if m else None


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


def race_free_variant(config: Any) -> Any | None:
    """A copy of a Triton ``Config`` whose tile has at least as many elements as its CTA has
    threads (see the design note), or None where it has already or has no block sizes."""
    blocks = {k: v for k, v in config.kwargs.items() if k.endswith("BLOCK") and isinstance(v, int)}
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
    blocks = [v for k, v in config.kwargs.items() if k.endswith("BLOCK") and isinstance(v, int)]
    return math.prod(blocks) * math.prod(fixed.values()) / (config.num_warps * _THREADS_PER_WARP)


def keep_race_free(autotuner: Any, results: Sequence[Any]) -> list[Any]:
    """The compiled configurations to autotune among: those not noted racy, where any remain;
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
                         f"{name}: every configuration loads a pointer it stores in another layout, and no "
                         f"variant without it compiled; all kept, as stock ({next(iter(noted.values()))[0]})")
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
        source = re.sub(rf"(?<![\w]){re.escape(base)}(?![\w])", marked, path.read_text())
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


# kernels whose name carries this are compiled with their racy loads ordered (install_ordering)
ORDER_MARK = "__grace_ordered"


def install_ordering() -> None:
    """Compile every kernel whose name carries :data:`ORDER_MARK` with :func:`order_racy_loads`
    applied after Triton's ``make_ttgir`` (a pass on Triton's stage hook, :mod:`grace.triton_hooks`;
    idempotent). The mark keeps such binaries apart from plain ones in Triton's cache, whose key
    hashes the kernel's source and name but not the stage hook."""
    from grace import triton_hooks

    triton_hooks.wrap_stage("race_order", "ttgir", _ordering)


def _ordering(make_ttgir: Any) -> Any:
    def make_ttgir_ordered(src: Any, metadata: dict) -> Any:
        module = make_ttgir(src, metadata)
        name = module.get_entry_func_name()
        if ORDER_MARK not in name:
            return module
        ordered = order_racy_loads(str(module))
        if ordered is None:
            return module  # nothing to order, or nothing a barrier orders: read like any binary
        log.debug("%s: racy loads ordered before their stores by a barrier", name)
        return _parse_ttgir(ordered, module.context)

    return make_ttgir_ordered


def _parse_ttgir(text: str, context: Any) -> Any:
    """The module ``text`` reads as, in ``context`` (Triton parses IR from a file only)."""
    import os
    import tempfile

    from triton._C.libtriton import ir

    fd, path = tempfile.mkstemp(suffix=".ttgir")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        module = ir.parse_mlir_module(path, context)
        module.context = context  # as Triton's own IR sources set it, for the later stages' passes
        return module
    finally:
        os.unlink(path)
