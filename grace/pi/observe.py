"""What PI observes of a function's warm-up and of a node's capture.

:class:`Warmup` watches the warm-up run: it builds the indirected variants the capture will want
and notes on the function an operator that would make its graph unverifiable.
:class:`Recording` watches the capture: placeholders by storage identity, the Triton launches it
redirects to a pointer-table slot (strategy "ptx"), and every ATen operator handed a
placeholder (:class:`_OperatorWatch`); after the capture, :meth:`Recording.finish` hands what it
saw to the strategy's finisher (:mod:`grace.pi.finish`). When these run is
:mod:`grace.pi.tree_hook`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from grace.log import get_logger
from grace.pi.check import Captured, RandomUse
from grace.pi.finish import FINISHERS, Finished
from grace.pi.guard import InputLayout
from grace.pi.launch_args import Owner, SlotRequest, runtime_arg_names, slot_requests
from grace.option_values import EXEC_UPDATE, PRELUDE, PTX
from grace.pi.plan import Placeholder, Slot
from grace.random_state import random_state_returns, schema_reads_random_state

log = get_logger("grace.pi")


@dataclass
class Recording:
    """One node's capture: placeholders by storage identity, slots handed out, and uses seen."""

    device: Any
    placeholders: dict[int, Placeholder]  # storage cdata -> the placeholder of that storage
    layouts: dict[int, InputLayout]  # input index -> what the recorded kernels assume of it
    table_storage: Any  # strategy "ptx" only
    slots: list[Slot] = field(default_factory=list)
    blocked: dict[int, list[str]] = field(default_factory=dict)  # input index -> why it keeps its copy
    has_rng: bool = False  # a generator among the inputs: replays advance its state
    strategy: str = PTX
    # why the graph must not run outside its capture for the check: a higher-order operator the
    # watch does not see into
    unverifiable: str | None = None
    random: RandomUse = field(default_factory=RandomUse)  # what the check must honour

    @property
    def keeps_graph(self) -> bool:
        """Whether the capture must keep its ``cudaGraph_t`` (strategies (2) and (3) read it)."""
        return self.strategy in (EXEC_UPDATE, PRELUDE)

    # -- during the capture ---------------------------------------------------------------

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Watch ATen operators while the graph records, and under strategy "ptx" redirect
        Triton launches ("exec-update" and "prelude" record stock and read the graph after)."""
        ptx = self.strategy == PTX
        watch = _OperatorWatch(self, placeholders=ptx, random=self.random)
        with _receiving_launches(self) if ptx else contextlib.nullcontext(), watch:
            yield

    def owner_of(self, arg: Any) -> Placeholder | None:
        import torch

        if not isinstance(arg, torch.Tensor) or arg.device != self.device:
            return None
        return self.placeholders.get(arg.untyped_storage()._cdata)

    def _owner(self, arg: Any) -> tuple[int, int] | None:
        t = self.owner_of(arg)
        return None if t is None else (t.input_index, t.data_ptr)

    def block(self, input_index: int, why: str) -> None:
        reasons = self.blocked.setdefault(input_index, [])
        if why not in reasons:
            reasons.append(why)

    def launch(self, autotuner: Any, launcher: Any, args: Sequence[Any], kwargs: dict, stream: Any) -> Any:
        """Launch ``autotuner``'s indirected variant if its arguments read placeholders.

        Returns ``NotImplemented`` when the stock launch should run (no placeholder read, or the
        variant could not be made, in which case the inputs it reads keep their copies).
        """
        name = autotuner.fn.__name__
        readers = [t for t in map(self.owner_of, args) if t is not None]
        if not readers:
            return NotImplemented
        try:
            requests = _slot_requests(autotuner, args, self._owner)
            with _relaxed_capture(self.device):  # a variant not built at warm-up is built here
                variant = variant_for(autotuner, launcher, requests)
            if len(self.slots) + len(requests) > self.table_storage.numel():
                raise ValueError(f"the pointer table is full ({self.table_storage.numel()} slots)")
            new_args = list(args)
            for r in requests:
                new_args[r.position] = self.table_storage.data_ptr() + 8 * len(self.slots)
                self.slots.append(Slot(r.input_index, r.offset, name))
        except Exception as e:  # not redirected: the stock launch reads the placeholders
            for t in readers:
                self.block(t.input_index, f"{name} not redirected ({type(e).__name__}: {e})")
            log.debug("PI: %s launched as recorded: %s", name, e)
            return NotImplemented
        with _relaxed_capture(self.device):  # its first launch loads its module
            return variant.run(*new_args, stream=stream, **kwargs)

    # -- after the capture ----------------------------------------------------------------

    def finish(self, captured: Captured) -> Finished:
        """The plan for this graph: its replay state, or a reason to record it again as stock.

        Inputs an output aliases, or that the graph mutates, keep their copies; the rest is the
        strategy's (:mod:`grace.pi.finish`): a graph that launches indirected kernels, or whose
        arguments are rewritten, is checked against ``captured.model``
        (:func:`grace.pi.check.validate`), and if the check fails or cannot run, the graph is not
        trusted and :func:`grace.pi.tree_hook.record` captures it again with every launch stock.
        """
        out_storages = {o.untyped_storage()._cdata for o in captured.outputs if hasattr(o, "untyped_storage")}
        for cdata, t in self.placeholders.items():
            if cdata in out_storages:  # the output would come back with the placeholder's bytes
                self.block(t.input_index, "an output aliases it")
            if t.input_index in captured.mutated_input_idxs:
                self.block(t.input_index, "the graph mutates it")
        return FINISHERS[self.strategy].finish(self, captured)


# Indirected variants by (kernel module file, kernel, indirected positions, config), for the
# process: built at warm-up where possible, so that a capture rarely compiles one.
_VARIANTS: dict[tuple, Any] = {}


def variant_for(autotuner: Any, launcher: Any, requests: Sequence[SlotRequest]) -> Any:
    """The indirected variant of ``autotuner``'s kernel for these slot requests, built once."""
    from grace.pi import variant as variants

    key = (str(variants.kernel_module_path(autotuner)), autotuner.fn.__name__, tuple(r.position for r in requests),
           variants.config_key(launcher.config))
    variant = _VARIANTS.get(key)
    if variant is None:
        variant = variants.indirected_variant(autotuner, launcher.config, [r.name for r in requests])
        _VARIANTS[key] = variant
    return variant


