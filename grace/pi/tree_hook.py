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
   Under strategy (1) the capture holds neither the placeholders nor the outputs of earlier
   graphs it reads: the graph may put its own buffers in their memory after their last use, as
   stock's capture does (the tree refills placeholders before every replay; the check of step
   3, which replays once more, puts every input's bytes back). A weak reference to each
   placeholder's storage keeps its identity, by which launch arguments are matched to
   placeholders, never by address; static inputs are held as stock holds them
   (:class:`HeldInputs`). Strategies (2) and (3) find their patch sites by address, so they
   hold every recording input through the capture.
2. During the capture, :meth:`grace.pi.observe.Recording.launch` (from ``CachingAutotuner.run``) redirects each
   launch whose pointer arguments are placeholders or views of them (the variant is compiled
   there, the first time, with this thread's capture mode relaxed so that loading its module
   does not invalidate the capture), and a dispatch mode notes
   every ATen operator that is handed one (a cuBLAS matmul, a copy, a fallback kernel): such
   an input keeps its copy, because that operator reads the placeholder itself.
3. After the capture, :meth:`grace.pi.observe.Recording.finish` hands the recording to its strategy's finisher
   (:mod:`grace.pi.finish`), which decides per input (:func:`grace.pi.plan.plan_graph`)
   and checks the graph against the recorded function run with stock kernels, replaying it
   with the indirected inputs moved and their placeholders overwritten (random numbers as the
   dispatch mode saw them used, :func:`grace.pi.observe.note_random`: drawn from a forked
   generator, saved state compared on the host, read state handed over as host copies). If they
   differ, or the check cannot run (a higher-order operator, which the mode does not see into),
   the graph is not trusted: :func:`record` captures it again with PI off, exactly as stock PyTorch would, and the log
   says why, on placeholders of its own under strategy (1); where an earlier graph's output it
   reads died during the capture, it cannot be captured again and is retired
   (:mod:`grace.pi.retire`): this call's outputs are the stock kernels', and the function
   records again, stock, at its next call. Inputs the graph mutates are
   compared too, and put back. Otherwise the node gets its
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

What the warm-up and the capture observe is :mod:`grace.pi.observe`. Everything here is
capture-time work; the replay is :mod:`grace.pi.replay`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from grace.log import get_logger
from grace.option_values import EXEC_UPDATE, PTX, checked
from grace.pi.check import Captured, InputsNotRestored
from grace.pi.finish import RNG_UNCHECKABLE, UNVERIFIABLE_AT_WARMUP, Finished, recorded_stock
from grace.pi.guard import InputLayout
from grace.pi.observe import Recording, Warmup, unverifiable_at_warmup, verifiable_at_warmup
from grace.pi.plan import Placeholder
from grace.pi.retire import refused, retire
from grace.pi.table import write_mode as table_write_mode

log = get_logger("grace.pi")

RETIRED_BEFORE = "PI retired a graph of this function after its check failed"

TABLE_CAPACITY = 1024  # slots a graph may use; 8 KiB of device memory per recorded graph
ALIGNMENT = 16  # Triton specializes pointer arguments on 16-byte divisibility
# A vendor library chooses its kernel for the pointers it is given at capture (the caching
# allocator's, 512-byte aligned); exec-update passes a new pointer only with this alignment.
VENDOR_ALIGNMENT = 256


def start_warmup(model: Any, inputs: Sequence[Any], static_input_idxs: Sequence[int],
                 managed_data_ptrs: Any) -> Warmup | None:
    """Before a function's warm-up run: its watch, or None for a function PI records stock
    anyway (not Inductor's generated code). Under strategy "ptx" it tracks the non-static
    tensor inputs by storage identity, for the variants."""
    import torch

    from grace.generated import is_inductor_generated

    if not is_inductor_generated(model):
        return None
    by_storage: dict[int, int] = {}
    if strategy() == PTX:
        static = set(static_input_idxs)
        by_storage = {t.untyped_storage()._cdata: i for i, t in enumerate(inputs)
                   if i not in static and isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != 0
                   and t.untyped_storage().data_ptr() not in managed_data_ptrs}
    return Warmup(by_storage, model)


