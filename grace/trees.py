"""torch's CUDA graph trees as GraCE reads and hardens them.

Read: the recorded graphs and their pools, for reports, SCG's profiles and tests. Hardened, with
any GraCE switch on (:func:`hardened`): no cyclic garbage collection while the tree snapshots
liveness or restores its allocator, and the inputs of a replay, a warm-up, a recording or a run
without a graph read before the tree acts on them, so that an input a replay overwrote raises
the tree's error with the tree as it was.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import Any


def nodes(manager: Any) -> list[Any]:
    """Every recorded node of one tree (``CUDAGraphTreeManager``), roots and descendants."""
    roots = getattr(manager, "roots", None) or {}
    out, stack = [], [n for ns in roots.values() for n in ns]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(c for children in node.children.values() for c in children)
    return out


def recorded_nodes() -> list[Any]:
    """Every recorded node of this process's trees, all devices."""
    import torch
    from torch._inductor import cudagraph_trees

    managers = (cudagraph_trees.get_manager(d, create_if_none_exists=False) for d in range(torch.cuda.device_count()))
    return [n for m in managers if m is not None for n in nodes(m)]


def graph_pool_bytes() -> int:
    """Device bytes held in CUDA graph private pools: the recorded graphs' placeholders, outputs
    and intermediates.

    The allocator's allocated-bytes statistics stop counting that memory once a graph is
    recorded (the trees rebuild outputs over it without allocating), so a peak of allocated
    bytes does not show what graphs cost; the pools' segments do. Takes a memory snapshot:
    for reports, never on a timed path.
    """
    import torch

    return sum(int(seg["total_size"]) for seg in torch.cuda.memory_snapshot()
               if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0))