def _slot_requests(autotuner: Any, args: Sequence[Any], owner: Owner) -> list[SlotRequest]:
    """The launch's arguments that read placeholders (ValueError if it cannot be redirected)."""
    fn = autotuner.fn
    if not hasattr(fn, "constexprs"):
        raise ValueError("its tl.constexpr parameters are unknown, so its launch arguments cannot be named")
    declared = {fn.arg_names[i] for i in fn.constexprs}
    names = runtime_arg_names(fn.arg_names, declared, len(args), autotuner.inductor_meta.get("extra_launcher_args", ()))
    signature = autotuner.triton_meta["signature"]
    return slot_requests(args, names, signature, owner, autotuner.inductor_meta.get("mutated_arg_names", ()))


@contextlib.contextmanager
def _receiving_launches(receiver: Any) -> Iterator[None]:
    """Hand ``CachingAutotuner.run``'s settled launches to ``receiver.launch`` (patch hook)."""
    from torch._inductor.runtime import triton_heuristics

    previous = getattr(triton_heuristics, "_grace_pi_recording", None)
    triton_heuristics._grace_pi_recording = receiver
    try:
        yield
    finally:
        triton_heuristics._grace_pi_recording = previous


@dataclass
class Warmup:
    """A function's warm-up run, watched: outside any capture, it builds the variants the
    capture will want, and it notes what makes the graph unverifiable, so that the capture is
    made once.

    A Triton launch whose pointer argument is one of the function's non-static inputs (by
    storage identity; not an input that a previous graph's output holds) will read a
    placeholder when the function records, so under strategy "ptx" its variant is compiled
    now. A higher-order operator (:class:`_OperatorWatch`) makes the graph one that PI's check
    cannot run; seen here, the recording captures it stock at once
    (:func:`grace.pi.tree_hook.record`) instead of capturing it with PI first and again stock
    after. Launches and operators run stock.
    """

    inputs: dict[int, int]  # storage cdata -> input index (strategy "ptx" only)
    model: Any  # the function warmed up, which carries the verdict to its recordings
    unverifiable: str | None = None  # the first operator seen that PI's check could not run

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        launches = _receiving_launches(self) if self.inputs else contextlib.nullcontext()
        with launches, _OperatorWatch(self, placeholders=False, random=None):
            yield
        if self.unverifiable is not None:
            note_unverifiable(self.model, self.unverifiable)
        else:
            note_verifiable(self.model)

    def launch(self, autotuner: Any, launcher: Any, args: Sequence[Any], kwargs: dict, stream: Any) -> Any:
        try:
            requests = _slot_requests(autotuner, args, self._owner)
            if requests:
                variant_for(autotuner, launcher, requests)
        except Exception as e:  # the capture will try again, or keep the copy
            log.debug("PI: no variant of %s at warm-up: %s", autotuner.fn.__name__, e)
        return NotImplemented

    def _owner(self, arg: Any) -> tuple[int, int] | None:
        import torch

        if not isinstance(arg, torch.Tensor):
            return None
        i = self.inputs.get(arg.untyped_storage()._cdata)
        return None if i is None else (i, arg.untyped_storage().data_ptr())


# Where a warm-up's verdict is kept: on the warmed-up function itself, which the tree hands to
# every recording of it, so that the verdict lives and dies with the function.
_VERDICT_ATTR = "_grace_pi_unverifiable"
_VERIFIED_ATTR = "_grace_pi_verifiable"


def note_verifiable(model: Any) -> None:
    """Note on ``model`` that a warm-up ran it to its end and saw nothing PI's check could not
    run (what :func:`grace.pi.tree_hook.held_through_capture` asks before it releases an
    earlier graph's output: its capture will not find otherwise)."""
    try:
        setattr(model, _VERIFIED_ATTR, True)
    except (AttributeError, TypeError):
        pass


