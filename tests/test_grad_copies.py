"""Gradients autograd adopted from a backward graph's outputs, copied before the graph runs again
(grace.grad_copies).

The tree's part is made on the CPU as the tree makes it: a backward graph writes its gradient
into the same memory on every replay and hands out a tensor over it (the node's cached tensor,
registered as stock registers it, a tensor made anew, or a view the partition wrapper makes);
the forward call before it is a tree call. Autograd's ``AccumulateGrad`` is torch's own.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch")

import grace.config  # noqa: E402
from grace.grad_copies import AdoptedGrads, adopted_grads, copies_grads  # noqa: E402

_OFF = {"cgct": False, "pi": False, "scg": False, "lean_replay": False}


class _Graph:
    """A backward graph's memory, rewritten in place by every replay, and what a replay hands
    out over it: ``"cached"`` (the node's registered tensor), ``"uncached"`` (a new tensor on the
    same storage) or ``"view"`` (a view of a larger output, as Inductor's partition wrapper
    returns)."""

    def __init__(self, output: str) -> None:
        torch._C._set_cached_tensors_enabled(True)
        self.memory = torch.empty(8)
        self.cached = self.memory[:4]
        torch._C._add_cached_tensor(self.cached)
        self.output = output

    def replay(self, values: Any) -> Any:
        self.memory[:4].copy_(values)
        if self.output == "cached":
            return self.cached
        if self.output == "uncached":
            return torch.empty(0).set_(self.memory.untyped_storage(), 0, (4,), (1,))
        return self.memory[:4]

    def on_memory(self, t: Any) -> bool:
        return t.untyped_storage().data_ptr() == self.memory.untyped_storage().data_ptr()

    def close(self) -> None:
        torch._C._remove_cached_tensor(self.cached)


def _replay_function(graph: _Graph, notes: Optional[AdoptedGrads], tree_node: Any = None) -> Any:
    """``(w * x).sum()`` whose forward is a tree call and whose backward replays ``graph``,
    noting what it returns as the tree manager does (``tree_node``: the recorded node it passes,
    or None for a warm-up)."""

    class Replay(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: Any, x: Any) -> Any:
            if notes is not None:
                notes.before_call()
            ctx.save_for_backward(x)
            return (w * x).sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            out = graph.replay(g * x)
            if notes is not None:
                notes.noted([out], tree_node)
            return out, None

    return Replay


def _accumulated(output: str, notes: Optional[AdoptedGrads], zero: Callable[[Any], None] = lambda w: None,
                 tree_node: Any = None) -> list[float]:
    """``.grad`` after each of three backwards of 1, 2 and 3, with ``zero(w)`` between them."""
    graph = _Graph(output)
    Replay = _replay_function(graph, notes, tree_node)
    w = torch.zeros(4, requires_grad=True)
    seen = []
    try:
        for value in (1.0, 2.0, 3.0):
            Replay.apply(w, torch.full((4,), value)).backward()
            seen.append(float(w.grad[0]))
            zero(w)
    finally:
        graph.close()
    return seen


@pytest.mark.parametrize("output", ["cached", "uncached", "view"])
def test_an_adopted_gradient_is_overwritten_by_the_next_replay_unless_copied_before_it(output: str) -> None:
    """Accumulating 1, 2, 3: stock adopts the graph's output and the second replay writes over
    it (2 + 2 where 1 + 2 is right); copied before the next call, the sums are right."""
    assert _accumulated(output, None)[:2] == [1.0, 4.0]
    assert _accumulated(output, AdoptedGrads()) == [1.0, 3.0, 6.0]


def test_a_gradient_zeroed_in_place_is_copied_once_and_is_right_every_step() -> None:
    """``zero_grad(set_to_none=False)``: stock's ``.grad`` stays on the graph's memory and every
    step reads twice its gradient; copied, each step reads its own, and the copy is the leaf's
    ``.grad`` from then on."""
    def zero(w: Any) -> None:
        w.grad.zero_()

    assert _accumulated("cached", None, zero) == [1.0, 4.0, 6.0]
    assert _accumulated("cached", AdoptedGrads(), zero) == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("output", ["cached", "uncached", "view"])
def test_a_recorded_nodes_storages_are_read_once_and_what_it_returns_is_still_copied(
        output: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Passed the recorded node that ran, the notes read its outputs' storages at its first call
    only and keep them on the node (its graph writes the same memory on every call); the sums
    are right on every step, as when each call's outputs are read."""
    import types

    inside: list[bool] = []
    reads: list[int] = []

    class Counting(AdoptedGrads):
        __slots__ = ()

        def noted(self, outputs: Any, tree_node: Any = None) -> None:
            inside.append(True)
            try:
                super().noted(outputs, tree_node)
            finally:
                inside.pop()

    storage = torch.Tensor.untyped_storage
    monkeypatch.setattr(torch.Tensor, "untyped_storage", lambda t: (inside and reads.append(1), storage(t))[1])
    node = types.SimpleNamespace()
    assert _accumulated(output, Counting(), tree_node=node) == [1.0, 3.0, 6.0]
    assert len(node.grace_output_storages) == 1, "the one storage the graph's output lies on"
    assert len(reads) == 1, "read at the node's first call only"


