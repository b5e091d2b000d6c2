"""Parameter indirection inside CUDA graph trees: what the patched tree calls, and when.

Design note
-----------
A node of a CUDA graph tree copies every non-static input into its placeholder before each
replay. With PI, a Triton kernel that reads a placeholder is recorded as its indirected variant
(:mod:`grace.pi.variant`), launched with the address of a pointer-table slot where the
placeholder's pointer would be; replays then write the new inputs' pointers into the table
instead of copying their bytes. Three moments, each a call from the patch
(``patches/pi/0001-pi-hook-points.patch``):

0. ``CUDAWarmupNode.run``: :func:`start_warmup` watches the function's warm-up run and builds
   the indirected variant of every Triton kernel that reads a non-static input, so that the
   capture finds them built (a capture that must build one relaxes its thread's capture mode
   for the module load). It also notes, on the function, an operator that would make its graph
   unverifiable (step 3): such a function is then captured once, stock.
1. ``CUDAGraphNode._record`` hands its capture to :func:`record`. Before the capture,
   :func:`start_recording` notes each placeholder by its storage's identity and allocates the
   table's device memory, outside the graph's memory pool (a block of the pool that no output
   owns would fail the tree's ``check_memory_pool``, and the table must outlive the capture).
   :func:`record` holds the recording inputs through this capture, so that a second capture (step 3) reads the same
   placeholders, and so that the graph cannot put its own buffers in a placeholder's memory
   after the input's last use (stock lets it: the tree refills placeholders before every
   replay, but the check of step 3 replays once more, and a placeholder that kept its copy
   would then hold a buffer's bytes). Launch arguments are still matched to placeholders by
   storage identity, never by address.
2. During the capture, :meth:`Recording.launch` (from ``CachingAutotuner.run``) redirects each
   launch whose pointer arguments are placeholders or views of them (the variant is compiled
   there, the first time, with this thread's capture mode relaxed so that loading its module
   does not invalidate the capture), and a dispatch mode notes
   every ATen operator that is handed one (a cuBLAS matmul, a copy, a fallback kernel): such
   an input keeps its copy, because that operator reads the placeholder itself.
3. After the capture, :meth:`Recording.finish` hands the recording to its strategy's finisher
   (:mod:`grace.pi.finish`), which decides per input (:func:`grace.pi.plan.plan_graph`)
   and checks the graph against the recorded function run with stock kernels, replaying it
   with the indirected inputs moved and their placeholders overwritten. If they differ, or the
   check cannot run (a graph that draws random numbers cannot be run twice, and one that
   reads random-number state a captured forward saved, such as attention's philox seed, must
   not run outside a capture: the dispatch mode notes both, :func:`random_use`), the graph is not
   trusted: :func:`record` captures it again with PI off, exactly as stock PyTorch would, and the log
   says why. Inputs the graph mutates are compared too, and put back. Otherwise the node gets its
   :class:`grace.pi.replay.PIReplay` (an input keeps its copy if an output aliases it, if the graph mutates
   it, or if a launch that read it could not be redirected). The table is filled with the
   placeholders' own addresses for the tree's first replay, which runs on the recording inputs.

Placeholders are the tree's own, in the graph's memory pool, for every graph: an output may
alias an input (a view returned, a partition passing a buffer through, a training forward
saving an input for its backward), and the tree requires every output in its pool. A function
that is not Inductor's generated code (:func:`grace.generated.is_inductor_generated`) records
stock: the check runs the function once more, which only generated code is known to allow.
The watch of step 2 also stops at a higher-order operator (selective activation
checkpointing's ``graphsafe_run_with_rng_state``, a wrapped subgraph): it does not see into it,
so such a graph is recorded again stock, with a log line.

At every replay, :meth:`grace.pi.replay.PIReplay.replay` runs instead of the tree's copy: the guard
(:class:`grace.pi.guard.ReplayGuard`) sends an input whose alignment, strides or storage offset
differ from the placeholder's, or whose bytes the replay itself may write (the tree's pool, where
the last call's outputs live; the static inputs the graph mutates), to the copy path for that
replay; the remaining copies run as the tree's own; the table is filled on the current
stream; the graph is replayed. The inputs stay referenced until the replay is queued.

With ``grace.config.pi_strategy = "exec-update"`` (strategy (3), :mod:`grace.pi.exec_update`)
nothing is redirected during the capture, which keeps its ``cudaGraph_t``; afterwards the
graph's kernel arguments that point into placeholders become patch sites, and a replay
rewrites them in the instantiated graph instead of filling a table. The check is the same; as
the kernels are stock, a failed check only drops the rewrite. With ``"prelude"`` (strategy
(2), :mod:`grace.pi.prelude`) the same sites are found, and before instantiation a prelude
kernel is added that rewrites them on the device from a pointer table, which replays fill as
strategy (1) does; that changes the graph, so a failed check records it again stock.

Everything here is capture-time work; the replay is :mod:`grace.pi.replay`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from grace.log import get_logger
from grace.pi.check import Captured
from grace.pi.finish import FINISHERS, RNG_UNCHECKABLE, UNVERIFIABLE_AT_WARMUP, Finished, recorded_stock
from grace.pi.guard import InputLayout
from grace.pi.launch_args import Owner, SlotRequest, runtime_arg_names, slot_requests
from grace.option_values import checked
from grace.pi.plan import EXEC_UPDATE, PRELUDE, PTX, Placeholder, Slot
from grace.pi.table import write_mode as table_write_mode

log = get_logger("grace.pi")

TABLE_CAPACITY = 1024  # slots a graph may use; 8 KiB of device memory per recorded graph
ALIGNMENT = 16  # Triton specializes pointer arguments on 16-byte divisibility
# A vendor library chooses its kernel for the pointers it is given at capture (the caching
# allocator's, 512-byte aligned); exec-update passes a new pointer only with this alignment.
VENDOR_ALIGNMENT = 256


@dataclass
class Recording:
    """One node's capture: placeholders by storage identity, slots handed out, and uses seen."""

    device: Any
    tracked: dict[int, Placeholder]  # storage cdata -> the placeholder of that storage
    layouts: dict[int, InputLayout]  # input index -> what the recorded kernels assume of it
    table_storage: Any  # strategy "ptx" only
    slots: list[Slot] = field(default_factory=list)
    blocked: dict[int, list[str]] = field(default_factory=dict)  # input index -> why it keeps its copy
    has_rng: bool = False  # a generator among the inputs: replays advance its state
    strategy: str = PTX
    # why the graph must not run outside its capture for the check: an operator seen drawing or
    # reading random-number state, or a higher-order operator the watch does not see into
    unverifiable: str | None = None

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
        with _receiving_launches(self) if ptx else contextlib.nullcontext(), _OperatorWatch(self, placeholders=ptx):
            yield

    def owner_of(self, arg: Any) -> Placeholder | None:
        import torch

        if not isinstance(arg, torch.Tensor) or arg.device != self.device:
            return None
        return self.tracked.get(arg.untyped_storage()._cdata)

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
        trusted and :func:`record` captures it again with every launch stock.
        """
        out_storages = {o.untyped_storage()._cdata for o in captured.outputs if hasattr(o, "untyped_storage")}
        for cdata, t in self.tracked.items():
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
    now. An operator that draws or reads random numbers, or a higher-order operator
    (:class:`_OperatorWatch`), makes the graph one that PI's check cannot run; seen here, the
    recording captures it stock at once (:func:`record`) instead of capturing it with PI first
    and again stock after. Launches and operators run stock.
    """

    inputs: dict[int, int]  # storage cdata -> input index (strategy "ptx" only)
    model: Any  # the function warmed up, which carries the verdict to its recordings
    unverifiable: str | None = None  # the first operator seen that PI's check could not run

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        launches = _receiving_launches(self) if self.inputs else contextlib.nullcontext()
        with launches, _OperatorWatch(self, placeholders=False):
            yield
        if self.unverifiable is not None:
            note_unverifiable(self.model, self.unverifiable)

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


