"""CGCT's constant rewrite: a CPU tensor that forward builds only to index GPU tensors is built on the GPU.

DLRM's interaction builds its lower-triangle indices with ``torch.tensor([...])`` (a CPU tensor)
on every call and indexes a GPU tensor with them (``Z[:, li, lj]``). Dynamo puts the constructor
in the graph; Inductor lowers it to a CPU buffer, its ``index`` refuses indices on another device
and falls back to ATen, and graph partitioning leaves the CPU buffers outside the CUDA graph as
inputs of the partition that reads them. CUDA graph trees then copy those CPU inputs into CPU
"placeholders" that their pool can never hold, and the tree's pool check fails the run
("These storage data ptrs are not allocated in pool"), under stock PT2-CG as under GraCE.

Here, before Inductor sees Dynamo's graph, such a constructor gets ``device=<the GPU>``: the
indices are then a GPU constant, ``index`` lowers natively, and the function is one CUDA graph.
The values are the same and so is every result: indexing a GPU tensor with GPU or CPU indices
selects the same elements. The rewrite applies only where that is all the tensor is used for:

* the node is ``torch.tensor(data)`` with no ``device`` argument (or ``device=None``, the
  default device, as code that passes a device argument on gives it) and a CPU result that does
  not require grad;
* every user is a subscript (``operator.getitem``) of a tensor on the GPU, with the constant
  among the indices, never as the indexed tensor, and a GPU result;
* so it is never returned, written in place, or read on the host.

Anything else stays as stock PyTorch builds it, with the reason in the log.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grace.log import get_logger

log = get_logger("grace.cgct")


@dataclass(frozen=True)
class MovedConstant:
    name: str  # the graph node
    where: str  # the user's source line, for the log


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if hasattr(node, "meta") else None


def _where(node: Any) -> str:
    trace = node.meta.get("stack_trace") if hasattr(node, "meta") else None
    if not trace:
        return node.name
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    return lines[-2] if len(lines) >= 2 else lines[-1]


def why_not_movable(node: Any, device: Any) -> str | None:
    """Why the constructor ``node`` must stay on the CPU, or None if it may be built on ``device``."""
    import torch

    value = _value(node)
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return "not a CPU tensor"
    if value.requires_grad:
        return "requires grad"
    if node.kwargs.get("device") is not None or len(node.args) != 1:
        return "its device or layout is given"
    if not node.users:
        return "unused"
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem:
            return f"used by {user.op} {getattr(user.target, '__name__', user.target)}, not only as indices"
        indexed, index = user.args
        if indexed is node or node not in (index if isinstance(index, (tuple, list)) else (index,)):
            return "indexed itself, not used as indices"
        source, result = _value(indexed), _value(user)
        if not (isinstance(source, torch.Tensor) and source.device == device
                and isinstance(result, torch.Tensor) and result.device == device):
            return f"indexes a tensor that is not on {device}"
    return None


def move_index_constants(gm: Any, example_inputs: Sequence[Any], device: Any) -> list[MovedConstant]:
    """Rewrite ``gm`` (Dynamo's graph) in place: each CPU ``torch.tensor`` used only as indices of
    tensors on ``device`` is built there. Returns what moved; logs what stayed and why."""
    import torch
    from torch._guards import detect_fake_mode

    moved: list[MovedConstant] = []
    fake_mode = detect_fake_mode(example_inputs)
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.tensor:
            continue
        why = why_not_movable(node, device)
        if why is not None:
            log.info("CGCT: torch.tensor %s stays on the CPU: %s", node.name, why)
            continue
        node.kwargs = {**node.kwargs, "device": device}
        value = _value(node)
        if fake_mode is not None:
            with fake_mode:
                node.meta["example_value"] = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype,
                                                                 device=device)
        where = _where(next(iter(node.users)))
        moved.append(MovedConstant(node.name, where))
        log.info("CGCT: torch.tensor %s built on %s: it only indexes tensors there (%s)", node.name, device, where)
    if moved:
        gm.graph.lint()
        gm.recompile()
    return moved
