"""Host cost of each call a pointer-table fill makes (cuda.bindings runtime, torch, ctypes): diagnostic for grace/pi/table.py."""
import time, torch
from cuda.bindings import runtime as rt
t = torch.zeros(8, dtype=torch.int64, device="cuda"); h = torch.zeros(8, dtype=torch.int64, pin_memory=True)
s = torch.cuda.current_stream().cuda_stream
kind = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
err, ev = rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming)
def tm(f, n=2000):
    f(); torch.cuda.synchronize(); a = time.perf_counter()
    for _ in range(n): f()
    b = time.perf_counter(); torch.cuda.synchronize(); return round((b - a) / n * 1e6, 2)
print("cudaMemcpyAsync", tm(lambda: rt.cudaMemcpyAsync(t.data_ptr(), h.data_ptr(), 64, kind, s)))
print("cudaEventRecord", tm(lambda: rt.cudaEventRecord(ev, s)))
print("cudaEventSynchronize", tm(lambda: rt.cudaEventSynchronize(ev)))
print("torch copy_ non_blocking", tm(lambda: t.copy_(h, non_blocking=True)))
import ctypes
cu = ctypes.CDLL("libcuda.so.1"); m = cu.cuMemcpyHtoDAsync_v2; m.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
print("ctypes cuMemcpyHtoDAsync", tm(lambda: m(t.data_ptr(), h.data_ptr(), 64, s)))
raw = torch._C._cuda_getCurrentRawStream
print("raw stream", tm(lambda: raw(0)))