def start_warmup(model: Any, inputs: Sequence[Any], static_input_idxs: Sequence[int],
                 managed_data_ptrs: Any) -> Warmup | None:
    """Before a function's warm-up run: its watch, or None for a function PI records stock
    anyway (not Inductor's generated code). Under strategy "ptx" it tracks the non-static
    tensor inputs by storage identity, for the variants."""
    import torch

    from grace.generated import is_inductor_generated

    if not is_inductor_generated(model):
        return None
    tracked: dict[int, int] = {}
    if strategy() == PTX:
        static = set(static_input_idxs)
        tracked = {t.untyped_storage()._cdata: i for i, t in enumerate(inputs)
                   if i not in static and isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != 0
                   and t.untyped_storage().data_ptr() not in managed_data_ptrs}
    return Warmup(tracked, model)


def record(node: Any, model: Any, inputs: list[Any],
           capture: Callable[[list[Any], contextlib.AbstractContextManager[None]], Sequence[Any]]) -> Sequence[Any]:
    """``CUDAGraphNode._record``'s capture with PI on: returns the static outputs, sets
    ``node.grace_pi``.

    ``capture(inputs, watch)`` is the tree's own capture of ``model`` on ``inputs`` into
    ``node.graph``, with ``watch`` entered inside it. The recording inputs (the placeholders)
    are held through it, so that a graph that fails its check (:meth:`Recording.finish`) is
    captured again with every launch stock, on the same placeholders, into a fresh graph; so is
    one whose planning raised, which would otherwise leave the node half made after the tree
    restored its allocator for it. A function PI does not record (no placeholder, or not
    Inductor's generated code) is captured once, as stock; so is one handed a random-number
    generator, whose graph draws other numbers each time it runs and so could never pass the
    check.
    """
    recording = start_recording(node.device, inputs, node.non_static_input_idx, model)
    if recording is None:
        return capture(inputs, contextlib.nullcontext())
    seen = unverifiable_at_warmup(model)
    if recording.has_rng or seen is not None:  # its check could never pass: one stock capture, not two
        why = RNG_UNCHECKABLE if recording.has_rng else f"{UNVERIFIABLE_AT_WARMUP}: {seen}"
        recorded_stock(recording, f"graph {node.id}", why)
        return capture(inputs, contextlib.nullcontext())
    held = list(inputs)
    if recording.keeps_graph:  # strategies (2) and (3) read the captured graph's nodes
        node.graph = new_graph(node.device, inputs, keep_graph=True)
    outputs = capture(inputs, recording.active())
    try:
        finished = recording.finish(Captured(node, f"graph {node.id}", recording.device, outputs, model, held,
                                             node.wrapped_function.mutated_input_idxs))
    except Exception as e:  # noqa: BLE001 - capture time: what cannot be planned is recorded as stock
        log.warning("PI graph %s: recorded again without indirection: planning it raised %s: %s",
                    node.id, type(e).__name__, e)
        finished = Finished(None, rerecord=f"planning raised {type(e).__name__}: {e}")
    node.grace_pi = finished.replay
    if finished.rerecord is None:
        return outputs
    del outputs, finished, recording
    node.graph = new_graph(node.device, held)
    return capture(held, contextlib.nullcontext())


