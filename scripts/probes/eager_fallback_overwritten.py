"""A function the tree refuses a graph (it mutates an input the tree does not manage), fed a graph
output that the tree has since overwritten.

The tree runs such a function's compiled code without a graph (``CUDAGraphTreeManager._run``),
deciding so once per node and function. Inductor's static kernel launcher then reads the fed
tensor's ``data_ptr()`` from C++, and the error that raises (the tree's overwritten-output error)
is not checked there: the process dies by SIGSEGV. GraCE, with any switch on, reads those inputs
first (``patches/scg/0013``). Each pattern runs in a child process, so that a crash ends only it;
one line per pattern: ``raised``, ``ran`` (the call read the tensor without an error) or the
signal that killed the child.

    GRACE_DISABLE=1 python scripts/probes/eager_fallback_overwritten.py     # stock
    python scripts/probes/eager_fallback_overwritten.py                      # GraCE
"""

from __future__ import annotations

import argparse
import subprocess
import sys

PATTERNS = {
    "warm-up": "the fed tensor an output of a warm-up that a new generation ended",
    "replay": "the fed tensor an output of a replay that the next call overwrote",
}


def bump(x):
    x.mul_(0.5).add_(1.0)
    return x.sin()


def other(x):
    return x.cos() + x


def run_pattern(pattern: str) -> str:
    """Each call of the refused function with an overwritten input: what it did, joined."""
    import torch

    mark = torch.compiler.cudagraph_mark_step_begin
    bump_c, other_c = torch.compile(bump, mode="reduce-overhead"), torch.compile(other, mode="reduce-overhead")
    x = torch.randn(64, device="cuda")
    seen = []
    for _ in range(5 if pattern == "warm-up" else 8):
        mark()
        stale = other_c(x)
        bump_c(torch.randn(64, device="cuda"))  # the refusal decided under the current node
        if pattern == "warm-up":
            mark()
        other_c(x)
        try:
            bump_c(stale)
            torch.cuda.synchronize()
            seen.append("ran")
        except RuntimeError as e:
            seen.append("raised" if "overwritten" in str(e) else f"raised {str(e).splitlines()[0][:60]}")
    return ", ".join(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pattern", choices=sorted(PATTERNS), help="run one pattern here (the child's part)")
    args = parser.parse_args()
    if args.pattern:
        print(run_pattern(args.pattern), flush=True)
        return
    for name, what in PATTERNS.items():
        child = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--pattern", name],
                               capture_output=True, text=True, timeout=600)
        last = (child.stdout.strip().splitlines() or [""])[-1]
        outcome = last if child.returncode == 0 else f"died (exit {child.returncode}): {last}"
        print(f"{name} ({what}): {outcome}", flush=True)
        if child.returncode != 0:
            sys.stderr.write(child.stderr[-4000:])


if __name__ == "__main__":
    main()
