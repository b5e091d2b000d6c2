"""Outputs of a replayed path that the user still holds, invalidated when a new generation ends it.

Design note
-----------
CUDA graph trees promise that reading an output after a later call overwrote its memory raises
("accessing tensor output of CUDAGraphs that has been overwritten"). A new generation (the next
compiled call, or ``cudagraph_mark_step_begin``) ends the executing path, and its memory is free
for the next recording or replay. Stock keeps the promise for a warm-up or a recording path
(``dealloc_current_path_weakrefs`` marks their outputs' storages) but not for a replayed path:
its outputs are the nodes' cached tensors, handed out again on every replay, so marking their
storages would mark every later replay's outputs. They stay readable and read whatever the next
graph wrote there: ``y = f(x); g(y)`` with ``g`` recorded or replayed as a new root can put
``g``'s output where ``y`` is, and ``y`` read after the call holds it, silently.

:class:`StaleOutputGuard` keeps the promise for replayed paths:

1. Where a path ends (``clear_current_path_state_and_set_to_none``, and ``try_end_curr_warmup``
   for a path that ends at a warm-up below replayed nodes), every output the path handed out
   that the user still holds is noted by weak reference. Four kinds, stock marking none of them
   where a replayed path ends:

   - a node's cached outputs that someone besides the tree holds. Held through another tensor
     on their storage (a view; and Inductor's code between graph partitions and AOTAutograd
     hand out such tensors in an output's place: a view of an intermediate, a 3-D linear
     layer's output, ``reinterpret_tensor`` and ``_unsafe_view`` of the graph's buffer), the
     node's cache gets a new tensor over a new storage object at the same memory
     (:func:`_replace_cached_output`, as ``_initialize_cached_tensors`` makes one) and the old
     storage object is noted: every tensor on it, whoever made it, is the user's. The tree's
     cached outputs never own their memory, so marking that storage frees nothing. Held
     through their own tensor alone, or on a storage that owns its memory (the caching
     allocator's deleter), the cache gets a new tensor on the same storage
     (:func:`_swap_cached_output`: the same version counter, a new ``TensorImpl``) and the held
     tensor is noted, as stock notes a warm-up's. Either way the next replay hands out a
     tensor no user holds, as stock's first replay does;
   - a node's outputs from its recording (a recording followed by a replay below it in one
     generation ends as a replayed path; stock marks a recording's outputs only where the path
     ends at the recording);
   - cached outputs the tree dropped from the path for an allocator restore before a warm-up or
     a recording below it (``apply_checkpoint_execution_state_in_allocator``), noted as they are
     dropped (:meth:`StaleOutputGuard.caches_dropped`);
   - outputs a replay handed out that its node does not cache (:meth:`StaleOutputGuard.replayed`):
     an output aliasing an earlier graph's, or one a recording below its node returned again
     (``_mark_prior_graph_output_as_aliased`` stops the node caching it for good), is a new
     tensor on every replay that neither the node nor stock keeps.
2. When the call that ended the path returns (``CUDAGraphTreeManager.run``), each noted output
   still alive gets the tree's overwritten-output message, as stock marks a warm-up's outputs:
   a noted storage object (``_set_storage_data_ptr_access_error_msg``, stock's mark of a
   warm-up's live storages) makes every tensor on it raise on its next read, views included;
   a noted tensor (the recording's outputs, uncached outputs) raises itself, and a view the
   user made of it does not, as in stock. The call itself reads them as its inputs first
   (``x = f(x)`` after ``cudagraph_mark_step_begin`` copies ``x`` before the replay writes);
   what AOTAutograd does after the tree returns (an output regenerated as a view of a stale
   input) raises within the user's call. A ``.grad`` autograd adopted from a backward's output
   shares its storage: where ``grace.config.copy_grads`` did not give it its own memory first
   (the switch off, a leaf it does not note), the next accumulation into it raises instead of
   summing into memory the next backward overwrote.
3. Where a path ends, an output costs two counter reads (:func:`_held_indices`) where they
   decide: a tensor nobody but the tree holds, and one a Python reference beyond the tree's
   holds, which the tree's own test calls live on the same count; the test runs only for a C++
   holder (an autograd save, a view's base). One more counter read, its storage's use count
   (:func:`_shared_indices`), finds another tensor on its storage. An output held through its
   own tensor at a generation's end, as in any loop ``out = f(x)`` (the last ``out`` is alive
   during the call), costs besides one weak reference, one ``detach`` and the cached-tensor
   registry's update, and its marking when the call returns, whose message is formatted once
   per stack trace; one held through another tensor on its storage costs a new storage object
   and tensor instead of the ``detach``. The node's other cached outputs stay as they are. A
   replay of a node with no uncached output pays one dictionary lookup.
4. On only with :func:`grace.trees.hardened` and ``grace.config.stale_outputs_raise``, as the
   tree is made; otherwise the manager's guard is None and the tree is stock's.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any, Optional

import torch
from torch._inductor.cudagraph_trees import AliasesNewOutput, is_live
from torch.multiprocessing.reductions import StorageWeakRef

from grace.tree_liveness import CachedOutputLiveness

getrefcount = sys.getrefcount
_is_cached_tensor = torch._C._is_cached_tensor
_storage_use_count = torch._C._storage_Use_Count
_has_standard_deleter = torch._C._has_Standard_Deleter


class StaleOutputGuard:
    """``CUDAGraphTreeManager.grace_stale_outputs``: held outputs of ended paths, to invalidate."""

    __slots__ = ("_message", "_messages", "_path_held", "_pending", "_uncached")

    def __init__(self, message: Callable[[Optional[str]], str]) -> None:
        self._message = message  # the tree's overwritten-output message for a stack trace
        self._messages: dict[Optional[str], str] = {}  # that message, per stack trace seen
        self._pending: list[tuple[Any, Optional[str]]] = []  # (weak reference, stack trace)
        # outputs of the executing path noted before it ends: cached ones dropped for an allocator
        # restore, and uncached ones its replays handed out
        self._path_held: list[tuple[Any, Optional[str]]] = []
        self._uncached: dict[int, tuple[int, ...]] = {}  # id(node) -> its uncached pool outputs, per cache

    def replayed(self, node: Any, outputs: Any) -> None:
        """After a replay of ``node``: the outputs it handed out that it does not cache, noted for
        when the path ends. Which outputs those are is fixed while the node's cache stands (an
        output stops being cached only at a recording below it, after the tree dropped the
        caches), so it is read once per cache: the common case is one lookup and an empty tuple."""
        uncached = self._uncached.get(id(node))
        if uncached is None:
            uncached = self._uncached[id(node)] = tuple(
                i for i, (cached, ref) in enumerate(zip(node.cached_tensor_outputs, node.outputs_weakrefs))
                if cached is None and ref is not None)
        if uncached:
            traces = node.stack_traces
            self._path_held.extend((weakref.ref(outputs[i]), traces[i] if traces else None) for i in uncached)

    def caches_dropped(self, node: Any) -> None:
        """Before the tree drops the cached outputs of the path ending at ``node`` for an allocator
        restore (the path goes on below it): the held ones are noted for when the path ends."""
        for near in node._path_from_root:
            self._uncached.pop(id(near), None)
            self._path_held.extend(_held_cached_outputs(near))

    def path_ends(self, node: Any) -> None:
        """Before the tree drops the path ending at ``node``: held cached outputs are noted and
        swapped out of their nodes' caches, and noted with them are held outputs of the nodes'
        recordings and those noted on the path before (invariant 1)."""
        pending = self._pending
        for near in node._path_from_root:
            traces = near.stack_traces
            if near.cached_tensor_outputs:
                _note_and_swap_held(near, pending)
            recorded = near.tensor_weakrefs
            if recorded.count(None) == len(recorded):
                continue  # every recording output noted or dead already, as after a path's first end
            for i in range(len(recorded)):
                if recorded[i] is not None:
                    # noted once, or dead for good: either way a None from here on, which stock's
                    # own invalidation skips as it skips a dead one
                    if recorded[i]() is not None:
                        pending.append((recorded[i], traces[i] if traces else None))
                    recorded[i] = None
        self._flush_path_held()

    def warmup_path_ends(self, node: Any) -> None:
        """Where the tree ends the path at the warm-up ``node`` (``try_end_curr_warmup``): stock
        marks what the path's warm-ups and recordings handed out and every storage the path still
        holds (``dealloc_current_path_weakrefs``), but not what the guard noted before the warm-up
        (cached outputs dropped for the allocator restore before it, uncached outputs of replays),
        nor held cached outputs of its replayed nodes: those are noted here (invariant 1)."""
        pending = self._pending
        for near in node._path_from_root:
            if getattr(near, "cached_tensor_outputs", None):  # a replayed node (warm-ups cache none)
                _note_and_swap_held(near, pending)
        self._flush_path_held()

    def _flush_path_held(self) -> None:
        """What was noted on the path before it ended, pending from now on."""
        if self._path_held:
            self._pending.extend(self._path_held)
            self._path_held = []

    def call_ends(self) -> None:
        """When the call returns: the noted outputs still alive raise on their next read
        (invariant 2). Nothing noted, the common case, is one test."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        for ref, trace in pending:
            if type(ref) is StorageWeakRef:  # a storage object, every tensor on it
                if ref.expired():
                    continue
                torch._C._set_storage_data_ptr_access_error_msg(ref.cdata, self._message_for(trace))
                continue
            tensor = ref()
            if tensor is not None:
                torch._C._set_storage_access_error_msg(tensor, self._message_for(trace))

    def _message_for(self, trace: Optional[str]) -> str:
        message = self._messages.get(trace)
        if message is None:
            message = self._messages[trace] = self._message(trace)
        return message


