"""The race in a compiled Triton kernel's TTGIR: finding it, and ordering it away with a barrier.

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

:func:`order_racy_loads` removes the race without changing the configuration: a CTA barrier
(``gpu.barrier``) before each store of the racy pointer, where each of its loads comes before each
of its stores in the module's text, makes every thread's loads happen before any thread's store.
:func:`install_ordering` applies it inside Triton's compiler (a pass on its stage hook, after
``make_ttgir``) to kernels whose name carries :data:`ORDER_MARK`, so that an ordered binary never
shares a cache entry with a plain one; :func:`find_layout_races` does not report a pointer so
ordered. ``scripts/probes/inplace_reduction_race.py --order`` launches the ordered kernel on the
GPU and counts wrong results per configuration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from grace.log import get_logger

log = get_logger("grace.ttgir_race")

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
        accessed: dict[str, _Accesses] = {}
        for j, line in enumerate(body):
            access = _ACCESS.match(line)
            if access is not None:
                arg = root.get(access["ptr"])
                layout = _pointer_layout(access["rest"])
                if arg is not None and layout is not None:
                    accessed.setdefault(arg, _Accesses()).add(access["op"] == "tt.load", layout, start + j)
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
        for arg, where in sorted(accessed.items()):
            unshared = where.load_layouts - where.store_layouts
            if where.stores and unshared:
                race = LayoutRace(kernel, arg.lstrip("%"), tuple(sorted(where.store_layouts)), tuple(sorted(unshared)))
                ordered = where.orderable() and all(module_lines[i - 1].strip().startswith(_BARRIER)
                                                    for i in where.stores)
                found.append((None if ordered else race, where))
    return found


@dataclass
class _Accesses:
    """One pointer argument's loads and stores: their layouts, and their lines in the module."""

    load_layouts: set[str] = field(default_factory=set)
    store_layouts: set[str] = field(default_factory=set)
    loads: list[int] = field(default_factory=list)
    stores: list[int] = field(default_factory=list)

    def add(self, load: bool, layout: str, line: int) -> None:
        (self.load_layouts if load else self.store_layouts).add(layout)
        (self.loads if load else self.stores).append(line)

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
