"""When a recorded graph's cached output is dead: the tree's test, and the hardened one.

Design note
-----------
From its first replay on, a CUDA graph node keeps each unaliased output as one tensor that it
hands out on every replay (``CUDAGraphNode._initialize_cached_tensors``), and judges the output
dead when nothing but the tree holds it: its storage has no holder beyond the tree's two, and
``check_refcount`` finds no Python reference beyond the tree's. The tree ends a path on that
verdict while a backward is pending (``all_outputs_are_dead``) and replays a child whose memory
overlaps outputs it expects dead (``check_invariants``).

Neither count sees a holder of the output's own ``TensorImpl`` from C++, and autograd is one:
a saved tensor of a backward the user can still run (a compiled forward's activations through
``ctx.save_for_backward``; ``out.square()`` saving ``out``) adds one to the ``TensorImpl``'s use
count and nothing to either. Counted dead, such an output is overwritten by the next replay
while the backward still reads it: a wrong gradient, or an allocator restore that frees memory
autograd later releases ("invalid device pointer").

Where the tree is hardened (:func:`grace.trees.hardened`), :class:`CachedOutputLiveness` holds
an output dead only if, besides stock's test, its use count is what it was when the node made
it. One holder must not count: the tree's own cached outputs keep the autograd history of their
last run (autograd replaces it when the output is handed out again), so a dead output's
``grad_fn`` keeps that run's saved activations held although no backward can reach them. An
output the hardened test finds dead drops that history (``detach_``: nothing outside the tree
can see the tensor), and a held output is judged again after every dead output of its node's
path and subtree has dropped its history. What then still holds it is a backward the user can
run.

Invariants:

1. With the tree not hardened, the test is stock's ``check_refcount`` itself.
2. An output stock counts live is live.
3. An output counted dead has, besides the tree, no Python and no C++ holder, and no autograd
   history where it can drop it in place; a held output's verdict is taken after the dead
   outputs near it dropped theirs.
4. A check keeps no reference to any output: the node's list is read through a weak reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class CachedOutputLiveness:
    """``extra_ref_check`` of the tree's weak reference to a cached output, where hardened:
    True when only the tree holds the output."""

    __slots__ = ("stock_check", "node_ref", "index", "made_with")

    def __init__(self, stock_check: Callable[[], bool], node_ref: Callable[[], Any], index: int,
                 made_with: int) -> None:
        self.stock_check = stock_check
        self.node_ref = node_ref
        self.index = index
        self.made_with = made_with  # the output's TensorImpl use count when the node made it

    def __call__(self) -> bool:
        if not self.stock_check():
            return False
        if self.unheld():
            return True
        node = self.node_ref()
        if node is None:
            return False
        release_dead_histories(node)
        return self.unheld()

    def unheld(self) -> bool:
        """Whether nothing beyond the tree holds the output's ``TensorImpl``; if so, the output
        drops the autograd history of its last run."""
        node = self.node_ref()
        if node is None:
            return False
        out = node.cached_tensor_outputs[self.index]
        if out._use_count() > self.made_with:
            return False
        if out.grad_fn is not None:
            try:
                out.detach_()
            except RuntimeError:  # not detachable in place: its history stays, and so do its saves
                pass
        return True


def release_dead_histories(node: Any) -> None:
    """Every output of ``node``'s path and subtree that only the tree holds drops its autograd
    history (see the design note)."""
    for near in _path_and_subtree(node):
        for ref in near.outputs_weakrefs:
            check = getattr(ref, "extra_ref_check", None)
            if isinstance(check, CachedOutputLiveness) and check.stock_check():
                check.unheld()


def _path_and_subtree(node: Any) -> Iterator[Any]:
    yield from node._path_to_root
    stack = [c for children in node.children.values() for c in children]
    while stack:
        child = stack.pop()
        yield child
        stack.extend(c for children in child.children.values() for c in children)


def cached_output_check(stock_check: Callable[[], bool], node_ref: Callable[[], Any], index: int,
                        output: Any) -> Callable[[], bool]:
    """The liveness test of cached output ``index`` of the node ``node_ref`` refers to, made as
    the node makes ``output`` (read here, not kept): :class:`CachedOutputLiveness` where the tree
    is hardened, else ``stock_check``."""
    from grace.trees import hardened

    if not hardened():
        return stock_check
    return CachedOutputLiveness(stock_check, node_ref, index, output._use_count())