def start_recording(device: Any, inputs: Sequence[Any], non_static_input_idx: Sequence[int],
                    model: Any) -> Recording | None:
    """Before the capture: note the placeholders (``inputs`` are the recording inputs), or None
    where the graph records stock (no placeholder, or ``model`` is not Inductor's generated
    code, which the check would run once more)."""
    import torch

    from grace.generated import is_inductor_generated

    chosen = strategy()
    if not is_inductor_generated(model):
        log.info("PI: %s is not Inductor's generated code; recorded stock", getattr(model, "__name__", model))
        return None
    if chosen != EXEC_UPDATE:  # the two table strategies write the table on every replay
        table_write_mode()
    alignment = ALIGNMENT if chosen == PTX else VENDOR_ALIGNMENT
    tracked: dict[int, Placeholder] = {}
    layouts: dict[int, InputLayout] = {}
    for i in non_static_input_idx:
        t = inputs[i]
        if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() == 0:
            continue
        nbytes = t.untyped_storage().nbytes()
        tracked[t.untyped_storage()._cdata] = Placeholder(i, t.data_ptr(), nbytes, t.numel() * t.element_size())
        layouts[i] = InputLayout.of(i, t, alignment)
    if not tracked:
        return None
    storage = torch.zeros(TABLE_CAPACITY, dtype=torch.int64, device=device) if chosen == PTX else None
    has_rng = any(isinstance(x, torch.Generator) for x in inputs)
    return Recording(torch.device(device), tracked, layouts, storage, has_rng=has_rng, strategy=chosen)


