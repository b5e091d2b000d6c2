"""Device and host cost of writing K pointers into a graph's pointer table, per way of writing.

Diagnostic for ``grace/pi/table.py``. Figure 9's device times showed a replay that rewrote
the table costing about 0.65 us of GPU time per slot with ``cuStreamBatchMemOp``: 41 us at K = 64, against 7 us for PT2-CG's copies. This probe times
each way on its own, for K = 1 to 64:

* batch memop: one ``cuStreamBatchMemOp`` of K 64-bit writes (today's way);
* pageable memcpy: ``cuMemcpyHtoDAsync`` from pageable memory, which the driver stages;
* pinned memcpy: the same from a pinned buffer (device cost only: reusing the buffer safely
  needs an event per use, as the pinned ring once had);
* writer kernel: a one-block kernel given the K values by value, storing them.

Device time is per write, from 20 writes queued behind a sleeping kernel (so the host's queuing
is hidden). Host time is per write, back to back. "waits for the stream" says whether one call
made behind a 2 ms sleeping kernel returned only after the sleep (a stream synchronization).

    python scripts/probes/table_write_device_cost.py
"""

from __future__ import annotations

import ctypes
import struct
import time
from typing import Callable

from pointer_update_cost import driver_fn, writer_function  # this directory, run as a script

KS = (1, 4, 16, 64)
REPS = 20
SLEEP_CYCLES = 1 << 22  # about 2.5 ms on an H100

WRITER_SOURCE = r"""
struct Values { unsigned long long v[64]; };
extern "C" __global__ void grace_table_writer(unsigned long long* table, unsigned int n, Values values) {
  const unsigned int i = threadIdx.x;
  if (i < n) table[i] = values.v[i];
}
"""


def main() -> None:
    import torch

    torch.cuda.init()
    cu = ctypes.CDLL("libcuda.so.1")
    stream = torch.cuda.current_stream().cuda_stream
    table = torch.zeros(64, dtype=torch.int64, device="cuda")
    dst = table.data_ptr()

    batch = driver_fn(cu, "cuStreamBatchMemOp_v2", "cuStreamBatchMemOp")
    batch.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint]
    memcpy = driver_fn(cu, "cuMemcpyHtoDAsync_v2")
    memcpy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    launch = driver_fn(cu, "cuLaunchKernel")
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    fptr = int(writer_function(WRITER_SOURCE))

    def ways(k: int) -> dict[str, Callable[[int], None]]:
        ops = ctypes.create_string_buffer(48 * k)
        for j in range(k):
            struct.pack_into("<I4xQ", ops, 48 * j, 5, dst + 8 * j)  # CU_STREAM_MEM_OP_WRITE_VALUE_64
        pageable = (ctypes.c_uint64 * k)()
        pinned = torch.zeros(k, dtype=torch.int64, pin_memory=True)
        arg_table, arg_n, arg_values = ctypes.c_uint64(dst), ctypes.c_uint(k), (ctypes.c_uint64 * 64)()
        argv = (ctypes.c_void_p * 3)(ctypes.addressof(arg_table), ctypes.addressof(arg_n),
                                     ctypes.addressof(arg_values))

        def memop(i: int) -> None:
            for j in range(k):
                struct.pack_into("<Q", ops, 48 * j + 16, 0x7F0000000000 + 256 * (i + j))
            batch(stream, k, ops, 0)

        def pageable_copy(i: int) -> None:
            pageable[:] = [0x7F0000000000 + 256 * (i + j) for j in range(k)]
            memcpy(dst, pageable, 8 * k, stream)

        def pinned_copy(i: int) -> None:  # device cost only: the buffer is reused unguarded
            memcpy(dst, pinned.data_ptr(), 8 * k, stream)

        def kernel(i: int) -> None:
            arg_values[:k] = [0x7F0000000000 + 256 * (i + j) for j in range(k)]
            launch(fptr, 1, 1, 1, 64, 1, 1, 0, stream, argv, None)

        return {"batch memop": memop, "pageable memcpy": pageable_copy, "pinned memcpy": pinned_copy,
                "writer kernel": kernel}

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    print(f"{'way':<18} {'K':>3} {'device us':>10} {'host us':>8}  waits for the stream")
    for k in KS:
        for name, write in ways(k).items():
            write(0)
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            for i in range(REPS):
                write(i)
            end.record()
            end.synchronize()
            device = start.elapsed_time(end) * 1e3 / REPS
            t = time.perf_counter()
            for i in range(2000):
                write(i)
            host = (time.perf_counter() - t) / 2000 * 1e6
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP_CYCLES)
            t = time.perf_counter()
            write(1)
            waited = (time.perf_counter() - t) * 1e6
            torch.cuda.synchronize()
            print(f"{name:<18} {k:>3} {device:>10.2f} {host:>8.2f}  {'yes' if waited > 1000 else 'no'} ({waited:.0f} us)")


if __name__ == "__main__":
    main()
