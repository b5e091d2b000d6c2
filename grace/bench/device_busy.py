"""An iteration's device time from a profile, where the sleeping-kernel measure cannot isolate it.

``Case.gpu_timed`` holds the stream behind a sleeping kernel while the host queues an
iteration, and times the iteration's device work between two events. An iteration that waits
for the device inside (a ``.item()``, an output whose shape depends on data: ST's and VM's) or
whose host work outlasts the longest sleep never gets ahead of the device, and gives nothing.
For those, the device time is read from ``torch.profiler`` instead: CUPTI records when every
kernel, copy and memset ran on the GPU, and the union of those intervals is the time the device
was busy, without the gaps where it waited for the host. It leaves out the device's own gaps
between back-to-back kernels (a microsecond or two each), which the events include, so it is a
slightly lower figure than ``gpu_us`` where both exist; rows keep the two apart
(``gpu_samples_us`` and ``gpu_busy_us``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# Chrome-trace categories of work that ran on the GPU (torch.profiler's export)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def busy_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals: overlapping work on several streams
    counts once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def device_intervals(trace: dict[str, Any]) -> list[tuple[float, float]]:
    """``(start, end)`` in microseconds of every GPU event of a Chrome trace as ``torch.profiler``
    exports it."""
    return [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
            for e in trace.get("traceEvents", []) if e.get("cat") in DEVICE_CATEGORIES and "ts" in e]


def measure(step: Callable[[int], Any], iterations: int) -> list[float]:
    """Device-busy microseconds of each of ``iterations`` calls of ``step(i)``, each profiled on its
    own after the caller's warm-up (GPU); untimed."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = []
    for i in range(iterations):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(i)
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            out.append(busy_us(device_intervals(json.loads(path.read_text()))))
    return out
