"""A backward graph's outputs, copied into ``.grad`` instead of adopted as it.

Design note
-----------
From its first replay on, a CUDA graph node hands out one cached tensor per output on every
replay, and registers each as a cached tensor (``torch._C._add_cached_tensor``) so that autograd
does not count the tree's own reference to it. Where a parameter has no gradient yet,
``AccumulateGrad`` then adopts a backward graph's output as ``.grad``: a tensor over the graph's
memory, no copy. The next replay of that backward writes its gradients into the same memory,
and ``AccumulateGrad`` adds them to a ``.grad`` that already holds them. Gradients kept across
steps (gradient accumulation) come out as twice the last step's instead of the sum, silently.
``zero_grad(set_to_none=True)`` before every replay hides it.

With :func:`copies_grads`, a backward graph's cached outputs are not registered: the tree's
reference counts, ``AccumulateGrad`` copies the output into a ``.grad`` of its own, and
accumulation sums. Invariants:

1. Only the cached outputs of backward graphs change; forward and inference graphs register
   theirs as stock does.
2. Registration is all that changes. The tree's liveness tests read Python and ``TensorImpl``
   counts, which the registry does not move; removing a tensor that was never registered is a
   no-op, so the tree's own clean-up needs no change.
3. The cost is autograd's own where it cannot adopt: one copy of each gradient that reaches a
   parameter without one, and an out-of-place sum where two gradients for one tensor meet.
4. Outputs of a warm-up or a recording are handed out before any node caches them, and
   ``AccumulateGrad`` still adopts those. Where their path ends the tree marks that memory, so
   an accumulation across it raises the tree's overwritten-output error, as in stock.
5. On only with :func:`grace.trees.hardened` and ``grace.config.copy_grads``, as the node
   caches its outputs; otherwise registration is stock's.
"""

from __future__ import annotations

from typing import Any


def copies_grads() -> bool:
    """Whether backward graphs' cached outputs stay unregistered (invariant 5)."""
    from grace import config
    from grace.trees import hardened

    return bool(config.copy_grads) and hardened()


def register_cached_output(output: Any, backward: bool) -> None:
    """``CUDAGraphNode._initialize_cached_tensors``' registration of one cached output of a node
    of a ``backward`` graph or not: stock's, but for a backward's with :func:`copies_grads`."""
    import torch

    if backward and copies_grads():
        return
    torch._C._add_cached_tensor(output)