def record(node: Any, model: Any, inputs: list[Any],
           capture: Callable[[list[Any], contextlib.AbstractContextManager[None]], Sequence[Any]]) -> Sequence[Any]:
    """``CUDAGraphNode._record``'s capture with PI on: returns the static outputs, sets
    ``node.grace_pi``.

    ``capture(inputs, watch)`` is the tree's own capture of ``model`` on ``inputs`` into
    ``node.graph``, with ``watch`` entered inside it. A graph that fails its check
    (:meth:`grace.pi.observe.Recording.finish`) is captured again with every launch stock, into a
    fresh graph; so is one whose planning raised, which would otherwise leave the node half made
    after the tree restored its allocator for it. What the recording holds through the capture
    is :func:`held_through_capture`'s to say; a graph that fails its check after its capture let
    an earlier graph's output die cannot be captured again, and is retired instead
    (:mod:`grace.pi.retire`). A function PI does not record (no placeholder, or not Inductor's
    generated code) is captured once, as stock; so is one handed a random-number generator,
    whose graph draws other numbers each time it runs and so could never pass the check, and
    one whose graph PI retired before.
    """
    recording = start_recording(node.device, inputs, node.non_static_input_idx, model)
    if recording is None:
        return capture(inputs, contextlib.nullcontext())
    seen, retired = unverifiable_at_warmup(model), refused(model)
    if recording.has_rng or seen is not None or retired is not None:  # one stock capture, not two
        if recording.has_rng:
            why = RNG_UNCHECKABLE
        elif seen is not None:
            why = f"{UNVERIFIABLE_AT_WARMUP}: {seen}"
        else:
            why = f"{RETIRED_BEFORE}: {retired}"
        recorded_stock(recording, f"graph {node.id}", why)
        return capture(inputs, contextlib.nullcontext())
    held = held_through_capture(recording, inputs, node, model)
    if recording.keeps_graph:  # strategies (2) and (3) read the captured graph's nodes
        node.graph = new_graph(node.device, inputs, keep_graph=True)
    outputs = capture(inputs, recording.active())
    seen_inputs = held.inputs_after_capture(node)
    try:
        finished = recording.finish(Captured(node, f"graph {node.id}", recording.device, outputs, model,
                                             seen_inputs, node.wrapped_function.mutated_input_idxs))
    except InputsNotRestored:
        raise
    except Exception as e:  # noqa: BLE001 - capture time: what cannot be planned is recorded as stock
        log.warning("PI graph %s: recorded again without indirection: planning it raised %s: %s",
                    node.id, type(e).__name__, e)
        finished = Finished(None, rerecord=f"planning raised {type(e).__name__}: {e}")
    node.grace_pi = finished.replay
    if finished.rerecord is None:
        return outputs
    # held from here on: a managed input alive now lived through the capture, whose buffers never took its memory;
    # dropping the first capture's outputs and plan below may drop the last other reference to it
    alive = held.managed_inputs_alive()
    if alive is None:  # a second capture would read it where the graph may have put its buffers
        if recording.unverifiable is not None:  # its warm-up saw nothing of the kind
            raise RuntimeError(f"GraCE internal error: PI graph {node.id} cannot be run outside its capture "
                               f"({recording.unverifiable}), though its warm-up ran it; and an earlier graph's "
                               "output it reads died during the capture, so it cannot be captured again")
        retire(node, model, seen_inputs, outputs, recording.device, recording.random, f"graph {node.id}",
               finished.rerecord)
        return outputs
    del outputs, finished, recording
    again = held.inputs_again(node, seen_inputs, alive)
    del seen_inputs, held, alive  # the second capture holds its inputs as stock's does: the list it drops
    node.graph = new_graph(node.device, again)
    return capture(again, contextlib.nullcontext())


