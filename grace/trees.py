"""The graphs recorded in torch's CUDA graph trees, for reports, SCG's profiles and tests."""

from __future__ import annotations

from typing import Any


def nodes(manager: Any) -> list[Any]:
    """Every recorded node of one tree (``CUDAGraphTreeManager``), roots and descendants."""
    roots = getattr(manager, "roots", None) or {}
    out, stack = [], [n for ns in roots.values() for n in ns]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(c for children in node.children.values() for c in children)
    return out


def recorded_nodes() -> list[Any]:
    """Every recorded node of this process's trees, all devices."""
    import torch
    from torch._inductor import cudagraph_trees

    managers = (cudagraph_trees.get_manager(d, create_if_none_exists=False) for d in range(torch.cuda.device_count()))
    return [n for m in managers if m is not None for n in nodes(m)]


def graph_pool_bytes() -> int:
    """Device bytes held in CUDA graph private pools: the recorded graphs' placeholders, outputs
    and intermediates.

    The allocator's allocated-bytes statistics stop counting that memory once a graph is
    recorded (the trees rebuild outputs over it without allocating), so a peak of allocated
    bytes does not show what graphs cost; the pools' segments do. Takes a memory snapshot:
    for reports, never on a timed path.
    """
    import torch

    return sum(int(seg["total_size"]) for seg in torch.cuda.memory_snapshot()
               if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0))


def release_cached_memory(device: Any) -> int:
    """Return the caching allocator's free segments to ``device``; the bytes given back.

    For capture-time work that held large temporaries (SCG's private trees, PI's check): left
    cached, they would stay reserved for the life of the process. Pools still in use (the real
    tree's) are untouched. Synchronizes; never on a timed path.
    """
    import torch

    before = torch.cuda.memory_reserved(device)
    torch.cuda.empty_cache()
    return before - torch.cuda.memory_reserved(device)
