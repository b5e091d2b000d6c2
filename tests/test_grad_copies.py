"""A backward graph's outputs copied into ``.grad`` rather than adopted (grace.grad_copies).

The tree's part is made on the CPU as the node makes it: one cached tensor per output, kept in
the node's list, registered (or not) as a cached tensor, rewritten in place by every replay and
handed out again; autograd's ``AccumulateGrad`` is torch's own.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch")

import grace.config  # noqa: E402
from grace.grad_copies import backward_output_hold, copies_grads, outputs_unregistered  # noqa: E402

_OFF = {"cgct": False, "pi": False, "scg": False, "lean_replay": False}


def _accumulate(backward_output: Callable[[Any], Any]) -> list[float]:
    """``.grad`` after each of three backwards that accumulate (1, then 2, then 3), where the
    backward's gradient is what ``backward_output`` makes of the values the graph computed."""

    class Replay(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return (w * x).sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return backward_output(g * x), None

    w = torch.zeros(4, requires_grad=True)
    seen = []
    for value in (1.0, 2.0, 3.0):
        Replay.apply(w, torch.full((4,), value)).backward()
        seen.append(float(w.grad[0]))
    return seen


def _accumulated_grads(backward_registered: bool) -> list[float]:
    """:func:`_accumulate` where the backward hands out one cached output that it rewrites in
    place, as a replayed graph does."""
    torch._C._set_cached_tensors_enabled(True)
    cache = [torch.empty(4)]  # the node's list
    if backward_registered:
        torch._C._add_cached_tensor(cache[0])

    def cached_output(values: Any) -> Any:
        cache[0].copy_(values)  # the graph writes its output where it always does
        return cache[0]

    try:
        return _accumulate(cached_output)
    finally:
        torch._C._remove_cached_tensor(cache[0])


def test_an_adopted_backward_output_loses_accumulated_gradients_and_a_copied_one_sums_them() -> None:
    """Stock registers the output, ``AccumulateGrad`` adopts it, and the second backward writes
    over the first one's gradients (2 + 2 where 1 + 2 is right); unregistered, it is copied."""
    assert _accumulated_grads(backward_registered=True)[:2] == [1.0, 4.0]
    assert _accumulated_grads(backward_registered=False) == [1.0, 3.0, 6.0]


@pytest.mark.parametrize(("switches", "backward", "unregistered"), [
    ({**_OFF, "cgct": True, "copy_grads": True}, True, True),
    ({**_OFF, "cgct": True, "copy_grads": True}, False, False),  # forward and inference graphs: stock's
    ({**_OFF, "cgct": True, "copy_grads": False}, True, False),
    ({**_OFF, "copy_grads": True}, True, False),  # every GraCE switch off: stock's
])
def test_only_a_backward_graphs_outputs_stay_unregistered_and_only_with_the_switch(
        switches: dict[str, bool], backward: bool, unregistered: bool) -> None:
    with grace.config.patch(**switches):
        assert copies_grads() is (switches["copy_grads"] and switches["cgct"])
        assert outputs_unregistered(backward) is unregistered


def test_the_stale_output_guard_keeps_a_backward_outputs_registration_as_it_swaps_it() -> None:
    """A held output is swapped for a new tensor on its storage where a path ends: the new one
    is registered exactly where the old one was."""
    from grace.stale_outputs import _swap_cached_output

    torch._C._set_cached_tensors_enabled(True)
    registered, unregistered = torch.empty(4), torch.empty(4)
    torch._C._add_cached_tensor(registered)
    fresh = _swap_cached_output(registered)
    assert torch._C._is_cached_tensor(fresh) and not torch._C._is_cached_tensor(registered)
    assert not torch._C._is_cached_tensor(_swap_cached_output(unregistered))
    torch._C._remove_cached_tensor(fresh)


def _accumulated_grads_of_uncached_output(hold: Any) -> list[float]:
    """:func:`_accumulate` where the backward returns a new tensor over one storage it rewrites
    in place, as a node does with an output it does not cache, and hands it to ``hold`` (None:
    nothing references it) as the tree manager does; ``hold`` lets go as each pass ends."""
    storage = torch.empty(4)

    def uncached_output(values: Any) -> Any:
        storage.copy_(values)
        out = torch.empty(0).set_(storage.untyped_storage(), 0, (4,), (1,))
        if hold is not None:
            hold.hold([out])
        return out

    seen = _accumulate(uncached_output)
    assert hold is None or hold.held_calls == 0
    return seen


def test_an_uncached_output_is_adopted_unless_held_until_the_backward_pass_ends() -> None:
    """Unregistered is not enough for an output the node makes anew on every replay: nothing
    references it, so ``AccumulateGrad`` adopts it (1, then 2 + 2); held through the pass, it
    is copied and accumulation sums (1, 3, 6)."""
    from grace.grad_copies import BackwardOutputHold

    assert _accumulated_grads_of_uncached_output(None)[:2] == [1.0, 4.0]
    assert _accumulated_grads_of_uncached_output(BackwardOutputHold()) == [1.0, 3.0, 6.0]


def _doubling(backward: Callable[[Any], None]) -> Any:
    """``x * 2`` whose backward calls ``backward(g)`` first (the tree's part, say), then returns
    ``g * 2``."""

    class Doubling(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            backward(g)
            return g * 2

    return Doubling


def test_what_a_backward_pass_that_raised_held_is_let_go_at_the_next_call_outside_one() -> None:
    """Autograd runs no callback of a pass that raised: the outputs stay referenced until
    ``before_call`` outside a backward pass, and a call inside one keeps them."""
    from grace.grad_copies import BackwardOutputHold

    hold = BackwardOutputHold()
    inside: list[int] = []

    def held(g: Any) -> None:
        hold.hold([g * 2])
        hold.before_call()  # a forward inside the pass (a checkpoint's recomputation)
        inside.append(hold.held_calls)

    def raises(g: Any) -> None:
        raise ValueError("a backward that raises")

    Held, Raises = _doubling(held), _doubling(raises)

    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError):  # Held's backward runs first, then Raises' raises
        Held.apply(Raises.apply(w)).sum().backward()
    assert inside == [1] and hold.held_calls == 1
    hold.before_call()
    assert hold.held_calls == 0


def test_a_backward_graph_called_outside_autograds_engine_is_not_held(caplog: Any) -> None:
    from grace.grad_copies import BackwardOutputHold

    hold = BackwardOutputHold()
    with caplog.at_level("INFO", logger="grace"):
        hold.hold([torch.ones(2)])
        hold.hold([torch.ones(2)])
    assert hold.held_calls == 0
    assert sum("outside autograd's engine" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(("switches", "made"), [
    ({**_OFF, "cgct": True, "copy_grads": True}, True),
    ({**_OFF, "cgct": True, "copy_grads": False}, False),
    ({**_OFF, "copy_grads": True}, False),  # every GraCE switch off: stock's
])
def test_the_manager_holds_backward_outputs_only_with_the_switch(switches: dict[str, bool], made: bool) -> None:
    with grace.config.patch(**switches):
        assert (backward_output_hold() is not None) is made


def test_a_backward_pass_nested_in_another_lets_go_of_its_own_outputs_only() -> None:
    """A reentrant backward (``torch.autograd.grad`` inside a backward) ends first: what the
    outer pass held stays referenced until the outer pass ends."""
    from grace.grad_copies import BackwardOutputHold

    hold = BackwardOutputHold()
    seen: list[int] = []

    Inner = _doubling(lambda g: hold.hold([g * 2]))

    def outer(g: Any) -> None:
        hold.hold([g * 3])
        with torch.enable_grad():
            v = torch.ones(2, requires_grad=True)
            torch.autograd.grad(Inner.apply(v).sum(), v)  # a nested pass: holds, then ends
        seen.append(hold.held_calls)  # the outer pass's call only

    Outer = _doubling(outer)
    Outer.apply(torch.zeros(2, requires_grad=True)).sum().backward()
    assert seen == [1] and hold.held_calls == 0


class _Manager:
    """What the partition wrapper reads of the device's tree manager."""

    def __init__(self, hold: Any) -> None:
        self.grace_backward_outputs = hold


class _PartitionedGraph:
    """What :func:`grace.grad_copies.hold_partitioned_backward_outputs` reads of a
    ``CompiledFxGraph``: ``current_callable``, here the wrapper around one partition that returns
    a new view of the partition's output on every call, as ``reinterpret_tensor`` does. The
    partition's call goes through ``manager``, which holds the partition's output as the tree
    manager does."""

    def __init__(self, manager: Optional[_Manager]) -> None:
        self.partition_output = torch.empty(8)  # the tree's output, rewritten by every replay

        def call(inputs: list[Any]) -> list[Any]:
            (values,) = inputs
            inputs.clear()  # the boxed calling convention
            self.partition_output[:4].copy_(values)
            if manager is not None and manager.grace_backward_outputs is not None:
                manager.grace_backward_outputs.hold([self.partition_output])
            return [self.partition_output[:4]]

        self.current_callable: Callable[[list[Any]], list[Any]] = call


def _accumulated_grads_of_partition_view(monkeypatch: Any, manager: Optional[_Manager], wrapped: bool) -> list[float]:
    import torch._inductor.cudagraph_trees as trees
    from grace.grad_copies import hold_partitioned_backward_outputs

    monkeypatch.setattr(trees, "get_manager", lambda device_index, create_if_none_exists=True: manager)
    graph = _PartitionedGraph(manager)
    with grace.config.patch(**{**_OFF, "cgct": True, "copy_grads": True}):
        if wrapped:
            hold_partitioned_backward_outputs(graph, is_backward=True, device_index=0)
        seen = _accumulate(lambda values: graph.current_callable([values])[0])
    if manager is not None and manager.grace_backward_outputs is not None:
        assert manager.grace_backward_outputs.held_calls == 0
    return seen


def test_a_view_the_partition_wrapper_makes_is_adopted_unless_the_wrapper_is_held(monkeypatch: Any) -> None:
    """With graph partitions the tree holds the partition's output, not the view of it that the
    wrapper returns: that view is adopted (1, then 2 + 2) unless what the wrapper returns is
    held through the pass too, by the tree manager's hold (1, 3, 6)."""
    from grace.grad_copies import BackwardOutputHold

    unwrapped = _accumulated_grads_of_partition_view(monkeypatch, _Manager(BackwardOutputHold()), wrapped=False)
    wrapped = _accumulated_grads_of_partition_view(monkeypatch, _Manager(BackwardOutputHold()), wrapped=True)
    assert unwrapped[:2] == [1.0, 4.0] and wrapped == [1.0, 3.0, 6.0]


def test_without_a_tree_manager_or_its_hold_the_partition_wrapper_holds_nothing(monkeypatch: Any) -> None:
    """A manager made with the switch off holds nothing, and a wrapper whose partitions made no
    manager has no pool memory to hold: the gradients are stock's."""
    assert _accumulated_grads_of_partition_view(monkeypatch, _Manager(None), wrapped=True)[:2] == [1.0, 4.0]
    assert _accumulated_grads_of_partition_view(monkeypatch, None, wrapped=True)[:2] == [1.0, 4.0]


@pytest.mark.parametrize(("switches", "backward", "wrapped"), [
    ({**_OFF, "cgct": True, "copy_grads": True}, True, True),
    ({**_OFF, "cgct": True, "copy_grads": True}, False, False),  # forward and inference graphs
    ({**_OFF, "cgct": True, "copy_grads": False}, True, False),
    ({**_OFF, "copy_grads": True}, True, False),  # every GraCE switch off: stock's
])
def test_only_a_backward_graphs_partition_wrapper_is_held_and_only_with_the_switch(
        switches: dict[str, bool], backward: bool, wrapped: bool) -> None:
    from grace.grad_copies import hold_partitioned_backward_outputs

    graph = _PartitionedGraph(None)
    call = graph.current_callable
    with grace.config.patch(**switches):
        hold_partitioned_backward_outputs(graph, is_backward=backward, device_index=0)
    assert (graph.current_callable is not call) is wrapped