class HeldInputs:
    """What :func:`record` holds of the recording inputs through a capture with PI.

    Under strategies (2) and (3) every recording input is held until the graph is deployed:
    they find the kernel arguments to rewrite by address (any argument that points into a
    placeholder), which is sound only while nothing else can live at a placeholder's address.
    Under strategy (1) neither the placeholders nor the outputs of earlier graphs that the tree
    manages (``cudagraph_managed_idxs``) are held, so that the graph may put its own buffers in
    their memory after their last use, as stock's capture does (holding them made PI's pools
    larger than PT2-CG's). What strategy (1) keeps instead:

    - a weak reference to each placeholder's storage: launches and operators are matched to
      placeholders by storage identity (the StorageImpl's address), and a StorageImpl stays
      allocated while a weak reference to it lives, though its memory goes back to the pool;
    - a weak reference to each managed input, which tells, if the check fails, whether it is
      still alive for a second capture (someone else holds it) or died during the first
      (the graph is retired then, :mod:`grace.pi.retire`);
    - the static inputs, held until the check is done, as stock holds them;
    - for the check, views of the released inputs' memory that do not own it: the node's
      ``reconstructed_inputs`` for the placeholders (as the tree copies into before each
      replay), and for each managed input one made before the capture with its storage offset
      (the tree's reconstructions leave it out: a placeholder starts its storage, an earlier
      graph's output need not). Nothing runs in the pool between the capture and the check;
      the check puts every input's bytes back after its own replay, for the tree's first
      replay and for a second capture.

    A second capture (the check failed) gets placeholders of its own, allocated in the pool as
    the tree allocated the first (``_allocate_and_copy_recording_inputs``) from copies made
    outside it first (a new placeholder may land on an old one's memory), and the node's
    ``reconstructed_inputs`` are made again over them; it gets the managed inputs themselves.
    """

    def __init__(self, inputs: list[Any], placeholders: Sequence[int],
                 managed_views: dict[int, Any] | None = None) -> None:
        import weakref

        from torch.multiprocessing.reductions import StorageWeakRef

        self.placeholders: frozenset[int] = frozenset(placeholders)
        self.managed_views: dict[int, Any] = managed_views or {}  # input index -> view made before the capture
        self.managed: dict[int, Any] = {i: weakref.ref(inputs[i]) for i in self.managed_views}
        self.released: frozenset[int] = self.placeholders | frozenset(self.managed)
        self.kept: list[Any] = [None if i in self.released else x for i, x in enumerate(inputs)]
        self.identities: list[Any] = [StorageWeakRef(inputs[i].untyped_storage()) for i in self.placeholders]

    def inputs_after_capture(self, node: Any) -> list[Any]:
        """The recording inputs for the check: held ones, and the released ones' reconstructions."""
        return [node.reconstructed_inputs[i] if i in self.placeholders else self.managed_views.get(i, x)
                for i, x in enumerate(self.kept)]

    def managed_inputs_alive(self) -> dict[int, Any] | None:
        """The managed inputs released through the capture, held again, or None if one is gone
        (it cannot be captured again). One alive now was alive all through the capture: nothing
        brings a tensor back."""
        alive = {i: ref() for i, ref in self.managed.items()}
        return None if any(x is None for x in alive.values()) else alive

    def inputs_again(self, node: Any, seen_inputs: list[Any], managed: dict[int, Any]) -> list[Any]:
        """Recording inputs for a second capture (see the class's note), given the managed
        inputs :meth:`managed_inputs_alive` held; the node's ``reconstructed_inputs`` follow."""
        import torch

        from grace import trees

        if not self.released:
            return list(self.kept)
        values = [copied_as_laid_out(x) if i in self.placeholders else x for i, x in enumerate(seen_inputs)]
        for i in self.managed:
            values[i] = managed[i]
        again = node._allocate_and_copy_recording_inputs(values)  # synchronizes, then drops the copies
        if torch.device(node.device).type == "cuda":
            trees.release_cached_memory(node.device)  # the copies, left cached, would stay reserved
        node.reconstructed_inputs = [reconstructed(node, x) for x in again]
        return again


def copied_as_laid_out(x: Any) -> Any:
    """``x`` over a copy of its whole storage, with its sizes, strides and offset: the tree
    allocates a recording input with its source's strides (an expanded input keeps its stride
    0, which ``clone`` would not), and the graph's kernels assume them."""
    import torch

    return torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage().clone(), x.storage_offset(), x.size(), x.stride())


def reconstructed(node: Any, x: Any, with_offset: bool = False) -> Any:
    """The tree's non-owning view of a recording input (``CUDAGraphNode.__init__``'s own, which
    leaves the storage offset out), or with it."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    return node._reconstruct_from_tensor_metadata(node._tensor_metadata(x, ignore_storage_offset=not with_offset))


def held_through_capture(recording: Recording, inputs: list[Any], node: Any, model: Any) -> HeldInputs:
    """Every recording input held under strategies (2) and (3); under strategy (1), all but the
    placeholders and the managed inputs (:class:`HeldInputs`). The managed ones are held too
    unless a retired graph could be made (:mod:`grace.pi.retire`): a warm-up ran ``model`` to its
    end and found it checkable, so that a stock run of it after the capture is one its warm-up
    already made."""
    import torch

    if recording.keeps_graph:
        return HeldInputs(inputs, placeholders=())
    releasable = verifiable_at_warmup(model)
    managed = [i for i in node.cudagraph_managed_idxs if isinstance(inputs[i], torch.Tensor)] if releasable else []
    views = {i: reconstructed(node, inputs[i], with_offset=True) for i in managed}
    return HeldInputs(inputs, [p.input_index for p in recording.placeholders.values()], views)


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
    placeholders: dict[int, Placeholder] = {}
    layouts: dict[int, InputLayout] = {}
    for i in non_static_input_idx:
        t = inputs[i]
        if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() == 0:
            continue
        nbytes = t.untyped_storage().nbytes()
        placeholders[t.untyped_storage()._cdata] = Placeholder(i, t.data_ptr(), nbytes, t.numel() * t.element_size())
        layouts[i] = InputLayout.of(i, t, alignment)
    if not placeholders:
        return None
    storage = torch.zeros(TABLE_CAPACITY, dtype=torch.int64, device=device) if chosen == PTX else None
    has_rng = any(isinstance(x, torch.Generator) for x in inputs)
    return Recording(torch.device(device), placeholders, layouts, storage, has_rng=has_rng, strategy=chosen)


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
