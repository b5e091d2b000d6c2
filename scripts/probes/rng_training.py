"""A training step that draws random numbers (dropout) and embeds token ids, under PI.

Diagnostic for DGPT2 and MT5 training: with PI on, their forward graph once failed its
capture-time check (dropout draws other numbers in the check's run) and was recorded again
stock, and the worker then died with SIGSEGV while recording the next graph.
Each step runs the compiled model and an eager copy from the same seed and prints whether the
loss and every gradient agree (``equal to eager`` or what differs): with Inductor's
``fallback_random`` the compiled step draws eager's masks. Each case runs in its own process, so
a crash is reported as an exit status, not lost:

    python scripts/probes/rng_training.py            # every case, one line each
    python scripts/probes/rng_training.py --case NAME  # one case, in this process

A case names the switches it sets: ``fallback`` (Inductor's ``fallback_random``, as the
benchmark sets for stochastic workloads) or ``inductor`` (Inductor's own RNG), ``dropout`` or
``no-dropout``, and ``pi``, ``scg`` (PI and SCG, which profiles each backward graph before
recording it) or ``stock``; ``sdpa`` cases add attention with dropout
(``scaled_dot_product_attention``), whose backward reads the forward's philox seed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CASES = [f"{rng}-{drop}-{pi}" for rng in ("fallback", "inductor") for drop in ("dropout", "no-dropout")
         for pi in ("pi", "stock")] + [f"sdpa-{drop}-{pi}" for drop in ("dropout", "no-dropout") for pi in ("pi", "scg", "stock")]


def run_case(case: str) -> int:
    import torch

    rng, pi = case.split("-")[0], case.rsplit("-", 1)[1]
    drop = "no-dropout" if "no-dropout" in case else "dropout"
    import torch._inductor.config as inductor_config

    import grace.config

    inductor_config.fallback_random = rng in ("fallback", "sdpa")
    grace.config.pi = pi in ("pi", "scg")
    grace.config.scg = pi == "scg"

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 64)
            self.drop = torch.nn.Dropout(0.1 if drop == "dropout" else 0.0)
            self.proj = torch.nn.Linear(64, 1000)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.drop(self.embed(ids) + 1.0)
            if rng == "sdpa":
                q = h.unflatten(-1, (4, 16)).transpose(1, 2)
                a = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.1 if drop == "dropout" else 0.0)
                h = h + a.transpose(1, 2).flatten(-2)
            return torch.nn.functional.cross_entropy(self.proj(h).flatten(0, 1), ids.flatten())

    import copy

    torch.manual_seed(0)
    model = Model().cuda().train()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, mode="reduce-overhead")
    for step in range(5):
        ids = torch.randint(0, 1000, (8, 32), device="cuda")
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        torch.manual_seed(100 + step)
        loss = compiled(ids)
        loss.backward()
        torch.manual_seed(100 + step)
        expected = reference(ids)
        expected.backward()
        torch.cuda.synchronize()
        differ = [] if torch.allclose(loss, expected, rtol=1e-4, atol=1e-4) else [f"loss {expected.item():.6f} in eager"]
        differ += [f"{name}.grad" for (name, p), q in zip(model.named_parameters(), reference.parameters())
                   if not torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-4)]
        verdict = "equal to eager" if not differ else "differs from eager: " + ", ".join(differ)
        print(f"{case}: step {step} loss {loss.item():.4f}, {verdict}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=CASES)
    args = ap.parse_args()
    if args.case:
        return run_case(args.case)
    worst = 0
    for case in CASES:
        proc = subprocess.run([sys.executable, __file__, "--case", case], capture_output=True, text=True,
                              env={**os.environ, "GRACE_LOGS": "info"}, timeout=300)
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        notes = [ln for ln in lines if "grace" in ln and ("WARNING" in ln or "ERROR" in ln)]
        print(f"{case}: exit {proc.returncode}; last: {lines[-1] if lines else ''}")
        for ln in notes:
            print(f"    {ln[:300]}")
        worst = worst or proc.returncode
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
