"""CPU calibration of the per-input helpers on the replay path (600 tensors)."""
import timeit, statistics, sys, functools
import torch
from torch._C._dynamo.guards import assert_size_stride

def bench(label, fn, n=2000, reps=15):
    fn()
    ts = [timeit.timeit(fn, number=n) / n * 1e6 for _ in range(reps)]
    med = statistics.median(ts)
    print(f"{label:70s} {med:9.2f} us/call")
    return med

def main(N=600):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4, 4)) for _ in range(N // 2)]
    bufs = [torch.randn(4) for _ in range(N - N // 2)]
    x = torch.randn(64, 3, 8, 8)
    inputs = params + bufs + [x]
    n = len(inputs)
    static_idxs = list(range(n - 1))
    ptrs = [t.data_ptr() if i in set(static_idxs) else None for i, t in enumerate(inputs)]
    f = torch._C._tensors_data_ptrs_at_indices_equal
    print(f"python {sys.version.split()[0]} torch {torch.__version__} N={n}")
    res = {}
    res["empty"] = bench("_tensors_data_ptrs_at_indices_equal, empty idx", lambda: f(inputs, ptrs, []))
    res["all"] = bench(f"_tensors_data_ptrs_at_indices_equal, {len(static_idxs)} idx (params+bufs)", lambda: f(inputs, ptrs, static_idxs))
    pidx = list(range(N // 2)); bidx = list(range(N // 2, N))
    res["p"] = bench(f"  ... only {len(pidx)} nn.Parameter", lambda: f(inputs, ptrs, pidx))
    res["b"] = bench(f"  ... only {len(bidx)} plain tensors", lambda: f(inputs, ptrs, bidx))
    res["lc"] = bench("python: all(t.data_ptr()==p for i in idxs)", lambda: all(inputs[i].data_ptr() == ptrs[i] for i in static_idxs))
    res["lc2"] = bench("python: [t.data_ptr() for t in inputs]", lambda: [t.data_ptr() for t in inputs])
    res["isinst"] = bench("python: [isinstance(t, torch.Tensor) for t in inputs]", lambda: [isinstance(t, torch.Tensor) for t in inputs])
    shapes = [(tuple(t.shape), tuple(t.stride())) for t in inputs]
    def asserts():
        for t, (s, st) in zip(inputs, shapes):
            assert_size_stride(t, s, st)
    res["ass"] = bench("python loop: assert_size_stride per input", asserts)
    def unpack_repack():
        lst = list(inputs)
        a = tuple(lst); lst.clear(); b = list(a); del a
        return b
    res["unpack"] = bench("unpack tuple + list rebuild (call() prologue analogue)", unpack_repack)
    def clear():
        lst = list(inputs); lst.clear()
    res["clear"] = bench("list(inputs) + clear()", clear)
    ALIGN = 16
    chk = [n - 1]
    def misaligned(idxs):
        for i in idxs:
            t = inputs[i]
            assert isinstance(t, torch.Tensor)
            if t.data_ptr() % ALIGN:
                pass
    res["mis1"] = bench("copy_misaligned_inputs loop, 1 idx (stock)", lambda: misaligned(chk))
    res["misall"] = bench(f"copy_misaligned_inputs loop, {n} idx", lambda: misaligned(range(n)))
    res["copy1"] = bench("torch._foreach_copy_ of 1 tensor", lambda: torch._foreach_copy_([x], [x]))
    print("per-element costs (us): C++ check %.3f (param %.3f, plain %.3f); py data_ptr loop %.3f; assert_size_stride %.3f; misaligned-loop %.3f" % (
        (res["all"] - res["empty"]) / len(static_idxs), (res["p"] - res["empty"]) / len(pidx), (res["b"] - res["empty"]) / len(bidx),
        res["lc"] / len(static_idxs), res["ass"] / n, res["misall"] / n))

if __name__ == "__main__":
    torch.set_num_threads(1)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 600)
