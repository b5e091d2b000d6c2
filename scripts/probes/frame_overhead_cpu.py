"""What Dynamo's frame costs a steady call beyond its guards, on the CPU (no GPU needed).

A compiled call enters Dynamo's ``compile_wrapper`` and the C eval frame, which evaluate the
cache entry's guards and run the entry's transformed bytecode; that bytecode calls the backend's
compiled function (AOTAutograd's wrappers, then the backend). This probe times, back to back
with one thread, for a one-operator function compiled with ``aot_eager`` (Dynamo's and
AOTAutograd's layers exactly as with Inductor; the backend runs the FX graph eagerly):

- the compiled call;
- the cache entry's guard check (``GuardManagerWrapper.check``) then its transformed bytecode,
  called as a plain function: what a frame-level fast path could do at most;
- each of those two alone, and the function eagerly.

The difference between the first two is what Dynamo's frame adds beyond its guards; the second
minus the eager call is what AOTAutograd's wrappers and the backend call add.

    python scripts/probes/frame_overhead_cpu.py [--calls 3000] [--rounds 7]
"""

from __future__ import annotations

import statistics
import types
from collections.abc import Callable
from typing import Any

import torch
from _timing import mean_call_us, rounds_parser


def f(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


def per_call_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    """The median over ``rounds`` of the mean time of ``calls`` calls, in microseconds."""
    return statistics.median(mean_call_us(call, calls) for _ in range(rounds))


def only_entry(fn: Callable) -> tuple[Any, types.FunctionType]:
    """The guard manager of the one cache entry Dynamo holds for ``fn``'s code, and the entry's
    transformed bytecode as a plain function."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = _debug_get_cache_entry_list(fn.__code__)
    if len(entries) != 1:
        raise SystemExit(f"expected one cache entry for {fn.__qualname__}, found {len(entries)}")
    return entries[0].guard_manager, types.FunctionType(entries[0].code, fn.__globals__, "transformed")


def main() -> None:
    parser = rounds_parser(__doc__, rounds=7, calls=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    compiled = torch.compile(f, backend="aot_eager")
    x = torch.randn(8)
    with torch.no_grad():
        for _ in range(5):
            compiled(x)
        guards, transformed = only_entry(f)
        if not (guards.check({"x": x}) and torch.equal(transformed(x), compiled(x))):
            raise SystemExit("the guard check or the transformed bytecode does not match the compiled call")
        rows = {
            "compiled call": lambda: compiled(x),
            "guard check, then transformed bytecode": lambda: (guards.check({"x": x}), transformed(x)),
            "guard check alone": lambda: guards.check({"x": x}),
            "transformed bytecode alone": lambda: transformed(x),
            "eager": lambda: f(x),
        }
        print(f"torch {torch.__version__}; {args.calls} calls a round, median of {args.rounds} rounds, one thread")
        for name, call in rows.items():
            print(f"{name:40s} {per_call_us(call, args.calls, args.rounds):7.2f} us")


if __name__ == "__main__":
    main()
