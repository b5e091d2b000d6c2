"""A recorded graph's cached outputs made on the CPU, for tests of the trees' liveness logic.

``CUDAGraphNode._initialize_cached_tensors`` makes each cached output as a tensor over a storage,
registers it with ``torch._C._add_cached_tensor``, keeps it in the node's list, and judges it
with ``check_refcount``; :func:`cached_output` and :func:`stock_check_refcount` do the same."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch


def cached_output(elements: int = 64) -> torch.Tensor:
    """A float tensor over its own storage, registered as a cached tensor, as the node makes it."""
    torch._C._set_cached_tensors_enabled(True)
    out = torch.empty(0).set_(torch.UntypedStorage(4 * elements), 0, (elements,), (1,))
    torch._C._add_cached_tensor(out)
    return out


def stock_check_refcount(node_ref: Callable[[], Any], index: int) -> Callable[[], bool]:
    """``CUDAGraphNode``'s ``check_refcount`` for output ``index`` of the node ``node_ref`` refers
    to: True when the node's list holds the only Python reference (a C++ holder counting one)."""

    def check_refcount() -> bool:
        node = node_ref()
        if node is None:
            return False
        refcount = sys.getrefcount(node.cached_tensor_outputs[index])
        return refcount == 3 if node.cached_tensor_outputs[index]._use_count() > 1 else refcount == 2

    return check_refcount