def test_a_gradient_set_to_none_before_the_next_call_is_adopted_and_never_copied() -> None:
    """``zero_grad()``'s default: autograd adopts the output, as in stock, and the next call has
    nothing to copy."""
    graph = _Graph("cached")
    notes = AdoptedGrads()
    Replay = _replay_function(graph, notes)
    w = torch.zeros(4, requires_grad=True)
    try:
        for value in (1.0, 2.0):
            Replay.apply(w, torch.full((4,), value)).backward()
            assert graph.on_memory(w.grad) and float(w.grad[0]) == value
            assert notes.noted_leaves == 1
            w.grad = None
    finally:
        graph.close()


def test_a_call_inside_the_same_backward_pass_copies_nothing() -> None:
    """Two backward graphs in one pass: the second's call (a tree call) leaves what the first
    noted, and the pass's last gradient still lands on the leaf."""
    first, second = _Graph("cached"), _Graph("cached")
    notes = AdoptedGrads()
    seen: list[int] = []

    class First(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: Any) -> Any:
            return w * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            notes.before_call()
            seen.append(notes.noted_leaves)
            out = first.replay(g)
            notes.noted([out])
            return out

    class Second(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, v: Any, w: Any) -> Any:
            return v.sum() + w.sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            out = second.replay(g * torch.ones(4))
            notes.noted([out])
            return g * torch.ones(4), out

    w, u = torch.zeros(4, requires_grad=True), torch.zeros(4, requires_grad=True)
    try:
        Second.apply(First.apply(w), u).backward()
        assert seen == [1]  # Second's leaf u, noted in this pass, still noted at First's call
        assert second.on_memory(u.grad) and notes.noted_leaves == 2
        notes.before_call()  # the next call, outside the pass
        assert not second.on_memory(u.grad) and not first.on_memory(w.grad)
        assert notes.noted_leaves == 0
    finally:
        first.close()
        second.close()


def test_a_second_backward_pass_without_a_call_between_copies_first() -> None:
    """``backward(retain_graph=True)`` twice: the second pass's backward call copies what the
    first adopted before it replays, so the two passes sum."""
    graph = _Graph("cached")
    notes = AdoptedGrads()

    class Replay(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: Any) -> Any:
            return w.sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            notes.before_call()  # the backward graph's tree call
            out = graph.replay(g * torch.ones(4))
            notes.noted([out])
            return out

    w = torch.zeros(4, requires_grad=True)
    try:
        loss = Replay.apply(w)
        loss.backward(retain_graph=True)
        loss.backward()
        assert float(w.grad[0]) == 2.0
    finally:
        graph.close()


def test_a_backward_graph_called_outside_autograds_engine_is_not_noted(caplog: Any) -> None:
    notes = AdoptedGrads()
    with caplog.at_level("INFO", logger="grace"):
        notes.noted([torch.ones(2)])
        notes.noted([torch.ones(2)])
    assert notes.noted_leaves == 0
    assert sum("outside autograd's engine" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(("switches", "made"), [
    ({**_OFF, "cgct": True, "copy_grads": True}, True),
    ({**_OFF, "cgct": True, "copy_grads": False}, False),
    ({**_OFF, "copy_grads": True}, False),  # every GraCE switch off: stock's
])
def test_the_manager_notes_adopted_gradients_only_with_the_switch(switches: dict[str, bool], made: bool) -> None:
    with grace.config.patch(**switches):
        assert copies_grads() is made
        assert (adopted_grads() is not None) is made


def test_the_stale_output_guard_keeps_a_cached_outputs_registration_as_it_swaps_it() -> None:
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


def _aot_accumulated(notes: Optional[AdoptedGrads]) -> list[list[float]]:
    """An MLP compiled by Dynamo and AOTAutograd, accumulating three micro-steps, whose backward
    stands for a replayed graph: its outputs are written into memory of its own, the same on
    every call, and handed out as new views of it (as the partition wrapper does); each compiled
    call first calls ``before_call`` and the backward notes what it returns, as the tree manager
    does. The max difference from eager's ``.grad`` after each micro-step."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def fw_compiler(gm: Any, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            if notes is not None:
                notes.before_call()
            return gm(*args)
        return make_boxed_func(run)

    def bw_compiler(gm: Any, example_inputs: Any) -> Any:
        memory: dict[int, Any] = {}

        def run(*args: Any) -> Any:
            if notes is not None:
                notes.before_call()
            outs = []
            for i, out in enumerate(gm(*args)):
                if isinstance(out, torch.Tensor):
                    mem = memory.setdefault(i, torch.empty_like(out))
                    mem.copy_(out)
                    out = mem.view(mem.shape)
                outs.append(out)
            if notes is not None:
                notes.noted(outs)
            return outs
        return make_boxed_func(run)

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=fw_compiler, bw_compiler=bw_compiler))
    diffs = []
    for step in range(3):
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(step))
        compiled(x).square().mean().backward()
        eager(x).square().mean().backward()
        diffs.append([float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), eager.parameters())])
    torch._dynamo.reset()
    return diffs


def test_through_dynamo_and_aot_autograd_the_backward_node_feeds_the_modules_parameters() -> None:
    """The compiled backward's autograd node (AOTAutograd's) has an ``AccumulateGrad`` for each
    of the module's parameters among its ``next_functions``: noted, every micro-step's
    ``.grad`` equals eager's; without the notes the second micro-step's differs."""
    without = _aot_accumulated(None)
    assert max(without[0]) < 1e-6 and max(without[1]) > 1e-3
    assert all(max(d) < 1e-6 for d in _aot_accumulated(AdoptedGrads()))
