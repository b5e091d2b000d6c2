"""A warmed-up function recorded after its Triton kernel was armed again: stock's capture fails.

Inductor compiling in the process (``compile_threads=1``, as the differential test does) hands
every graph with the same kernel source the same ``CachingAutotuner`` from its module cache, and
each later load of that source precompiles it again: a launcher for every configuration, so the
next launch autotunes. Here ``f`` and ``h`` are warmed up and recorded as roots; the module of
``f``'s kernel is loaded again, as a recompile loads it (``--rearm reload``), or a function
``g`` with the same kernel is compiled and its first call raises before its kernel runs, as in
the differential program of seed 85147021 (``--rearm overwritten``). Then ``f`` runs after ``h``
in one step, a new child of ``h``'s node: a recording of a function warmed up long ago. Under
stock the autotuner benchmarks inside the capture ("operation not permitted when stream is
capturing"); with a GraCE switch on, the tree warms ``f`` up again first
(``grace.untuned_kernels``) and records it at the next step. Prints "ok" per step whose result
equals eager's, and "armed kernels: N" before the step that records.

    GRACE_DISABLE=1 python scripts/probes/autotune_in_capture.py --rearm reload   # stock
    python scripts/probes/autotune_in_capture.py --rearm reload                   # GraCE's defaults
"""

import argparse
import gc
import os
import tempfile

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
# a fresh cache: a kernel's best configuration saved by an earlier run loads it with one launcher
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="grace-autotune-probe-"))
os.environ.setdefault("GRACE_SCG_FORCE", "graph")  # SCG would keep so small a function out of graphs

import torch  # noqa: E402
from torch._inductor.runtime.triton_heuristics import CachingAutotuner  # noqa: E402

KERNEL = "triton_poi_fused_add_mul_sin_0"


def f(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 2 + x


def g(x: torch.Tensor) -> torch.Tensor:  # f's kernel source, from another Dynamo graph
    return torch.sin(x) * 2 + x


def h(x: torch.Tensor) -> torch.Tensor:
    return x * 3 - 1


def k(x: torch.Tensor) -> torch.Tensor:
    return x - 7


def sin_kernels() -> list[CachingAutotuner]:
    # type(), not isinstance(): the heap holds weak proxies, and isinstance() on a dead one raises
    return [o for o in gc.get_objects()
            if issubclass(type(o), CachingAutotuner) and getattr(o.fn, "__name__", "") == KERNEL]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rearm", choices=("reload", "overwritten"), default="reload")
    args = parser.parse_args()
    cf, cg, ch, ck = (torch.compile(fn, mode="reduce-overhead") for fn in (f, g, h, k))
    x = torch.randn(7, 27, device="cuda")
    for _ in range(3):  # f and h each a root: warm-up, recording, replay
        torch.compiler.cudagraph_mark_step_begin()
        cf(x)
        torch.compiler.cudagraph_mark_step_begin()
        ch(x)
    torch.cuda.synchronize()
    if not sin_kernels():
        raise SystemExit(f"no autotuner named {KERNEL}: Inductor named f's kernel otherwise; nothing to re-arm")
    print("launchers after f's recording:", [len(k.launchers) for k in sin_kernels()], flush=True)
    if args.rearm == "overwritten":
        torch.compiler.cudagraph_mark_step_begin()
        w = ck(x)  # a warm-up's output, freed by the next step
        torch.compiler.cudagraph_mark_step_begin()
        try:
            cg(w)  # compiles g (its module's load arms the shared kernel); raises before the kernel runs
        except RuntimeError as e:
            print("expected:", str(e).splitlines()[0][:100], flush=True)
        del w
    else:
        from torch._inductor.async_compile import AsyncCompile

        kernel = sin_kernels()[0]
        source = open(kernel.fn.fn.__code__.co_filename).read()
        again = AsyncCompile().triton(KERNEL, source)  # what loading a recompiled graph's module does
        print("the module cache gave back the same autotuner:", again is kernel, flush=True)
    print("armed kernels:", sum(len(k.launchers) > 1 for k in sin_kernels()), flush=True)
    for step in range(3):  # f after h in one step: a new child of h's node, recorded (after a warm-up under GraCE)
        x = torch.randn(7, 27, device="cuda")  # new values each step: a stale replay cannot pass
        torch.compiler.cudagraph_mark_step_begin()
        out = cf(ch(x))
        torch.cuda.synchronize()
        torch.testing.assert_close(out, f(h(x)))
        print("step", step, "ok", flush=True)


if __name__ == "__main__":
    main()
