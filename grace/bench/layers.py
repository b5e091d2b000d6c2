"""Where the host time of one compiled call goes, layer by layer.

A steady-state call of ``torch.compile(model, mode="reduce-overhead")`` passes through Dynamo's
frame and guards, AOTAutograd's runtime wrappers, Inductor's output code (and its per-partition
CUDA graph wrappers), the CUDA graph tree's manager, the node's replay (its input copies and
output reconstruction, or PI's guard, pointer fill and remaining copies) and the launch. To see
what each costs, :func:`timing` wraps the entry of each layer with a clock that charges the time
between two boundaries to the innermost layer running, so every microsecond of the call is
counted once, in the layer that spent it (*exclusive* time):

========  ===============================================================================
layer     entry wrapped, and what its exclusive time holds
========  ===============================================================================
caller    the timed step itself: Dynamo's frame evaluation and guards; for training, the
          autograd engine and loss between the compiled forward and backward
aot       each function Dynamo compiled (``__compiled_fn_*`` in the globals of the frames it
          compiled): AOTAutograd's runtime wrappers
inductor  ``CompiledFxGraph.__call__``: the generated output code, the per-partition
          ``cudagraphify`` wrappers, extern kernels (cuBLAS, cuDNN) launched by that code
tree      ``CUDAGraphTreeManager._run`` and, with lean replay on, its one-pass dispatch
          (``LeanDispatch.replay``): the tree's bookkeeping and checks (and the code of
          functions SCG keeps out of graphs)
guards    GraCE's per-call work for the tree's guarantees: the stale-output guard
          (``grace.stale_outputs.StaleOutputGuard``) and the gradient copies
          (``grace.grad_copies.AdoptedGrads``), each entry the tree's patches call
node      ``CUDAGraphNode.run``: the input copies and the output tensors handed back
pi        PI's replay (``grace.pi.replay``): its guard, pointer fill and remaining copies
launch    ``CUDAGraph.replay``, or a Triton kernel's launch (``CachingAutotuner.run``) where
          no graph replays it
========  ===============================================================================

Every boundary costs two clock reads and a Python frame, about half a microsecond, charged to
the layers either side; the timed samples of the benchmark run without these wrappers, which
are put in place for the measured iteration and taken away after it, in a phase of their own
after the last timed round (the runner's ``_measure_layers``): no timed sample follows a call that
ran with them. The first calls after they go in are cold (on the development machine's CPU,
about four times a steady call: ``scripts/probes/layers_cpu_profile.py``), so a measurement
runs :data:`WARM_CALLS` unmeasured calls with the wrappers in place first and
:meth:`LayerClock.reset` before the one it keeps.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

LAYERS: tuple[str, ...] = ("caller", "aot", "inductor", "tree", "guards", "node", "pi", "launch")
WARM_CALLS = 3  # unmeasured calls with the wrappers in place before the measured one: the first are cold

# (layer, module, class, method): the entries wrapped, in addition to Dynamo's compiled functions.
# The tree's is ``_run``: ``run`` is bound into each function's ``functools.partial`` when the
# function is added, so a wrapper on the class would never be called.
METHODS: tuple[tuple[str, str, str, str], ...] = (
    ("inductor", "torch._inductor.output_code", "CompiledFxGraph", "__call__"),
    ("tree", "torch._inductor.cudagraph_trees", "CUDAGraphTreeManager", "_run"),
    ("tree", "grace.lean.dispatch", "LeanDispatch", "replay"),
    *(("guards", "grace.stale_outputs", "StaleOutputGuard", m)
      for m in ("replayed", "caches_dropped", "path_ends", "warmup_path_ends", "call_ends")),
    *(("guards", "grace.grad_copies", "AdoptedGrads", m) for m in ("before_call", "noted")),
    ("node", "torch._inductor.cudagraph_trees", "CUDAGraphNode", "run"),
    ("pi", "grace.pi.replay", "PIReplay", "replay"),
    ("pi", "grace.pi.replay", "CopyingReplay", "replay"),
    ("launch", "torch.cuda", "CUDAGraph", "replay"),
    ("launch", "torch._inductor.runtime.triton_heuristics", "CachingAutotuner", "run"),
)
COMPILED_FN_PREFIX = "__compiled_fn"


class LayerClock:
    """Exclusive nanoseconds per layer: entering a layer stops its parent's clock."""

    def __init__(self) -> None:
        self.exclusive_ns: dict[str, int] = {}
        self._stack: list[str] = []
        self._mark = 0

    def enter(self, layer: str) -> None:
        now = time.perf_counter_ns()
        if self._stack:
            parent = self._stack[-1]
            self.exclusive_ns[parent] = self.exclusive_ns.get(parent, 0) + now - self._mark
        self._stack.append(layer)
        self._mark = now

    def leave(self) -> None:
        now = time.perf_counter_ns()
        layer = self._stack.pop()
        self.exclusive_ns[layer] = self.exclusive_ns.get(layer, 0) + now - self._mark
        self._mark = now

    def timed(self, layer: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with its calls charged to ``layer``."""
        clock = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            clock.enter(layer)
            try:
                return fn(*args, **kwargs)
            finally:
                clock.leave()
        return wrapper

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` as the outermost layer, ``caller`` (without building a wrapper, which
        would cost the timed call microseconds no layer counts)."""
        self.enter("caller")
        try:
            return fn(*args)
        finally:
            self.leave()

    def reset(self) -> None:
        """Forget what was counted (between layers only), to measure a later call alone."""
        if self._stack:
            raise RuntimeError(f"layers still open: {self._stack}")
        self.exclusive_ns.clear()

    def exclusive_us(self) -> dict[str, float]:
        """Microseconds per layer, every layer of :data:`LAYERS` present (0 where not entered)."""
        if self._stack:
            raise RuntimeError(f"layers still open: {self._stack}")
        return {layer: self.exclusive_ns.get(layer, 0) / 1e3 for layer in LAYERS}


def compiled_functions() -> list[tuple[dict[str, Any], str]]:
    """(globals, name) of every function Dynamo has compiled so far in this process: Dynamo
    stores each in the globals of the frame it compiled, where the rewritten bytecode loads it
    on every call."""
    spaces = {id(ns): ns for ns in (getattr(m, "__dict__", None) for m in list(sys.modules.values()))
              if isinstance(ns, dict)}
    return [(ns, name) for ns in spaces.values() for name in list(ns) if name.startswith(COMPILED_FN_PREFIX)]


@contextlib.contextmanager
def timing(extra_globals: tuple[dict[str, Any], ...] = ()) -> Iterator[LayerClock]:
    """Wrap every layer's entry with one clock while the block runs; put them back after.

    ``extra_globals`` are namespaces outside any module (a function defined in ``__main__`` or
    a test) that may hold Dynamo's compiled functions too.
    """
    clock = LayerClock()
    restore: list[Callable[[], None]] = []
    try:
        for layer, module_name, cls_name, attr in METHODS:
            try:
                owner = getattr(importlib.import_module(module_name), cls_name)
                original = owner.__dict__[attr]
            except (ImportError, AttributeError, KeyError):
                continue  # a layer this process does not have (no GraCE PI, no Triton)
            setattr(owner, attr, clock.timed(layer, original))
            restore.append(functools.partial(setattr, owner, attr, original))
        found = compiled_functions()
        seen = {id(ns) for ns, _ in found}
        found += [(g, n) for g in extra_globals if id(g) not in seen for n in list(g) if n.startswith(COMPILED_FN_PREFIX)]
        for namespace, name in found:
            original = namespace[name]
            namespace[name] = clock.timed("aot", original)
            restore.append(functools.partial(namespace.__setitem__, name, original))
        yield clock
    finally:
        for undo in reversed(restore):
            undo()
