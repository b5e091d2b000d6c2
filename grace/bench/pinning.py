"""Which core a worker's timed work runs on.

The worker pins the thread that times its samples to one core (``--pin-cpu``, claimed per host by
:mod:`grace.bench.timing_core`), so that a sample does not migrate between cores mid-call. Two
other threads take part in a timed iteration and need the same care: torch's intra-op pool, made
by the first parallel CPU op, which must be made before the pin, and autograd's thread for the
GPU, which runs every training step's backward while the timing thread waits, and which must
follow the pin.
"""

from __future__ import annotations

import os
import threading


# elements of the parallel CPU op that makes torch's intra-op thread pool: far above its grain
# (at::internal::GRAIN_SIZE, 32768), so that every thread of the pool takes part
POOL_WARMING_ELEMENTS = 1 << 22


def pin_timing_thread(core: int) -> None:
    """Pin the calling (timing) thread to ``core``; compile workers and thread pools stay free.

    OpenMP makes torch's intra-op pool at the first parallel CPU op, and its threads inherit the
    affinity of the thread that makes it. Made after the pin, the whole pool would share the
    timing thread's core and spin there, and a parallel CPU op would take about 170 times as long
    (``scripts/probes/pinned_pool.py``): the first such ops of a compiled worker are often its
    check's, in an eager reference that computes on the CPU what the compiled code moved to the
    GPU (XLNet's positions). So the pool is made first, with the process's cores."""
    import torch

    torch.zeros(POOL_WARMING_ELEMENTS).add_(1)
    os.sched_setaffinity(0, {core})


def autograd_device_thread(device: str) -> int | None:
    """The native id of the thread autograd runs a backward on ``device`` on, started by a backward
    of one small tensor if no backward has run there yet; None where the calling thread runs it
    (the CPU, or with autograd's multithreading off)."""
    import torch

    if not device.startswith("cuda"):
        return None
    seen: list[int] = []
    x = torch.ones(4, device=device, requires_grad=True)
    y = x * 2
    y.grad_fn.register_prehook(lambda grads: seen.append(threading.get_native_id()))
    y.sum().backward()
    return seen[0] if seen[0] != threading.get_native_id() else None


def pin_backward_thread(core: int, device: str) -> int | None:
    """Pin autograd's backward thread for ``device`` to ``core``, the timing thread's: a training
    step's caller waits on that thread while it runs the backward, so the two share a core without
    contention, and the backward's Python stays warm in that core's caches. Its id, or None where
    there is no such thread."""
    tid = autograd_device_thread(device)
    if tid is not None:
        os.sched_setaffinity(tid, {core})
    return tid
