"""A replay whose input a later replay overwrote, then a recording in the same generation.

CUDA graph trees make a node current before its replay reads its inputs; an overwritten input
raises in that read, and the node stays current still counting, as its outputs, storages the
tree freed when their path ended. If one is still referenced (here ``y``), the next recording's
allocator checkpoint lists it and fails ("accessing tensor output of CUDAGraphs that has been
overwritten" from ``_cuda_setCheckpointPoolState``). GraCE, with any switch on, reads the inputs
before the node becomes current (``patches/scg/0003``). Prints each step's outcome:

    GRACE_DISABLE=1 python scripts/probes/replay_input_overwritten.py     # stock
    python scripts/probes/replay_input_overwritten.py                      # GraCE
"""

import torch


def outcome(fn, expected=None) -> str:
    try:
        out = fn()
        torch.cuda.synchronize()
    except RuntimeError as e:
        return f"RuntimeError: {str(e).splitlines()[0][:90]}"
    if expected is None:
        return "ok"
    return f"ok, equal to eager: {torch.allclose(out, expected, rtol=1e-5, atol=1e-5)}"


def main() -> None:
    mark = torch.compiler.cudagraph_mark_step_begin
    f = torch.compile(lambda x: torch.sin(x) * 2 + x, mode="reduce-overhead")
    g = torch.compile(lambda x: x.cos() + 1, mode="reduce-overhead")
    x = torch.randn(7, 9, device="cuda")
    for _ in range(3):
        mark()
        f(x)
        g(x)
    mark()
    y = f(x)  # a replay; y held
    z = g(y)  # a new recording under f's node
    mark()
    print("f(z), z overwritten:", outcome(lambda: f(z)))
    fresh = torch.randn(7, 9, device="cuda")
    print("f(fresh), same generation:", outcome(lambda: f(fresh), torch.sin(fresh) * 2 + fresh))
    del y


if __name__ == "__main__":
    main()
