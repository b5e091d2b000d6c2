"""Which cold lines cost the C++ check: after eviction + guard-field re-read, also re-read
(a) the index and pointer Python ints, (b) additionally each tensor's storage (t.data_ptr())."""
import statistics, time, torch
torch.set_num_threads(1)
BIG = torch.empty(64 * 1024 * 1024); junk = []
E = torch._C._tensors_data_ptrs_at_indices_equal
def build(n):
    ts = []
    for i in range(n - 1):
        junk.append(torch.randn(7))
        ts.append(torch.nn.Parameter(torch.randn(8, 4, 3, 3)) if i % 5 < 3 else torch.randn(8))
    return ts + [torch.randn(4, 3, 8, 8)]
def go(n, mode):
    ts = build(n); idx = list(range(n - 1)); ptrs = [t.data_ptr() for t in ts[:-1]] + [None]
    out = []
    for k in range(60):
        BIG.fill_(1.0)
        for t in ts:
            t.dtype; t.device; t.shape; t.stride(); t.requires_grad
        if mode >= 1:
            s = 0
            for i in idx: s += i
            for p in ptrs[:-1]: s ^= p
        if mode >= 2:
            for t in ts: t.data_ptr()
        t0 = time.perf_counter_ns(); E(ts, ptrs, idx); out.append(time.perf_counter_ns() - t0)
    return statistics.median(out[5:]) / 1e3
for mode, lab in ((0, "guard-warm"), (1, "+ index/pointer ints warm"), (2, "+ storages warm")):
    a, b = go(17, mode), go(607, mode)
    print(f"{lab:28s} N=17 {a:6.1f}  N=607 {b:6.1f} us  per input {(b - a) / 590:.3f} us")
