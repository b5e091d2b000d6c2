"""A reduce-overhead function whose first call gets an input 4 bytes off 16-byte alignment.

Two cases:

- ``new-size``: a function with a dynamic batch size, first called aligned at batch 8, then at
  batch 6 off alignment: the first call for that size (the differential test's seed 76475015,
  step 32, a ``mutate_buf`` call at a batch size new to its dynamic graph). Inductor compiled the
  kernels for the aligned example, and CUDA graph trees list the inputs they check for alignment
  from the first call of each size, so under stock the misaligned input reaches kernels
  specialized for 16-byte-aligned pointers ("CUDA error: misaligned address").
- ``first``: the function's very first call (the differential test's seed 28695003, a first
  call of ``binary`` on a "misaligned" input), which faulted under stock when this probe was
  written; which kernel assumes the alignment there is not established.

With a GraCE switch on, the tree checks such an input too and copies it into an aligned clone
(``grace.input_alignment``). Each call prints "ok" once its result equals eager's; a fault
ends the process (the CUDA context is lost).

    GRACE_DISABLE=1 python scripts/probes/misaligned_first_call.py --case new-size   # stock
    GRACE_SCG_FORCE=graph python scripts/probes/misaligned_first_call.py --case new-size
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
    args = parser.parse_args()
    configure_torch()
    f = torch.compile(binary, mode="reduce-overhead")
    calls = []
    if args.case == "new-size":
        x8, y8 = torch.randn(8, 12, device="cuda"), torch.randn(8, 12, device="cuda")
        torch._dynamo.mark_dynamic(x8, 0)
        torch._dynamo.mark_dynamic(y8, 0)
        calls.append((x8, y8))
    x = off_alignment(6, 12)
    calls += [(x, torch.randn(6, 12, device="cuda"))] * 3
    print("x.data_ptr() % 16 =", x.data_ptr() % 16)
    for i, (a, b) in enumerate(calls):
        out = f(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, binary(a, b))
        print("call", i, "ok", flush=True)


if __name__ == "__main__":
    main()