def _note_and_swap_held(node: Any, pending: list[tuple[Any, Optional[str]]]) -> None:
    """Each cached output of ``node`` held beyond the tree noted in ``pending`` and replaced in the
    node's cache. One that another tensor on its storage holds (a view, an alias the framework
    handed out) is cached anew over a new storage object at the same memory
    (:func:`_replace_cached_output`) and its old storage object noted, so that every tensor on it
    raises. One held through its own tensor alone, or whose storage owns its memory (marking it
    would free it), gets a new tensor on the same storage (:func:`_swap_cached_output`) and the
    held tensor noted, as stock marks a warm-up's outputs."""
    cached, traces = node.cached_tensor_outputs, node.stack_traces
    held = _held_indices(node)
    shared = _shared_indices(node)
    for i in sorted(set(held).union(shared)) if shared else held:
        trace = traces[i] if traces else None
        if i in shared:
            storage = cached[i].untyped_storage()
            if not _owns_memory(storage):
                pending.append((StorageWeakRef(storage), trace))
                _replace_cached_output(node, i)
                continue
        # held through its own tensor alone (no other tensor on its storage to reach; the tree's
        # own code between here and the call's return makes none), or on a storage that owns
        # its memory: the tensor is marked, as stock marks a warm-up's
        pending.append((weakref.ref(cached[i]), trace))
        cached[i] = _swap_cached_output(cached[i])


