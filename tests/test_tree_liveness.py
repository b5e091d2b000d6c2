"""The liveness test of a recorded graph's cached outputs, stock's and hardened, on CPU tensors.

Cached outputs are made as ``CUDAGraphNode._initialize_cached_tensors`` makes them (a tensor
over a storage, registered with ``torch._C._add_cached_tensor``, kept in the node's list) and
judged by the tree's own ``StorageWeakRefWrapper`` with the node's ``check_refcount``. A compiled
forward is played by an autograd Function that returns one cached output and saves another, as
AOTAutograd's forward returns a user output and saves an activation. The GPU side (a backward
computing with a later replay's values under stock) is in ``scripts/probes/saved_output_dead.py``
and ``tests/test_trees_cuda.py``.
"""

from __future__ import annotations

import weakref
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tree_fakes import cached_output, stock_check_refcount  # noqa: E402


class _Node:
    """What the liveness tests read of a ``CUDAGraphNode``."""

    def __init__(self) -> None:
        self.cached_tensor_outputs: list[Any] = []
        self.outputs_weakrefs: list[Any] = []
        self.children: dict[Any, list[Any]] = {}

    @property
    def _path_to_root(self) -> Any:
        yield self

    def cache(self, hardened: bool) -> Any:
        """A new cached output and the tree's weak reference to it, as the tree makes them."""
        import grace.config
        from grace.tree_liveness import cached_output_check
        from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

        out = cached_output()
        node_ref, i = weakref.ref(self), len(self.cached_tensor_outputs)
        check_refcount = stock_check_refcount(node_ref, i)

        with grace.config.patch(cgct=hardened, pi=False, scg=False, lean_replay=False):
            check = cached_output_check(check_refcount, node_ref, i, out)
        assert (check is check_refcount) is not hardened, "stock's own test where the tree is not hardened"
        self.outputs_weakrefs.append(StorageWeakRefWrapper(out, extra_ref_check=check))
        self.cached_tensor_outputs.append(out)
        return out

    def dead(self) -> list[bool]:
        return [ref.expired() for ref in self.outputs_weakrefs]

    def release(self) -> None:
        for out in self.cached_tensor_outputs:
            torch._C._remove_cached_tensor(out)
        self.cached_tensor_outputs.clear()


class _Forward(torch.autograd.Function):
    """A compiled forward as AOTAutograd runs it: returns the node's output 0, saves output 1."""

    outputs: list[Any] = []  # the replayed node's cached outputs, as the tree hands them out

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        user_out, activation = _Forward.outputs
        ctx.save_for_backward(activation)
        return user_out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (activation,) = ctx.saved_tensors
        return grad * activation


def _replay(node: _Node) -> Any:
    _Forward.outputs = node.cached_tensor_outputs
    try:
        return _Forward.apply(torch.ones(64, requires_grad=True))
    finally:
        _Forward.outputs = []


@pytest.fixture
def node() -> Any:
    made = _Node()
    yield made
    made.release()


@pytest.mark.parametrize("hardened", [False, True])
def test_an_output_autograd_saved_is_live_only_where_the_tree_is_hardened(node: _Node, hardened: bool) -> None:
    out = node.cache(hardened)
    assert node.dead() == [False], "held by the user"
    user = out.requires_grad_()
    del out
    loss = user.square().sum()  # saves the output itself for the backward
    del user
    assert node.dead() == [not hardened], "held only through autograd's saved tensor"
    loss.backward()
    del loss
    assert node.dead() == [True], "dead once the backward ran and its graph is gone"


@pytest.mark.parametrize("hardened", [False, True])
def test_an_output_nothing_holds_is_dead_and_one_the_user_holds_live(node: _Node, hardened: bool) -> None:
    out = node.cache(hardened)
    view = out.view(8, 8)
    del out
    assert node.dead() == [False], "a view holds the storage"
    del view
    assert node.dead() == [True]


def test_an_activation_that_a_pending_backward_saved_is_live_until_it_ran(node: _Node) -> None:
    node.cache(True), node.cache(True)
    loss = _replay(node).sum()  # the user keeps the loss only, as `loss = f(x).sum()` does
    assert node.dead() == [True, False], "the output is dead; the backward still reads the activation"
    assert node.cached_tensor_outputs[0].grad_fn is None, "the dead output dropped its history"
    loss.backward()  # the graph the loss holds still reaches the activation
    del loss
    assert node.dead() == [True, True]


def test_an_activation_only_dead_outputs_history_reaches_is_dead(node: _Node) -> None:
    node.cache(True), node.cache(True)
    _replay(node)  # the user drops everything, as in a forward whose result is never used
    assert node.cached_tensor_outputs[0].grad_fn is not None, "the tree's output keeps its last history"
    assert node.cached_tensor_outputs[1]._use_count() > 1, "which holds the saved activation"
    activation, user_out = reversed(node.outputs_weakrefs)
    assert activation.expired() is True, "judged before the output whose history holds it: dead all the same"
    assert user_out.expired() is True


def test_stock_counts_a_pending_backwards_activation_dead(node: _Node) -> None:
    node.cache(False), node.cache(False)
    loss = _replay(node).sum()
    assert node.dead() == [True, True], "stock's test: the hazard the hardened test closes"
    del loss


def test_the_hardened_test_counts_nothing_dead_once_the_node_is_gone() -> None:
    node = _Node()
    node.cache(True)
    refs = node.outputs_weakrefs
    node.release()
    del node
    assert refs[0].extra_ref_check() is False  # as stock's: the storage count alone decides
