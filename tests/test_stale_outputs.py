"""Held outputs of a replayed path raise once a new generation ended it (grace.stale_outputs).

A node's cached outputs are made on the CPU as ``CUDAGraphNode._initialize_cached_tensors``
makes them, judged by the tree's own ``StorageWeakRefWrapper`` and ``check_refcount``, and
given up with the tree's own ``CUDAGraphNode.remove_node_cached_tensors`` where the tree drops
them. The GPU side is ``scripts/probes/handoff_clobber.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tree_fakes import FakeNode as _Node, cached_output  # noqa: E402


def _guard() -> Any:
    from grace.stale_outputs import StaleOutputGuard
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    return StaleOutputGuard(CUDAGraphTreeManager.format_dealloc_msg)


def test_a_held_output_is_read_by_the_call_and_raises_after_it() -> None:
    from torch._inductor.cudagraph_trees import is_live

    node, guard = _Node(2), _guard()
    y = node.cached_tensor_outputs[0]  # the user holds output 0; output 1 is dead
    other = id(node.cached_tensor_outputs[1])
    guard.path_ends(node)
    fresh = node.cached_tensor_outputs[0]
    assert fresh is not y, "the next replay hands out a tensor the user does not hold"
    assert id(node.cached_tensor_outputs[1]) == other, "an output nobody holds keeps its cached tensor"
    assert fresh.untyped_storage().data_ptr() == y.untyped_storage().data_ptr(), "the graph's memory"
    y.data_ptr()  # the call that ended the path still reads it as its input
    assert is_live(node.outputs_weakrefs[0]), "held until the call returns"
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 0"):
        y.data_ptr()
    fresh.data_ptr()
    del fresh
    assert not is_live(node.outputs_weakrefs[0]), "marked, the held one no longer holds the storage"
    assert not is_live(node.outputs_weakrefs[1])
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)


def test_a_loop_holding_the_last_output_swaps_one_tensor_per_call() -> None:
    """``out = f(x)`` in a loop: the last ``out`` is alive during each call. Each path end swaps
    that one output, the one before stops holding the storage, and the tree's liveness test
    (stock's, then hardened) counts the new one dead as soon as the user lets it go."""
    from torch._inductor.cudagraph_trees import is_live

    node, guard = _Node(1, hardened=True), _guard()
    ref = node.outputs_weakrefs[0]
    out = node.cached_tensor_outputs[0]
    handed = [out]
    for _ in range(3):
        guard.path_ends(node)
        guard.call_ends()
        out = node.cached_tensor_outputs[0]  # the replay hands out the swapped-in tensor
        handed.append(out)
        assert is_live(ref)
    assert len({id(t) for t in handed}) == 4
    for old in handed[:-1]:
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
            old.data_ptr()
    del out, handed, old
    assert not is_live(ref), "only the tree holds the output: dead, by the hardened test too"
    guard.path_ends(node)
    guard.call_ends()
    node.cached_tensor_outputs[0].data_ptr()
    torch._C._remove_cached_tensor(node.cached_tensor_outputs[0])


def test_a_path_nobody_holds_keeps_its_cache_and_nothing_is_invalidated() -> None:
    node, guard = _Node(2), _guard()
    ids = [id(t) for t in node.cached_tensor_outputs]
    guard.path_ends(node)
    assert [id(t) for t in node.cached_tensor_outputs] == ids
    guard.call_ends()
    for t in node.cached_tensor_outputs:
        t.data_ptr()
        torch._C._remove_cached_tensor(t)


def test_an_output_held_through_a_view_is_replaced_and_the_view_raises_after_the_call() -> None:
    node, guard = _Node(1), _guard()
    base = node.cached_tensor_outputs[0]
    view = base.view(4, 4)
    del base
    guard.path_ends(node)
    fresh = node.cached_tensor_outputs[0]
    assert view._base is not fresh, "the next replay hands out a new tensor"
    assert fresh.untyped_storage()._cdata != view.untyped_storage()._cdata, "over a new storage object"
    assert fresh.data_ptr() == view.data_ptr(), "at the graph's memory"
    view.sum()  # the call that ended the path still reads it as its input
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        view.sum()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        view._base.data_ptr()
    fresh.sum()
    torch._C._remove_cached_tensor(fresh)


def test_an_alias_the_framework_handed_out_in_the_outputs_place_raises_after_the_call() -> None:
    """Inductor's code between graph partitions returns ``reinterpret_tensor(buf, ...)`` of a
    partition's output, and AOTAutograd ``_unsafe_view`` of it: new tensors on the output's
    storage, not views of its tensor. Held in the output's place, each keeps the output live for
    the tree and raises once a call ended its path."""
    node, guard = _Node(2, hardened=True), _guard()
    out0, out1 = node.cached_tensor_outputs
    reinterpreted = torch.empty(0).set_(out0.untyped_storage(), 0, (4, 4), (4, 1))
    unsafe_view = torch.ops.aten._unsafe_view(out1, (4, 4))
    del out0, out1
    guard.path_ends(node)
    guard.call_ends()
    for alias in (reinterpreted, unsafe_view):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
            alias.sum()
    for t in node.cached_tensor_outputs:
        t.sum()
        torch._C._remove_cached_tensor(t)


def test_an_output_held_both_ways_and_its_same_storage_sibling_follow_the_new_storage() -> None:
    """Output 0 held through its own tensor and a view at once, and output 1 returned on the same
    storage (``AliasesNewOutput(0)``, uncached): both raise after the call, and the tree's weak
    reference of each now reads the new storage, not the marked one."""
    from torch._inductor.cudagraph_trees import AliasesNewOutput, StorageWeakRefWrapper, is_live

    node, guard = _Node(1), _guard()
    out = node.cached_tensor_outputs[0]
    sibling = out.view(4, 4)  # what the replay hands out for output 1
    node.output_storage_alias.append(AliasesNewOutput(0))
    node.cached_tensor_outputs.append(None)
    node.outputs_weakrefs.append(StorageWeakRefWrapper(sibling))
    node.stack_traces.append("line 1")
    guard.path_ends(node)
    guard.call_ends()
    fresh = node.cached_tensor_outputs[0]
    for stale in (out, sibling):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
            stale.sum()
    new_storage = fresh.untyped_storage()._cdata
    assert node.outputs_weakrefs[0].ref.cdata == new_storage == node.outputs_weakrefs[1].ref.cdata
    del out, sibling, fresh
    assert not is_live(node.outputs_weakrefs[0]), "the stale tensors no longer keep the output live"
    torch._C._remove_cached_tensor(node.cached_tensor_outputs[0])


def test_a_shared_storage_that_owns_its_memory_is_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Marking a storage with the caching allocator's deleter would free the graph's memory: the
    output's own tensor is swapped and marked instead, as stock marks a warm-up's, and the other
    tensor on its storage reads on."""
    import grace.stale_outputs as stale_outputs

    monkeypatch.setattr(stale_outputs, "_has_standard_deleter", lambda cdata: True)
    node, guard = _Node(1), _guard()
    out = node.cached_tensor_outputs[0]
    sharer = torch.empty(0).set_(out.untyped_storage())
    storage = out.untyped_storage()._cdata
    guard.path_ends(node)
    guard.call_ends()
    assert node.cached_tensor_outputs[0].untyped_storage()._cdata == storage, "the same storage object"
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        out.sum()
    sharer.sum()
    del out, sharer
    torch._C._remove_cached_tensor(node.cached_tensor_outputs[0])


def test_held_outputs_of_a_recording_raise_where_a_replayed_path_below_it_ends() -> None:
    """A node recorded in this generation, then a replay below it: the path ends as a replayed
    one, where stock marks nothing; the recording's held output raises after the call."""
    from torch.utils.weak import TensorWeakRef

    node, guard = _Node(1), _guard()
    recorded, dropped = torch.ones(4), torch.ones(4)
    node.tensor_weakrefs = [TensorWeakRef(recorded)]
    guard.path_ends(node)
    assert node.tensor_weakrefs == [None], "noted once"
    recorded.data_ptr()
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 0"):
        recorded.data_ptr()
    node.tensor_weakrefs = [TensorWeakRef(dropped)]
    del dropped
    guard.path_ends(node)
    guard.call_ends()  # a recording's output nobody holds is nothing to invalidate
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)


