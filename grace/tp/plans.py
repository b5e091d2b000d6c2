"""Tensor-parallel plans: which linear layers of a workload are split by columns and which by rows.

The Megatron pattern, with PyTorch's own styles: in an attention block the query, key and value
projections are split by columns (each rank computes its own heads) and the output projection by
rows (its partial sums reduced across ranks); in a feed-forward block the first layer by columns
and the second by rows. Everything else is replicated. A module that reshapes by its head count
then sees only its rank's heads: :func:`shard` sets that count to the local one, the only change
to the model besides the layers' own parameters, which ``parallelize_module`` shards.

A plan refuses a degree that does not divide a block's heads or hidden width, naming it.
"""

from __future__ import annotations

from typing import Any

# module class name -> (column-wise children, row-wise children, head-count attribute or None)
Blocks = dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]]

SPEECH_TRANSFORMER: Blocks = {
    "MultiHeadAttention": (("w_qs", "w_ks", "w_vs"), ("fc",), "n_head"),
    "PositionwiseFeedForward": (("w_1",), ("w_2",), None),
}

# XLNet's relative attention holds its projections as parameters of one einsum each (``q``, ``k``,
# ``v``, ``o``, ``r``), not as linear layers, which PyTorch's styles do not split: it stays
# replicated, and the feed-forward blocks are split.
XLNET: Blocks = {
    "XLNetFeedForward": (("layer_1",), ("layer_2",), None),
}

# Mask R-CNN: the box head's two fully connected layers (its largest matrices, 12544 x 1024 and
# 1024 x 1024) split; the convolutions of the backbone, the FPN and the mask head stay replicated.
MASK_RCNN: Blocks = {
    "TwoMLPHead": (("fc6",), ("fc7",), None),
}

PLANS: dict[str, Blocks] = {"ST": SPEECH_TRANSFORMER, "XLNET-I": XLNET, "VM": MASK_RCNN}


def plan_for(workload: str, model: Any, degree: int) -> tuple[dict[str, Any], list[tuple[Any, str, int]]]:
    """``parallelize_module``'s plan for ``model`` at ``degree`` ranks, and the head counts to make
    local: ``(module, attribute, local count)``."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    if workload not in PLANS:
        raise ValueError(f"no tensor-parallel plan for {workload}; plans exist for {', '.join(sorted(PLANS))}")
    if degree < 1:
        raise ValueError(f"the tensor-parallel degree must be at least 1, not {degree}")
    blocks = PLANS[workload]
    plan: dict[str, Any] = {}
    heads: list[tuple[Any, str, int]] = []
    for name, module in model.named_modules():
        spec = blocks.get(type(module).__name__)
        if spec is None:
            continue
        columns, rows, head_attr = spec
        for child in columns:
            width = getattr(module, child).out_features
            if width % degree:
                raise ValueError(f"{name}.{child}: {width} output features do not split over {degree} ranks")
            plan[f"{name}.{child}"] = ColwiseParallel()
        for child in rows:
            plan[f"{name}.{child}"] = RowwiseParallel()
        if head_attr is not None:
            count = getattr(module, head_attr)
            if count % degree:
                raise ValueError(f"{name}: {count} heads do not split over {degree} ranks")
            heads.append((module, head_attr, count // degree))
    if not plan:
        raise ValueError(f"{workload}: the plan found no block to shard in {type(model).__name__}")
    return plan, heads


def shard(workload: str, model: Any, mesh: Any) -> Any:
    """``model`` sharded in place over ``mesh`` (one-dimensional) with its workload's plan."""
    from torch.distributed.tensor.parallel import parallelize_module

    plan, heads = plan_for(workload, model, mesh.size())
    parallelize_module(model, mesh, plan)
    for module, attr, local in heads:
        setattr(module, attr, local)
    return model


def workloads() -> list[str]:
    return sorted(PLANS)

