"""Gradients autograd adopted from a backward graph's outputs, copied before the graph runs again.

Design note
-----------
``AccumulateGrad`` adopts a gradient as a leaf's ``.grad``, without a copy, where the leaf has
none yet and nothing else references the gradient's ``TensorImpl``
(``at::caching::adjusted_use_count``, which leaves out the cached-tensor registry's own
reference). A CUDA graph tree's outputs pass that test, cached or made anew on every replay,
and so do the views Inductor's wrapper around graph partitions makes of them: ``.grad`` is then
a tensor over the graph's memory. The next replay of that backward writes its gradients into
the same memory, and ``AccumulateGrad`` adds them to a ``.grad`` that already holds them:
gradients kept across steps (gradient accumulation, or ``zero_grad(set_to_none=False)``) come
out as twice the last step's instead of the sum, silently (pytorch/pytorch#96693); after a
warm-up the tree marks that memory instead, and the next accumulation raises.

:class:`AdoptedGrads` lets autograd adopt, as stock does, and gives each adopted ``.grad`` its
own memory at the one moment that needs it: before the tree next runs anything that could write
the graph's memory. Invariants:

1. Every call of a backward graph that the tree runs inside autograd's engine, warm-up,
   recording or replay, notes the leaves its autograd node feeds directly (each
   ``AccumulateGrad`` among the node's ``next_functions``: the node is valid only while its
   backward runs) and the storages of the outputs it returns. With graph partitions each
   partition is such a call, and the wrapper's views of their outputs share their storages.
2. At the start of the tree's next call that is not part of the same backward pass (outside a
   backward pass, or in another one), each noted leaf whose ``.grad`` lies on a noted storage
   gets a copy of it as its ``.grad``, and the notes are dropped. The values are intact then:
   the graph's memory is the tree's private pool, and the tree has not run since.
3. The cost where ``.grad`` is set to None before the next call (``zero_grad()``'s default):
   per backward call one pass over its node's ``next_functions``, and per later call one
   ``.grad`` read per noted leaf. The storages a call returned are read from its outputs where
   it warmed up or ran outside the tree; a recorded node returns the same storages on every
   call (its graph writes fixed addresses; cached, static and prior outputs alike), so the tree
   passes the node that ran and they are read once per node, kept on it
   (``grace_output_storages``). Where ``.grad`` is kept, one
   copy of it, once: the copy is the leaf's own ``.grad`` from then on, and later backwards add
   into it without adopting, as eager's do. A backward pass nested in another (a reentrant
   checkpoint's) is another pass: its first tree call copies what the outer one noted so far.
4. A leaf the graph's gradient reaches through another autograd node (a view of a parameter made
   outside the compiled region) is not noted and keeps stock's adoption; so does every leaf of
   a backward graph called outside autograd's engine (compiled autograd), which is logged once.
   Where the stale-output guard is on, such a ``.grad`` kept into the next generation raises the
   tree's overwritten-output error when it is next read (it shares the output's storage,
   :mod:`grace.stale_outputs`) instead of summing into memory the next backward overwrote.
5. On only with :func:`grace.trees.hardened` and ``grace.config.copy_grads``, as the tree is
   made; otherwise the manager's ``grace_adopted_grads`` is None and autograd's adoption is
   stock's.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from grace.log import get_logger

_log = get_logger("grace.grad_copies")
_AccumulateGrad = torch._C._functions.AccumulateGrad
_current_autograd_node = torch._C._current_autograd_node
_current_graph_task_id = torch._C._current_graph_task_id


def copies_grads() -> bool:
    """Whether adopted gradients are copied before the tree runs again (invariant 5)."""
    from grace import config
    from grace.trees import hardened

    return bool(config.copy_grads) and hardened()


class AdoptedGrads:
    """``CUDAGraphTreeManager.grace_adopted_grads``: the leaves the backward calls since the
    tree's last call outside their pass fed, and the storages those calls returned."""

    __slots__ = ("_leaves", "_storages", "_node_storages", "_task", "_node", "_outside_engine_logged")

    def __init__(self) -> None:
        self._leaves: list[torch.Tensor] = []  # fed directly by a noted backward call's node
        self._storages: set[int] = set()  # data pointers of the storages noted calls returned
        self._node_storages: list[frozenset[int]] = []  # those of the recorded nodes that returned them
        self._task = -1  # autograd's graph task of the noted calls
        self._node = 0  # id() of the autograd node noted last (partitions of one backward share it);
        # an id, not the node: the node would keep what it saved for backward alive past its pass
        self._outside_engine_logged = False

    def before_call(self) -> None:
        """At the start of a tree call: outside the noted calls' backward pass, give each noted
        leaf whose ``.grad`` lies on a noted storage a copy of it (invariant 2)."""
        if self._task != -1 and _current_graph_task_id() != self._task:
            self._copy_adopted()

    def noted(self, outputs: Sequence[Any], tree_node: Any = None) -> None:
        """A backward call returned ``outputs``; ``tree_node``: the recorded node that ran it, or
        None (invariants 1 and 3)."""
        grad_fn = _current_autograd_node()
        if grad_fn is None:
            if not self._outside_engine_logged:
                self._outside_engine_logged = True
                _log.info("gradient copies: a backward graph ran outside autograd's engine; what "
                          "autograd adopts of its outputs stays on the graph's memory, as in stock")
            return
        self._task = _current_graph_task_id()
        if id(grad_fn) != self._node:  # nodes of one pass are alive together: their ids differ
            self._node = id(grad_fn)
            self._leaves += [fn.variable for fn, _ in grad_fn.next_functions if type(fn) is _AccumulateGrad]
        if tree_node is None:
            for out in outputs:
                if isinstance(out, torch.Tensor):
                    self._storages.add(out.untyped_storage().data_ptr())
            return
        storages = getattr(tree_node, "grace_output_storages", None)
        if storages is None:
            storages = tree_node.grace_output_storages = frozenset(
                out.untyped_storage().data_ptr() for out in outputs if isinstance(out, torch.Tensor))
        if not self._node_storages or self._node_storages[-1] is not storages:
            self._node_storages.append(storages)

    def _copy_adopted(self) -> None:
        storages, node_storages = self._storages, self._node_storages
        for leaf in self._leaves:
            grad = leaf.grad
            if grad is None:
                continue
            try:
                address = grad.untyped_storage().data_ptr()
            except RuntimeError:  # a storage the tree marked overwritten already: stock's error stands
                continue
            if address in storages or any(address in s for s in node_storages):
                leaf.grad = grad.clone()
        self._leaves.clear()
        storages.clear()
        node_storages.clear()
        self._task = -1
        self._node = 0

    @property
    def noted_leaves(self) -> int:
        """How many leaves wait for the next call (0 once it began)."""
        return len(self._leaves)


def adopted_grads() -> Optional[AdoptedGrads]:
    """The manager's notes as the tree is made: with :func:`copies_grads`, else None."""
    return AdoptedGrads() if copies_grads() else None