def release_cached_memory(device: Any) -> int:
    """Return the caching allocator's free segments to ``device``; the bytes given back.

    For capture-time work that held large temporaries (SCG's private trees, PI's check): left
    cached, they would stay reserved for the life of the process. Pools still in use (the real
    tree's) are untouched. Synchronizes; never on a timed path.
    """
    import torch

    before = torch.cuda.memory_reserved(device)
    torch.cuda.empty_cache()
    return before - torch.cuda.memory_reserved(device)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, then as it was.

    A CUDA graph tree node notes which outputs of earlier graphs die while it records, and each
    replay checks that the same ones are dead: the tree assumes that what dies during a
    recording is what the recording's own reference counts free, which a replay repeats. The
    cyclic collector instead runs wherever allocations cross its threshold, and GraCE's
    capture-time work (PI's watch, variants and check, SCG's profiles) allocates enough Python
    objects that it ran during almost every recording: an output that only a reference cycle
    kept alive died there, and the next replay that found it alive failed the tree's check.
    The collector also must not free a CUDA graph (a private tree's, say) during a capture,
    which would invalidate it, nor a storage that the tree's allocator restore has listed by raw
    pointer. Reference counting still frees everything else as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def hardened() -> bool:
    """Whether the tree runs with GraCE's hardening (:func:`collector_paused_if_hardened`,
    :func:`check_inputs_readable` before its allocator restore): with any GraCE switch on, lean
    replay's included (its dispatch changes what Python allocates, and so when the collector
    runs: unpaused, a collection between the liveness snapshot and the allocator checkpoint
    breaks the restore, as it can in stock). With every switch off the tree is stock PyTorch's,
    hardening included."""
    from grace import config

    return bool(config.cgct or config.pi or config.scg or config.lean_replay)


def collector_paused_if_hardened() -> contextlib.AbstractContextManager[None]:
    """:func:`collector_paused` where the tree is :func:`hardened`, else nothing."""
    return collector_paused() if hardened() else contextlib.nullcontext()


def replay_input_check() -> Any:
    """What ``CUDAGraphTreeManager.execute_node`` calls before a replay makes its node current:
    :func:`check_replay_inputs_readable` where the tree is :func:`hardened` as it is made,
    else None (stock's execute_node)."""
    return check_replay_inputs_readable if hardened() else None


def check_replay_inputs_readable(node: Any, inputs: Sequence[Any]) -> None:
    """Raise what reading a replay's copied or indirected inputs raises, before its node becomes
    current.

    The tree makes the node current (path, state, generation) and then runs it, whose first
    act is reading those inputs (the copy into placeholders, or PI's guard). An input whose
    memory a replay overwrote raises there, and the node stays current still counting its
    previous run's outputs, storages the tree freed when it ended their path, as its own; the
    next allocator checkpoint then lists one of them, if anything still refers to it, and fails
    in ``_cuda_setCheckpointPoolState``. Read first, the same error reaches the caller with the
    path as it was. One data-pointer read per tensor input the replay reads: on the replay path.
    """
    import torch

    tensor = torch.Tensor
    for i in node.non_static_input_idx:
        t = inputs[i]
        if isinstance(t, tensor):
            t.data_ptr()


def check_inputs_readable(inputs: Sequence[Any]) -> None:
    """Raise what reading each tensor input's memory raises, before the tree changes any state.

    An input whose memory a later replay overwrote (an earlier graph's output, fed back) raises
    "accessing tensor output of CUDAGraphs that has been overwritten" on its first data-pointer
    read. The tree makes that read only after it has applied its allocator checkpoint for a
    warm-up or a recording, and after a warm-up node has joined its path; raised there, the
    call leaves the allocator restored with no node after it (the next restore then fails in
    ``_cuda_setCheckpointPoolState``) or a node without outputs on the path (the next end of a
    warm-up fails the tree's assertion). Called first, the same error reaches the caller and
    the tree is as it was.
    """
    import torch

    for t in inputs:
        if isinstance(t, torch.Tensor):
            t.untyped_storage().data_ptr()


class EagerFallback:
    """The tree's runs of a function's compiled code without a graph, with its inputs read first.

    ``CUDAGraphTreeManager._run`` runs a function's compiled code directly where it gives the
    function no graph: one that mutates an input the tree does not manage, one past its
    re-record limit, and one SCG keeps out. An input there may be a graph output that a later
    replay overwrote, fed back. Reading it raises the tree's overwritten-output error; but where
    the compiled code first reads it in a Triton kernel's launch, Inductor's static launcher
    calls its ``data_ptr`` from C++, does not check for the error and dereferences the missing
    result: the process dies with SIGSEGV. Each run here first reads the data pointer of every
    non-static tensor input, so the error reaches the caller as a Python exception. Parameters
    and buffers (static inputs) are never graph outputs and are not read. The inputs read are
    found at a function's first run: one data-pointer read per such input per run, on a path
    that launches its kernels one by one anyway.
    """

    __slots__ = ("_functions", "_read")

    def __init__(self, functions: dict[Any, Any]) -> None:
        self._functions = functions  # the manager's ids_to_funcs: FunctionID -> WrappedFunction
        self._read: dict[Any, tuple[int, ...]] = {}  # FunctionID -> the inputs each run reads first

    def run(self, new_inputs: list[Any], function_id: Any) -> Any:
        """What stock's fallback returns, ``ids_to_funcs[function_id].model(new_inputs)``, or the
        error reading an overwritten input raises."""
        read = self._read.get(function_id)
        if read is None:
            read = self._read[function_id] = self._inputs_read(new_inputs, function_id)
        for i in read:
            new_inputs[i].data_ptr()
        return self._functions[function_id].model(new_inputs)

    def _inputs_read(self, inputs: Sequence[Any], function_id: Any) -> tuple[int, ...]:
        import torch

        static = frozenset(self._functions[function_id].static_input_idxs)
        return tuple(i for i, x in enumerate(inputs) if i not in static and isinstance(x, torch.Tensor))


def eager_fallback(functions: dict[Any, Any]) -> EagerFallback | None:
    """The manager's :class:`EagerFallback` where the tree is :func:`hardened` as it is made,
    else None (stock's fallbacks)."""
    return EagerFallback(functions) if hardened() else None
