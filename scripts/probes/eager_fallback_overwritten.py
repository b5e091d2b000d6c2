"""A function the tree refuses a graph (it mutates an input the tree does not manage), fed a graph
output that the tree has since overwritten.

The tree runs such a function's compiled code without a graph (``CUDAGraphTreeManager._run``),
deciding so once per node and function. Inductor's static kernel launcher then reads the fed
tensor's ``data_ptr()`` from C++, and the error that raises (the tree's overwritten-output error)
is not checked there: the process dies by SIGSEGV. GraCE, with any switch on, reads those inputs
first (``patches/scg/0013``). Each pattern runs in a child process, so that a crash ends only it;
one line per pattern: per call ``raised``, ``ran`` (the call read the tensor without an error),
``ran on overwritten values`` (and the tensor no longer held what the function returned) or the
signal that killed the child.

    GRACE_DISABLE=1 python scripts/probes/eager_fallback_overwritten.py     # stock
    python scripts/probes/eager_fallback_overwritten.py                      # GraCE
"""

from __future__ import annotations

import argparse
import subprocess
import sys

PATTERNS = {
    "generations": "the fed tensor the last generation's output, which this generation's first call wrote over: "
                   "a warm-up's in the first call, a recording's in the second, a replay's from the third on",
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
    for i in range(8):
        mark()
        stale = other_c(x)
        held = stale.clone()  # what the function returned, to tell an overwrite
        bump_c(torch.randn(64, device="cuda"))  # the refusal decided under the current node
        mark()  # a new generation: its first call replays (or warms up) where ``stale`` is
        other_c(x + i + 1)
        try:
            bump_c(stale)
            torch.cuda.synchronize()
        except RuntimeError as e:
            seen.append("raised" if "overwritten" in str(e) else f"raised {str(e).splitlines()[0][:60]}")
            continue
        # it ran: on what the function had returned, bumped, or on what the next call wrote there
        seen.append("ran" if torch.allclose(stale, held * 0.5 + 1.0) else "ran on overwritten values")
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
