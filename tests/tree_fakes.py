"""A recorded graph's cached outputs made on the CPU, for tests of the trees' liveness logic.

``CUDAGraphNode._initialize_cached_tensors`` makes each cached output as a tensor over a storage,
registers it with ``torch._C._add_cached_tensor``, keeps it in the node's list, and judges it
with ``check_refcount``; :func:`cached_output` and :func:`stock_check_refcount` do the same."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch


# the graph's memory pool: what the cached outputs' storages point into and do not own
_POOL: list[torch.UntypedStorage] = []


def storage_at(data_ptr: int, nbytes: int) -> torch.UntypedStorage:
    """A storage object over memory it does not own, as ``CUDAGraphNode.create_storage`` makes one."""
    return torch._C._construct_storage_from_data_pointer(data_ptr, torch.device("cpu"), nbytes)


def tensor_on(storage: torch.UntypedStorage, metadata: dict[str, Any]) -> torch.Tensor:
    """``CUDAGraphNode._reconstruct_from_tensor_metadata`` on the CPU."""
    return torch.empty(0, dtype=metadata["dtype"]).set_(storage, metadata["storage_offset"], metadata["size"],
                                                       metadata["stride"])


def cached_output(elements: int = 64) -> torch.Tensor:
    """A float tensor over pool memory its storage does not own, registered as a cached tensor, as
    the node makes it."""
    torch._C._set_cached_tensors_enabled(True)
    memory = torch.UntypedStorage(4 * elements)
    _POOL.append(memory)
    out = torch.empty(0).set_(storage_at(memory.data_ptr(), memory.nbytes()), 0, (elements,), (1,))
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


class FakeNode:
    """What the stale-output guard reads and calls of a ``CUDAGraphNode`` whose path is itself
    alone: cached outputs made as the node makes them, each judged by stock's ``check_refcount``,
    or with ``hardened`` by ``grace.tree_liveness.CachedOutputLiveness`` around it."""

    children: dict[Any, list[Any]] = {}

    def __init__(self, outputs: int, hardened: bool = False) -> None:
        import weakref

        from torch._inductor.cudagraph_trees import StorageWeakRefWrapper

        from grace.tree_liveness import CachedOutputLiveness

        from torch._inductor.cudagraph_trees import CUDAGraphNode, UnaliasedStorage

        self.output_storage_alias: list[Any] = [UnaliasedStorage] * outputs
        self.cached_tensor_outputs: list[Any] = []
        self.outputs_weakrefs: list[Any] = []
        self.outputs_metadata: list[Any] = []
        self.unaliased_in_all_paths = [True] * outputs
        self.stack_traces = [f"line {i}" for i in range(outputs)]
        self.tensor_weakrefs: list[Any] = [None] * outputs  # outputs of the recording: none held
        me = weakref.ref(self)
        for i in range(outputs):
            out = cached_output(16)
            check: Any = stock_check_refcount(me, i)
            if hardened:
                check = CachedOutputLiveness(check, me, i, out._use_count())
            self.outputs_weakrefs.append(StorageWeakRefWrapper(out, extra_ref_check=check))
            self.outputs_metadata.append(CUDAGraphNode._tensor_metadata(out))
            self.cached_tensor_outputs.append(out)
            del out

    def create_storage(self, metadata: dict[str, Any]) -> torch.UntypedStorage:
        return storage_at(metadata["data_ptr"], metadata["nbytes"])

    def _reconstruct_from_tensor_metadata(self, metadata: dict[str, Any], storage: Any = None) -> torch.Tensor:
        return tensor_on(self.create_storage(metadata) if storage is None else storage, metadata)

    @property
    def _path_from_root(self) -> Any:
        yield self

    @property
    def _path_to_root(self) -> Any:
        yield self

    def remove_node_cached_tensors(self) -> None:
        from torch._inductor.cudagraph_trees import CUDAGraphNode

        CUDAGraphNode.remove_node_cached_tensors(self)  # type: ignore[arg-type]
