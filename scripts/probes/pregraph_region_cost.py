"""What Dynamo's pre-graph profiler region costs a steady compiled call, on the CPU (no GPU needed).

Two copies of a one-operator function are compiled in one process, one while
``grace.config.lean_replay`` is off (the region's two calls in its bytecode, as stock) and one
while it is on (``grace.lean.profiler_regions``: left out); then they are called in turn, round
after round, so that both see the same machine. Prints each one's median and spread of the
per-call mean over the rounds, and how often each frame's bytecode enters the region.

    python scripts/probes/pregraph_region_cost.py [--backend inductor] [--calls 3000] [--rounds 21]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from _timing import rounds_parser


def fresh_function() -> Callable[[torch.Tensor], torch.Tensor]:
    """A new code object each time, so that each copy gets its own compiled frame."""
    namespace: dict = {}
    exec("def f(x):\n    return x.sin() + 1\n", namespace)  # noqa: S102 - a probe's own source
    return namespace["f"]


def region_calls(compiled: Callable, x: torch.Tensor) -> int:
    """How many times two calls of the compiled frame enter the region (its bytecode loads
    ``record_pregraph_bytecode_enter`` from ``torch._dynamo.utils`` on each call)."""
    import torch._dynamo.utils as dynamo_utils

    entered = []
    stock = dynamo_utils.record_pregraph_bytecode_enter

    def counting():  # noqa: ANN202
        entered.append(1)
        return stock()

    dynamo_utils.record_pregraph_bytecode_enter = counting
    try:
        with torch.no_grad():
            compiled(x)
            compiled(x)
    finally:
        dynamo_utils.record_pregraph_bytecode_enter = stock
    return len(entered)


def main() -> None:
    parser = rounds_parser(__doc__, rounds=21, calls=3000)
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()

    import grace.config

    torch.set_num_threads(1)
    x = torch.randn(8)
    compiled = {}
    for lean in (False, True):
        with grace.config.patch(lean_replay=lean):
            fn = torch.compile(fresh_function(), backend=args.backend)
            with torch.no_grad():
                for _ in range(5):
                    fn(x)
        compiled["lean replay on" if lean else "lean replay off"] = fn
    samples: dict[str, list[float]] = {name: [] for name in compiled}
    with torch.no_grad():
        for _ in range(args.rounds):
            for name, fn in compiled.items():
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                samples[name].append((time.perf_counter() - start) / args.calls * 1e6)
    print(f"torch {torch.__version__}; backend {args.backend}; {args.calls} calls a round, {args.rounds} rounds, "
          f"interleaved, one thread")
    for name, fn in compiled.items():
        s = sorted(samples[name])
        print(f"{name:<16} median {statistics.median(s):6.2f} us a call (p10 {s[len(s) // 10]:6.2f}, "
              f"p90 {s[len(s) * 9 // 10]:6.2f}); region entered in 2 calls: {region_calls(fn, x)}")
    off, on = (statistics.median(samples[n]) for n in compiled)
    paired = sorted(a - b for a, b in zip(samples["lean replay off"], samples["lean replay on"]))
    print(f"saved per call: {off - on:.2f} us (median of the rounds' differences {statistics.median(paired):.2f} us, "
          f"p10 {paired[len(paired) // 10]:.2f}, p90 {paired[len(paired) * 9 // 10]:.2f})")


if __name__ == "__main__":
    main()
