"""An iteration's device-busy time from a profile's GPU events (grace.bench.device_busy)."""

from __future__ import annotations

import pytest

from grace.bench.device_busy import busy_us, device_intervals


def test_busy_time_is_the_union_of_the_devices_intervals() -> None:
    assert busy_us([]) == 0.0
    assert busy_us([(0.0, 10.0), (20.0, 25.0)]) == 15.0, "a gap where the device waited is not busy"
    assert busy_us([(0.0, 10.0), (5.0, 12.0), (6.0, 8.0)]) == 12.0, "work overlapping on two streams counts once"
    assert busy_us([(30.0, 40.0), (0.0, 10.0), (10.0, 20.0)]) == 30.0, "in any order; touching intervals join"


def test_only_work_that_ran_on_the_gpu_counts() -> None:
    trace = {"traceEvents": [
        {"cat": "kernel", "ts": 100.0, "dur": 5.0},
        {"cat": "gpu_memcpy", "ts": 110.0, "dur": 2.0},
        {"cat": "gpu_memset", "ts": 104.0, "dur": 3.0},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 90.0, "dur": 50.0},
        {"cat": "cpu_op", "ts": 80.0, "dur": 100.0},
        {"ph": "M", "name": "process_name"},
    ]}
    assert sorted(device_intervals(trace)) == [(100.0, 105.0), (104.0, 107.0), (110.0, 112.0)]
    assert busy_us(device_intervals(trace)) == 9.0


def test_a_step_that_waits_for_the_device_gets_its_busy_time_from_the_profile() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from grace.bench import device_busy

    x = torch.randn(2048, 2048, device="cuda")

    def step(i: int) -> None:
        (x @ x).sum().item()  # waits for the device: the sleeping-kernel measure cannot isolate it

    busy = device_busy.measure(step, 3)
    assert len(busy) == 3 and all(b > 0 for b in busy)
