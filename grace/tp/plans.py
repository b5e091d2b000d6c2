"""Tensor-parallel plans: which linear layers of a workload are split by columns and which by rows.

The Megatron pattern, with PyTorch's own styles: in an attention block the query, key and value
projections are split by columns (each rank computes its own heads) and the output projection by
rows (its partial sums reduced across ranks); in a feed-forward block the first layer by columns
and the second by rows. Everything else is replicated. A module that reshapes by its head count
then sees only its rank's heads: :func:`shard` sets that count to the local one, the only change
to the model besides the layers' own parameters, which ``parallelize_module`` shards.

A gated feed-forward (SwiGLU: the first layer's output chunked into value and gate halves) has
its first layer's rows laid out again before it is sharded, so that each rank's columns are its
share of the value and its share of the gate (:func:`gated_row_order`); the sharded model
computes what the unsharded one does. A plan refuses a degree that does not divide a block's
heads or hidden width, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Block:
    """One kind of block to shard: its column-wise and row-wise children, and what else a rank
    must know to run its share."""

    kind: str  # the module's class name
    columns: tuple[str, ...]  # children split by columns (output features)
    rows: tuple[str, ...]  # children split by rows (input features), their partial sums reduced
    heads: str | None = None  # attribute holding the head count, made local
    # a child's class that the block holds, for a kind as general as Sequential
    holds: str | None = None
    # the column children's outputs are chunked into (value, gate) halves (SwiGLU): their rows
    # are laid out again so that each rank's columns are its value and its gate halves
    gated: bool = False

    def matches(self, module: Any) -> bool:
        if type(module).__name__ != self.kind:
            return False
        return self.holds is None or any(type(c).__name__ == self.holds for c in module.children())


SPEECH_TRANSFORMER = (
    Block("MultiHeadAttention", ("w_qs", "w_ks", "w_vs"), ("fc",), heads="n_head"),
    Block("PositionwiseFeedForward", ("w_1",), ("w_2",)),
)

# XLNet's relative attention holds its projections as parameters of one einsum each (``q``, ``k``,
# ``v``, ``o``, ``r``), not as linear layers, which PyTorch's styles do not split: it stays
# replicated, and the feed-forward blocks are split.
XLNET = (Block("XLNetFeedForward", ("layer_1",), ("layer_2",)),)

# Mask R-CNN: the box head's two fully connected layers (its largest matrices, 12544 x 1024 and
# 1024 x 1024) split; the convolutions of the backbone, the FPN and the mask head stay replicated.
MASK_RCNN = (Block("TwoMLPHead", ("fc6",), ("fc7",)),)

# DALL-E 2: the diffusion prior's SwiGLU feed-forward blocks (Sequential: LayerNorm, Linear to
# twice the inner width, SwiGLU, Identity, Dropout, Linear back), whose first layer's output is
# chunked into value and gate. Its attention (one shared key/value head, a learned null key and
# value, a relative position bias of every head) and the decoder's U-Nets stay replicated.
DALLE2 = (Block("Sequential", ("1",), ("5",), holds="SwiGLU", gated=True),)

PLANS: dict[str, tuple[Block, ...]] = {"ST": SPEECH_TRANSFORMER, "XLNET-I": XLNET, "VM": MASK_RCNN,
                                       "DALLE2": DALLE2}


def plan_for(workload: str, model: Any, degree: int) -> tuple[dict[str, Any], list[tuple[Any, str, int]], list[Any]]:
    """``parallelize_module``'s plan for ``model`` at ``degree`` ranks, the head counts to make
    local (``(module, attribute, local count)``), and the gated layers to lay out again."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    if workload not in PLANS:
        raise ValueError(f"no tensor-parallel plan for {workload}; plans exist for {', '.join(sorted(PLANS))}")
    if degree < 1:
        raise ValueError(f"the tensor-parallel degree must be at least 1, not {degree}")
    plan: dict[str, Any] = {}
    heads: list[tuple[Any, str, int]] = []
    gated: list[Any] = []
    for name, module in model.named_modules():
        block = next((b for b in PLANS[workload] if b.matches(module)), None)
        if block is None:
            continue
        for child in block.columns:
            layer = getattr(module, child)
            width = layer.out_features // 2 if block.gated else layer.out_features
            if width % degree:
                raise ValueError(f"{name}.{child}: {width} output features do not split over {degree} ranks")
            plan[f"{name}.{child}"] = ColwiseParallel()
            if block.gated:
                gated.append(layer)
        for child in block.rows:
            plan[f"{name}.{child}"] = RowwiseParallel()
        if block.heads is not None:
            count = getattr(module, block.heads)
            if count % degree:
                raise ValueError(f"{name}: {count} heads do not split over {degree} ranks")
            heads.append((module, block.heads, count // degree))
    if not plan:
        raise ValueError(f"{workload}: the plan found no block to shard in {type(model).__name__}")
    return plan, heads, gated


def gated_row_order(out_features: int, degree: int) -> list[int]:
    """The order of a gated layer's output rows (value rows, then gate rows) that puts each
    rank's value rows and gate rows side by side: rank ``r``'s contiguous share of the rows is
    then its value slice followed by its gate slice, which its SwiGLU chunks correctly."""
    inner = out_features // 2
    share = inner // degree
    order: list[int] = []
    for r in range(degree):
        order += list(range(r * share, (r + 1) * share))
        order += list(range(inner + r * share, inner + (r + 1) * share))
    return order


def lay_out_gated(layer: Any, degree: int) -> None:
    """Reorder ``layer``'s output rows by :func:`gated_row_order`, before it is sharded."""
    import torch

    order = torch.tensor(gated_row_order(layer.out_features, degree), device=layer.weight.device)
    with torch.no_grad():
        layer.weight.copy_(layer.weight[order])
        if layer.bias is not None:
            layer.bias.copy_(layer.bias[order])


def shard(workload: str, model: Any, mesh: Any) -> Any:
    """``model`` sharded in place over ``mesh`` (one-dimensional) with its workload's plan."""
    from torch.distributed.tensor.parallel import parallelize_module

    plan, heads, gated = plan_for(workload, model, mesh.size())
    for layer in gated:
        lay_out_gated(layer, mesh.size())
    parallelize_module(model, mesh, plan)
    for module, attr, local in heads:
        setattr(module, attr, local)
    return model


def workloads() -> list[str]:
    return sorted(PLANS)

