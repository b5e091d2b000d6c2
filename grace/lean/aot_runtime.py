"""AOTAutograd's runtime wrappers without the work their metadata rules out.

Every call of a compiled function passes through AOTAutograd's runtime wrappers before Inductor's
code runs. For an inference graph whose inputs are not mutated and whose outputs alias no input
(nearly every ``torch.no_grad()`` call), most of what those wrappers do on each call has no
effect: ``runtime_wrapper`` builds a dict of the inputs its epilogue needs (none), enters a context that is a ``nullcontext``
after the first call, calls the graph through ``call_func_at_runtime_with_args`` (another
``nullcontext`` and a ``getattr``), then tests five metadata fields whose answer was fixed at
compile time (where outputs are marked dynamic, which outputs is fixed too).
``FunctionalizedRngRuntimeWrapper and ``EffectTokensWrapper`` each add a frame
that only passes the call on when no random-number state is functionalized and the graph has
no effect tokens.

Invariants (each decision is made once, when AOTAutograd builds the wrappers, from
``ViewAndMutationMeta`` fields it sets when it makes the metadata and never changes; stock's own
``runtime_wrapper`` already fixes its epilogue's inputs from them at that moment):

1. Nothing here acts unless ``grace.config.lean_replay`` and ``grace.config.lean_aot`` are on
   when the wrapper is built.
2. A wrapper is left out only where stock's wrapper is the identity on that metadata
   (:func:`rng_wrapper_is_identity`, :func:`effect_tokens_wrapper_is_identity`).
3. :class:`LeanInferenceWrapper` stands in for ``runtime_wrapper`` only where every branch it
   skips is dead on that metadata (:func:`plain_inference`), and it keeps the rest: the
   profiler's prologue region, grad mode off around the graph, autocast disabled where stock
   disables it, the version counters of inputs the graph mutates, the boxed call that lets the
   graph free its inputs, the output count check, and the dynamic dimensions marked on the
   outputs Dynamo will see again.
4. Until stock's first-invocation analysis of custom ops has run
   (``_FirstInvocationContext``), every call is stock's own ``runtime_wrapper``; with
   ``torch._functorch.config.check_custom_op_aliasing`` off it never runs, and every call stays
   stock's.

Hot path: :meth:`LeanInferenceWrapper.__call__`. Slow path: everything else here, run at
compile time. Call sites: ``patches/lean_replay/0005``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["LeanInferenceWrapper", "effect_tokens_wrapper_is_identity", "lean_runtime_wrapper",
           "plain_inference", "rng_wrapper_is_identity"]


def _on() -> bool:
    from grace import config

    return bool(config.lean_replay and config.lean_aot)


def rng_wrapper_is_identity(runtime_metadata: Any) -> bool:
    """Whether ``FunctionalizedRngRuntimeWrapper``'s wrapper may be left out: with no
    functionalized random-number state it only calls the function it wraps."""
    return _on() and not runtime_metadata.is_rng_op_functionalized


def effect_tokens_wrapper_is_identity(compiled_fn: Callable[..., Any], runtime_metadata: Any) -> bool:
    """Whether ``EffectTokensWrapper``'s wrapper may be left out: with no tokens it passes the
    call on and returns what it got, and the function it wraps is already boxed (the wrapper
    would make it so)."""
    return (_on() and len(runtime_metadata.tokens) == 0
            and bool(getattr(compiled_fn, "_boxed_call", False)))


def plain_inference(runtime_metadata: Any, *, trace_joint: bool) -> str | None:
    """Why ``runtime_wrapper``'s epilogue could act on this metadata, or None where every branch
    :class:`LeanInferenceWrapper` skips is dead. Outputs that alias inputs are what
    ``num_outputs_aliased`` counts with those aliasing intermediates, and the inputs the epilogue
    keeps are theirs and the ones mutated outside the graph."""
    m = runtime_metadata
    if trace_joint:
        return "a training graph (autograd.Function)"
    if m.num_mutated_inp_runtime_indices:
        return "inputs mutated outside the graph"
    if m.num_outputs_aliased or m.num_intermediate_bases:
        return "outputs that alias inputs or intermediates"
    if m.grad_enabled_mutation is not None:
        return "grad mode set by the graph"
    if m.is_rng_op_functionalized:
        return "functionalized random-number state"
    return None


class LeanInferenceWrapper:
    """``runtime_wrapper`` for a plain inference graph (:func:`plain_inference`): the version
    counters of the inputs the graph mutates bumped (``bumped``), grad mode off around the boxed
    call, the output count checked, the outputs' dynamic dimensions marked (``dynamic_dims``),
    nothing else. ``stock`` serves every call until the first-invocation analysis has run. It
    carries what stock's wrapper carries (``functools.update_wrapper``: the wrapped function's
    attributes, ``__wrapped__``)."""

    def __init__(self, stock: Callable[[list[Any]], Any], compiled_fn: Callable[[list[Any]], Any],
                 expected_outs: int, disable_amp: bool, first_invocation: Any,
                 prologue_enter: Callable[[], Any], prologue_exit: Callable[[Any], None],
                 bumped: tuple[int, ...], dynamic_dims: tuple[tuple[int, set[int]], ...],
                 mark_dynamic: Callable[[Any, set[int]], None]) -> None:
        functools.update_wrapper(self, stock, assigned=("__doc__",))
        self._lean_stock = stock
        self._lean_graph = compiled_fn
        self._lean_expected_outs = expected_outs
        self._lean_disable_amp = disable_amp
        self._lean_first_invocation = first_invocation  # stock's _FirstInvocationContext
        self._lean_prologue_enter = prologue_enter
        self._lean_prologue_exit = prologue_exit
        self._lean_bumped = bumped  # inputs the graph mutates whose version counters autograd reads
        self._lean_dynamic_dims = dynamic_dims  # (output index, dims) as stock marks them
        self._lean_mark_dynamic = mark_dynamic
        self._boxed_call = True

    def __call__(self, args: list[Any]) -> Any:
        if self._lean_first_invocation._is_first:
            return self._lean_stock(args)
        cm = self._lean_prologue_enter()
        if self._lean_bumped:
            torch.autograd.graph.increment_version([args[i] for i in self._lean_bumped])
        grad_enabled = torch.is_grad_enabled()
        try:
            if grad_enabled:
                torch._C._set_grad_enabled(False)
            self._lean_prologue_exit(cm)
            if self._lean_disable_amp:
                with torch._C._DisableAutocast():
                    outs = self._lean_graph(args)
            else:
                outs = self._lean_graph(args)
        finally:
            if grad_enabled:
                torch._C._set_grad_enabled(True)
        if not isinstance(outs, list):
            outs = list(outs) if isinstance(outs, tuple) else [outs]
        if len(outs) != self._lean_expected_outs:
            raise AssertionError(f"expected {self._lean_expected_outs} outputs, got {len(outs)}")
        for i, dims in self._lean_dynamic_dims:
            self._lean_mark_dynamic(outs[i], dims)
        return outs


def lean_runtime_wrapper(stock: Callable[[list[Any]], Any], compiled_fn: Callable[[list[Any]], Any],
                         runtime_metadata: Any, *, trace_joint: bool, keep_input_mutations: bool,
                         disable_amp: bool, first_invocation: Any, prologue_enter: Callable[[], Any],
                         prologue_exit: Callable[[Any], None]) -> Callable[[list[Any]], Any] | None:
    """A :class:`LeanInferenceWrapper` in place of stock's ``runtime_wrapper`` where lean replay
    is on and the metadata is plain; None where stock's stays. ``compiled_fn`` is the boxed
    function stock's wrapper calls."""
    if not _on() or not getattr(compiled_fn, "_boxed_call", False):
        return None
    if plain_inference(runtime_metadata, trace_joint=trace_joint):
        return None
    from torch._functorch._aot_autograd.runtime_wrappers import maybe_mark_dynamic_helper

    dynamic_dims = tuple((i, info.dynamic_dims) for i, info in enumerate(runtime_metadata.output_info)
                         if info.dynamic_dims is not None) if runtime_metadata.dynamic_outputs else ()
    bumped = tuple(runtime_metadata.mutated_graph_handled_indices_seen_by_autograd) if keep_input_mutations else ()
    return LeanInferenceWrapper(stock, compiled_fn, runtime_metadata.num_outputs, disable_amp, first_invocation,
                                prologue_enter, prologue_exit, bumped, dynamic_dims, maybe_mark_dynamic_helper)
