"""The benchmark worker's device-time measurement on a real GPU (skips without one)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_device_time_of_an_iteration_is_isolated_from_the_host() -> None:
    """The device time of a graph replay is far below its host time, and a step that waits for
    the device (``.item()``) cannot be isolated and says so with None."""
    from grace.bench.modes import MODES
    from grace.bench.worker import Case
    from grace.bench.workloads import get

    case = Case(get("micro-ptr-8"), MODES["pt2-nocg"], "cuda", 4096, "full")
    case.warm_up(3)
    gpu = sorted(case.gpu_timed(s) for s in range(5))
    host = sorted(case.timed(s, inner=1) for s in range(5))
    assert all(g is not None and g > 0 for g in gpu)
    assert gpu[2] < host[2], "one small kernel: the device is busy for less than the host's call"
    held = case._last_gpu_inputs
    case.gpu_timed(9)
    assert {t.data_ptr() for t in held}.isdisjoint(t.data_ptr() for t in case._last_gpu_inputs), \
        "consecutive measured calls read inputs at new addresses"
    step = case.step
    case.step = lambda fn, module, inputs: (step(fn, module, inputs), torch.ones(1, device="cuda").item())
    case._sleep_cycles = 1 << 26  # two doublings to the limit
    assert case.gpu_timed(0) is None
    assert case.gpu_time_unavailable and "head start" in case.gpu_time_unavailable
    busy = case.device_busy(2)
    assert len(busy) == 2 and all(b > 0 for b in busy), "its device time comes from a profile instead"

    def must_not_run(fn, module, inputs):
        raise AssertionError("a step that cannot be isolated is not run again for its device time")

    case.step = must_not_run
    assert case.gpu_timed(1) is None, "given up for the rest of the run"


def test_autograd_backward_thread_is_found_and_pinned_to_the_timing_core() -> None:
    """A CUDA backward runs on autograd's own thread; the benchmark pins it beside the timing thread."""
    import os
    import threading

    from grace.bench import pinning

    tid = pinning.autograd_device_thread("cuda")
    assert tid is not None and tid != threading.get_native_id()
    before = os.sched_getaffinity(tid)
    core = min(os.sched_getaffinity(0))
    try:
        assert pinning.pin_backward_thread(core, "cuda") == tid
        assert os.sched_getaffinity(tid) == {core}
        assert pinning.autograd_device_thread("cuda") == tid, "one thread per device, reused by every backward"
    finally:
        os.sched_setaffinity(tid, before)
    torch.autograd.set_multithreading_enabled(False)
    try:
        assert pinning.autograd_device_thread("cuda") is None, "multithreading off: the calling thread runs it"
    finally:
        torch.autograd.set_multithreading_enabled(True)
