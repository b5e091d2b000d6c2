"""Cold-cache cost of the per-input helpers on 607 CPU tensors (caches evicted with a 256 MiB write
before each timed call; 'guard-warm' re-reads the fields Dynamo's tensor guards read first)."""
import statistics, time, torch
from torch._C._dynamo.guards import assert_size_stride
torch.set_num_threads(1)
BIG = torch.empty(64 * 1024 * 1024)
junk = []
def build(n):
    ts = []
    for i in range(n - 1):
        junk.append(torch.randn(7))  # interleave allocations, as a model's construction does
        ts.append(torch.nn.Parameter(torch.randn(8, 4, 3, 3)) if i % 5 < 3 else torch.randn(8))
    ts.append(torch.randn(4, 3, 8, 8))
    return ts
def guard_touch(ts):
    for t in ts:
        t.dtype; t.device; t.shape; t.stride(); t.requires_grad
E = torch._C._tensors_data_ptrs_at_indices_equal
def run(n, label, fn, warm):
    ts = build(n); idx = list(range(n - 1)); ptrs = [t.data_ptr() for t in ts[:-1]] + [None]
    shp = [(tuple(t.shape), tuple(t.stride())) for t in ts]
    f = {"C++ _tensors_data_ptrs_at_indices_equal": lambda: E(ts, ptrs, idx),
         "py all(t.data_ptr()==p)": lambda: all(ts[i].data_ptr() == ptrs[i] for i in idx),
         "py assert_size_stride loop": lambda: [assert_size_stride(t, a, b) for t, (a, b) in zip(ts, shp)],
         "py isinstance+data_ptr%16 loop (copy_misaligned_inputs)": lambda: [t.data_ptr() % 16 for t in ts if isinstance(t, torch.Tensor)],
         }[fn]
    out = []
    for k in range(60):
        if warm != "hot":
            BIG.fill_(1.0)
            if warm == "guard-warm":
                guard_touch(ts)
        t0 = time.perf_counter_ns(); f(); out.append(time.perf_counter_ns() - t0)
    return statistics.median(out[5:]) / 1e3
for fn in ("C++ _tensors_data_ptrs_at_indices_equal", "py all(t.data_ptr()==p)", "py assert_size_stride loop",
           "py isinstance+data_ptr%16 loop (copy_misaligned_inputs)"):
    for warm in ("hot", "guard-warm", "cold"):
        a, b = run(17, fn, fn, warm), run(607, fn, fn, warm)
        print(f"{fn:58s} {warm:10s} N=17 {a:7.1f} us  N=607 {b:7.1f} us  per input {(b - a) / 590:.3f} us")