def _owns_memory(storage: Any) -> bool:
    """Whether ``storage`` frees its memory when released (the caching allocator's deleter), so
    that marking it would free the graph's memory; a storage already marked counts as owning:
    it is not marked again."""
    try:
        return bool(_has_standard_deleter(storage._cdata))
    except RuntimeError:
        return True


# the holders of a cached output's storage that are the tree's: the storage's Python object and
# the cached tensor (as StorageWeakRefWrapper.expired counts them)
_TREE_STORAGE_HOLDERS = 2


def _shared_indices(node: Any) -> list[int]:
    """Indices of the cached outputs of ``node`` whose storage another tensor holds: a view of
    the output, or an alias Inductor's code between graph partitions or AOTAutograd made of it
    (``reinterpret_tensor``, ``_unsafe_view``) and handed to the user in its place, which no mark
    of the output's own tensor reaches."""
    cached, refs = node.cached_tensor_outputs, node.outputs_weakrefs
    return [i for i in range(len(cached))
            if cached[i] is not None and refs[i] is not None
            and _storage_use_count(refs[i].ref.cdata) > _TREE_STORAGE_HOLDERS]


def _replace_cached_output(node: Any, i: int) -> None:
    """Output ``i`` of ``node`` cached anew, as ``_initialize_cached_tensors`` makes it: a tensor
    over a new storage object at the output's memory, registered, and the node's weak reference
    moved to it. The old storage object (which the graph's memory does not belong to: the
    tree's cached outputs never own it) is left to whoever holds it, to be marked."""
    old = node.cached_tensor_outputs[i]
    metadata = node.outputs_metadata[i]
    fresh = node._reconstruct_from_tensor_metadata(metadata, node.create_storage(metadata))
    if _is_cached_tensor(old):
        torch._C._remove_cached_tensor(old)
        torch._C._add_cached_tensor(fresh)
    node.cached_tensor_outputs[i] = fresh
    node.outputs_weakrefs[i].swap_weakref(fresh.untyped_storage()._weak_ref())
    # outputs of the node on the same storage (AliasesNewOutput(i)) follow it: the tree would
    # otherwise count the old, marked storage as live memory in its next allocator restore
    for j, alias in enumerate(node.output_storage_alias):
        if isinstance(alias, AliasesNewOutput) and alias.index == i and node.outputs_weakrefs[j] is not None:
            node.outputs_weakrefs[j].swap_weakref(fresh.untyped_storage()._weak_ref())


