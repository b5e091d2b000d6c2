"""What the layers above CUDA graph trees cost per call, read with cProfile on the CPU.

Inductor's CPU code has no graphs, but the Python above the kernels (Dynamo's wrappers and
guards, AOTAutograd's runtime wrappers, the generated code's input asserts) is the one a GPU call
runs. A 16-layer MLP of width 16 at batch 1, so that every parameter is an input of the
generated code (``inline_inbuilt_nn_modules``): prints the median call, the layer clock's split
(``grace.bench.layers``) of the first call after its wrappers go in and of a later one, and the
functions with the most time of their own over 2,000 calls.

    python scripts/probes/layers_cpu_profile.py
"""

import cProfile
import io
import pstats
import statistics
import time

import torch

from grace.bench.layers import timing


def main() -> None:
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(16)]).eval()
    x = torch.randn(1, 16)
    f = torch.compile(model)
    with torch.no_grad():
        for _ in range(5):
            f(x)
        calls = []
        for _ in range(2000):
            start = time.perf_counter_ns()
            f(x)
            calls.append(time.perf_counter_ns() - start)
        print(f"compiled call, median: {statistics.median(calls) / 1e3:.1f} us")
        first, steady = [], []
        for _ in range(100):  # the first call after the clock's wrappers go in, then a later one
            with timing() as clock:
                clock.call(f, x)
                first.append(clock.exclusive_us())
                for _ in range(3):
                    clock.call(f, x)
                clock.reset()
                clock.call(f, x)
                steady.append(clock.exclusive_us())
        for name, split in (("first call after wrapping", first), ("fourth call", steady)):
            print(f"layers, {name}, medians (us):",
                  {k: round(statistics.median(r[k] for r in split), 1) for k in split[0]})
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            f(x)
        profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
    print(out.getvalue())


if __name__ == "__main__":
    main()
