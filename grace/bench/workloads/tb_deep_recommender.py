"""NVIDIA DeepRecommender, as TorchBench's ``nvidia_deeprecommender`` runs it.

The original (``reco_encoder/model/model.py`` with the benchmark arguments of ``nvtrain.py`` and
``nvinfer.py``) is an autoencoder over a user's rating vector: the layer sizes are
``[197951, 512, 512, 1024]`` (197951 items, TorchBench's "number of movies in netflix training
set"), SELU after every layer including the decoder's last, dropout 0.8 on the code layer only,
weights held as raw ``nn.ParameterList``s applied with ``F.linear`` and initialised with
``xavier_uniform_``, biases zero. TorchBench passes ``constrained=False`` (and the tied-weight path
of its copy of ``decode`` is switched off), so the decoder has its own weights; so does this one.

Kept: the ParameterList/``F.linear`` structure, the activation chosen by a string per call, the
code-layer dropout in training, and the training loss ``MSEloss`` (squared error of the output
masked to the rated items, summed, divided by the number of ratings). Inputs are dense rating
vectors that are mostly zeros (what ``UserItemRecDataProvider`` yields after ``to_dense()``):
integer ratings 1 to 5 on about 209 items per user (the Netflix Prize average), at least one per
user, so the masked loss never divides by zero. TorchBench's toy mode feeds ``randn`` instead,
which makes every item "rated"; the cost of the model is the same either way. DR-T's module is
the toy training step's forward: the autoencoder, then ``MSEloss`` of its output against its
input, returning (summed error, number of ratings); :meth:`DeepRecommender.loss` divides, as
``loss = loss / num_ratings`` does. TorchBench's eval batch is 256; DR-I runs at 8192.

For CUDA graphs nothing here splits the graph: what matters is the size of the input, a
batch of 197951-wide float32 rows (6.5 GB at batch 8192), which stock replays copy into the
graph's static input buffer every iteration.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register

RATINGS_PER_USER = 209


def _dims(size: Size) -> tuple[list[int], float]:
    """(layer sizes starting with the number of items, fraction of items a user has rated)."""
    if size == "full":
        return [197951, 512, 512, 1024], RATINGS_PER_USER / 197951
    return [64, 16, 16, 32], 0.25


def _modules() -> tuple[Any, Any]:
    """(AutoEncoder, AutoEncoderTrainStep) classes, made with torch imported."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def activation(x, kind: str):
        if kind == "selu":
            return F.selu(x)
        if kind == "relu":
            return F.relu(x)
        if kind == "relu6":
            return F.relu6(x)
        if kind == "sigmoid":
            return torch.sigmoid(x)
        if kind == "tanh":
            return torch.tanh(x)
        if kind == "elu":
            return F.elu(x)
        if kind == "lrelu":
            return F.leaky_relu(x)
        if kind == "swish":
            return x * torch.sigmoid(x)
        if kind == "none":
            return x
        raise ValueError(f"unknown non-linearity {kind!r}")

    def mse_loss(outputs, targets):
        """The original ``MSEloss`` with ``size_average=False``: (summed masked error, ratings)."""
        mask = targets != 0
        num_ratings = torch.sum(mask.float())
        criterion = nn.MSELoss(reduction="sum")
        return criterion(outputs * mask.float(), targets), num_ratings

    class AutoEncoder(nn.Module):
        def __init__(self, layer_sizes: list[int], device: str, nl_type: str = "selu",
                     dp_drop_prob: float = 0.0, last_layer_activations: bool = True) -> None:
            super().__init__()
            self._dp_drop_prob = dp_drop_prob
            self._last_layer_activations = last_layer_activations
            if dp_drop_prob > 0:
                self.drop = nn.Dropout(dp_drop_prob)
            self._last = len(layer_sizes) - 2
            self._nl_type = nl_type
            forward_pairs = list(itertools.pairwise(layer_sizes))
            self.encode_w = nn.ParameterList(
                [nn.Parameter(torch.empty(n_out, n_in, device=device)) for n_in, n_out in forward_pairs])
            self.encode_b = nn.ParameterList(
                [nn.Parameter(torch.zeros(n_out, device=device)) for _, n_out in forward_pairs])
            reversed_sizes = list(reversed(layer_sizes))
            backward_pairs = list(itertools.pairwise(reversed_sizes))
            self.decode_w = nn.ParameterList(
                [nn.Parameter(torch.empty(n_out, n_in, device=device)) for n_in, n_out in backward_pairs])
            self.decode_b = nn.ParameterList(
                [nn.Parameter(torch.zeros(n_out, device=device)) for _, n_out in backward_pairs])
            for w in list(self.encode_w) + list(self.decode_w):
                nn.init.xavier_uniform_(w)

        def encode(self, x):
            for ind, w in enumerate(self.encode_w):
                x = activation(F.linear(x, w, self.encode_b[ind]), self._nl_type)
            if self._dp_drop_prob > 0:
                x = self.drop(x)
            return x

        def decode(self, z):
            for ind, w in enumerate(self.decode_w):
                kind = self._nl_type if ind != self._last or self._last_layer_activations else "none"
                z = activation(F.linear(z, w, self.decode_b[ind]), kind)
            return z

        def forward(self, x):
            return self.decode(self.encode(x))

    class AutoEncoderTrainStep(nn.Module):
        """The toy training step's forward: reconstruct, then the masked loss against the input."""

        def __init__(self, rencoder: AutoEncoder) -> None:
            super().__init__()
            self.rencoder = rencoder

        def forward(self, inputs):
            return mse_loss(self.rencoder(inputs), inputs)

    return AutoEncoder, AutoEncoderTrainStep


@dataclass(frozen=True)
class DeepRecommender(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        autoencoder, train_step = _modules()
        layer_sizes, _ = _dims(size)
        rencoder = autoencoder(layer_sizes, device, nl_type="selu", dp_drop_prob=0.8,
                               last_layer_activations=True)
        if self.kind == "training":
            return train_step(rencoder).train()
        return rencoder.eval()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        layer_sizes, density = _dims(size)
        items = layer_sizes[0]
        gen = generator(device, sample)
        ratings = torch.rand(batch_size, items, device=device, generator=gen)
        ratings.mul_(5.0 / density).floor_().add_(1.0)
        ratings.masked_fill_(ratings > 5.0, 0.0)
        rows = torch.arange(batch_size, device=device)
        cols = torch.randint(0, items, (batch_size,), device=device, generator=gen)
        ratings[rows, cols] = torch.randint(1, 6, (batch_size,), device=device, generator=gen).float()
        return (ratings,)

    def loss(self, output: Any) -> Any:
        loss, num_ratings = output
        return loss / num_ratings


register(DeepRecommender("DR-I", "nvidia_deeprecommender", "torchbench", "inference", 8192,
                         idiom="none: large input (197951-wide fp32 rows) copied into the graph each replay"))
register(DeepRecommender("DR-T", "nvidia_deeprecommender", "torchbench", "training", 256,
                         idiom="none: large input copies; dropout (RNG) on the code layer",
                         stochastic=True))