def new_graph(device: Any, inputs: Sequence[Any], keep_graph: bool = False) -> Any:
    """A ``torch.cuda.CUDAGraph`` for the node's capture, in place of the one the tree made,
    with the generators among ``inputs`` registered as the tree registers them on its own: a
    capture that draws from an unregistered generator fails ("not in capture mode"). Strategies
    (2) and (3) ask for ``keep_graph``; a graph recorded again stock gets a fresh one."""
    import torch

    graph = torch.cuda.CUDAGraph(keep_graph=keep_graph)
    with torch.cuda.device(device):
        for generator in inputs:
            if isinstance(generator, torch.Generator):
                graph.register_generator_state(generator)
    return graph


def strategy() -> str:
    """``grace.config.pi_strategy``, checked (:mod:`grace.option_values`)."""
    return checked("pi_strategy")


class _OperatorWatch:
    """A dispatch mode over a capture (or a warm-up) that notes every non-view ATen operator
    handed a placeholder (with ``placeholders``), and the first operator that makes the graph
    unverifiable: one that draws or reads random numbers, or a higher-order operator, which
    this mode does not see into (it runs as it would without the mode). ``recording`` is a
    :class:`Recording`, or a :class:`Warmup` without ``placeholders``: what it sets is their
    ``unverifiable``."""

    def __init__(self, recording: Recording | Warmup, placeholders: bool) -> None:
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
                if rec.unverifiable is None:
                    rec.unverifiable = random_use(func, args, kwargs)
                return func(*args, **kwargs)

        self._mode = Mode()

    def __enter__(self) -> None:
        self._mode.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def random_use(func: Any, args: Sequence[Any], kwargs: dict) -> str | None:
    """Why running ``func`` outside the capture would not do what the captured graph does, or None.

    An operator that draws random numbers draws others outside the capture (the graph's draws
    come from the generator's graph-safe state), so the check would fail for no fault of PI and
    advance the program's generator besides. An operator that reads random-number state (the
    philox seed and offset that flash and memory-efficient attention save for their backward)
    reads, after a captured forward, device tensors that it dereferences on the host when not
    capturing: run outside the capture it would read device memory from the host and crash the
    process (a training backward with such attention).
    Attention without dropout draws nothing.
    """
    import torch

    arguments = func._schema.arguments
    names = [a.name for a in arguments]
    if "dropout_p" in names:
        k = names.index("dropout_p")
        if not kwargs.get("dropout_p", args[k] if k < len(args) else arguments[k].default_value):
            return None
    if any("philox" in n or "rng_state" in n for n in names):
        return f"{func} reads random-number state"
    if torch.Tag.nondeterministic_seeded in func.tags:
        return f"{func} draws random numbers"
    return None


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