def test_cached_outputs_dropped_for_an_allocator_restore_raise_where_the_path_ends() -> None:
    """The tree drops the path's caches before a warm-up or recording below it; a held output
    then is no cached output of its node where the path ends, and still raises after."""
    node, guard = _Node(2), _guard()
    y = node.cached_tensor_outputs[1]
    guard.caches_dropped(node)
    node.remove_node_cached_tensors()  # as apply_checkpoint_execution_state_in_allocator does
    guard.call_ends()
    y.data_ptr()  # the path goes on: still readable
    guard.path_ends(node)
    y.data_ptr()
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 1"):
        y.data_ptr()


class _WarmupBelow:
    """A warm-up node below ``parent`` on the path, as ``CUDAWarmupNode`` is for the guard: no
    cache, its own outputs stock's to mark."""

    def __init__(self, parent: Any) -> None:
        self.parent = parent
        self.stack_traces = ["warm-up line"]
        self.tensor_weakrefs: list[Any] = [None]

    @property
    def _path_from_root(self) -> Any:
        yield self.parent
        yield self


def test_outputs_noted_before_a_warm_up_raise_where_the_warm_up_ends_the_path() -> None:
    """A warm-up below a replayed node follows an allocator restore that drops the node's caches
    (noted by the guard); where ``try_end_curr_warmup`` ends that path, the held output raises
    after the call, not at some later path end; a held cached output of a replayed node on the
    path, too."""
    node, guard = _Node(2), _guard()
    y = node.cached_tensor_outputs[1]
    guard.caches_dropped(node)
    node.remove_node_cached_tensors()  # as apply_checkpoint_execution_state_in_allocator does
    guard.warmup_path_ends(_WarmupBelow(node))
    y.data_ptr()  # the call that ended the path reads it as an input first
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 1"):
        y.data_ptr()

    node, guard = _Node(2), _guard()  # caches standing: the held one swapped and noted
    z = node.cached_tensor_outputs[0]
    guard.warmup_path_ends(_WarmupBelow(node))
    assert node.cached_tensor_outputs[0] is not z
    guard.call_ends()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 0"):
        z.data_ptr()
    node.cached_tensor_outputs[1].data_ptr()  # not held: cached and readable
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)


