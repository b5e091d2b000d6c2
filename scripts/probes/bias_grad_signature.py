"""Which wrong ``fc2.bias.grad`` a differential-test program's mismatch is, from eager alone (CPU).

A train_step's ``fc2.bias.grad`` is the column sum of ``g = 2 * out / out.numel()`` over the batch
rows. If a kernel summed values it had already scaled in place (``inplace_reduction_race.py``), a
row read after its store contributes ``g`` times the scale once more (``2 / out.numel()``). This replays the program's eager side on the CPU, takes ``g`` at the given step, and
prints, for every subset of rows read scaled, the largest absolute and relative difference from
eager that it gives: a mismatch message's two numbers that match one subset name it.

    python scripts/probes/bias_grad_signature.py --seed 11908004 --step 17 --max-steps 19 --columns 16-19
"""

import argparse
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from grace.difftest import execute  # noqa: E402
from grace.difftest.programs import generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--step", type=int, required=True, help="the train_step whose bias gradient was wrong")
    parser.add_argument("--max-steps", type=int, default=19)
    parser.add_argument("--columns", default="",
                        help="first-last columns the mismatch names (e.g. 16-19); the others are taken as right")
    args = parser.parse_args()

    outputs: list[torch.Tensor] = []  # fc2's output of each eager train_step call, in order
    steps: list[int] = []
    forward = execute.MLPLoss.forward

    def recording_forward(self: execute.MLPLoss, x: torch.Tensor) -> torch.Tensor:
        out = self.fc2(torch.tanh(self.fc1(x)))
        outputs.append(out.detach().clone())
        return out.square().mean()

    step = execute.ProgramRun.step

    def marking_step(self: execute.ProgramRun, index: int, s) -> None:  # type: ignore[no-untyped-def]
        before = len(outputs)
        step(self, index, s)
        steps.extend([index] * (len(outputs) - before))

    execute.MLPLoss.forward, execute.ProgramRun.step = recording_forward, marking_step
    try:
        execute.run_program(generate(args.seed, None, args.max_steps), "cpu", "eager")
    finally:
        execute.MLPLoss.forward, execute.ProgramRun.step = forward, step
    # both sides run eagerly here: the later of the step's two calls is the eager side's
    at = [i for i, s in enumerate(steps) if s == args.step]
    if not at:
        raise SystemExit(f"bias_grad_signature: step {args.step} is not a train_step of seed {args.seed}")
    out = outputs[at[-1]].double()
    g = 2 * out / out.numel()
    scale = 2 / out.numel()
    expected = g.sum(0)
    columns = torch.zeros(out.shape[1], dtype=torch.float64)
    first, _, last = args.columns.partition("-")
    columns[int(first) if first else 0:int(last or first) + 1 if first else None] = 1
    print(f"seed {args.seed} step {args.step}: batch {out.shape[0]}, eager fc2.bias.grad {expected.tolist()}")
    for rows in itertools.product((0, 1), repeat=out.shape[0]):
        if not any(rows):
            continue
        scaled = torch.tensor(rows, dtype=torch.float64)[:, None] * columns
        got = (g * (1 - scaled) + g * scale * scaled).sum(0)
        diff = (got - expected).abs()
        rel = diff / expected.abs()
        print(f"rows read scaled {rows}: largest absolute difference {diff.max().item():.8g} at "
              f"{diff.argmax().item()}, relative {rel.max().item():.8g} at {rel.argmax().item()}")


if __name__ == "__main__":
    main()
