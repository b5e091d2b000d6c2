"""The workload registry: one small module per workload, registered by import.

A workload knows how to build its model (deterministic weights, so every worker process of a
run builds the same one) and how to make input sample ``i`` (deterministic too, and different
for every ``i``, so replays never see the inputs they were captured with). It keeps whatever
idiom its original has that trips CUDA graphs: that is what GraCE exists to fix.

Adding one is one file in this package that subclasses :class:`Workload` and calls
:func:`register`; the registry imports every module here on first use, and also the modules
named in ``GRACE_WORKLOAD_MODULES`` (comma-separated), for workloads kept outside GraCE.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["inference", "training"]
Size = Literal["full", "tiny"]
SIZES: tuple[Size, ...] = ("full", "tiny")  # "tiny": the CPU tests' sizes


@dataclass(frozen=True)
class Workload:
    """One benchmark case: a model, its inputs, and how one iteration runs."""

    name: str  # the short name used in configs and figures, e.g. "micro-eos"
    model: str  # what it is, e.g. "eos_like"
    suite: str  # "micro", "torchbench", "huggingface", "timm"
    kind: Kind
    batch_size: int
    idiom: str = ""  # the construct that keeps kernels out of CUDA graphs, if any
    # An iteration draws random numbers (dropout in training). The worker then compiles with
    # Inductor's ``fallback_random`` and seeds the RNG alike before the compiled and the eager
    # step, so that outputs can be checked; otherwise compiled dropout draws other masks.
    stochastic: bool = False

    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        """The model (an nn.Module or a function) on ``device``; weights seeded by the caller."""
        raise NotImplementedError

    def inputs(self, model: Any, sample: int, device: str, batch_size: int,
               size: Size = "full") -> tuple:
        """Input sample ``sample`` as positional arguments; deterministic in ``sample``."""
        raise NotImplementedError

    def loss(self, output: Any) -> Any:
        """Training workloads: the scalar the backward pass starts from."""
        raise NotImplementedError(f"{self.name} is not a training workload")


_REGISTRY: dict[str, Workload] = {}
_loaded: list[bool] = []


def register(workload: Workload) -> Workload:
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def _load_all() -> None:
    if _loaded:
        return
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    for module in filter(None, os.environ.get("GRACE_WORKLOAD_MODULES", "").split(",")):
        importlib.import_module(module.strip())
    _loaded.append(True)


def get(name: str) -> Workload:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def all_workloads() -> list[Workload]:
    _load_all()
    return list(_REGISTRY.values())


class MissingPackage(RuntimeError):
    """A workload's third-party package (transformers, timm, torchvision) is not installed."""


def require(module: str, pip_name: str) -> Any:
    """Import a third-party package a workload needs, or say how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingPackage(
            f"this workload needs {pip_name}, which is not importable ({e}); `make setup` installs "
            f"it on a networked machine, and the GPU image has it preinstalled") from e


def generator(device: str, sample: int) -> Any:
    """A torch.Generator on ``device`` seeded by the sample index."""
    import torch

    return torch.Generator(device=device).manual_seed(1_000_003 * (sample + 1))