def test_outputs_a_replay_hands_out_uncached_raise_where_the_path_ends() -> None:
    """An output its node does not cache (one a recording below returned again) is a new tensor
    on every replay: each one the user holds raises after the path ends; cached ones are left to
    the path's own rule, and an output nobody holds costs nothing."""
    from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

    node, guard = _Node(2), _guard()
    node.remove_node_cached_tensors()
    kept = cached_output(16)
    node.cached_tensor_outputs[:] = [kept, None]  # output 1 no longer cached, as the tree rebuilds it
    first, second = torch.ones(4), torch.ones(4)  # two replays' new tensors for output 1
    node.outputs_weakrefs[1] = StorageWeakRefWrapper(second)
    guard.replayed(node, [kept, first])
    guard.replayed(node, [kept, second])
    guard.call_ends()
    first.data_ptr(), second.data_ptr()  # the path goes on: still readable
    guard.path_ends(node)  # output 0 of the first cache is not held: the node keeps its cache
    assert node.cached_tensor_outputs[0] is kept
    guard.call_ends()
    for t in (first, second):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*line 1"):
            t.data_ptr()
    kept.data_ptr()
    torch._C._remove_cached_tensor(kept)


def test_the_guard_exists_only_with_its_switch_and_a_hardened_tree() -> None:
    import grace.config
    from grace.stale_outputs import StaleOutputGuard, stale_output_guard

    off = {"cgct": False, "pi": False, "scg": False, "lean_replay": False}
    cases = [({**off, "cgct": True, "stale_outputs_raise": True}, True),
             ({**off, "cgct": True, "stale_outputs_raise": False}, False),
             ({**off, "stale_outputs_raise": True}, False)]
    for switches, expected in cases:
        with grace.config.patch(**switches):
            assert isinstance(stale_output_guard(str), StaleOutputGuard) is expected, switches


