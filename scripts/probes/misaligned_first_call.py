"""A reduce-overhead function whose first call gets an input 4 bytes off 16-byte alignment.

Two cases:

- ``new-size``: a function with a dynamic batch size, first called aligned at batch 8, then at
  batch 6 off alignment: the first call for that size, shaped after the differential test's
  seed 76475015 (step 32, a ``mutate_buf`` call at a batch size new to its dynamic graph), which
  faulted with "CUDA error: misaligned address" under stock and under GraCE alike.
- ``first``: the function's very first call on an input off alignment, shaped after the
  differential test's seed 28695003.

CUDA graph trees list the inputs they check for alignment from the first call of each size,
while Inductor's kernels assume the alignment of the example they were compiled for
(``grace.input_alignment``). ``--cols 64`` makes the element count a multiple of 16 at every
size, so that Triton may vectorize the loads of an input it was told is aligned; whether it does
depends on the configuration autotuning picks (a block of 256 elements on four warps loads two
floats a thread, a block of 128 one, as their PTX for sm_90 reads on the CPU), so stock faults
on some runs only. ``--no-autotune`` keeps Inductor's first configuration, the block of 256:
stock's warm-up at the new size is then expected to fault every time, and GraCE (any switch on)
copies the input first (not yet run on a GPU). Each call prints
"ok" once its result equals eager's; a fault ends the process (the CUDA context is lost).

    GRACE_DISABLE=1 python scripts/probes/misaligned_first_call.py --case new-size   # stock
    python scripts/probes/misaligned_first_call.py --case new-size                    # GraCE's defaults
    python scripts/probes/misaligned_first_call.py --case new-size --cols 64 --no-autotune
"""

import argparse

import torch

from grace.difftest.execute import binary, configure_torch


def off_alignment(rows: int, cols: int) -> torch.Tensor:
    base = torch.randn(rows * cols + 1, device="cuda")
    return base[1:].view(rows, cols)  # one float past the block's start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=("first", "new-size"), default="first")
    parser.add_argument("--cols", type=int, default=12,
                        help="columns: 64 makes every size a multiple of 16 elements, so that Triton may "
                             "vectorize the loads of an input it was told is aligned")
    parser.add_argument("--no-autotune", action="store_true",
                        help="keep Inductor's first pointwise configuration (no autotuning): the vectorized one")
    args = parser.parse_args()
    configure_torch()
    if args.no_autotune:
        torch._inductor.config.triton.autotune_pointwise = False
    f = torch.compile(binary, mode="reduce-overhead")
    calls = []
    if args.case == "new-size":
        x8, y8 = torch.randn(8, args.cols, device="cuda"), torch.randn(8, args.cols, device="cuda")
        torch._dynamo.mark_dynamic(x8, 0)
        torch._dynamo.mark_dynamic(y8, 0)
        calls.append((x8, y8))
    # new values at every call, each input off alignment: a stale replay cannot pass
    calls += [(off_alignment(6, args.cols), torch.randn(6, args.cols, device="cuda")) for _ in range(3)]
    print("x.data_ptr() % 16 =", [a.data_ptr() % 16 for a, _ in calls[-3:]])
    for i, (a, b) in enumerate(calls):
        out = f(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, binary(a, b))
        print("call", i, "ok", flush=True)


if __name__ == "__main__":
    main()
