"""DLRM, as TorchBench's ``dlrm`` builds it (``DLRM_Net`` of ``dlrm_s_pytorch.py``).

TorchBench's architecture is the DLRM paper's: 512 dense features through a bottom MLP
512-512-64, eight ``nn.EmbeddingBag(1_000_000, 64, mode="sum", sparse=True)`` tables, the "dot"
interaction without self-interactions (the 9 feature vectors' 36 pairwise dot products next to
the bottom MLP's 64 outputs: 100 features) and a top MLP 100-1024-1024-1024-1. TorchBench passes
``sigmoid_top=-1``, so every MLP layer, the last included, is followed by ReLU. Inputs are its
``data_generation="random"`` batches: ``mini_batch_size`` 2048 rows, uniform dense features in
[0, 1), and for each table 100 indices per row (``num_indices_per_lookup_fixed``), drawn as
``round(u * (rows - 1))``, sorted within the row, with offsets ``0, 100, 200, ...`` stacked into
one (tables, batch) tensor as ``collate_wrapper_random`` does.

Kept: ``nn.Sequential`` MLPs of Linear+ReLU, the per-table EmbeddingBag loop indexed by
``lS_o[k]``/``lS_i[k]``, ``torch.cat(...).view`` + ``bmm`` for the interaction, the
``loss_threshold`` clamp branch, and the CPU-side idiom of ``interact_features``: the
lower-triangle indices are rebuilt every forward from Python lists with ``torch.tensor`` (on the
CPU) and used to index the device tensor ``Z``.

Differences: the original draws weights and data with NumPy; here they come from torch (the
caller's ``torch.manual_seed`` and :func:`generator`), with the same distributions (weights
N(0, sqrt(2/(m+n))), biases N(0, sqrt(1/m)), tables U(-sqrt(1/n), sqrt(1/n))). The original
``np.unique``s each row's indices, which drops a duplicate about once per 200 rows and makes the
index count vary between batches; here duplicates are kept so every sample has the same shapes.
The indices of the eight tables are stacked into one (tables, batch * 100) tensor rather than a
list, so every input is one tensor. ``parallel_forward`` (multi-GPU, ``ndevices > 1``) is left
out: TorchBench runs with ``ndevices=-1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register


@dataclass(frozen=True)
class _Arch:
    ln_emb: tuple[int, ...]
    m_spa: int
    ln_bot: tuple[int, ...]
    mlp_top: tuple[int, ...]
    num_indices_per_lookup: int


def _arch(size: Size) -> _Arch:
    if size == "full":
        return _Arch(ln_emb=(1_000_000,) * 8, m_spa=64, ln_bot=(512, 512, 64), mlp_top=(1024, 1024, 1024, 1),
                     num_indices_per_lookup=100)
    return _Arch(ln_emb=(50,) * 8, m_spa=8, ln_bot=(16, 16, 8), mlp_top=(16, 16, 1), num_indices_per_lookup=4)


def _top_layers(arch: _Arch, arch_interaction_itself: bool = False) -> tuple[int, ...]:
    num_fea = len(arch.ln_emb) + 1
    m_den_out = arch.ln_bot[-1]
    if arch_interaction_itself:
        num_int = num_fea * (num_fea + 1) // 2 + m_den_out
    else:
        num_int = num_fea * (num_fea - 1) // 2 + m_den_out
    return (num_int,) + arch.mlp_top


def _dlrm_net(arch: _Arch, device: str) -> Any:
    import math

    import torch
    from torch import nn

    class DLRM_Net(nn.Module):
        def create_mlp(self, ln: tuple[int, ...], sigmoid_layer: int) -> nn.Sequential:
            layers = []
            for i in range(len(ln) - 1):
                n, m = ln[i], ln[i + 1]
                linear = nn.Linear(n, m, bias=True, device=device)
                with torch.no_grad():
                    linear.weight.normal_(0.0, math.sqrt(2 / (m + n)))
                    linear.bias.normal_(0.0, math.sqrt(1 / m))
                layers.append(linear)
                layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
            return nn.Sequential(*layers)

        def create_emb(self, m: int, ln: tuple[int, ...]) -> nn.ModuleList:
            emb_l = nn.ModuleList()
            for n in ln:
                bound = math.sqrt(1 / n)
                weight = torch.empty(n, m, device=device).uniform_(-bound, bound)
                emb_l.append(nn.EmbeddingBag(n, m, mode="sum", sparse=True, _weight=weight))
            return emb_l

        def __init__(self, m_spa: int, ln_emb: tuple[int, ...], ln_bot: tuple[int, ...],
                     ln_top: tuple[int, ...], arch_interaction_op: str = "dot",
                     arch_interaction_itself: bool = False, sigmoid_bot: int = -1, sigmoid_top: int = -1,
                     loss_threshold: float = 0.0) -> None:
            super().__init__()
            self.arch_interaction_op = arch_interaction_op
            self.arch_interaction_itself = arch_interaction_itself
            self.loss_threshold = loss_threshold
            self.emb_l = self.create_emb(m_spa, ln_emb)
            self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
            self.top_l = self.create_mlp(ln_top, sigmoid_top)

        def apply_mlp(self, x, layers):
            return layers(x)

        def apply_emb(self, lS_o, lS_i, emb_l):
            ly = []
            for k in range(len(lS_i)):
                sparse_index_group_batch = lS_i[k]
                sparse_offset_group_batch = lS_o[k]
                E = emb_l[k]
                ly.append(E(sparse_index_group_batch, sparse_offset_group_batch))
            return ly

        def interact_features(self, x, ly):
            if self.arch_interaction_op == "dot":
                (batch_size, d) = x.shape
                T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
                Z = torch.bmm(T, torch.transpose(T, 1, 2))
                _, ni, nj = Z.shape
                offset = 1 if self.arch_interaction_itself else 0
                li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
                lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
                Zflat = Z[:, li, lj]
                R = torch.cat([x] + [Zflat], dim=1)
            elif self.arch_interaction_op == "cat":
                R = torch.cat([x] + ly, dim=1)
            else:
                raise ValueError(f"arch_interaction_op={self.arch_interaction_op!r} is not supported")
            return R

        def forward(self, dense_x, lS_o, lS_i):
            x = self.apply_mlp(dense_x, self.bot_l)
            ly = self.apply_emb(lS_o, lS_i, self.emb_l)
            z = self.interact_features(x, ly)
            p = self.apply_mlp(z, self.top_l)
            if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
                z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
            else:
                z = p
            return z

    return DLRM_Net(arch.m_spa, arch.ln_emb, arch.ln_bot, _top_layers(arch),
                    arch_interaction_op="dot", arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=-1,
                    loss_threshold=0.0)


@dataclass(frozen=True)
class Dlrm(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return _dlrm_net(_arch(size), device).eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        arch = _arch(size)
        gen = generator(device, sample)
        per_row = arch.num_indices_per_lookup
        dense_x = torch.rand(batch_size, arch.ln_bot[0], device=device, generator=gen)
        offsets = torch.arange(batch_size, device=device) * per_row
        lS_o = torch.stack([offsets] * len(arch.ln_emb))
        indices = []
        for rows in arch.ln_emb:
            u = torch.rand(batch_size, per_row, device=device, generator=gen, dtype=torch.float64)
            group = torch.round(u * (rows - 1)).long()
            indices.append(torch.sort(group, dim=1).values.reshape(-1))
        lS_i = torch.stack(indices)
        return (dense_x, lS_o, lS_i)


register(Dlrm("DLRM", "dlrm", "torchbench", "inference", 2048,
              idiom="CPU index tensors built in forward (torch.tensor of the tril indices) "
                    "index a device tensor"))
