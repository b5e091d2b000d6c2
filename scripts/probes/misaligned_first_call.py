"""A reduce-overhead function whose first call gets an input 4 bytes off 16-byte alignment.

Stock torch 2.11 faults here ("CUDA error: misaligned address"): the function's warm-up run
launches a Triton kernel specialized for 16-byte-aligned pointers on the misaligned input. The
differential test reaches the same fault (seed 28695003, a first call of `binary` on a
"misaligned" input) under every GraCE configuration, one step after stock stops at its own
assertion; this shows the fault is stock's, not GraCE's.

    GRACE_DISABLE=1 python scripts/probes/misaligned_first_call.py
"""

import torch

from grace.difftest.execute import binary, configure_torch


def main() -> None:
    configure_torch()
    f = torch.compile(binary, mode="reduce-overhead")
    base = torch.randn(61, device="cuda")
    x = base[1:61].view(5, 12)  # one float past the block's start
    y = torch.randn(5, 12, device="cuda")
    print("x.data_ptr() % 16 =", x.data_ptr() % 16)
    for i in range(3):
        out = f(x, y)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, binary(x, y))
        print("call", i, "ok")


if __name__ == "__main__":
    main()
