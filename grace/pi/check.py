"""PI's check of a captured graph against the function it recorded, run with stock kernels.

A graph whose kernels PI changed (indirected variants, or arguments to be rewritten) is trusted
only if, replayed with its indirected inputs moved to new addresses and their placeholders
overwritten, it computes what the recorded function computes with stock kernels on the same
inputs. The check runs once per graph, at capture time, and puts back every byte and pointer it
touched: the tree's first replay (or a second, stock capture) sees the inputs as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from grace import trees
from grace.log import get_logger
from grace.pi.plan import GraphPlan
from grace.random_state import host_random_state

log = get_logger("grace.pi")


@dataclass(frozen=True)
class Captured:
    """What one capture left, which planning and the check read.

    ``model`` is the function the graph recorded, which the check runs with stock kernels;
    ``inputs`` are the recording inputs; one the capture released (a placeholder, an earlier
    graph's output) is a view of its memory that does not own it
    (:class:`grace.pi.tree_hook.HeldInputs`)."""

    node: Any
    name: str  # "graph N", for logs and reports
    device: Any
    outputs: Sequence[Any]
    model: Any
    inputs: Sequence[Any]
    mutated_input_idxs: Sequence[int]


@dataclass
class RandomUse:
    """What the capture's watch saw of random numbers (:func:`grace.pi.observe.note_random`, as
    each operator runs), which the check must honour.

    ``draws``: an operator drew from the device generator; both sides run from one generator
    state (:class:`GeneratorFork`). ``reads_state``: an operator read saved random-number state
    (attention's backward with dropout); the stock side runs under
    :func:`grace.random_state.host_random_state`. ``saved_state``: storages (``data_ptr``) of
    state an operator saved while drawing (attention's forward with dropout), on the device in
    the graph and on the host in the stock run: compared on the host. ``unused_state``: storages
    of state an operator returned without drawing (attention without dropout), which nothing
    reads: not compared."""

    draws: bool = False
    reads_state: bool = False
    saved_state: set[int] = field(default_factory=set)
    unused_state: set[int] = field(default_factory=set)


def validate(captured: Captured, plan: GraphPlan, pointers: Any, placeholder_ptrs: list[int],
             placeholder_indices: Iterable[int], unverifiable: str | None,
             random: RandomUse | None = None) -> str | None:
    """:func:`compare`, then the check's memory given back to the device.

    The check holds a snapshot and a moved copy of every indirected input, and the stock
    run's outputs: for DR-I, three times its 6.5 GB input. Left cached by the allocator,
    that would stay reserved for the life of the process, beside the graph's own pool.
    """
    why = compare(captured, plan, pointers, placeholder_ptrs, placeholder_indices, unverifiable, random)
    if captured.device.type == "cuda":
        log.debug("PI: the check's copies released %.1f MB", trees.release_cached_memory(captured.device) / 1e6)
    return why


def compare(captured: Captured, plan: GraphPlan, pointers: Any, placeholder_ptrs: list[int],
            placeholder_indices: Iterable[int], unverifiable: str | None,
            random: RandomUse | None = None) -> str | None:
    """Check the recorded graph against ``captured.model`` run with stock kernels; None if they agree.

    The reference is ``model`` (outside any capture, so every launch is stock) on the
    recording inputs, as stock runs it. The graph is then replayed once with its indirected
    inputs moved to new addresses (fresh copies) and their placeholders overwritten (NaN in
    every float lane): a kernel that still reads a placeholder reads the overwritten bytes,
    and an indirected kernel that computes anything else than the stock one differs too.
    Outputs are compared, and so are the inputs the graph mutates (a static buffer such as
    BatchNorm's running statistics). Every tensor input's storage is put back after each
    run, from snapshots taken before the first and never handed to a run, so that the
    tree's first replay reads and updates them as stock would; the placeholders get their
    bytes back and the pointers their placeholders' addresses before that replay.

    Random numbers (``random``, what the capture's watch saw): a graph that draws them (dropout,
    Inductor's seeds) runs both sides from the device generator's state as it was
    (:class:`GeneratorFork`): a replay draws from the generator's state at its launch what the
    same launches draw eagerly from it, so the two sides draw the same numbers, and the
    generator is left where it was, for the tree's first replay to advance as stock's does. A
    graph that reads saved random-number state (attention's backward with dropout, handed the
    device seed a captured forward saved) runs its stock side with host copies of that state
    (:func:`grace.random_state.host_random_state`), as it would after an eager forward. State a
    forward saves is on the device in the graph and on the host in the stock run: it is
    compared on the host. State returned without drawing any (attention without dropout) is
    left out: nothing reads it. A graph that ``unverifiable`` names (a higher-order operator,
    a generator among its inputs) is not run outside its capture, and that counts as failing.
    """
    import torch

    if unverifiable is not None:
        return unverifiable
    random = random if random is not None else RandomUse()
    node, outputs, model, inputs = captured.node, captured.outputs, captured.model, captured.inputs
    placeholders = {i: inputs[i] for i in placeholder_indices}
    mutated = [i for i in captured.mutated_input_idxs if isinstance(inputs[i], torch.Tensor)]
    saved = before = StorageSnapshot({})
    try:
        generator = GeneratorFork(captured.device if random.draws else None)
    except Exception as e:  # noqa: BLE001 - capture time: a check that cannot run is a failed one
        return f"the generator's state could not be read ({type(e).__name__}: {e})"
    try:
        saved = StorageSnapshot(placeholders)
        # Every other tensor input the compiled code may write: the ones it mutates, and in a
        # backward graph the saved activations it reuses in place (AOTAutograd's donated
        # buffers, which no index list marks). Stock runs the code once; the check runs it
        # twice more, so each run starts from, and the tree's first replay gets, these bytes.
        before = StorageSnapshot({i: x for i, x in enumerate(inputs)
                                   if isinstance(x, torch.Tensor) and i not in placeholders})
        # The function runs on the recording inputs themselves, as stock runs it. It may
        # write any input it reads (a backward graph reuses a donated activation as scratch,
        # a placeholder when the activation came from outside the graphs), so every input is
        # put back from the snapshots before the replay; the snapshots are never handed to
        # a run, which keeps their bytes the originals.
        reference_args = list(inputs)
        written = {i: reference_args[i] for i in mutated}
        # An output that aliases an input may change when inputs are put back below, so it is
        # cloned; a fresh one is not (DR-I's is 6.5 GB, and the check runs at capture time,
        # beside the recorded graph's own copy of it).
        arg_storages = {a.untyped_storage()._cdata for a in reference_args if isinstance(a, torch.Tensor)}
        generator.start()
        returned = stock_run(model, reference_args, captured.device, random)
        expected = [e.clone() if isinstance(e, torch.Tensor) and e.untyped_storage()._cdata in arg_storages
                    else e for e in returned]
        del returned
        reference_mutated = {i: t.clone() for i, t in written.items()}
        del reference_args, written
        saved.put_back()
        before.put_back()
        moved = saved.fresh_views(plan.indirected)  # new addresses, and the replay's to write
        for i in plan.indirected:
            overwrite(placeholders[i])
        ptrs = list(placeholder_ptrs)
        for i, t in moved.items():
            ptrs[i] = t.data_ptr()
        pointers.fill(ptrs)
        generator.start()
        node.graph.replay()
        storages = [o.untyped_storage().data_ptr() if isinstance(o, torch.Tensor) else None for o in outputs]
        unused = {k for k, p in enumerate(storages) if p in random.unused_state}
        on_host = {k for k, p in enumerate(storages) if p in random.saved_state}
        why = (first_difference(outputs, expected, skip=unused, on_host=on_host)
               or first_difference([inputs[i] for i in mutated], [reference_mutated[i] for i in mutated],
                                   what="mutated input"))
    except Exception as e:  # noqa: BLE001 - capture time: a check that cannot run is a failed one
        return f"the check against stock kernels could not run ({type(e).__name__}: {e})"
    finally:  # whatever happened, the tree's first replay (or second capture) reads the real inputs
        try:
            saved.put_back()  # copied ones too: a graph that reused their memory overwrote them
            before.put_back()
        except Exception as e:  # noqa: BLE001 - re-raised as what it means for the recording
            raise InputsNotRestored(
                f"PI's check could not put the recording inputs' bytes back ({type(e).__name__}: {e}): "
                "neither the graph's first replay nor a second capture may read them") from e
        # and draws from the generator's state as it was, through the placeholders' pointers
        failed = []
        for undo in (generator.start, lambda: pointers.fill(placeholder_ptrs)):
            try:
                undo()
            except Exception as e:  # noqa: BLE001 - the graph may still point at the moved copies
                failed.append(f"{type(e).__name__}: {e}")
        if failed:
            return f"{UNDO_FAILED} ({'; '.join(failed)})"
        if captured.device.type == "cuda":
            torch.cuda.synchronize()
    return None if why is None else f"differs from the stock kernels with inputs moved: {why}"


UNDO_FAILED = "the graph's pointers, or the generator's state, could not be put back"


def stock_run(model: Any, args: list[Any], device: Any, random: RandomUse) -> Any:
    """``model`` run on ``args`` outside a capture, with stock kernels, as the tree's warm-up
    runs it: cuBLAS's workspaces freed around it (:func:`vendor_workspaces_released`), and
    random-number state a captured forward saved handed over as host values where the capture
    saw it read (:func:`grace.random_state.host_random_state`)."""
    with (vendor_workspaces_released(device),
          host_random_state() if random.reads_state else contextlib.nullcontext()):
        return model(args)


def vendor_workspaces_released(device: Any) -> contextlib.AbstractContextManager[None]:
    """Around the check's stock run of the model: cuBLAS's workspaces freed before and after.

    cuBLAS allocates a workspace for each stream it runs on (32 MiB on Hopper) and keeps it
    until told to free it. Stock's tree runs a model outside a capture only inside
    ``clear_cublas_manager`` (its warm-up), so the workspaces its matmuls take go back to the
    allocator; the check's run does the same, or the process would keep one allocated for
    good, above stock's peak memory in every later iteration."""
    import torch

    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()
    from torch._inductor.cudagraph_trees import clear_cublas_manager

    return clear_cublas_manager()


class InputsNotRestored(RuntimeError):
    """The check overwrote recording inputs it could not put back: the recording must stop
    (:func:`grace.pi.tree_hook.record` lets this through), since its first replay, or a second
    capture, would read the wrong bytes."""


class GeneratorFork:
    """The state of ``device``'s default generator when made; :meth:`start` puts it back, so that
    each run of the check, and then the program, draws from that state. The device's default
    generator is the one Inductor's generated code draws from (its seeds, a fallback's dropout),
    and the one a capture registers: its state is set in place, where the graph reads it at each
    replay. ``None`` (a graph that draws nothing, or not on CUDA): nothing is saved or put back."""

    def __init__(self, device: Any) -> None:
        import torch

        self._device = device if device is not None and getattr(device, "type", None) == "cuda" else None
        self._state = torch.cuda.get_rng_state(self._device) if self._device is not None else None

    def start(self) -> None:
        if self._state is not None:
            import torch

            torch.cuda.set_rng_state(self._state, self._device)


class StorageSnapshot:
    """Copies of the storages behind some tensors (keyed), each storage once.

    The check works on whole storages, not on the tensors' views: an input may be a view whose
    elements share memory (an expanded tensor, stride 0), which no elementwise copy or fill may
    write, and a storage-level copy puts back every byte the graph could have reached. Inputs
    that share a storage share its copy, so the snapshot costs each storage's size once. The
    copies are only ever read: a run that needs the inputs elsewhere gets :meth:`fresh_views`.
    """

    def __init__(self, tensors: dict[int, Any]) -> None:
        self._storages: dict[int, tuple[Any, Any]] = {}  # cdata -> (storage, its copy)
        self._layouts: dict[int, Any] = {}  # key -> the tensor, for its layout on its storage
        for i, t in tensors.items():
            storage = t.untyped_storage()
            self._storages.setdefault(storage._cdata, (storage, storage.clone()))
            self._layouts[i] = t

    def fresh_views(self, keys: Iterable[int]) -> dict[int, Any]:
        """The tensors of ``keys``, laid out as they are, over new copies of their storages
        (each storage once)."""
        import torch

        copies: dict[int, Any] = {}
        out = {}
        for i in keys:
            like = self._layouts[i]
            cdata = like.untyped_storage()._cdata
            if cdata not in copies:
                copies[cdata] = self._storages[cdata][1].clone()
            out[i] = torch.empty(0, dtype=like.dtype, device=like.device).set_(
                copies[cdata], like.storage_offset(), like.size(), like.stride())
        return out

    def put_back(self) -> None:
        """Every byte of every storage from its copy."""
        for original, copy in self._storages.values():
            original.copy_(copy)


def overwrite(t: Any) -> None:
    """Every byte of ``t``'s storage 0xFF: NaN in every float lane, -1 in every integer one."""
    import torch

    torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).fill_(0xFF)


def first_difference(outputs: Sequence[Any], expected: Sequence[Any], what: str = "output",
                      chunk: int = 1 << 26, skip: Collection[int] = (), on_host: Collection[int] = ()) -> str | None:
    """None if every tensor but those at ``skip`` matches the stock run's, else the first
    difference, described. Those at ``on_host`` (random-number state, on the device on one side
    and on the host on the other) are compared as host copies. Tensors of no elements match
    when their shapes and dtypes do.

    Tensors are compared ``chunk`` elements (or the rows that hold them) at a time: ``allclose``
    makes several temporaries of its operands' size, which for DR-I's 6.5 GB output would not fit
    beside what the check already holds.
    """
    import torch

    expected = list(expected)
    if len(expected) != len(outputs):
        return f"{len(outputs)} {what}s against {len(expected)}"
    for k, (o, e) in enumerate(zip(outputs, expected)):
        if not isinstance(o, torch.Tensor) or k in skip:
            continue
        if o.shape != e.shape or o.dtype != e.dtype:
            return f"{what} {k}: {tuple(o.shape)} {o.dtype} against {tuple(e.shape)} {e.dtype}"
        if o.numel() == 0:
            continue
        if k in on_host:
            o, e = o.cpu(), e.cpu()
        for start, (a, b) in _row_chunks(o, e, chunk):
            if a.is_floating_point() or a.is_complex():
                if torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                    continue
                nans = int(a.isnan().sum() - b.isnan().sum())
                diff = (a - b).abs().nan_to_num(float("inf")).max().item()
                return f"{what} {k} (from row {start}): max |difference| {diff:.3g}, {nans} more NaN than stock"
            if not torch.equal(a, b):
                return f"{what} {k} (from row {start}): {int((a != b).sum())} elements differ"
    return None


def _row_chunks(a: Any, b: Any, chunk: int) -> Iterator[tuple[int, tuple[Any, Any]]]:
    """``(first row, (a's rows, b's rows))`` over dimension 0, about ``chunk`` elements each."""
    if a.dim() == 0 or a.numel() <= chunk:
        yield 0, (a, b)
        return
    rows = max(1, chunk // max(1, a.numel() // a.shape[0]))
    for n, pair in enumerate(zip(a.split(rows), b.split(rows))):
        yield n * rows, pair


# The graph and the stock run launch the same kernels with the same configs; what may differ
# is the order of atomic additions (split reductions) and a vendor library's algorithm choice.
RTOL, ATOL = 1e-4, 1e-5