def test_the_outputs_held_are_those_the_trees_test_calls_live() -> None:
    """Where a path ends the guard replaces and marks the outputs someone besides the tree holds,
    as the tree's test says: a Python holder, a view, an autograd save, and a tensor sharing the
    output's storage alone (``set_``). After the call each of them raises; nothing else changes."""
    from grace.stale_outputs import _held_indices, _shared_indices
    from torch._inductor.cudagraph_trees import is_live

    node, guard = _Node(5, hardened=True), _guard()
    assert _held_indices(node) == [] == _shared_indices(node) == [i for i in range(5) if is_live(node.outputs_weakrefs[i])]
    python_holder = node.cached_tensor_outputs[0]
    view = node.cached_tensor_outputs[1][2:]
    w = torch.ones(16, requires_grad=True)
    saved = w * node.cached_tensor_outputs[2]  # autograd saves output 2 for w's gradient, from C++
    sharer = torch.empty(0).set_(node.cached_tensor_outputs[3].untyped_storage())  # its storage alone
    assert _held_indices(node) == [0, 1, 2]
    assert _shared_indices(node) == [1, 3]
    assert [i for i in range(5) if is_live(node.outputs_weakrefs[i])] == [0, 1, 2, 3]
    kept = id(node.cached_tensor_outputs[4])
    guard.path_ends(node)
    guard.call_ends()
    assert id(node.cached_tensor_outputs[4]) == kept
    for stale in (python_holder, view, sharer):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
            stale.sum()
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        saved.sum().backward()
    del python_holder, view, saved, sharer
    assert _held_indices(node) == [] == _shared_indices(node)
    assert not any(is_live(ref) for ref in node.outputs_weakrefs)
    for t in node.cached_tensor_outputs:
        t.sum()
        torch._C._remove_cached_tensor(t)


def test_the_counts_decide_a_python_holder_as_the_trees_test_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """An output a Python reference beyond the tree's holds is held by its counts alone, as the
    tree's test says (its first step, ``check_refcount``, reads the same count), with one holder,
    two, or one beside an autograd save; the tree's test runs only for the holders the counts
    cannot tell (a view, a C++ holder alone)."""
    import grace.stale_outputs as stale_outputs
    from torch._inductor.cudagraph_trees import is_live

    node = _Node(4, hardened=True)
    tested: list[int] = []
    monkeypatch.setattr(stale_outputs, "is_live", lambda ref: tested.append(1) or is_live(ref))
    one = node.cached_tensor_outputs[0]
    two = (node.cached_tensor_outputs[1], node.cached_tensor_outputs[1])
    w = torch.ones(16, requires_grad=True)
    saved_and_held = node.cached_tensor_outputs[2]
    product = w * saved_and_held
    view = node.cached_tensor_outputs[3][1:]
    assert stale_outputs._held_indices(node) == [0, 1, 2, 3]
    assert len(tested) == 1, "the view alone goes to the tree's test"
    assert [i for i in range(4) if is_live(node.outputs_weakrefs[i])] == [0, 1, 2, 3]
    del one, two, saved_and_held, view
    assert stale_outputs._held_indices(node) == [2], "the autograd save alone still holds output 2"
    del product
    assert stale_outputs._held_indices(node) == []
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)


def test_the_overwritten_output_message_is_the_trees_and_formatted_once_per_stack_trace() -> None:
    """Marking a held output in every call of a loop formats the tree's message once for its
    stack trace; the tensor raises it."""
    from grace.stale_outputs import StaleOutputGuard
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    formatted: list[object] = []

    def message(trace: object) -> str:
        formatted.append(trace)
        return CUDAGraphTreeManager.format_dealloc_msg(trace)  # type: ignore[arg-type]

    node, guard = _Node(1), StaleOutputGuard(message)
    held = []
    for _ in range(3):
        held.append(node.cached_tensor_outputs[0])
        guard.path_ends(node)
        guard.call_ends()
    assert formatted == ["line 0"]
    for y in held:
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run. Stack trace: line 0"):
            y.sum()
    for t in node.cached_tensor_outputs:
        torch._C._remove_cached_tensor(t)