def _held_indices(node: Any) -> list[int]:
    """Indices of the cached outputs of ``node`` whose own tensor someone besides the tree holds
    (a view too: it holds its base's tensor). Another tensor on the output's storage alone
    (``set_``, an alias the framework made) is :func:`_shared_indices`' to find. A holder of the
    storage's Python object alone (``untyped_storage()``), or of its raw address (DLPack,
    ``__cuda_array_interface__``), is one of the tree's own counts or none: neither finds it,
    and it reads on, as in stock.

    The tree's liveness test (``is_live`` through the node's ``CachedOutputLiveness``) costs some
    microseconds an output, paid on every output of the path wherever a path ends. Two counter
    reads decide the common cases: a Python reference count and a ``TensorImpl`` use count at
    the tree's own baselines (``check_refcount``'s two or three, ``made_with``) mean nobody else
    holds the tensor; a Python count above its baseline means someone does, as the tree's test
    says on the same count (its first step, stock's ``check_refcount``, calls the output live on
    it before anything else runs). Only a use count above ``made_with`` with no Python holder (a
    C++ holder: an autograd save, a view) goes to the tree's test, which may find the holder is
    the tree's own (a dead output's autograd history) and release it. An output whose test is
    not the hardened one always gets the test.
    """
    cached, refs = node.cached_tensor_outputs, node.outputs_weakrefs
    held = []
    for i in range(len(cached)):
        out = cached[i]
        if out is None:
            continue
        ref = refs[i]
        check = ref.extra_ref_check if ref is not None else None
        if type(check) is CachedOutputLiveness:
            uses = out._use_count()
            # the list, ``out`` and getrefcount's argument; one more where C++ holds the PyObject
            if getrefcount(out) > 3 + (uses > 1):
                held.append(i)
                continue
            if uses <= check.made_with:
                continue
        del out
        if is_live(ref):
            held.append(i)
    return held


def _held_cached_outputs(node: Any) -> list[tuple[Any, Optional[str]]]:
    """(weak reference, stack trace) of each cached output of ``node`` the user still holds."""
    cached = node.cached_tensor_outputs
    if not cached:
        return []
    traces = node.stack_traces
    return [(weakref.ref(cached[i]), traces[i] if traces else None) for i in _held_indices(node)]


def _swap_cached_output(held: Any) -> Any:
    """The tensor that takes a held cached output's place in its node's cache.

    ``detach`` makes a new ``TensorImpl`` on the same storage, sharing the version counter, as
    stock's handing out of the same tensor does: the node's weak reference to that storage, its
    liveness test (which reads the cache by index, and whose use count at making matches: one
    Python object; the registry holds a weak reference) and the graph's memory are unchanged.
    Where the held one is in the cached-tensor registry, it leaves it and the new one takes its
    place; marking it later releases only its own reference to the storage."""
    fresh = held.detach()
    if _is_cached_tensor(held):
        torch._C._remove_cached_tensor(held)
        torch._C._add_cached_tensor(fresh)
    return fresh


def stale_output_guard(message: Callable[[Optional[str]], str]) -> Optional[StaleOutputGuard]:
    """The manager's guard as the tree is made: one where :func:`grace.trees.hardened` and
    ``grace.config.stale_outputs_raise``, else None (invariant 4)."""
    from grace import config
    from grace.trees import hardened

    return StaleOutputGuard(message) if hardened() and config.stale_outputs_raise else None
