"""The share of kernels launched inside CUDA graphs (the paper's Table 2), from a profile.

Under ``torch.profiler`` with CUDA activities, CUPTI records every kernel that ran on the GPU and
every runtime or driver call that launched work, and links the two by a correlation id: a kernel
launched directly correlates with its launch call (``cudaLaunchKernel``, ``cuLaunchKernelEx``,
...), a kernel that ran in a graph replay with the replay's ``cudaGraphLaunch``. Counting kernels
by the call they correlate with measures coverage from what actually ran, not from what the
compiler meant to capture. nsys is not needed (and not on the GPU image).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


@dataclass(frozen=True)
class Coverage:
    kernels: int  # kernels that ran
    in_graphs: int  # of which launched by a graph replay
    unlinked: int  # kernels whose launching call the profile did not record

    @property
    def share(self) -> float:
        """Share of the kernels whose launch is known that ran inside a CUDA graph."""
        known = self.kernels - self.unlinked
        return self.in_graphs / known if known else 0.0


def count(trace: dict[str, Any]) -> Coverage:
    """Coverage of a Chrome trace as ``torch.profiler`` exports it."""
    launches: dict[int, str] = {}
    kernels: list[int | None] = []
    for e in trace.get("traceEvents", []):
        cat, args = e.get("cat", ""), e.get("args") or {}
        corr = args.get("correlation")
        if cat == "kernel":
            kernels.append(corr)
        elif cat in ("cuda_runtime", "cuda_driver") and corr is not None:
            launches[corr] = e.get("name", "")
    in_graphs = sum(1 for c in kernels if c is not None and launches.get(c, "").startswith(GRAPH_LAUNCHES))
    unlinked = sum(1 for c in kernels if c is None or c not in launches)
    return Coverage(len(kernels), in_graphs, unlinked)


def measure(step: Callable[[int], Any], iterations: int) -> Coverage:
    """Coverage over ``iterations`` calls of ``step(i)``, profiled after the caller's warm-up (GPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(iterations):
            step(i)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return count(json.loads(path.read_text()))
