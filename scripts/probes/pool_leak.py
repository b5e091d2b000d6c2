"""Which objects keep a CUDA graph pool alive after ``torch._dynamo.reset()``.

PyTorch's CUDA graph trees tests end each test by resetting Dynamo, collecting garbage,
emptying the cache and asserting that no segment of any graph pool is left. This runs one of a
few small cases under the switches of the environment, does the same, and for every object that
can hold a pool (a tree manager, a CUDA graph, a tree node) still alive prints the chain of
referrers that keeps it, so that a leak names its owner.

    GRACE_CGCT=1 GRACE_PI=0 GRACE_SCG=0 python scripts/probes/pool_leak.py cpu_scalar
"""

from __future__ import annotations

import gc
import sys
import types

import torch


def case_cpu_scalar() -> None:
    compiled = torch.compile(lambda x, y: x + y, mode="reduce-overhead")
    inputs = (torch.ones(2, 2, device="cuda"), torch.ones((), device="cpu"))
    for _ in range(3):
        compiled(*inputs)


def case_output_alias() -> None:
    compiled = torch.compile(lambda x: (x.view(-1), x + 1), mode="reduce-overhead")
    x = torch.ones(4, 4, device="cuda")
    for _ in range(3):
        compiled(x)


def case_triton_reuse() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(in_ptr, out_ptr, n: tl.constexpr):
        i = tl.arange(0, n)
        tl.store(out_ptr + i, tl.load(in_ptr + i) + 1)

    def f(x):
        out = torch.empty_like(x)
        add_one[(1,)](x, out, 128)
        return out * 2

    compiled = torch.compile(f, mode="reduce-overhead")
    x = torch.ones(128, device="cuda")
    for _ in range(3):
        compiled(x)


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def pool_segments() -> int:
    return sum(1 for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) != (0, 0))


def chain(obj: object, depth: int = 6, seen: set[int] | None = None, indent: str = "  ") -> None:
    """Print who refers to ``obj``, ``depth`` levels up (frames and this module's own lists skipped)."""
    seen = seen if seen is not None else {id(obj)}
    if depth == 0:
        return
    for ref in gc.get_referrers(obj):
        if id(ref) in seen or isinstance(ref, types.FrameType) or ref is sys.modules[__name__].__dict__:
            continue
        seen.add(id(ref))
        what = type(ref).__name__
        if isinstance(ref, dict):
            keys = [k for k, v in ref.items() if v is obj][:3]
            what += f" (keys {keys})"
        elif isinstance(ref, types.FunctionType):
            what += f" {ref.__module__}.{ref.__qualname__}"
        elif isinstance(ref, types.ModuleType):
            what += f" {ref.__name__}"
        print(f"{indent}<- {what}")
        if not isinstance(ref, types.ModuleType):
            chain(ref, depth - 1, seen, indent + "  ")


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "cpu_scalar"
    CASES[name]()
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    from torch._inductor import cudagraph_trees as trees

    left = pool_segments()
    print(f"{name}: {left} graph pool segment(s) left after reset")
    if left:
        kinds = (trees.CUDAGraphTreeManager, trees.CUDAGraphNode, torch.cuda.CUDAGraph)
        holders = [o for o in gc.get_objects() if isinstance(o, kinds)]
        for o in holders[:4]:
            print(f"alive: {type(o).__name__}")
            chain(o)
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main())