def verifiable_at_warmup(model: Any) -> bool:
    """Whether a warm-up of ``model`` ran to its end and saw nothing PI's check could not run."""
    return getattr(model, _VERIFIED_ATTR, False) and unverifiable_at_warmup(model) is None


def note_unverifiable(model: Any, why: str) -> None:
    """Note on ``model`` that its graph cannot be checked (a function object takes attributes;
    anything else is left unmarked, and its capture finds out for itself)."""
    try:
        setattr(model, _VERDICT_ATTR, why)
    except (AttributeError, TypeError):
        pass


def unverifiable_at_warmup(model: Any) -> str | None:
    """What the warm-up of ``model`` saw that PI's check could not run, or None."""
    return getattr(model, _VERDICT_ATTR, None)


class _OperatorWatch:
    """A dispatch mode over a capture (or a warm-up) that notes every non-view ATen operator
    handed a placeholder (with ``placeholders``), the first operator that makes the graph
    unverifiable: a higher-order operator, which this mode does not see into (it runs as it
    would without the mode); and, into ``random`` (a capture's; a warm-up checks nothing), what
    operators do with random numbers (:func:`note_random`). ``recording`` is a
    :class:`Recording`, or a :class:`Warmup` without ``placeholders``: what it sets is their
    ``unverifiable``."""

    def __init__(self, recording: Recording | Warmup, placeholders: bool, random: RandomUse | None) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        rec = recording

        class Mode(TorchDispatchMode):
            supports_higher_order_operators = True

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                from torch._ops import HigherOrderOperator
                from torch.utils._pytree import tree_leaves

                kwargs = kwargs or {}
                if isinstance(func, HigherOrderOperator):
                    if rec.unverifiable is None:
                        rec.unverifiable = f"higher-order operator {func.name()}, which the watch does not see into"
                    return func(*args, **kwargs)
                if placeholders and not func.is_view:
                    for leaf in tree_leaves((args, kwargs)):
                        t = rec.owner_of(leaf)
                        if t is not None:
                            rec.block(t.input_index, f"read by {func}")
                out = func(*args, **kwargs)
                if random is not None:
                    note_random(random, func, args, kwargs, out)
                return out

        self._mode = Mode()

    def __enter__(self) -> None:
        self._mode.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def note_random(use: RandomUse, func: Any, args: Sequence[Any], kwargs: dict, out: Any) -> None:
    """Note in ``use`` what ``func``, called with ``args`` and ``kwargs``, did with random
    numbers; ``out`` is what it returned.

    - An operator that draws from the device's generator (dropout, Inductor's seeds; attention
      with dropout): run outside the capture from the generator state a replay starts from, it
      draws what the graph draws (CUDA graphs advance the generator as the same launches would,
      eagerly), so the check forks the generator.
    - An operator that reads saved random-number state (attention's backward with dropout,
      handed the philox seed and offset its captured forward saved on the device): outside a
      capture it takes them for host values and would read device memory from the host, so the
      check's stock side gets host copies (:func:`grace.random_state.host_random_state`).
    - The state an operator returns: on the device inside a capture, on the host outside one.
      Saved while drawing, the check compares it on the host; returned without drawing
      (attention without dropout), nothing reads it and the check leaves it out.
    """
    import torch

    drawing = not _dropout_off(func, args, kwargs)
    if drawing and torch.Tag.nondeterministic_seeded in func.tags:
        use.draws = True
    if drawing and schema_reads_random_state(func._schema):
        use.reads_state = True
    indices = random_state_returns(func._schema)
    if indices:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        storages = [outs[k].untyped_storage().data_ptr() for k in indices
                    if k < len(outs) and isinstance(outs[k], torch.Tensor) and outs[k].numel() > 0]
        (use.saved_state if drawing else use.unused_state).update(storages)


def _dropout_off(func: Any, args: Sequence[Any], kwargs: dict) -> bool:
    """Whether ``func`` takes a ``dropout_p`` that is zero here (attention without dropout)."""
    arguments = func._schema.arguments
    names = [a.name for a in arguments]
    if "dropout_p" not in names:
        return False
    k = names.index("dropout_p")
    return not kwargs.get("dropout_p", args[k] if k < len(args) else arguments[k].default_value)


@contextlib.contextmanager
def _relaxed_capture(device: Any) -> Iterator[None]:
    """Let this thread load a CUDA module while its stream captures.

    The tree captures in thread-local mode, where loading a module (a variant built, or a
    binary's first launch) is a "potentially unsafe" call that would invalidate the capture.
    Loading enqueues nothing on the capturing stream, so relaxed mode is right for it; the
    previous mode is restored at once.
    """
    if getattr(device, "type", device) != "cuda":
        yield
        return
    from cuda.bindings import driver

    relaxed = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    err, previous = driver.cuThreadExchangeStreamCaptureMode(relaxed)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuThreadExchangeStreamCaptureMode: {driver.CUresult(err).name}")
    try:
        yield
    finally:
        driver.cuThreadExchangeStreamCaptureMode(previous)
