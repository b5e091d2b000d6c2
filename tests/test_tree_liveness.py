"""The liveness test of a recorded graph's cached output, stock's and hardened, on CPU tensors.

A cached output is made as ``CUDAGraphNode._initialize_cached_tensors`` makes it (a tensor over
a storage, registered with ``torch._C._add_cached_tensor``, kept in the node's list) and judged
by the tree's own ``StorageWeakRefWrapper`` with the node's ``check_refcount``. The GPU side
(a backward computing with a later replay's values under stock) is in
``scripts/probes/saved_output_dead.py`` and ``tests/test_lean_cuda.py``.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import pytest

torch = pytest.importorskip("torch")


class _Node:
    """What the liveness test reads of a ``CUDAGraphNode``: its cached outputs."""

    def __init__(self) -> None:
        self.cached_tensor_outputs: list[Any] = []

    def get_output_refcount(self, index: int) -> int:
        return sys.getrefcount(self.cached_tensor_outputs[index])


def _cached_output(node: _Node, hardened: bool) -> tuple[Any, Any]:
    """A cached output of ``node`` and the tree's weak reference to it, as the tree makes them."""
    import grace.config
    from grace.trees import cached_output_check
    from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

    torch._C._set_cached_tensors_enabled(True)
    out = torch.empty(0).set_(torch.UntypedStorage(256), 0, (64,), (1,))
    torch._C._add_cached_tensor(out)
    node_ref = weakref.ref(node)

    def check_refcount(i: int = 0) -> bool:  # CUDAGraphNode's, for output 0
        node = node_ref()
        if node is None:
            return False
        refcount = node.get_output_refcount(i)
        return refcount == 3 if node.cached_tensor_outputs[i]._use_count() > 1 else refcount == 2

    switches = {"cgct": hardened, "pi": False, "scg": False, "lean_replay": False}
    with grace.config.patch(**switches):
        check = cached_output_check(check_refcount, node_ref, 0, out)
    assert (check is check_refcount) is not hardened, "stock's own test where the tree is not hardened"
    ref = StorageWeakRefWrapper(out, extra_ref_check=check)
    node.cached_tensor_outputs.append(out)
    return out, ref


@pytest.mark.parametrize("hardened", [False, True])
def test_an_output_autograd_saved_is_live_only_where_the_tree_is_hardened(hardened: bool) -> None:
    node = _Node()
    out, ref = _cached_output(node, hardened)
    try:
        assert ref.expired() is False, "held by the user"
        user = out.requires_grad_()
        del out
        loss = user.square().sum()  # saves the output itself for the backward
        del user
        saved = loss.grad_fn.next_functions[0][0]
        assert ref.expired() is (not hardened), "held only through autograd's saved tensor"
        loss.backward()
        del loss, saved
        assert ref.expired() is True, "dead once the backward ran and its graph is gone"
    finally:
        torch._C._remove_cached_tensor(node.cached_tensor_outputs.pop())


@pytest.mark.parametrize("hardened", [False, True])
def test_an_output_nothing_holds_is_dead_and_one_the_user_holds_live(hardened: bool) -> None:
    node = _Node()
    out, ref = _cached_output(node, hardened)
    try:
        assert ref.expired() is False
        view = out.view(8, 8)
        del out
        assert ref.expired() is False, "a view holds the storage"
        del view
        assert ref.expired() is True
    finally:
        torch._C._remove_cached_tensor(node.cached_tensor_outputs.pop())


def test_the_hardened_test_counts_dead_once_the_node_is_gone() -> None:
    node = _Node()
    out, ref = _cached_output(node, True)
    del out
    kept = node.cached_tensor_outputs.pop()
    torch._C._remove_cached_tensor(kept)
    del node
    assert ref.extra_ref_check() is False  # stock's answer for a collected node: not dead through the test
