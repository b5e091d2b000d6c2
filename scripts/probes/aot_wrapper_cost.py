"""What AOTAutograd's runtime wrappers cost a steady inference call, stock against lean replay's
(``grace.lean.aot_runtime``, ``patches/lean_replay/0005``), on the CPU it runs on.

Two copies of a one-operator function (separate code objects, so separate Dynamo cache entries)
are compiled with Inductor: one with the lean wrappers turned off for its compile
(``grace.lean.aot_runtime._on`` patched to False: everything else GraCE does is the same), one
with them on. Calls alternate in rounds of ``--calls``; prints each one's median microseconds a
call, and the paired difference's median with its 10th and 90th percentiles.

    python scripts/probes/aot_wrapper_cost.py [--rounds 41] [--calls 2000]
"""

from __future__ import annotations

import statistics
from unittest import mock

import torch
from _timing import mean_call_us, rounds_parser


def stock_copy(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def lean_copy(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def main() -> None:
    parser = rounds_parser(__doc__, rounds=41, calls=2000)
    args = parser.parse_args()
    import grace.lean.aot_runtime as aot_runtime

    torch.set_num_threads(1)
    x = torch.randn(4)
    stock, lean = torch.compile(stock_copy), torch.compile(lean_copy)
    with torch.no_grad():
        with mock.patch.object(aot_runtime, "_on", lambda: False):
            for _ in range(3):
                stock(x)
        for _ in range(3):
            lean(x)
        torch.testing.assert_close(stock(x), lean(x))
        s_us, l_us = [], []
        for _ in range(args.rounds):
            s_us.append(mean_call_us(stock, args.calls, x))
            l_us.append(mean_call_us(lean, args.calls, x))
    diffs = sorted(s - l for s, l in zip(s_us, l_us))
    k = len(diffs) // 10
    print(f"stock wrappers {statistics.median(s_us):.2f} us a call, lean {statistics.median(l_us):.2f}; "
          f"saved {statistics.median(diffs):.2f} us (p10 {diffs[k]:.2f}, p90 {diffs[-1 - k]:.2f}), "
          f"{args.rounds} rounds of {args.calls} calls, torch {torch.__version__}")


if __name__ == "__main__":
    main()
