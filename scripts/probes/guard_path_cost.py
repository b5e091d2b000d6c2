"""What GraCE's per-step guards cost on the host, on the CPU, by the size of what they walk.

The replay map charges GraCE's training steps about 100 us a step to the guards' layer
(``StaleOutputGuard.path_ends``, ``AdoptedGrads.noted`` and ``before_call``): the stale-output
guard walks every cached output of every node on a path when the path ends, and the gradient
copies note each gradient a backward graph returns. This probe times the two on the development
CPU, where no tree exists: ``path_ends`` over fake nodes whose outputs are made as a recorded
node makes them (``tests/tree_fakes.py``; none held, the common case), for a path of N nodes of K
outputs; ``noted`` inside a real autograd backward that returns K gradients to K leaves. Medians
of repeated calls; nothing here touches a GPU.

    python scripts/probes/guard_path_cost.py
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from grace.paths import REPO_ROOT


def _fakes() -> Any:
    spec = importlib.util.spec_from_file_location("tree_fakes", REPO_ROOT / "tests" / "tree_fakes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_us(call: Callable[[], object], repeat: int) -> float:
    for _ in range(max(5, repeat // 10)):
        call()
    samples = []
    for _ in range(repeat):
        begun = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - begun) / 1e3)
    return statistics.median(samples)


def _path(nodes: int, outputs: int) -> list[Any]:
    fakes = _fakes()
    return [fakes.FakeNode(outputs, hardened=True) for _ in range(nodes)]


def path_ends_us(nodes: int, outputs: int, repeat: int) -> float:
    """Median microseconds of ``path_ends`` over a path of ``nodes`` fake nodes of ``outputs``."""
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager

    from grace.stale_outputs import StaleOutputGuard

    path = _path(nodes, outputs)

    class Tail:
        """The node a path ends at: its ``_path_from_root`` is the whole path."""

        @property
        def _path_from_root(self) -> Any:
            return iter(path)

    guard = StaleOutputGuard(CUDAGraphTreeManager.format_dealloc_msg)
    tail = Tail()
    return _median_us(lambda: guard.path_ends(tail), repeat)


def passes_us(nodes: int, outputs: int, repeat: int) -> tuple[float, float]:
    """Median microseconds of the two passes ``path_ends`` makes over the same path's cached
    outputs: who holds an output's tensor (``_held_indices``), and whether another tensor holds
    its storage (``_shared_indices``)."""
    from grace.stale_outputs import _held_indices, _shared_indices

    path = _path(nodes, outputs)
    held = _median_us(lambda: [_held_indices(n) for n in path], repeat)
    shared = _median_us(lambda: [_shared_indices(n) for n in path], repeat)
    return held, shared


def noted_us(gradients: int, repeat: int, recorded: bool = False) -> float:
    """Median microseconds of ``AdoptedGrads.noted`` for a backward returning ``gradients``
    gradients to as many leaves, called inside autograd's engine as the tree calls it; with
    ``recorded``, passed the recorded node that ran (its storages read at its first call)."""
    import types

    import torch

    from grace.grad_copies import AdoptedGrads

    leaves = [torch.nn.Parameter(torch.randn(8)) for _ in range(gradients)]
    grads = [torch.ones(8) for _ in range(gradients)]
    notes = AdoptedGrads()
    node = types.SimpleNamespace() if recorded else None
    times: list[float] = []

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, *params: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            notes._node = 0  # as at the first call of each backward pass: its leaves are noted
            begun = time.perf_counter_ns()
            notes.noted(grads, node)
            times.append((time.perf_counter_ns() - begun) / 1e3)
            notes._leaves.clear()
            notes._storages.clear()
            notes._node_storages.clear()
            return (g, *[None] * gradients)

    x = torch.randn(4, requires_grad=True)
    for _ in range(repeat + max(5, repeat // 10)):
        Backward.apply(x, *leaves).sum().backward()
    return statistics.median(times[max(5, repeat // 10):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=300, help="calls timed per case (default: %(default)s)")
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print("StaleOutputGuard.path_ends, nothing held (us per path end):")
    for nodes, outputs in ((2, 35), (1, 70), (190, 8), (50, 8), (190, 2)):
        us = path_ends_us(nodes, outputs, args.repeat)
        held, shared = passes_us(nodes, outputs, args.repeat)
        print(f"  {nodes:4d} nodes x {outputs:3d} outputs: {us:8.1f}   ({us / (nodes * outputs):.2f} an output; "
              f"its tensor-holder pass {held:.1f}, its storage pass {shared:.1f})")
    print("AdoptedGrads.noted, a backward's first call (us per call; a warm-up's, then a recorded node's):")
    for gradients in (8, 32, 128):
        us = noted_us(gradients, args.repeat)
        node_us = noted_us(gradients, args.repeat, recorded=True)
        print(f"  {gradients:4d} gradients: {us:8.1f}   ({us / gradients:.2f} a gradient); recorded node {node_us:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
